package engine_test

import (
	"context"
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

// commitLog records which steps each commit recorded, and whether it
// created an approval.
type commitLog struct {
	store.Store
	mu      sync.Mutex
	commits []loggedCommit
}

type loggedCommit struct {
	steps    []string
	approval bool
}

func (l *commitLog) CommitRun(ctx context.Context, c store.RunCommit) (store.Run, error) {
	r, err := l.Store.CommitRun(ctx, c)
	if err == nil {
		lc := loggedCommit{approval: c.Approval != nil}
		for _, st := range c.Steps {
			lc.steps = append(lc.steps, st.ID)
		}
		l.mu.Lock()
		l.commits = append(l.commits, lc)
		l.mu.Unlock()
	}
	return r, err
}

// recorded lists the step ids of the commits that recorded steps, in order.
func (l *commitLog) recorded() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]string
	for _, c := range l.commits {
		if len(c.steps) > 0 {
			out = append(out, c.steps)
		}
	}
	return out
}

// approveBatch runs the batch agent through its approval to the end.
func approveBatch(t *testing.T, h *harness) store.Run {
	t.Helper()
	r := h.start("batch", `{}`)
	h.drain()
	a := h.pending(r.ID)
	if a.StepID != "c" {
		t.Fatalf("paused at step %s, want c", a.StepID)
	}
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	h.drain()
	r = h.run(r.ID)
	wantStatus(t, r, store.RunSucceeded, "")
	return r
}

// Consecutive read steps share a commit — here the pause's — and a write
// step never shares one.
func TestReadStepsShareACommitWritesNever(t *testing.T) {
	t.Parallel()
	log := &commitLog{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { log.Store = s; return log } })
	r := approveBatch(t, h)

	// e is held until f, a write, is about to run: then e is recorded on
	// its own, before f's handler runs.
	want := [][]string{{"a", "b"}, {"c"}, {"d"}, {"e"}, {"f"}}
	if got := log.recorded(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("steps per commit = %v, want %v", got, want)
	}
	for _, c := range log.commits {
		if c.approval && !slices.Equal(c.steps, []string{"a", "b"}) {
			t.Errorf("the pause recorded %v, want the held reads a and b", c.steps)
		}
	}
	steps, err := h.store.ListSteps(h.ctx, r.ID)
	if err != nil || len(steps) != 6 {
		t.Fatalf("%d step records (%v), want 6", len(steps), err)
	}
	for i, st := range steps {
		if st.Index != i || st.IdempotencyKey != engine.IdempotencyKey(h.project, r.ID, i, st.ID) {
			t.Errorf("step %d = %+v", i, st)
		}
	}
	// The events of the held steps went out with their commit, in order.
	var got []string
	for _, e := range h.events(r.ID) {
		if e.Type == "step.completed" {
			got = append(got, e.Step)
		}
	}
	if !slices.Equal(got, []string{"a", "b", "c", "d", "e", "f"}) {
		t.Errorf("step.completed events for %v", got)
	}
}

// A crash between two batched read steps — the commit that would record
// both never lands — re-runs both with the same idempotency keys, and each
// is recorded once, its cost counted once.
func TestCrashBetweenBatchedReadsReRunsBoth(t *testing.T) {
	t.Parallel()
	cs := &crashingStore{crashes: 1, match: func(c store.RunCommit) bool { return recordsStep(c, "b") }}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })
	stuck := h.startAndCrash("batch")
	r := stuck
	if stuck.Cursor != 0 {
		t.Fatalf("after the crash the run is at cursor %d, want 0 (nothing recorded)", stuck.Cursor)
	}
	if st, _ := h.store.ListSteps(h.ctx, r.ID); len(st) != 0 {
		t.Fatalf("%d steps recorded by a commit that did not land", len(st))
	}
	h.recoverAfterLease(stuck)
	a := h.pending(r.ID)
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	h.drain()
	r = h.run(r.ID)
	wantStatus(t, r, store.RunSucceeded, "")

	for i, step := range []string{"a", "b"} {
		c := h.calls(r.ID, step)
		if len(c) != 2 || c[0].Key != c[1].Key || c[0].Key != engine.IdempotencyKey(h.project, r.ID, i, step) {
			t.Errorf("step %s calls = %+v, want two with its key", step, c)
		}
	}
	for _, step := range []string{"c", "d", "f"} {
		if c := h.calls(r.ID, step); len(c) != 1 {
			t.Errorf("write step %s ran %d times", step, len(c))
		}
	}
	steps, _ := h.store.ListSteps(h.ctx, r.ID)
	if len(steps) != 6 {
		t.Errorf("%d step records, want 6 (no duplicate)", len(steps))
	}
	if r.Costs.CostUSD != 0.5 {
		t.Errorf("run costs %+v, want spend's 0.5 USD once", r.Costs)
	}
	n := 0
	for _, e := range h.events(r.ID) {
		if e.Type == "cost.recorded" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d cost.recorded events, want 1", n)
	}
}

// slowInvoker moves the clock forward by d in every handler call.
type slowInvoker struct {
	engine.Invoker
	h *harness
	d time.Duration
}

func (s *slowInvoker) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error) {
	s.h.clock.Advance(s.d)
	return s.Invoker.Invoke(ctx, b, inv)
}

