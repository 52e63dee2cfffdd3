package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"stead/runtime/bundle"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/store"
)

// crashingStore fails the write that records a chosen step's completion (or
// any write match chooses), as if the worker died after the handler ran but
// before its result was stored.
type crashingStore struct {
	store.Store
	mu      sync.Mutex
	step    string
	match   func(store.RunCommit) bool
	crashes int
}

var errCrash = errors.New("worker died")

// hasEvent reports whether a commit writes an event of the type whose data
// contains every fragment.
func hasEvent(c store.RunCommit, typ string, fragments ...string) bool {
	for _, e := range c.Events {
		if e.Type != typ {
			continue
		}
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(string(e.Data), f)
		}
		if ok {
			return true
		}
	}
	return false
}

// recordsStep reports whether a commit records the step with that id.
func recordsStep(c store.RunCommit, id string) bool {
	return slices.ContainsFunc(c.Steps, func(st store.Step) bool { return st.ID == id })
}

func (s *crashingStore) CommitRun(ctx context.Context, c store.RunCommit) (store.Run, error) {
	s.mu.Lock()
	crash := s.crashes > 0 && ((s.match == nil && recordsStep(c, s.step)) || (s.match != nil && s.match(c)))
	if crash {
		s.crashes--
	}
	s.mu.Unlock()
	if crash {
		return store.Run{}, errCrash
	}
	return s.Store.CommitRun(ctx, c)
}

// startAndCrash starts a run of agentName and executes it until the
// crashing store fails a write, as a worker that dies there would.
func (h *harness) startAndCrash(agentName string) store.Run {
	h.t.Helper()
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: agentName, EndUserID: "alice"})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, id := range h.queue.take() {
		if err := h.eng.Execute(h.ctx, id); !errors.Is(err, errCrash) {
			h.t.Fatalf("execute: err = %v, want the crash", err)
		}
	}
	return h.run(r.ID)
}

// recoverAfterLease moves the clock past the run's lease and sweeps: the
// sweeper dispatches the run again, and the queue is drained.
func (h *harness) recoverAfterLease(stuck store.Run) {
	h.t.Helper()
	h.clock.Advance(stuck.LeaseUntil.Sub(h.clock.Now()) + time.Second)
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Redispatched != 1 {
		h.t.Fatalf("sweep after the lease ran out: %+v %v", res, err)
	}
	h.drain()
}

func TestCrashMidStepReRunsWithSameKey(t *testing.T) {
	t.Parallel()
	cs := &crashingStore{step: "two", crashes: 1}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })

	// The worker is gone; its lease holds the run until it runs out.
	stuck := h.startAndCrash("plain")
	r := stuck
	if stuck.Status != store.RunRunning || stuck.Cursor != 1 {
		t.Fatalf("after the crash: %s at cursor %d", stuck.Status, stuck.Cursor)
	}
	if res, _ := h.eng.Sweep(h.ctx); res.Redispatched != 0 {
		t.Fatalf("sweeper took a run whose lease is live")
	}
	if err := h.eng.Execute(h.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if h.run(r.ID).Version != stuck.Version {
		t.Fatal("a second worker claimed a run with a live lease")
	}

	h.recoverAfterLease(stuck)
	r = h.run(r.ID)
	wantStatus(t, r, store.RunSucceeded, "")

	// The completed step did not run again; the interrupted one ran twice
	// with the same key; the last once.
	if c := h.calls(r.ID, "one"); len(c) != 1 {
		t.Errorf("completed step one ran %d times", len(c))
	}
	c := h.calls(r.ID, "two")
	if len(c) != 2 || c[0].Key != c[1].Key || c[0].Key != engine.IdempotencyKey(h.project, r.ID, 1, "two") {
		t.Errorf("step two calls = %+v, want two with the same key", c)
	}
	if c := h.calls(r.ID, "three"); len(c) != 1 {
		t.Errorf("step three ran %d times", len(c))
	}
	steps, _ := h.store.ListSteps(h.ctx, r.ID)
	if len(steps) != 3 {
		t.Errorf("%d step records, want 3 (no duplicate)", len(steps))
	}
	if r.Attempts != 0 {
		t.Errorf("attempts = %d after completion", r.Attempts)
	}
}

