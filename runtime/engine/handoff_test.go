package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stead/runtime/bundle"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/store"
)

// runCalls counts the run reads and writes of the local shape, and runs
// afterCreate (if set) once a create is stored.
type runCalls struct {
	store.Store
	creates, claims, reads atomic.Int64
	// attempts is the Attempts of the last claim.
	attempts    atomic.Int64
	afterCreate func(store.Run)
}

func (c *runCalls) CreateRun(ctx context.Context, r store.Run, evs []store.Event) (store.Run, error) {
	c.creates.Add(1)
	created, err := c.Store.CreateRun(ctx, r, evs)
	if err == nil && c.afterCreate != nil {
		c.afterCreate(created)
	}
	return created, err
}

func (c *runCalls) ClaimRun(ctx context.Context, p store.ClaimParams) (store.Run, error) {
	c.claims.Add(1)
	r, err := c.Store.ClaimRun(ctx, p)
	if err == nil {
		c.attempts.Store(int64(r.Attempts))
	}
	return r, err
}

func (c *runCalls) GetRun(ctx context.Context, id string) (store.Run, error) {
	c.reads.Add(1)
	return c.Store.GetRun(ctx, id)
}

// setupPool is setup with a Pool of n workers and the run calls counted.
func setupPool(t *testing.T, n int, opts ...func(*options)) (*harness, *runCalls) {
	t.Helper()
	calls := &runCalls{}
	opts = append(opts, func(o *options) {
		o.pool = n
		o.wrap = func(s store.Store) store.Store { calls.Store = s; return calls }
	})
	return setup(t, opts...), calls
}

// waitEnd waits for the run to end (or pause) and returns it as the wait
// answered.
func (h *harness) waitEnd(id string) store.Run {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	r, err := h.eng.WaitFor(ctx, h.dev, id, func(r store.Run) bool {
		return r.Status.Terminal() || r.Status == store.RunAwaitingApproval
	})
	if err != nil {
		h.t.Fatalf("wait for %s: %v", id, err)
	}
	return r
}

// A run started with a worker of the Pool free is created already claimed
// by this process: the create's write is the claim (attempt 1, a lease a
// dying process lets run out), and a wait right after the create reads
// nothing back. Its trace is a dispatched run's.
func TestLocalRunIsClaimedByItsCreate(t *testing.T) {
	t.Parallel()
	h, calls := setupPool(t, 2)
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != store.RunRunning || r.Attempts != 1 || !strings.HasPrefix(r.LeaseOwner, "test/") || !r.LeaseUntil.After(r.CreatedAt) {
		t.Fatalf("created: status %s, attempts %d, lease %q until %v (created %v); want running, attempt 1, leased by this process",
			r.Status, r.Attempts, r.LeaseOwner, r.LeaseUntil, r.CreatedAt)
	}
	got := h.waitEnd(r.ID)
	wantStatus(t, got, store.RunSucceeded, "")
	if n := calls.claims.Load(); n != 0 {
		t.Errorf("%d claims of a run its create claimed", n)
	}
	if n := calls.reads.Load(); n != 0 {
		t.Errorf("%d reads of the run: the execution and the wait right after the create need none", n)
	}
	stored := h.run(r.ID)
	want, _ := json.Marshal(stored)
	if have, _ := json.Marshal(got); string(have) != string(want) {
		t.Errorf("the wait answered a run other than the stored one:\n got  %s\n want %s", have, want)
	}
	for _, step := range []string{"one", "two", "three"} {
		if c := h.calls(r.ID, step); len(c) != 1 {
			t.Errorf("step %s ran %d times", step, len(c))
		}
	}
	dispatched := setup(t)
	if have, want := h.eventTypes(r.ID), dispatched.eventTypes(dispatched.start("plain", `{}`).ID); !slices.Equal(have, want) {
		t.Errorf("trace of a run claimed by its create = %v\nof a dispatched run = %v", have, want)
	}
}