// Held steps are recorded before a read whose call could outlast the lease
// the last write took: a batch never stretches a claim past its lease.
func TestHeldStepsRecordedBeforeTheLeaseRunsShort(t *testing.T) {
	t.Parallel()
	log := &commitLog{}
	slow := &slowInvoker{d: 20 * time.Second}
	h := setup(t,
		func(o *options) { o.wrap = func(s store.Store) store.Store { log.Store = s; return log } },
		func(o *options) {
			o.invoker = func(rt engine.Invoker) engine.Invoker { slow.Invoker = rt; return slow }
		})
	slow.h = h
	approveBatch(t, h)
	// Lease: 30 s (the longest tool timeout) + 30 s margin. After a's 20 s,
	// b's 30 s timeout and half the margin no longer fit.
	want := [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}, {"f"}}
	if got := log.recorded(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("steps per commit = %v, want %v", got, want)
	}
}

// A claim that retries a run whose last worker stopped mid-step holds no
// steps: each is recorded as it completes, so a step that keeps crashing
// its worker uses up its own attempts, not those of the reads before it.
func TestRetriedClaimHoldsNoSteps(t *testing.T) {
	t.Parallel()
	log := &commitLog{}
	cs := &crashingStore{crashes: 1, match: func(c store.RunCommit) bool { return recordsStep(c, "b") }}
	h := setup(t, func(o *options) {
		o.wrap = func(s store.Store) store.Store { log.Store = s; cs.Store = log; return cs }
	})
	h.recoverAfterLease(h.startAndCrash("batch"))
	// The retry recorded a on its own, then b with the pause.
	if got, want := log.recorded(), [][]string{{"a"}, {"b"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("steps per commit after the retry = %v, want %v", got, want)
	}
}

// Held steps are recorded before a read whose call could outlast the
// execution's own deadline (a runner Lambda's), not only the lease.
func TestHeldStepsRecordedBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	log := &commitLog{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { log.Store = s; return log } })
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "batch", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	h.queue.take()
	// Less than a tool timeout (30 s) plus half the margin is left.
	ctx, cancel := context.WithTimeout(h.ctx, 20*time.Second)
	defer cancel()
	if err := h.eng.Execute(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got, want := log.recorded(), [][]string{{"a"}, {"b"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("steps per commit = %v, want %v", got, want)
	}
}

// bigReads is three reads of outputs over half the inline limit each, and
// a write.
const bigReads = `{
  "agents": {
    "bigReads": {
      "tools": { "bigResult": { "effect": "read" }, "addNote": { "effect": "write" } },
      "steps": [
        { "id": "a", "tool": "bigResult", "input": { "size": 550 } },
        { "id": "b", "tool": "bigResult", "input": { "size": 550 } },
        { "id": "c", "tool": "bigResult", "input": { "size": 550 } },
        { "id": "d", "tool": "addNote", "input": { "text": "read" } }
      ]
    }
  }
}`

// The read steps held for one commit keep their outputs, together, within
// what one step may keep, the limit included: with outputs of 564 bytes
// and a limit of 1000, a is held, b's commit records both, and c goes on
// its own before the write; with a limit of exactly two outputs, a and b
// are held and c's commit records all three, and no commit comes before
// the write's handler, nothing being held.
func TestHeldOutputsStayWithinTheInlineLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		limit int
		want  [][]string
	}{
		{1000, [][]string{{"a", "b"}, {"c"}, {"d"}}},
		{1128, [][]string{{"a", "b", "c"}, {"d"}}},
	} {
		log := &commitLog{}
		h := setup(t, func(o *options) {
			o.maxOutputInline = c.limit
			o.wrap = func(s store.Store) store.Store { log.Store = s; return log }
		})
		h.deploy(h.owner, handlers, bigReads)
		r := h.start("bigReads", `{}`)
		wantStatus(t, r, store.RunSucceeded, "")
		if got := log.recorded(); !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("limit %d: steps per commit = %v, want %v", c.limit, got, c.want)
		}
		// With nothing held, the write's handler runs without a commit
		// before it.
		if len(log.commits) != len(c.want) {
			t.Errorf("limit %d: %d commits, want one per group of steps (%d)", c.limit, len(log.commits), len(c.want))
		}
	}
}

// readThenModel is a read step followed by a model step.
const readThenModel = `{
  "models": { "default": { "provider": "openai", "baseUrl": "%URL%", "model": "m", "apiKeyEnv": "TEST_LLM_KEY" } },
  "agents": {
    "readThenAsk": {
      "tools": { "listOrders": { "effect": "read" } },
      "steps": [
        { "id": "orders", "tool": "listOrders", "input": { "user": "$run.endUserId" } },
        { "id": "summary", "model": "default", "prompt": "Summarize the orders of {{ $steps.orders.output.user }}" }
      ]
    }
  }
}`

// Only a read followed by a tool step is held: a read before a model step
// is recorded before the model is asked, so a crash while the model step
// is recorded asks the model again but does not run the read again.
func TestReadBeforeAModelStepIsNotHeld(t *testing.T) {
	t.Parallel()
	cs := &crashingStore{step: "summary", crashes: 1}
	h, l := setupModels(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })
	h.deploy(h.owner, handlers, strings.ReplaceAll(readThenModel, "%URL%", l.url()))
	l.then(answer("one order", 1, 1), answer("one order", 1, 1))
	stuck := h.startAndCrash("readThenAsk")
	h.recoverAfterLease(stuck)
	l.done()
	r := h.run(stuck.ID)
	wantStatus(t, r, store.RunSucceeded, "")
	if c := h.calls(r.ID, "orders"); len(c) != 1 {
		t.Errorf("the read before the model step ran %d times, want once: it was recorded before the model was asked", len(c))
	}
}