func TestStaleWorkerCannotOverwrite(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	h.queue.take()
	now := h.clock.Now()
	stale, err := h.store.ClaimRun(h.ctx, store.ClaimParams{RunID: r.ID, Owner: "w1", Until: now.Add(time.Minute), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Minute)
	// Another worker takes the run over after w1's lease ran out and finishes it.
	if err := h.eng.Execute(h.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
	// w1 wakes up and writes from the version it held: refused.
	stale.Status = store.RunFailed
	if _, err := h.store.CommitRun(h.ctx, store.RunCommit{Run: stale}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale write: err = %v, want conflict", err)
	}
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
}

// crashRun executes the queued runs expecting the injected crash, then lets
// the dead worker's lease run out and has the sweeper dispatch the run again.
func crashRun(t *testing.T, h *harness, runID string) {
	t.Helper()
	for _, id := range h.queue.take() {
		if err := h.eng.Execute(h.ctx, id); !errors.Is(err, errCrash) {
			t.Fatalf("execute: err = %v, want the crash", err)
		}
	}
	stuck := h.run(runID)
	if stuck.Status != store.RunRunning {
		t.Fatalf("after the crash the run is %s", stuck.Status)
	}
	h.restart()
	h.clock.Advance(stuck.LeaseUntil.Sub(h.clock.Now()) + time.Second)
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Redispatched != 1 {
		t.Fatalf("sweep after the lease ran out: %+v %v", res, err)
	}
	h.drain()
}

func TestAgentLoopCrashWhilePausedResumesSameConversation(t *testing.T) {
	t.Parallel()
	h, l := setupModels(t)
	r, a := startTriage(t, h, l, "triage")
	// The process dies while the run waits; a new one decides and resumes.
	h.restart()
	l.then(answer("Refunded.", 1, 1))
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
	l.done()
	// The new process sent exactly the saved conversation, continued by the
	// approved call's result.
	r2, r3 := l.request(2), l.request(3)
	sent := slices.Concat(r2.Messages(), []any{msg(t, r3, 4), msg(t, r3, 5)})
	if jsonString(r3.Messages()) != jsonString(sent) || jsonString(r3.Body["tools"]) != jsonString(r2.Body["tools"]) {
		t.Errorf("request 3 does not continue request 2:\n%s\n%s", jsonString(r2.Messages()), jsonString(r3.Messages()))
	}
	if m := msg(t, r3, 4); !strings.Contains(jsonString(m["tool_calls"]), `"id":"call_b"`) {
		t.Errorf("message 4 = %v", m)
	}
	if c := h.calls(r.ID, "triage"); len(c) != 2 {
		t.Errorf("%d handler calls, want 2 (each once)", len(c))
	}
}

func TestAgentLoopCrashAfterCallDoesNotRunItAgain(t *testing.T) {
	t.Parallel()
	cs := &crashingStore{crashes: 1, match: func(c store.RunCommit) bool {
		// The worker dies saving the model's second answer, after the first
		// call's result was saved.
		return hasEvent(c, "model.responded", `"turn":2`)
	}}
	h, l := setupModels(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })
	l.then(
		calls(1, 1, tcall{"c1", "listOrders", `{"user":"once"}`}),
		answer("lost with the worker", 1, 1),
		answer("done", 1, 1),
	)
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "triage", Input: json.RawMessage(`{"request":"x"}`), EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	crashRun(t, h, r.ID)
	r = h.run(r.ID)
	wantStatus(t, r, store.RunSucceeded, "")
	l.done()
	if c := h.calls(r.ID, "triage"); len(c) != 1 {
		t.Errorf("the completed call ran %d times, want once", len(c))
	}
	// The model was asked the second turn again with the same conversation.
	if jsonString(l.request(2).Messages()) != jsonString(l.request(3).Messages()) {
		t.Error("the retried turn saw another conversation")
	}
	if string(r.Output) != `"done"` {
		t.Errorf("output = %s", r.Output)
	}
}

func TestAgentLoopCrashMidCallReRunsWithSameKey(t *testing.T) {
	t.Parallel()
	cs := &crashingStore{crashes: 1, match: func(c store.RunCommit) bool {
		// The worker dies saving the call's result: the handler ran.
		return hasEvent(c, "tool.completed", `"callId":"t1.1"`)
	}}
	h, l := setupModels(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })
	l.then(calls(1, 1, tcall{"c1", "listOrders", `{"user":"twice"}`}), answer("done", 1, 1))
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "triage", Input: json.RawMessage(`{"request":"x"}`), EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	crashRun(t, h, r.ID)
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
	l.done()
	c := h.calls(r.ID, "triage")
	if len(c) != 2 || c[0].Key != c[1].Key || c[0].Key != engine.IdempotencyKey(h.project, r.ID, 0, "t1.1") {
		t.Errorf("calls = %+v, want two with the same key", c)
	}
	if l.count() != 2 {
		t.Errorf("%d model requests, want 2: the saved turn is not asked again", l.count())
	}
}

