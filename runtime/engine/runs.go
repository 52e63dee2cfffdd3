package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/store"
)

// StartParams starts a run.
type StartParams struct {
	Agent     string
	Input     json.RawMessage
	EndUserID string
	// IdempotencyKey, when set, makes the start repeatable: the same key and
	// the same request return the same run.
	IdempotencyKey string
}

// InputError is a run input the agent's input schema refuses.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// StartRun creates a run of the latest deployment and dispatches it (or,
// with a worker of the Pool free, creates it claimed for that worker).
// It reports whether the run is new (false when an idempotent repeat).
// Errors: ErrForbidden, ErrNoDeployment, store.ErrNotFound (unknown agent),
// *InputError, ErrIdempotencyKeyReused.
func (e *Engine) StartRun(ctx context.Context, actor approvals.Actor, p StartParams) (store.Run, bool, error) {
	if !actor.Role.May(approvals.RunAgents) {
		return store.Run{}, false, ErrForbidden
	}
	if len(p.Input) == 0 {
		p.Input = json.RawMessage("{}")
	}
	d, ag, err := e.latestAgent(ctx, actor.ProjectID, p.Agent)
	if err != nil {
		return store.Run{}, false, err
	}
	input, err := decode(p.Input)
	if err != nil {
		return store.Run{}, false, &InputError{fmt.Errorf("input: %w", err)}
	}
	if err := ag.ValidateRunInput(input); err != nil {
		return store.Run{}, false, &InputError{err}
	}
	now := e.now()
	run := store.Run{
		ID:             e.newID("run"),
		ProjectID:      actor.ProjectID,
		Agent:          p.Agent,
		EndUserID:      p.EndUserID,
		Requester:      actor.MemberID,
		Deployment:     d.Version,
		Status:         store.RunQueued,
		Input:          p.Input,
		Trust:          store.Trusted,
		IdempotencyKey: p.IdempotencyKey,
		LeaseUntil:     now.Add(e.cfg.DispatchGrace),
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	if p.IdempotencyKey != "" {
		run.RequestDigest = requestDigest(p)
	}
	return e.create(ctx, actor, d, run, map[string]any{
		"agent": p.Agent, "deployment": d.Version, "endUserId": p.EndUserID, "input": p.Input,
	})
}

// create stores a new run of deployment d with its run.created event and
// dispatches it (or hands it to a Pool worker, see handOff). It reports
// whether the run is new: false when run.IdempotencyKey names a run
// created by the same request (ErrIdempotencyKeyReused when by another).
func (e *Engine) create(ctx context.Context, actor approvals.Actor, d *deployment, run store.Run, data map[string]any) (store.Run, bool, error) {
	h := e.handOff(d, &run)
	e.watch.creating(run.ID)
	created, err := e.store.CreateRun(ctx, run, []store.Event{event("run.created", run.CreatedAt, "", byActor(actor, data))})
	if err != nil {
		e.watch.notCreated(run.ID)
		if h != nil {
			h.drop()
		}
	}
	if errors.Is(err, store.ErrExists) && run.IdempotencyKey != "" && created.ID != "" {
		if created.RequestDigest != run.RequestDigest {
			return store.Run{}, false, ErrIdempotencyKeyReused
		}
		return created, false, nil
	}
	if err != nil {
		return store.Run{}, false, fmt.Errorf("create run: %w", err)
	}
	e.watch.publish(created)
	if h != nil {
		h.start(created)
		return created, true, nil
	}
	// A lost dispatch is not an error: the run is stored, and the sweeper
	// dispatches it after DispatchGrace.
	_ = e.cfg.Dispatch.Dispatch(ctx, created.ID)
	return created, true, nil
}

// handoff is a run created already claimed by this process, for a worker of
// its Pool kept free for it: the create's write is the claim, so the run
// executes with one write and one read fewer than a dispatched run. It is
// the same claim Execute would make — Attempts counted in the write, a
// lease that a process dying lets run out, a local cancel heard from
// before the write — made sooner.
type handoff struct {
	e     *Engine
	slot  *slot
	d     *deployment
	ag    *agent.Agent
	lease time.Duration
	ctx   context.Context // the execution's: ended by a local Cancel
	stop  func()
}

// handOff makes run (not yet stored) of deployment d claimed by this
// process when the engine dispatches to a Pool with a worker idle, and
// returns what starts it once stored; nil, leaving run as it was,
// otherwise.
func (e *Engine) handOff(d *deployment, run *store.Run) *handoff {
	p, ok := e.cfg.Dispatch.(*Pool)
	if !ok {
		return nil
	}
	s := p.reserve()
	if s == nil {
		return nil
	}
	ag, err := agentIn(d, *run)
	if err != nil { // Execute deals with it, after a dispatch
		s.release()
		return nil
	}
	h := &handoff{e: e, slot: s, d: d, ag: ag, lease: e.lease(d.config, ag)}
	run.Status = store.RunRunning
	run.LeaseOwner, run.LeaseUntil = e.leaseOwner(), run.CreatedAt.Add(h.lease)
	run.Attempts = 1
	h.ctx, h.stop = e.listen(context.Background(), run.ID)
	return h
}

// start hands the stored run to its worker.
func (h *handoff) start(r store.Run) {
	ok := h.slot.run(r.ID, func(ctx context.Context) error {
		defer h.stop()
		if ctx.Err() != nil {
			return nil // the pool stopped first: left to the sweeper
		}
		defer context.AfterFunc(ctx, h.stop)() // the pool stopping interrupts it too
		return h.e.executeClaimed(h.ctx, r, h.d, h.ag, h.lease)
	})
	if !ok {
		h.stop()
	}
}

// drop gives the worker back when the run was not stored.
func (h *handoff) drop() {
	h.slot.release()
	h.stop()
}

// latestAgent is an agent as the project's latest deployment declares it.
// Errors: ErrNoDeployment, store.ErrNotFound (no such agent).
func (e *Engine) latestAgent(ctx context.Context, projectID, name string) (*deployment, *agent.Agent, error) {
	d, err := e.deployments.latest(ctx, projectID)
	if err != nil {
		return nil, nil, err
	}
	ag, ok := d.config.Agent(name)
	if !ok {
		return nil, nil, fmt.Errorf("agent %q is not in deployment %d: %w", name, d.Version, store.ErrNotFound)
	}
	return d, ag, nil
}

func requestDigest(p StartParams) string {
	var compact any
	_ = json.Unmarshal(p.Input, &compact)
	b, _ := json.Marshal(struct {
		Agent     string `json:"agent"`
		Input     any    `json:"input"`
		EndUserID string `json:"endUserId"`
	}{p.Agent, compact, p.EndUserID})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// GetRun returns a run the actor may see: any run of its project for a
// role that reads runs, the end user's own runs for a customer token, the
// runs that asked for an approval for an approver. Anything else reads as
// store.ErrNotFound.
func (e *Engine) GetRun(ctx context.Context, actor approvals.Actor, id string) (store.Run, error) {
	r, err := e.store.GetRun(ctx, id)
	if err != nil {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	ok, err := e.canSee(ctx, actor, r)
	if err != nil {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	if !ok {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, store.ErrNotFound)
	}
	return r, nil
}

func (e *Engine) canSee(ctx context.Context, a approvals.Actor, r store.Run) (bool, error) {
	if r.ProjectID != a.ProjectID {
		return false, nil
	}
	switch {
	case a.Role.May(approvals.ReadRuns):
		return true, nil
	case a.Role.May(approvals.ReadOwnRuns) && a.EndUserID != "" && a.EndUserID == r.EndUserID:
		return true, nil
	case a.Role.May(approvals.CallTools) && r.Via == ViaMCP(a.ID):
		return true, nil
	case a.Role.May(approvals.ReadApprovalRuns):
		if r.ApprovalID != "" {
			return true, nil
		}
		page, err := e.store.ListApprovals(ctx, store.ApprovalFilter{ProjectID: r.ProjectID, RunID: r.ID, Limit: 1})
		return err == nil && len(page.Items) > 0, err
	}
	return false, nil
}

// ListRuns lists runs of the actor's project (a customer sees only its own).
func (e *Engine) ListRuns(ctx context.Context, actor approvals.Actor, f store.RunFilter) (store.Page[store.Run], error) {
	f.ProjectID = actor.ProjectID
	switch {
	case actor.Role.May(approvals.ReadRuns):
	case actor.Role.May(approvals.ReadOwnRuns) && actor.EndUserID != "":
		f.EndUserID = actor.EndUserID
	default:
		return store.Page[store.Run]{}, ErrForbidden
	}
	return e.store.ListRuns(ctx, f)
}

// Events returns a run's trace after a sequence number.
func (e *Engine) Events(ctx context.Context, actor approvals.Actor, runID string, afterSeq int64, limit int) ([]store.Event, error) {
	if _, err := e.GetRun(ctx, actor, runID); err != nil {
		return nil, err
	}
	return e.store.ListEvents(ctx, runID, afterSeq, limit)
}

// Cancel stops a run: a queued or running run becomes cancelled (a worker
// in the same process is interrupted at once; one elsewhere stops at its
// next write, which may come after the read steps it holds — their records
// and handler costs are then not kept), and a run awaiting approval has its
// approval settled as cancelled in the same write. Errors: store.ErrNotFound,
// ErrForbidden, ErrRunFinished.
func (e *Engine) Cancel(ctx context.Context, actor approvals.Actor, runID string) (store.Run, error) {
	r, err := e.GetRun(ctx, actor, runID)
	if err != nil {
		return store.Run{}, err
	}
	ownCall := actor.Role.May(approvals.CallTools) && r.Via == ViaMCP(actor.ID)
	if !actor.Role.May(approvals.RunAgents) && !ownCall {
		return store.Run{}, ErrForbidden
	}
	for attempt := 1; ; attempt++ {
		if r.Status.Terminal() {
			return r, ErrRunFinished
		}
		now := e.now()
		runErr := &store.RunError{Code: "cancelled", Message: "cancelled by " + actor.ID}
		cancelled := event("run.cancelled", now, "", byActor(actor, map[string]any{}))
		if r.Status == store.RunAwaitingApproval {
			// Read first, to name the tool in the event (the decision then
			// reads nothing more).
			a, err := e.store.GetApproval(ctx, r.ApprovalID)
			if err != nil {
				return store.Run{}, fmt.Errorf("cancel run %s: read approval %s: %w", runID, r.ApprovalID, err)
			}
			_, r2, err := e.store.DecideApproval(ctx, store.DecideParams{
				Decision: approvals.Decision{
					ProjectID: r.ProjectID, ApprovalID: r.ApprovalID, Status: approvals.Cancelled,
					By: actor.ID, ByName: actor.Name, Note: "run cancelled", At: now,
				},
				Read:      &a,
				RunStatus: store.RunCancelled,
				RunError:  runErr,
				Events: []store.Event{
					event("approval.cancelled", now, a.StepID, byActor(actor, map[string]any{"approvalId": a.ID, "tool": a.Tool})),
					cancelled,
				},
			})
			if err == nil {
				e.watch.publish(r2)
				return r2, nil
			}
			if !isRace(err) {
				return store.Run{}, fmt.Errorf("cancel run %s: %w", runID, err)
			}
		} else {
			next := r
			next.Status = store.RunCancelled
			next.Error = runErr
			next.LeaseOwner, next.LeaseUntil = "", zeroTime
			next.FinishedAt, next.UpdatedAt = now, now
			r2, err := e.store.CommitRun(ctx, store.RunCommit{Run: next, Events: []store.Event{cancelled}})
			if err == nil {
				e.watch.publish(r2)
				e.stopLocal(runID)
				return r2, nil
			}
			if !errors.Is(err, store.ErrConflict) {
				return store.Run{}, fmt.Errorf("cancel run %s: %w", runID, err)
			}
		}
		// Lost a race with a worker or a decision: read again and retry, a
		// few times — a run that keeps changing (or whose store keeps
		// refusing) is reported busy rather than retried without end.
		if attempt == maxCancelAttempts {
			return r, fmt.Errorf("cancel run %s: it kept changing while it was being cancelled; try again: %w", runID, store.ErrConflict)
		}
		if err := e.cfg.Sleep(ctx, time.Duration(attempt)*10*time.Millisecond); err != nil {
			return store.Run{}, err
		}
		if r, err = e.store.GetRun(ctx, runID); err != nil {
			return store.Run{}, fmt.Errorf("cancel run %s: %w", runID, err)
		}
	}
}

// isRace reports whether a decide lost to a concurrent change of the run.
func isRace(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, approvals.ErrNotPending)
}

// stopLocal interrupts an execution of the run in this process, if any.
func (e *Engine) stopLocal(runID string) {
	e.runningMu.Lock()
	l := e.running[runID]
	e.runningMu.Unlock()
	if l != nil {
		l.cancel(errCancelled)
	}
}

// maxCancelAttempts bounds how often Cancel retries a lost race.
const maxCancelAttempts = 5

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
