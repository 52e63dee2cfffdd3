package engine_test

import (
	"errors"
	"testing"
	"time"

	"stead/store"
)

// TestSweepPurgesPastRetention: a sweep deletes a run that finished longer
// ago than the store's retention, and only that one — not a run that
// finished since, nor one waiting for a decision that started with the old one.
func TestSweepPurgesPastRetention(t *testing.T) {
	t.Parallel()
	h := setup(t, func(o *options) { o.retention = 10 * time.Minute })
	old := h.start("plain", `{}`)
	wantStatus(t, old, store.RunSucceeded, "")
	waiting := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	wantStatus(t, waiting, store.RunAwaitingApproval, "")

	h.clock.Advance(5 * time.Minute)
	recent := h.start("plain", `{}`)
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Purged != 0 {
		t.Fatalf("sweep before anything is due: %+v, %v", res, err)
	}

	h.clock.Advance(7 * time.Minute) // old finished 12 minutes ago, recent 7
	res, err := h.eng.Sweep(h.ctx)
	if err != nil || res.Purged != 1 {
		t.Fatalf("sweep: %+v, %v; want 1 purged", res, err)
	}
	if _, err := h.store.GetRun(h.ctx, old.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the old run after the sweep: %v, want ErrNotFound", err)
	}
	if evs := h.events(old.ID); len(evs) != 0 {
		t.Errorf("the old run's trace after the sweep: %d events", len(evs))
	}
	wantStatus(t, h.run(recent.ID), store.RunSucceeded, "")
	wantStatus(t, h.run(waiting.ID), store.RunAwaitingApproval, "")
}