// A step whose worker dies every time is not retried forever: after
// MaxAttempts claims the run fails, saying why.
func TestStepGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	cs := &crashingStore{step: "two", crashes: 100}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2*engine.MaxAttempts && !h.run(r.ID).Status.Terminal(); i++ {
		for _, id := range h.queue.take() {
			if err := h.eng.Execute(h.ctx, id); err != nil && !errors.Is(err, errCrash) {
				t.Fatal(err)
			}
		}
		h.clock.Advance(time.Hour) // past any lease
		if _, err := h.eng.Sweep(h.ctx); err != nil {
			t.Fatal(err)
		}
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodeInternal)
	if r.Error.Step != "two" || !strings.Contains(r.Error.Message, fmt.Sprintf("did not complete in %d attempts", engine.MaxAttempts)) {
		t.Errorf("error = %+v", r.Error)
	}
	if c := h.calls(r.ID, "two"); len(c) != engine.MaxAttempts {
		t.Errorf("step two ran %d times, want %d", len(c), engine.MaxAttempts)
	}
	if c := h.calls(r.ID, "one"); len(c) != 1 {
		t.Errorf("step one ran %d times", len(c))
	}
}

// A run whose deployment cannot be loaded (its bundle is gone) fails clearly
// instead of being dispatched again at every sweep.
func TestUnrunnableDeploymentFailsRun(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	h.queue.take()
	h.restartWithoutBundles()
	if err := h.eng.Execute(h.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodeInternal)
	if !strings.Contains(r.Error.Message, "deployment 1 cannot run this run") || !strings.Contains(r.Error.Message, "not found") {
		t.Errorf("error = %+v", r.Error)
	}
	if res, _ := h.eng.Sweep(h.ctx); res.Redispatched != 0 {
		t.Errorf("the failed run is dispatched again: %+v", res)
	}
}

// sharedBreach makes the first call of one export end as the handler runtime
// reports a memory breach it cannot pin on that handler (others ran too).
type sharedBreach struct {
	engine.Invoker
	export string
	mu     sync.Mutex
	done   bool
}

func (s *sharedBreach) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error) {
	res, err := s.Invoker.Invoke(ctx, b, inv)
	s.mu.Lock()
	defer s.mu.Unlock()
	if inv.Export == s.export && !s.done {
		s.done = true
		return res, &jsvm.Error{Code: jsvm.CodeMemory, Retryable: true, Message: "memory limit exceeded: … may not be the cause"}
	}
	return res, err
}

// A step interrupted by a memory breach that may be a neighbour's is tried
// again with the same key, not failed.
func TestRetryableHandlerErrorRequeuesTheStep(t *testing.T) {
	t.Parallel()
	h := setup(t, func(o *options) {
		o.invoker = func(rt engine.Invoker) engine.Invoker { return &sharedBreach{Invoker: rt, export: "addNote"} }
	})
	r := h.start("plain", `{}`)
	wantStatus(t, r, store.RunSucceeded, "")
	c := h.calls(r.ID, "two")
	if len(c) != 2 || c[0].Key != c[1].Key {
		t.Errorf("step two calls = %+v, want two with the same key", c)
	}
	types := h.eventTypes(r.ID)
	if !slices.Contains(types, "step.retrying") || slices.Contains(types, "run.failed") {
		t.Errorf("trace = %v", types)
	}
}

// busyStore refuses every CommitRun, as a store whose run keeps changing
// would.
type busyStore struct {
	store.Store
	commits int
}

func (s *busyStore) CommitRun(context.Context, store.RunCommit) (store.Run, error) {
	s.commits++
	return store.Run{}, store.ErrConflict
}

// Cancel retries a lost race a few times, then reports the run busy instead
// of spinning until its context ends.
func TestCancelGivesUpOnARunThatKeepsChanging(t *testing.T) {
	t.Parallel()
	bs := &busyStore{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { bs.Store = s; return bs } })
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.eng.Cancel(h.ctx, h.dev, r.ID)
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "try again") || bs.commits != 5 {
		t.Fatalf("cancel: %v after %d commits, want a conflict after 5", err, bs.commits)
	}
}

