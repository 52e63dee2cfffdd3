package notify_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stead/approvals"
	"stead/notify"
	"stead/store"
	"stead/store/boltstore"
)

// answering is a receiver that answers every delivery with status (and
// Retry-After, when set), and counts them. (A Go receiver: the clock
// moves days ahead of the reference library's own.)
func answering(t *testing.T, status int, retryAfter string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// onlyRunSucceeded makes an endpoint that gets run.succeeded only: one
// delivery per run.
func (w *world) onlyRunSucceeded(id, url string) {
	w.t.Helper()
	ep := w.endpoint(id, url)
	ep.Events = []string{"run.succeeded"}
	if _, err := w.store.UpdateEndpoint(w.ctx, ep); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) only(endpointID string) store.Delivery {
	w.t.Helper()
	page, err := w.store.ListDeliveries(w.ctx, "prj_a", endpointID, "", 10)
	if err != nil || len(page.Items) != 1 {
		w.t.Fatalf("deliveries: %+v, %v", page.Items, err)
	}
	return page.Items[0]
}

// A delivery that keeps failing is tried at once, then 5 s, 5 min, 30 min,
// 2 h, 5 h, 10 h and 10 h after the try before — 8 tries — and then it has
// failed: no ninth try is scheduled.
func TestScheduleEndsAfterEightTries(t *testing.T) {
	srv, sent := answering(t, http.StatusInternalServerError, "")
	w := setup(t)
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	for i, wait := range []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour} {
		d := w.only("whe_a")
		if d.Status != store.DeliveryPending || d.Tries != i+1 {
			t.Fatalf("after try %d: %s after %d tries", i+1, d.Status, d.Tries)
		}
		if got := d.NextAt.Sub(d.Attempts[len(d.Attempts)-1].At); got != wait {
			t.Fatalf("after try %d the next is due in %s, want %s", i+1, got, wait)
		}
		w.clock.Advance(wait)
		w.pass()
	}
	d := w.only("whe_a")
	if d.Status != store.DeliveryFailed || d.Tries != 8 || !d.NextAt.IsZero() {
		t.Fatalf("after the last try: %s after %d tries, next at %s", d.Status, d.Tries, d.NextAt)
	}
	w.clock.Advance(24 * time.Hour)
	w.pass()
	if n := sent.Load(); n != 8 {
		t.Errorf("the receiver got %d tries, want 8", n)
	}
}

// A Retry-After defers the next try by at most 10 h, however long it asks.
func TestRetryAfterBounded(t *testing.T) {
	srv, _ := answering(t, http.StatusServiceUnavailable, "1000000")
	w := setup(t)
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	d := w.only("whe_a")
	if got := d.NextAt.Sub(d.Attempts[0].At); got != 10*time.Hour {
		t.Errorf("Retry-After: 1000000 deferred the next try by %s, want 10h", got)
	}
}

// Two reminders of one approval are two events: each goes out, at its
// time, under its own webhook-id.
func TestTwoRemindersTwoWebhookIDs(t *testing.T) {
	var (
		mu  sync.Mutex
		ids []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	w := setup(t)
	ep := w.endpoint("whe_a", srv.URL)
	ep.Events = []string{"approval.reminder"}
	if _, err := w.store.UpdateEndpoint(w.ctx, ep); err != nil {
		t.Fatal(err)
	}
	now := w.clock.Now()
	w.gated("run_1", []approvals.Notice{
		{Kind: approvals.Reminder, After: 30 * time.Minute},
		{Kind: approvals.Reminder, After: 90 * time.Minute},
	}, 2*time.Hour)
	w.pass()
	for _, at := range []time.Duration{30 * time.Minute, 90 * time.Minute} {
		w.clock.Set(now.Add(at))
		w.pass()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Errorf("two reminders went out under webhook-ids %v, want two different", ids)
	}
}

// fakeChannel is a channel whose sends answer with the statuses given, in
// turn (the last one again after those), none of them final.
type fakeChannel struct {
	now      func() time.Time
	statuses []int
	sent     atomic.Int64
}

func (c *fakeChannel) Name() string { return "fake" }

func (c *fakeChannel) Deliveries(_ context.Context, _ store.Run, ev store.Event, _ notify.Data) ([]store.Delivery, error) {
	if ev.Type != "approval.requested" {
		return nil, nil
	}
	return []store.Delivery{{EndpointID: "fake:ana", Body: []byte(`{}`)}}, nil
}

func (c *fakeChannel) Send(context.Context, store.Delivery) (store.Attempt, bool) {
	i := int(c.sent.Add(1)) - 1
	return store.Attempt{At: c.now(), Status: c.statuses[min(i, len(c.statuses)-1)]}, false
}

// A channel's delivery is delivered only on a 2xx: a deferral (an SMTP
// 451) is tried again on the schedule.
func TestChannelDeliveredOnlyOn2xx(t *testing.T) {
	w := setup(t)
	ch := &fakeChannel{now: w.clock.Now, statuses: []int{451, 250}}
	w.n = notify.New(notify.Config{Store: w.store, Now: w.clock.Now, PublicURL: "https://stead.example.com", Channels: []notify.Channel{ch}})
	w.run("run_1")
	w.pass()
	if d := w.only("fake:ana"); d.Status != store.DeliveryPending || d.Tries != 1 || d.Attempts[0].Status != 451 {
		t.Fatalf("after a 451: %s after %d tries %+v", d.Status, d.Tries, d.Attempts)
	}
	w.clock.Advance(5 * time.Second)
	w.pass()
	if d := w.only("fake:ana"); d.Status != store.DeliveryDelivered || d.Tries != 2 || ch.sent.Load() != 2 {
		t.Fatalf("after the retry: %s after %d tries, %d sends", d.Status, d.Tries, ch.sent.Load())
	}
}

// flakyStore fails PutDeliveries once.
type flakyStore struct {
	*boltstore.Store
	failed atomic.Bool
}

func (s *flakyStore) PutDeliveries(ctx context.Context, ds []store.Delivery) error {
	if s.failed.CompareAndSwap(false, true) {
		return errors.New("the store is unavailable")
	}
	return s.Store.PutDeliveries(ctx, ds)
}

// A fan-out whose deliveries could not be written leaves the run in the
// outbox: the next pass makes and sends them.
func TestOutboxKeptWhenDeliveriesAreNotWritten(t *testing.T) {
	srv, sent := answering(t, http.StatusOK, "")
	w := setup(t)
	w.n = notify.New(notify.Config{Store: &flakyStore{Store: w.store}, Now: w.clock.Now, PublicURL: "https://stead.example.com"})
	w.endpoint("whe_a", srv.URL)
	w.run("run_1")
	if err := w.n.Pass(w.ctx); err == nil {
		t.Fatal("a pass whose deliveries were not written reported no error")
	}
	if es, err := w.store.ListOutbox(w.ctx, 10); err != nil || len(es) != 1 {
		t.Fatalf("outbox after a failed fan-out: %+v, %v", es, err)
	}
	w.pass()
	if n := sent.Load(); n != 3 {
		t.Errorf("after the failed fan-out, the next pass sent %d deliveries, want 3", n)
	}
}