// holdFirst holds the first handler call until released.
type holdFirst struct {
	engine.Invoker
	once     sync.Once
	started  chan struct{}
	released chan struct{}
}

func (h *holdFirst) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error) {
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.started)
		<-h.released
	}
	return h.Invoker.Invoke(ctx, b, inv)
}

// With every worker busy a run is created queued and dispatched, as
// before: a run claimed by its create never waits behind others while its
// lease runs.
func TestRunIsQueuedWhenNoWorkerIsFree(t *testing.T) {
	t.Parallel()
	hold := &holdFirst{started: make(chan struct{}), released: make(chan struct{})}
	h, calls := setupPool(t, 1, func(o *options) {
		o.invoker = func(rt engine.Invoker) engine.Invoker { hold.Invoker = rt; return hold }
	})
	a, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	<-hold.started
	b, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != store.RunRunning || b.Status != store.RunQueued {
		t.Errorf("created: %s with the worker free, %s with it busy; want running, queued", a.Status, b.Status)
	}
	close(hold.released)
	wantStatus(t, h.waitEnd(a.ID), store.RunSucceeded, "")
	wantStatus(t, h.waitEnd(b.ID), store.RunSucceeded, "")
	if n := calls.claims.Load(); n != 1 {
		t.Errorf("%d claims, want 1 (the queued run's)", n)
	}
}

// liveCalls records the runs whose handlers were called with a live
// context.
type liveCalls struct {
	engine.Invoker
	mu   sync.Mutex
	runs []string
}

func (l *liveCalls) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error) {
	if ctx.Err() == nil {
		l.mu.Lock()
		l.runs = append(l.runs, inv.RunID)
		l.mu.Unlock()
	}
	return l.Invoker.Invoke(ctx, b, inv)
}

// A cancel that lands between the create's write and the worker's start
// (someone listed the run the moment it was stored) is heard: the create
// listened for it before writing, so no handler of the run is called, and
// a wait right after the create answers with the cancelled run, not the
// run as its create stored it.
func TestCancelBeforeTheWorkerStartsIsHeard(t *testing.T) {
	t.Parallel()
	live := &liveCalls{}
	h, calls := setupPool(t, 1, func(o *options) {
		o.invoker = func(rt engine.Invoker) engine.Invoker { live.Invoker = rt; return live }
	})
	var cancelled atomic.Bool
	calls.afterCreate = func(r store.Run) {
		if cancelled.CompareAndSwap(false, true) {
			if _, err := h.eng.Cancel(h.ctx, h.owner, r.ID); err != nil {
				t.Errorf("cancel: %v", err)
			}
		}
	}
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.waitEnd(r.ID); got.Status != store.RunCancelled {
		t.Fatalf("the wait answered %s (version %d), want cancelled", got.Status, got.Version)
	}
	// The one worker takes the next run only after the cancelled one's turn.
	next, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.waitEnd(next.ID), store.RunSucceeded, "")
	live.mu.Lock()
	defer live.mu.Unlock()
	if slices.Contains(live.runs, r.ID) {
		t.Errorf("a handler of the cancelled run was called with a live context")
	}
	if !slices.Contains(live.runs, next.ID) {
		t.Errorf("the next run's handlers were not called: %v", live.runs)
	}
	wantStatus(t, h.run(r.ID), store.RunCancelled, "cancelled")
}

