package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

// A 410 fails its delivery at once, with tries left on the schedule, and
// disables the endpoint.
func TestGoneFailsTheDeliveryAtOnce(t *testing.T) {
	srv, _ := answering(t, http.StatusGone, "")
	w := setup(t)
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	if d := w.only("whe_a"); d.Status != store.DeliveryFailed || d.Tries != 1 || !d.NextAt.IsZero() {
		t.Errorf("after a 410: %s after %d tries, next at %s", d.Status, d.Tries, d.NextAt)
	}
	if ep, err := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a"); err != nil || !ep.Disabled() {
		t.Errorf("endpoint after a 410: %+v, %v", ep, err)
	}
}

// A success clears an endpoint's failing mark: failures after it count
// from then, not from the first.
func TestSuccessClearsTheFailingMark(t *testing.T) {
	var status atomic.Int64
	status.Store(http.StatusInternalServerError)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(status.Load())) }))
	t.Cleanup(srv.Close)
	w := setup(t)
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	if ep, _ := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a"); ep.FailingSince.IsZero() {
		t.Fatal("a failure left no failing mark")
	}
	status.Store(http.StatusOK)
	w.clock.Advance(5 * time.Second)
	w.pass()
	if ep, _ := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a"); !ep.FailingSince.IsZero() {
		t.Errorf("after a success the endpoint is failing since %s", ep.FailingSince)
	}
}

// An endpoint is disabled by a failure exactly FailingLimit after its
// failures began.
func TestFailingLimitReachedDisables(t *testing.T) {
	srv, _ := answering(t, http.StatusInternalServerError, "")
	w := setup(t)
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	w.clock.Advance(5 * 24 * time.Hour)
	w.run("run_2")
	w.pass()
	if ep, _ := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a"); !ep.Disabled() {
		t.Error("an endpoint failing for exactly 5 days is not disabled")
	}
}

// webhook.disabled goes to the project's enabled endpoints that take it
// (no event filter, or one naming it), and to no other.
func TestDisabledToldToEndpointsThatTakeIt(t *testing.T) {
	gone, _ := answering(t, http.StatusGone, "")
	ok, _ := answering(t, http.StatusOK, "")
	w := setup(t)
	w.onlyRunSucceeded("whe_gone", gone.URL)
	w.endpoint("whe_all", ok.URL)
	for id, events := range map[string][]string{"whe_named": {notify.Disabled}, "whe_runs": {"run.failed"}, "whe_off": nil} {
		ep := w.endpoint(id, ok.URL)
		ep.Events = events
		if id == "whe_off" {
			ep.DisabledAt, ep.DisabledReason = w.clock.Now(), "by hand"
		}
		if _, err := w.store.UpdateEndpoint(w.ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	w.run("run_1")
	w.pass()
	for id, want := range map[string]int{"whe_all": 1, "whe_named": 1, "whe_runs": 0, "whe_off": 0} {
		page, err := w.store.ListDeliveries(w.ctx, "prj_a", id, "", 20)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range page.Items {
			if d.Type == notify.Disabled {
				n++
			}
		}
		if n != want {
			t.Errorf("%s got %d webhook.disabled, want %d", id, n, want)
		}
	}
}

// A notice of an approval that was denied before its time is skipped, as
// one of an approved approval is.
func TestNoticeSkippedOnceDenied(t *testing.T) {
	srv, sent := answering(t, http.StatusOK, "")
	w := setup(t)
	ep := w.endpoint("whe_a", srv.URL)
	ep.Events = []string{"approval.reminder"}
	if _, err := w.store.UpdateEndpoint(w.ctx, ep); err != nil {
		t.Fatal(err)
	}
	now := w.clock.Now()
	a := w.gated("run_1", []approvals.Notice{{Kind: approvals.Reminder, After: 30 * time.Minute}}, time.Hour)
	w.pass()
	if _, _, err := w.store.DecideApproval(w.ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "prj_a", ApprovalID: a.ID, Status: approvals.Denied, By: "key_ana", At: now},
		RunStatus: store.RunQueued, LeaseUntil: now.Add(time.Minute),
	}); err != nil {
		t.Fatal(err)
	}
	w.clock.Set(now.Add(30 * time.Minute))
	w.pass()
	if d := w.only("whe_a"); d.Status != store.DeliverySkipped || sent.Load() != 0 {
		t.Errorf("the reminder of a denied approval: %s, %d sent", d.Status, sent.Load())
	}
}

