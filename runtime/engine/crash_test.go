package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"stead/runtime/engine"
	"stead/store"
)

// crashingStore fails the write that records a chosen step's completion, as
// if the worker died after the handler ran but before its result was stored.
type crashingStore struct {
	store.Store
	mu      sync.Mutex
	step    string
	crashes int
}

var errCrash = errors.New("worker died")

func (s *crashingStore) CommitRun(ctx context.Context, c store.RunCommit) (store.Run, error) {
	s.mu.Lock()
	crash := s.crashes > 0 && c.Step != nil && c.Step.ID == s.step
	if crash {
		s.crashes--
	}
	s.mu.Unlock()
	if crash {
		return store.Run{}, errCrash
	}
	return s.Store.CommitRun(ctx, c)
}

func TestCrashMidStepReRunsWithSameKey(t *testing.T) {
	t.Parallel()
	cs := &crashingStore{step: "two", crashes: 1}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })

	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range h.queue.take() {
		if err := h.eng.Execute(h.ctx, id); !errors.Is(err, errCrash) {
			t.Fatalf("execute: err = %v, want the crash", err)
		}
	}
	// The worker is gone; its lease holds the run until it runs out.
	stuck := h.run(r.ID)
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

	h.clock.Advance(stuck.LeaseUntil.Sub(h.clock.Now()) + time.Second)
	res, err := h.eng.Sweep(h.ctx)
	if err != nil || res.Redispatched != 1 {
		t.Fatalf("sweep after the lease ran out: %+v %v", res, err)
	}
	h.drain()
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