// A run whose create claimed it but whose worker stopped before taking it
// (the server shutting down in between) stays claimed until its lease
// runs out, as after a crash; then the sweeper of the next process
// dispatches it, and its steps run once. The lost claim counts as an
// attempt.
func TestClaimedRunOfAStoppedPoolIsRecoveredAfterItsLease(t *testing.T) {
	t.Parallel()
	h, calls := setupPool(t, 1)
	calls.afterCreate = func(store.Run) { h.pool.Stop(context.Background()) }
	stuck, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.run(stuck.ID); got.Status != store.RunRunning || got.Version != stuck.Version {
		t.Fatalf("after the pool stopped: %s, version %d; want it as created", got.Status, got.Version)
	}
	if c := h.calls(stuck.ID, "one"); len(c) != 0 {
		t.Fatalf("step one ran on a stopped pool: %+v", c)
	}
	h.cfg.Dispatch = h.queue
	h.restart()
	if res, _ := h.eng.Sweep(h.ctx); res.Redispatched != 0 {
		t.Fatal("the sweeper took a run whose lease is live")
	}
	h.recoverAfterLease(stuck)
	r := h.run(stuck.ID)
	wantStatus(t, r, store.RunSucceeded, "")
	if n := calls.attempts.Load(); n != 2 {
		t.Errorf("the claim after the lease counted attempt %d, want 2", n)
	}
	for _, step := range []string{"one", "two", "three"} {
		if c := h.calls(r.ID, step); len(c) != 1 {
			t.Errorf("step %s ran %d times", step, len(c))
		}
	}
}

// An idempotent repeat of a start gives its worker back: the next start
// is claimed by its create again.
func TestIdempotentRepeatGivesTheWorkerBack(t *testing.T) {
	t.Parallel()
	h, _ := setupPool(t, 1)
	p := engine.StartParams{Agent: "plain", EndUserID: "alice", IdempotencyKey: "k1"}
	first, isNew, err := h.eng.StartRun(h.ctx, h.dev, p)
	if err != nil || !isNew {
		t.Fatalf("first start: new %v, %v", isNew, err)
	}
	wantStatus(t, h.waitEnd(first.ID), store.RunSucceeded, "")
	again, isNew, err := h.eng.StartRun(h.ctx, h.dev, p)
	if err != nil || isNew || again.ID != first.ID {
		t.Fatalf("repeat: %s new %v, %v; want %s", again.ID, isNew, err, first.ID)
	}
	// The worker may still be finishing the first run when its end is
	// published; a repeat that kept the worker would keep every later start
	// queued.
	claimed := false
	for range 100 {
		next, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, h.waitEnd(next.ID), store.RunSucceeded, "")
		if claimed = next.Status == store.RunRunning; claimed {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !claimed {
		t.Errorf("every start after the repeat was created queued: the repeat kept the worker")
	}
	if c := h.calls(first.ID, "one"); len(c) != 1 {
		t.Errorf("the repeated run's step one ran %d times", len(c))
	}
}

// A run purged after it ended is not answered from what the engine kept
// of it when it was created.
func TestPurgedRunIsNotAnsweredFromMemory(t *testing.T) {
	t.Parallel()
	h, _ := setupPool(t, 1, func(o *options) { o.retention = time.Hour })
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for it to end without waiting on it (a wait would take it out
	// of what the engine keeps of new runs).
	for !h.run(r.ID).Status.Terminal() {
		time.Sleep(time.Millisecond)
	}
	h.clock.Advance(2 * time.Hour)
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Purged == 0 {
		t.Fatalf("sweep past the retention: %+v, %v", res, err)
	}
	if _, err := h.eng.WaitFor(h.ctx, h.dev, r.ID, func(store.Run) bool { return true }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("wait for a purged run: err = %v, want not found", err)
	}
}

// Nor from what the engine kept of it for a wait that has ended.
func TestPurgedRunIsNotAnsweredFromAnEndedWait(t *testing.T) {
	t.Parallel()
	h, _ := setupPool(t, 1, func(o *options) { o.retention = time.Hour })
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := h.eng.WaitFor(h.ctx, h.dev, r.ID, func(r store.Run) bool { return r.Status.Terminal() }); err != nil || !done.Status.Terminal() {
		t.Fatalf("wait for the run to end: %s, %v", done.Status, err)
	}
	h.clock.Advance(2 * time.Hour)
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Purged == 0 {
		t.Fatalf("sweep past the retention: %+v, %v", res, err)
	}
	if _, err := h.eng.WaitFor(h.ctx, h.dev, r.ID, func(store.Run) bool { return true }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("wait for a purged run: err = %v, want not found", err)
	}
}