// endpointsStore answers ListEndpoints from eps, or with err; nothing else.
type endpointsStore struct {
	notify.Store
	eps []store.Endpoint
	err error
}

func (s *endpointsStore) ListEndpoints(context.Context, string) ([]store.Endpoint, error) {
	return s.eps, s.err
}

// Notifies answers whether the project has endpoints, from what it read
// at most 2 s ago unless Forget dropped it; true on a store error, and
// always with a channel.
func TestNotifiesWhenTheProjectHasEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := &endpointsStore{}
		n := notify.New(notify.Config{Store: st})
		if n.Notifies(ctx, "prj_a") {
			t.Error("a project without endpoints notifies")
		}
		st.eps = []store.Endpoint{{ID: "whe_a", ProjectID: "prj_a"}}
		if n.Notifies(ctx, "prj_a") {
			t.Error("an endpoint was seen at once although nothing was forgotten")
		}
		n.Forget("prj_a")
		if !n.Notifies(ctx, "prj_a") {
			t.Error("an endpoint created in this process was not seen after Forget")
		}
		st.eps = nil
		time.Sleep(3 * time.Second)
		if n.Notifies(ctx, "prj_a") {
			t.Error("an endpoint deleted in another process was still seen 3 s later")
		}
		st.err = errors.New("the store is unavailable")
		if !n.Notifies(ctx, "prj_b") {
			t.Error("a store error answered false")
		}
		st.err = nil
		withChannel := notify.New(notify.Config{Store: st, Channels: []notify.Channel{&fakeChannel{}}})
		if !withChannel.Notifies(ctx, "prj_a") {
			t.Error("a project without endpoints does not notify although a channel is configured")
		}
	})
}

// faultStore is a store whose runs are gone, whose endpoints are gone, or
// whose ListEndpoints or UpdateDelivery fail, as set.
type faultStore struct {
	*boltstore.Store
	runsGone, endpointsGone bool
	listEndpointsErr        atomic.Pointer[error]
	updateDeliveryErr       error
	// meanwhile, when set, runs once after the first ListEvents.
	meanwhile func()
	once      sync.Once
}

func (s *faultStore) ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error) {
	evs, err := s.Store.ListEvents(ctx, runID, afterSeq, limit)
	if s.meanwhile != nil {
		s.once.Do(s.meanwhile)
	}
	return evs, err
}

func (s *faultStore) GetRun(ctx context.Context, id string) (store.Run, error) {
	if s.runsGone {
		return store.Run{}, store.ErrNotFound
	}
	return s.Store.GetRun(ctx, id)
}

func (s *faultStore) GetEndpoint(ctx context.Context, projectID, id string) (store.Endpoint, error) {
	if s.endpointsGone {
		return store.Endpoint{}, store.ErrNotFound
	}
	return s.Store.GetEndpoint(ctx, projectID, id)
}

func (s *faultStore) ListEndpoints(ctx context.Context, projectID string) ([]store.Endpoint, error) {
	if err := s.listEndpointsErr.Swap(nil); err != nil {
		return nil, *err
	}
	return s.Store.ListEndpoints(ctx, projectID)
}

func (s *faultStore) UpdateDelivery(ctx context.Context, d store.Delivery) (store.Delivery, error) {
	if s.updateDeliveryErr != nil {
		return store.Delivery{}, s.updateDeliveryErr
	}
	return s.Store.UpdateDelivery(ctx, d)
}

