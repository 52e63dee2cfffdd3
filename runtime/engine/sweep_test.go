package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"stead/approvals"
	"stead/runtime/engine"
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

// TestSweepExpiresPastTheFirstPage: one sweep expires every due approval,
// not only the first page the store lists.
func TestSweepExpiresPastTheFirstPage(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const n = 101 // more than one page of due approvals
	var ids []string
	for range n {
		r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "refunds", Input: json.RawMessage(`{"orderId":"o-1","amount":12}`), EndUserID: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	h.drain()
	h.clock.Advance(time.Hour) // past every approval's deadline
	res, err := h.eng.Sweep(h.ctx)
	if err != nil || res.Expired != n {
		t.Fatalf("sweep: %+v, %v; want %d expired", res, err, n)
	}
	for _, id := range ids {
		wantStatus(t, h.run(id), store.RunFailed, engine.CodeApprovalExpired)
	}
}

// shortPages is a store whose pages of due approvals come one short, as
// DynamoDB's do when an index entry lagging behind a decision is dropped
// after the limit is applied.
type shortPages struct{ store.Store }

func (s shortPages) ListDueApprovals(ctx context.Context, now time.Time, limit int) ([]approvals.Approval, error) {
	as, err := s.Store.ListDueApprovals(ctx, now, limit)
	if len(as) == limit {
		as = as[:limit-1]
	}
	return as, err
}

// TestSweepGoesOnAfterAShortPage: a page shorter than asked for does not
// end the sweep while approvals are still due.
func TestSweepGoesOnAfterAShortPage(t *testing.T) {
	t.Parallel()
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { return shortPages{s} } })
	const n = 101
	for range n {
		if _, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "refunds", Input: json.RawMessage(`{"orderId":"o-1","amount":12}`), EndUserID: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	h.drain()
	h.clock.Advance(time.Hour)
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Expired != n {
		t.Fatalf("sweep: %+v, %v; want %d expired", res, err, n)
	}
}

// TestSweepPurgesPastTheFirstBatch: one sweep deletes every run past its
// retention, not only the first batch the purger deletes.
func TestSweepPurgesPastTheFirstBatch(t *testing.T) {
	t.Parallel()
	h := setup(t, func(o *options) { o.retention = 10 * time.Minute })
	const n = 101 // more than one purge batch
	var ids []string
	for range n {
		ids = append(ids, h.start("plain", `{}`).ID)
	}
	h.clock.Advance(11 * time.Minute)
	res, err := h.eng.Sweep(h.ctx)
	if err != nil || res.Purged != n {
		t.Fatalf("sweep: %+v, %v; want %d purged", res, err, n)
	}
	for _, id := range ids {
		if _, err := h.store.GetRun(h.ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("run %s after the sweep: %v, want ErrNotFound", id, err)
		}
	}
}

// claimRaced is a store in which, once armed, another worker claims the run
// first, between an execution's read of it and its claim: what a duplicate
// Lambda delivery executing at the same time does.
type claimRaced struct {
	store.Store
	armed atomic.Bool
}

func (s *claimRaced) ClaimRun(ctx context.Context, p store.ClaimParams) (store.Run, error) {
	if s.armed.CompareAndSwap(true, false) {
		other := p
		other.Owner = "other-worker"
		if _, err := s.Store.ClaimRun(ctx, other); err != nil {
			return store.Run{}, err
		}
	}
	return s.Store.ClaimRun(ctx, p)
}

// TestExecuteThatLosesTheClaimIsHarmless: an execution whose claim loses to
// another worker's (a duplicate delivery) returns nil — the runner's
// invocation does not fail and is not retried — and runs nothing.
func TestExecuteThatLosesTheClaimIsHarmless(t *testing.T) {
	t.Parallel()
	cs := &claimRaced{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	h.queue.take()
	cs.armed.Store(true)
	if err := h.eng.Execute(h.ctx, r.ID); err != nil {
		t.Fatalf("execute that lost the claim: %v, want nil", err)
	}
	got := h.run(r.ID)
	if got.Status != store.RunRunning || got.LeaseOwner != "other-worker" || got.Attempts != 1 {
		t.Errorf("run after a lost claim: status %s, lease owner %q, attempts %d; want running, other-worker's, 1", got.Status, got.LeaseOwner, got.Attempts)
	}
	if c := h.calls(r.ID, "one"); len(c) != 0 {
		t.Errorf("step one ran %d times by the execution that lost the claim", len(c))
	}
}

// An approval whose expiry loses a race with a decision is no failure of
// the sweep: it is left to that decision, and a later sweep expires it if
// it is still due.
func TestSweepLeavesAnExpiryThatLostARace(t *testing.T) {
	t.Parallel()
	rs := &decideRaceStore{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { rs.Store = s; return rs } })
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	h.clock.Advance(2 * time.Hour)
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Expired != 0 {
		t.Fatalf("sweep that lost the race: %+v, %v; want nothing expired and no error", res, err)
	}
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Expired != 1 {
		t.Fatalf("next sweep: %+v, %v; want 1 expired", res, err)
	}
	wantStatus(t, h.run(r.ID), store.RunFailed, engine.CodeApprovalExpired)
}
