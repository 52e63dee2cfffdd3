package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/store"
)

// SweepResult says what a sweep did.
type SweepResult struct {
	Expired      int `json:"expired"`
	Redispatched int `json:"redispatched"`
	Purged       int `json:"purged,omitempty"`
}

// A Purger deletes up to limit of what its retention no longer keeps —
// finished runs, settled notifications, expired rules — and says how many it deleted
// (fewer than limit: nothing else is due).
type Purger interface {
	Purge(ctx context.Context, now time.Time, limit int) (int, error)
}

// purgeBatch is how many records (runs, notifications, rules) one purge
// deletes.
const purgeBatch = 100

// Sweep expires due approvals (their runs fail approval-expired) and
// dispatches again the runs nobody is working on: queued runs whose dispatch
// was lost and running runs whose worker died (their lease ran out). Last,
// with a Config.Purger, it deletes what is past its retention: finished
// runs, settled notifications, expired rules.
// It is a plain function: a ticker calls it locally, a scheduled
// Lambda on AWS.
func (e *Engine) Sweep(ctx context.Context) (SweepResult, error) {
	var (
		res    SweepResult
		failed []error
	)
	now := e.now()
	for {
		due, err := e.store.ListDueApprovals(ctx, now, 100)
		if err != nil {
			return res, fmt.Errorf("list due approvals: %w", err)
		}
		expired := 0
		for _, a := range due {
			_, err := e.expire(ctx, a)
			switch {
			case err == nil:
				res.Expired++
				expired++
			case errors.Is(err, approvals.ErrNotPending), errors.Is(err, approvals.ErrNotDue), errors.Is(err, store.ErrConflict):
				// Decided or cancelled meanwhile.
			default:
				// One approval that cannot be expired now must not stop
				// the others, nor the dispatches below.
				failed = append(failed, fmt.Errorf("expire approval %s: %w", a.ID, err))
			}
		}
		// A short page does not mean the queue is empty: a store may drop
		// entries of an index that lags behind a decision (DynamoDB's). A
		// page that expired nothing ends the loop, so one that cannot be
		// expired now is not read again and again.
		if len(due) == 0 || expired == 0 {
			break
		}
	}
	stalled, err := e.store.ListStalledRuns(ctx, now, 500)
	if err != nil {
		return res, errors.Join(append(failed, fmt.Errorf("list stalled runs: %w", err))...)
	}
	// A dispatch that fails (a full queue, a throttled invoke) is tried
	// again by the next sweep; the others still go out now.
	for _, r := range stalled {
		if err := e.cfg.Dispatch.Dispatch(ctx, r.ID); err != nil {
			failed = append(failed, fmt.Errorf("dispatch run %s: %w", r.ID, err))
			continue
		}
		res.Redispatched++
	}
	if e.cfg.Purger != nil {
		for ctx.Err() == nil {
			n, err := e.cfg.Purger.Purge(ctx, now, purgeBatch)
			res.Purged += n
			if err != nil {
				failed = append(failed, err)
			}
			if err != nil || n < purgeBatch {
				break
			}
		}
		if res.Purged > 0 {
			e.watch.forgetFresh() // none may answer for a run now deleted
		}
	}
	return res, errors.Join(failed...)
}

// expire settles a due approval as expired and fails its run — or, for a
// call proposed by an agent step with onDecline "tell-model", queues the run
// to tell the model the approval expired.
func (e *Engine) expire(ctx context.Context, a approvals.Approval) (store.Run, error) {
	now := e.now()
	// If the config cannot say whether the model is to be told, the run
	// fails: expiry must happen whatever else is broken.
	tell, _ := e.tellsModel(ctx, a)
	msg := fmt.Sprintf("approval %s for %s expired at %s without a decision", a.ID, a.Tool, a.ExpiresAt.UTC().Format("2006-01-02 15:04:05Z"))
	data := map[string]any{"approvalId": a.ID, "tool": a.Tool, "expiresAt": a.ExpiresAt}
	params := store.DecideParams{
		Decision: approvals.Decision{
			ProjectID: a.ProjectID, ApprovalID: a.ID, Status: approvals.Expired, By: "stead", At: now,
		},
		Read:      &a,
		RunStatus: store.RunFailed,
		RunError:  &store.RunError{Code: CodeApprovalExpired, Message: msg, Step: a.StepID},
		Events: []store.Event{
			event("approval.expired", now, a.StepID, data),
			event("run.failed", now, "", map[string]any{"code": CodeApprovalExpired, "message": msg, "step": a.StepID}),
		},
	}
	if tell {
		data["onDecline"] = string(agent.DeclineTellModel)
		params.RunStatus, params.RunError = store.RunQueued, nil
		params.LeaseUntil = now.Add(e.cfg.DispatchGrace)
		params.Events = []store.Event{event("approval.expired", now, a.StepID, data)}
	}
	_, run, err := e.store.DecideApproval(ctx, params)
	if err != nil {
		return run, err
	}
	e.decided(ctx, run)
	return run, nil
}