func (w *world) faulty(fs *faultStore) {
	fs.Store = w.store
	w.n = notify.New(notify.Config{Store: fs, Now: w.clock.Now, PublicURL: "https://stead.example.com"})
}

func (w *world) outbox() int {
	w.t.Helper()
	es, err := w.store.ListOutbox(w.ctx, 10)
	if err != nil {
		w.t.Fatal(err)
	}
	return len(es)
}

// A run deleted before its fan-out leaves the outbox: nothing is sent
// for it, and it is not read again.
func TestDeletedRunLeavesTheOutbox(t *testing.T) {
	srv, sent := answering(t, http.StatusOK, "")
	w := setup(t)
	w.faulty(&faultStore{runsGone: true})
	w.endpoint("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	if n := w.outbox(); n != 0 || sent.Load() != 0 {
		t.Errorf("after the fan-out of a deleted run: %d outbox entries, %d sent", n, sent.Load())
	}
}

// A fan-out that could not read the project's endpoints leaves the run in
// the outbox: the next pass sends its events.
func TestOutboxKeptWhenEndpointsAreNotRead(t *testing.T) {
	srv, sent := answering(t, http.StatusOK, "")
	w := setup(t)
	fs := &faultStore{}
	err := errors.New("the store is unavailable")
	fs.listEndpointsErr.Store(&err)
	w.faulty(fs)
	w.endpoint("whe_a", srv.URL)
	w.run("run_1")
	if err := w.n.Pass(w.ctx); err == nil {
		t.Fatal("a pass that could not read the endpoints reported no error")
	}
	if n := w.outbox(); n != 1 {
		t.Fatalf("outbox after a failed fan-out: %d entries", n)
	}
	w.pass()
	if n := sent.Load(); n != 3 {
		t.Errorf("the next pass sent %d deliveries, want 3", n)
	}
}

// A delivery another notifier took first is left to it, without an
// error; a store error taking it is the pass's error. Neither is sent.
func TestTakeLostOrFailed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"taken by another notifier", store.ErrConflict, false},
		{"store unavailable", errors.New("the store is unavailable"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, sent := answering(t, http.StatusOK, "")
			w := setup(t)
			w.faulty(&faultStore{updateDeliveryErr: tc.err})
			w.onlyRunSucceeded("whe_a", srv.URL)
			w.run("run_1")
			err := w.n.Pass(w.ctx)
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, tc.err)) {
				t.Errorf("pass: %v, want error %v", err, tc.wantErr)
			}
			if d := w.only("whe_a"); sent.Load() != 0 || d.Status != store.DeliveryPending || d.Tries != 0 {
				t.Errorf("%d sent; delivery %s after %d tries", sent.Load(), d.Status, d.Tries)
			}
		})
	}
}

// A due delivery whose endpoint was deleted fails, with no request made.
func TestDeliveryToADeletedEndpointFails(t *testing.T) {
	srv, sent := answering(t, http.StatusOK, "")
	w := setup(t)
	w.faulty(&faultStore{endpointsGone: true})
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	if d := w.only("whe_a"); sent.Load() != 0 || d.Status != store.DeliveryFailed || !strings.Contains(d.Attempts[0].Error, "deleted") {
		t.Errorf("%d sent; delivery %s after %+v", sent.Load(), d.Status, d.Attempts)
	}
}

// A delivery whose endpoint was disabled after it was made fails at its
// next try, with no request made.
func TestDeliveryToADisabledEndpointFails(t *testing.T) {
	srv, sent := answering(t, http.StatusInternalServerError, "")
	w := setup(t)
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	ep, err := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a")
	if err != nil {
		t.Fatal(err)
	}
	ep.DisabledAt, ep.DisabledReason = w.clock.Now(), "by hand"
	if _, err := w.store.UpdateEndpoint(w.ctx, ep); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(5 * time.Second)
	w.pass()
	if d := w.only("whe_a"); sent.Load() != 1 || d.Status != store.DeliveryFailed || d.Tries != 2 || !strings.Contains(d.Attempts[1].Error, "by hand") {
		t.Errorf("%d sent; delivery %s after %+v", sent.Load(), d.Status, d.Attempts)
	}
}

