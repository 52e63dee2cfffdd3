package storetest

import (
	"context"
	"fmt"
	"time"

	"stead/approvals"
	"stead/store"
)

// Awaiting writes through s a run as the engine leaves it at the gated call
// req describes: created a second before req.RequestedAt (queued, the call's
// input as its input), then committed into awaiting-approval at the call's
// step with the call's new pending approval (approvals.New with unique
// "seed"). Steps before it are not recorded. Benchmarks seed approval queues
// with it; it returns errors rather than failing a test so that many
// goroutines may call it at once.
func Awaiting(ctx context.Context, s store.Store, req approvals.Request) (store.Run, approvals.Approval, error) {
	created := req.RequestedAt.Add(-time.Second)
	r, err := s.CreateRun(ctx, store.Run{
		ID: req.RunID, ProjectID: req.ProjectID, Agent: req.Agent, EndUserID: req.EndUserID, Deployment: req.Deployment,
		Status: store.RunQueued, Input: req.Input, Trust: store.Trusted, CreatedAt: created, UpdatedAt: created,
	}, []store.Event{{Type: "run.created", At: created}})
	if err != nil {
		return store.Run{}, approvals.Approval{}, fmt.Errorf("seed run %s: %w", req.RunID, err)
	}
	a, err := approvals.New(req, "seed")
	if err != nil {
		return store.Run{}, approvals.Approval{}, fmt.Errorf("seed run %s: %w", req.RunID, err)
	}
	r.Status, r.Cursor, r.ApprovalID, r.UpdatedAt = store.RunAwaitingApproval, req.StepIndex, a.ID, req.RequestedAt
	r, err = s.CommitRun(ctx, store.RunCommit{
		Run:      r,
		Events:   []store.Event{{Type: "approval.requested", At: req.RequestedAt, Step: req.StepID}},
		Approval: &a,
	})
	if err != nil {
		return store.Run{}, approvals.Approval{}, fmt.Errorf("seed run %s: %w", req.RunID, err)
	}
	return r, a, nil
}