// redispatchUntil executes the run's dispatches, as workers that die at
// the crashing store's writes would, and after each round moves past their
// leases and sweeps, until done holds for the run (at most ten rounds).
func (h *harness) redispatchUntil(runID string, done func(store.Run) bool) store.Run {
	h.t.Helper()
	for range 10 {
		for _, id := range h.queue.take() {
			if err := h.eng.Execute(h.ctx, id); err != nil && !errors.Is(err, errCrash) {
				h.t.Fatal(err)
			}
		}
		if r := h.run(runID); done(r) {
			return r
		}
		h.clock.Advance(time.Hour) // past any lease
		if _, err := h.eng.Sweep(h.ctx); err != nil {
			h.t.Fatal(err)
		}
	}
	r := h.run(runID)
	h.t.Fatalf("run %s is still %s after ten rounds of dispatches; trace %v", runID, r.Status, h.eventTypes(runID))
	return r
}

// SandboxRetries above the default gives a step whose worker keeps dying
// as many claims as a crashing sandbox gets tries: 1 + SandboxRetries.
func TestStepAttemptsFollowSandboxRetries(t *testing.T) {
	t.Parallel()
	cs := &crashingStore{step: "two", crashes: 100}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })
	h.cfg.SandboxRetries = 4
	h.restart()
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	r = h.redispatchUntil(r.ID, func(r store.Run) bool { return r.Status.Terminal() })
	wantStatus(t, r, store.RunFailed, engine.CodeInternal)
	if !strings.Contains(r.Error.Message, "did not complete in 5 attempts") {
		t.Errorf("error = %+v, want 5 attempts", r.Error)
	}
	if c := h.calls(r.ID, "two"); len(c) != 5 {
		t.Errorf("step two ran %d times, want 5 (1 + SandboxRetries)", len(c))
	}
}

// A step's attempts are its own: a crash while an earlier step was being
// recorded does not use up the attempts of the step after it, which still
// gets MaxAttempts claims of its own.
func TestEachStepGetsItsOwnAttempts(t *testing.T) {
	t.Parallel()
	crashedOne := false
	cs := &crashingStore{crashes: 100, match: func(c store.RunCommit) bool {
		if recordsStep(c, "one") && !crashedOne {
			crashedOne = true
			return true
		}
		return recordsStep(c, "two")
	}}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	r = h.redispatchUntil(r.ID, func(r store.Run) bool { return r.Status.Terminal() })
	wantStatus(t, r, store.RunFailed, engine.CodeInternal)
	if r.Error.Step != "two" {
		t.Errorf("error = %+v, want step two's", r.Error)
	}
	if c := h.calls(r.ID, "one"); len(c) != 2 {
		t.Errorf("step one ran %d times, want 2 (once more after the crash that lost its record)", len(c))
	}
	if c := h.calls(r.ID, "two"); len(c) != engine.MaxAttempts {
		t.Errorf("step two ran %d times, want %d: the crash at step one used up its attempts", len(c), engine.MaxAttempts)
	}
}

// An approval pause does not count as an attempt: a step that paused on its
// last attempt (its worker died twice writing the pause) runs once approved
// instead of failing for having used up its attempts.
func TestPauseResetsTheAttempts(t *testing.T) {
	t.Parallel()
	cs := &crashingStore{crashes: engine.MaxAttempts - 1, match: func(c store.RunCommit) bool { return c.Approval != nil }}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })
	// The first step, note, asks: "sensitive" notes need a look.
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "rules", Input: json.RawMessage(`{"text":"sensitive","amount":5}`), EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	h.redispatchUntil(r.ID, func(r store.Run) bool { return r.Status == store.RunAwaitingApproval })
	a := h.pending(r.ID)
	if a.Tool != "addNote" {
		t.Fatalf("paused on %s, want addNote", a.Tool)
	}
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	if c := h.calls(r.ID, "note"); len(c) != 1 {
		t.Errorf("the approved note ran %d times, want once", len(c))
	}
	// On to the next gated step, which asks in turn.
	if next := h.pending(r.ID); next.Tool != "refundOrder" {
		t.Errorf("the run waits for %s, want refundOrder", next.Tool)
	}
}

// A dispatch of a run that is not claimable changes nothing, even when
// its deployment can no longer be loaded: a run awaiting approval stays
// awaiting it.
func TestUnclaimableRunIsLeftAloneByABrokenDeployment(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	h.restartWithoutBundles()
	if err := h.eng.Execute(h.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := h.run(r.ID); got.Status != store.RunAwaitingApproval || got.ApprovalID != a.ID || got.Error != nil {
		t.Errorf("after a duplicate dispatch the run is %s (%+v), want it still awaiting approval %s", got.Status, got.Error, a.ID)
	}
}