// A Retry-After given as an HTTP date defers the next try to that time.
func TestRetryAfterAsADate(t *testing.T) {
	w := setup(t)
	srv, _ := answering(t, http.StatusServiceUnavailable, w.clock.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	if d := w.only("whe_a"); !d.NextAt.Equal(w.clock.Now().Add(time.Hour)) {
		t.Errorf("Retry-After an hour from now: next try at %s, want %s", d.NextAt, w.clock.Now().Add(time.Hour))
	}
}

// One pass fans out a run with more events than one page holds.
func TestFanOutReadsEveryPage(t *testing.T) {
	srv, sent := answering(t, http.StatusOK, "")
	w := setup(t)
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.gated("run_1", nil, time.Hour)
	r, err := w.store.GetRun(w.ctx, "run_1")
	if err != nil {
		t.Fatal(err)
	}
	events := make([]store.Event, 150)
	for i := range events {
		events[i] = store.Event{Type: "step.completed", At: w.clock.Now()}
	}
	events = append(events, store.Event{Type: "run.succeeded", At: w.clock.Now(), Notify: true})
	r.Status = store.RunSucceeded
	if _, err := w.store.CommitRun(w.ctx, store.RunCommit{Run: r, Events: events}); err != nil {
		t.Fatal(err)
	}
	w.pass()
	if n := w.outbox(); n != 0 || sent.Load() != 1 {
		t.Errorf("after one pass: %d outbox entries, %d sent", n, sent.Load())
	}
}

// during answers 200 (or status) after calling f once, while the first
// try is in flight.
func during(t *testing.T, status int, f func()) *httptest.Server {
	t.Helper()
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(f)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A delivery is taken — its lease written — before it is sent: while it
// is in flight, it is InFlight.
func TestDeliveryTakenBeforeItIsSent(t *testing.T) {
	w := setup(t)
	var inFlight atomic.Bool
	srv := during(t, http.StatusOK, func() {
		page, err := w.store.ListDeliveries(w.ctx, "prj_a", "whe_a", "", 10)
		inFlight.Store(err == nil && len(page.Items) == 1 && notify.InFlight(page.Items[0], w.clock.Now()))
	})
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	if !inFlight.Load() {
		t.Error("the delivery was not in flight while it was sent")
	}
}

// A try whose delivery was delivered meanwhile (by a retry) leaves it as
// it is: delivered, with the attempt that delivered it.
func TestDeliveredMeanwhileStaysDelivered(t *testing.T) {
	w := setup(t)
	srv := during(t, http.StatusInternalServerError, func() {
		page, err := w.store.ListDeliveries(w.ctx, "prj_a", "whe_a", "", 10)
		if err != nil || len(page.Items) != 1 {
			t.Errorf("deliveries: %v", err)
			return
		}
		d := page.Items[0].Record(store.Attempt{At: w.clock.Now(), Status: http.StatusOK})
		d.Status, d.NextAt = store.DeliveryDelivered, time.Time{}
		if _, err := w.store.UpdateDelivery(w.ctx, d); err != nil {
			t.Errorf("concurrent delivery: %v", err)
		}
	})
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.run("run_1")
	w.pass()
	if d := w.only("whe_a"); d.Status != store.DeliveryDelivered || d.Tries != 1 || d.Attempts[0].Status != http.StatusOK {
		t.Errorf("delivery: %s after %d tries %+v", d.Status, d.Tries, d.Attempts)
	}
}

// An endpoint's health survives a concurrent write: a 410 disables an
// endpoint written meanwhile, and one disabled meanwhile keeps the reason
// it was disabled for. A success on a healthy endpoint writes nothing.
func TestEndpointHealthAfterAConcurrentWrite(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		disable    bool
		wantReason string
		wantWrites int64
	}{
		{"410 after an edit", http.StatusGone, false, "it answered 410 Gone", 2},
		{"410 after disabled by hand", http.StatusGone, true, "by hand", 1},
		{"success", http.StatusOK, false, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := setup(t)
			srv := during(t, tc.status, func() {
				ep, err := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a")
				if err != nil {
					t.Error(err)
					return
				}
				if tc.disable {
					ep.DisabledAt, ep.DisabledReason = w.clock.Now(), "by hand"
				}
				if _, err := w.store.UpdateEndpoint(w.ctx, ep); err != nil {
					t.Errorf("concurrent write: %v", err)
				}
			})
			w.onlyRunSucceeded("whe_a", srv.URL)
			before, err := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a")
			if err != nil {
				t.Fatal(err)
			}
			w.run("run_1")
			w.pass()
			ep, err := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a")
			if err != nil || ep.DisabledReason != tc.wantReason || ep.Version != before.Version+tc.wantWrites {
				t.Errorf("endpoint: disabled for %q at version %d (was %d), %v; want %q after %d writes",
					ep.DisabledReason, ep.Version, before.Version, err, tc.wantReason, tc.wantWrites)
			}
		})
	}
}

// Run without an Interval uses its default (a zero one would panic in
// time.NewTicker); it returns when ctx ends.
func TestRunWithoutAnInterval(t *testing.T) {
	w := setup(t)
	ctx, cancel := context.WithCancel(w.ctx)
	cancel()
	notify.New(notify.Config{Store: w.store}).Run(ctx)
}

// crowd is a channel with more recipients than one pass delivers.
type crowd struct {
	now  func() time.Time
	sent atomic.Int64
}

func (c *crowd) Name() string { return "crowd" }

func (c *crowd) Deliveries(_ context.Context, _ store.Run, ev store.Event, _ notify.Data) ([]store.Delivery, error) {
	if ev.Type != "approval.requested" {
		return nil, nil
	}
	ds := make([]store.Delivery, 150)
	for i := range ds {
		ds[i] = store.Delivery{EndpointID: "crowd:" + strconv.Itoa(i), Body: []byte(`{}`)}
	}
	return ds, nil
}

func (c *crowd) Send(context.Context, store.Delivery) (store.Attempt, bool) {
	c.sent.Add(1)
	return store.Attempt{At: c.now(), Status: 250}, false
}

// A fan-out asks for another pass at once: what one pass could not
// deliver goes out without waiting for the interval.
func TestFanOutDeliversBeyondOnePass(t *testing.T) {
	w := setup(t)
	w.run("run_1")
	synctest.Test(t, func(t *testing.T) {
		ch := &crowd{now: w.clock.Now}
		n := notify.New(notify.Config{Store: w.store, Now: w.clock.Now, Interval: time.Hour, Channels: []notify.Channel{ch}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { n.Run(ctx); close(done) }()
		synctest.Wait()
		if got := ch.sent.Load(); got != 150 {
			t.Errorf("before the interval, %d of 150 deliveries went out", got)
		}
		cancel()
		<-done
	})
}

// webhook.disabled is timed when the endpoint was disabled: the try that
// disabled it, not when the others were told.
func TestDisabledTimedAtTheDisable(t *testing.T) {
	w := setup(t)
	gone := during(t, http.StatusGone, func() { w.clock.Advance(time.Minute) })
	w.onlyRunSucceeded("whe_gone", gone.URL)
	other := w.endpoint("whe_other", "http://127.0.0.1:1")
	other.Events = []string{notify.Disabled}
	if _, err := w.store.UpdateEndpoint(w.ctx, other); err != nil {
		t.Fatal(err)
	}
	w.run("run_1")
	w.pass()
	ep, err := w.store.GetEndpoint(w.ctx, "prj_a", "whe_gone")
	if err != nil || !ep.Disabled() {
		t.Fatalf("endpoint after a 410: %+v, %v", ep, err)
	}
	var p notify.Payload
	if err := json.Unmarshal(w.only("whe_other").Body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != notify.Disabled || !p.Timestamp.Equal(ep.DisabledAt) || p.Data.WebhookID != "whe_gone" {
		t.Errorf("webhook.disabled at %s about %q, want at %s about whe_gone", p.Timestamp, p.Data.WebhookID, ep.DisabledAt)
	}
}

// An approval's notices are scheduled by its request only: a vote on it
// brings no second reminder.
func TestVoteSchedulesNoSecondReminder(t *testing.T) {
	srv, sent := answering(t, http.StatusOK, "")
	w := setup(t)
	ep := w.endpoint("whe_a", srv.URL)
	ep.Events = []string{"approval.reminder"}
	if _, err := w.store.UpdateEndpoint(w.ctx, ep); err != nil {
		t.Fatal(err)
	}
	now := w.clock.Now()
	a := w.gated("run_1", []approvals.Notice{{Kind: approvals.Reminder, After: 30 * time.Minute}}, time.Hour)
	w.pass()
	r, err := w.store.GetRun(w.ctx, "run_1")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(map[string]any{"approvalId": a.ID})
	if _, err := w.store.CommitRun(w.ctx, store.RunCommit{Run: r,
		Events: []store.Event{{Type: "approval.vote", At: now.Add(10 * time.Minute), Data: data, Notify: true}}}); err != nil {
		t.Fatal(err)
	}
	w.clock.Set(now.Add(10 * time.Minute))
	w.pass()
	w.clock.Set(now.Add(30 * time.Minute))
	w.pass()
	if n := sent.Load(); n != 1 {
		t.Errorf("the endpoint got %d reminders, want 1", n)
	}
}

// A run whose fan-out fails does not hold up the others: the pass reports
// it and delivers theirs.
func TestFanOutOfOtherRunsGoesOn(t *testing.T) {
	srv, sent := answering(t, http.StatusOK, "")
	w := setup(t)
	w.onlyRunSucceeded("whe_a", srv.URL)
	now := w.clock.Now()
	if _, err := w.store.CreateRun(w.ctx, store.Run{ID: "run_0", ProjectID: "prj_a", Agent: "refunds", Deployment: 1,
		Status: store.RunRunning, Input: json.RawMessage(`{}`), Trust: store.Trusted, CreatedAt: now, UpdatedAt: now},
		[]store.Event{{Type: "approval.requested", At: now, Data: json.RawMessage(`{}`), Notify: true}}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Second)
	w.run("run_1")
	if err := w.n.Pass(w.ctx); err == nil || !strings.Contains(err.Error(), "run_0") {
		t.Errorf("pass: %v, want run_0's error", err)
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("run_1's run.succeeded was sent %d times, want once", n)
	}
}

// An event appended while its run is fanned out stays in the outbox: the
// next pass sends it.
func TestEventAppendedDuringTheFanOutIsSent(t *testing.T) {
	srv, sent := answering(t, http.StatusOK, "")
	w := setup(t)
	w.onlyRunSucceeded("whe_a", srv.URL)
	w.gated("run_1", nil, time.Hour)
	w.faulty(&faultStore{meanwhile: func() {
		r, err := w.store.GetRun(w.ctx, "run_1")
		if err != nil {
			t.Error(err)
			return
		}
		r.Status = store.RunSucceeded
		if _, err := w.store.CommitRun(w.ctx, store.RunCommit{Run: r,
			Events: []store.Event{{Type: "run.succeeded", At: w.clock.Now(), Notify: true}}}); err != nil {
			t.Error(err)
		}
	}})
	w.pass()
	w.pass()
	if n := sent.Load(); n != 1 {
		t.Errorf("the run.succeeded appended during the fan-out was sent %d times, want once", n)
	}
}
