package notify_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stead/approvals"
	"stead/infra/localproc"
	"stead/notify"
	"stead/runtime/egress"
	"stead/store"
	"stead/store/boltstore"
)

// receiver is oracle/receiver.mjs: a webhook receiver that checks every
// delivery with the Standard Webhooks reference library.
type receiver struct {
	url  string
	mu   sync.Mutex
	seen []received
}

// received is one request the receiver logged.
type received struct {
	Path      string `json:"path"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Signature string `json:"signature"`
	Type      string `json:"type"`
	Verified  bool   `json:"verified"`
	Error     string `json:"error"`
	Status    int    `json:"status"`
}

// startReceiver runs the receiver with secrets (space-separated). Without
// `npm ci` in notify/oracle the test is skipped — and fails under CI=true,
// where the Makefile has installed it.
func startReceiver(t *testing.T, secrets string) *receiver {
	t.Helper()
	dir, err := filepath.Abs("oracle")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks")); err != nil {
		localproc.Unavailable(t, "notify/oracle's npm packages are not installed (make webhook-oracle): %v", err)
	}
	cmd := exec.Command("node", filepath.Join(dir, "receiver.mjs"))
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+secrets)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := &receiver{}
	lines := bufio.NewScanner(out)
	ready := make(chan string, 1)
	go func() {
		for lines.Scan() {
			line := lines.Text()
			if port, ok := strings.CutPrefix(line, "listening "); ok {
				ready <- port
				continue
			}
			var rec received
			if err := json.Unmarshal([]byte(line), &rec); err == nil {
				r.mu.Lock()
				r.seen = append(r.seen, rec)
				r.mu.Unlock()
			}
		}
	}()
	select {
	case port := <-ready:
		r.url = "http://127.0.0.1:" + port
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver did not start")
	}
	return r
}

func (r *receiver) got() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.seen...)
}

// waitFor waits until the receiver has logged n requests.
func (r *receiver) waitFor(t *testing.T, n int) []received {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got := r.got(); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver got %d requests, want %d: %+v", len(r.got()), n, r.got())
		}
		time.Sleep(10 * time.Millisecond) // poll, bounded by the deadline
	}
}

// clock is the notifier's clock, moved by the test. It starts at the real
// time: the receiver refuses timestamps more than 5 minutes off.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type world struct {
	t     *testing.T
	ctx   context.Context
	store *boltstore.Store
	clock *clock
	n     *notify.Notifier
}

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func setup(t *testing.T) *world {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "stead.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{t: time.Now().UTC().Truncate(time.Second)}
	client := egress.Policy{Allow: egress.Loopback}.Client()
	client.Timeout = notify.Timeout
	n := notify.New(notify.Config{Store: st, Client: client, Now: c.Now, PublicURL: "https://stead.example.com"})
	return &world{t: t, ctx: context.Background(), store: st, clock: c, n: n}
}

func (w *world) endpoint(id, url string, secrets ...store.EndpointSecret) store.Endpoint {
	w.t.Helper()
	if len(secrets) == 0 {
		secrets = []store.EndpointSecret{{Secret: secret, CreatedAt: w.clock.Now()}}
	}
	e := store.Endpoint{ID: id, ProjectID: "prj_a", URL: url, Secrets: secrets, CreatedAt: w.clock.Now(), UpdatedAt: w.clock.Now()}
	if err := w.store.CreateEndpoint(w.ctx, e); err != nil {
		w.t.Fatal(err)
	}
	e.Version = 1
	return e
}

// run makes a run of prj_a that asked for an approval, was approved and
// succeeded, its three notifying events written as the engine writes them.
func (w *world) run(id string) {
	w.t.Helper()
	now := w.clock.Now()
	ev := func(typ string, data map[string]any) store.Event {
		b, _ := json.Marshal(data)
		return store.Event{Type: typ, At: now, Data: b, Notify: notify.Notifies(typ)}
	}
	r, err := w.store.CreateRun(w.ctx, store.Run{ID: id, ProjectID: "prj_a", Agent: "refunds", EndUserID: "alice", Deployment: 1,
		Status: store.RunRunning, Input: json.RawMessage(`{}`), Trust: store.Trusted, CreatedAt: now, UpdatedAt: now},
		[]store.Event{ev("run.created", nil)})
	if err != nil {
		w.t.Fatal(err)
	}
	a, err := approvals.New(approvals.Request{ProjectID: "prj_a", RunID: id, Agent: "refunds", EndUserID: "alice", Deployment: 1,
		StepID: "refund", CallID: "refund", Tool: "refundOrder", Input: json.RawMessage(`{"orderId":"o-1"}`),
		Reason: "refundOrder requires approval", RequestedAt: now, Timeout: 15 * time.Minute}, "x1")
	if err != nil {
		w.t.Fatal(err)
	}
	r.Status, r.ApprovalID = store.RunAwaitingApproval, a.ID
	r, err = w.store.CommitRun(w.ctx, store.RunCommit{Run: r, Approval: &a,
		Events: []store.Event{ev("approval.requested", map[string]any{"approvalId": a.ID, "tool": "refundOrder"})}})
	if err != nil {
		w.t.Fatal(err)
	}
	_, r, err = w.store.DecideApproval(w.ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "prj_a", ApprovalID: a.ID, Status: approvals.Approved, By: "key_ana", ByName: "Ana Diaz", At: now},
		RunStatus: store.RunQueued, LeaseUntil: now.Add(time.Minute),
		Events: []store.Event{ev("approval.approved", map[string]any{"approvalId": a.ID, "tool": "refundOrder"})},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	r.Status = store.RunSucceeded
	if _, err := w.store.CommitRun(w.ctx, store.RunCommit{Run: r, Events: []store.Event{ev("run.succeeded", nil)}}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) pass() {
	w.t.Helper()
	if err := w.n.Pass(w.ctx); err != nil {
		w.t.Fatal(err)
	}
}

// Every delivery verifies with the reference library; a webhook-id is the
// same on every try of one event and different between events; a 500 is
// answered by a try 5 s later; the payload is {type, timestamp, data} with
// the approval's fields and a console link, and no input unless the
// endpoint includes it.
func TestDeliveriesVerifyAndRetry(t *testing.T) {
	rc := startReceiver(t, secret)
	w := setup(t)
	w.endpoint("whe_a", rc.url+"/fail-once")
	w.run("run_1")
	w.pass()
	first := rc.waitFor(t, 3)
	ids := map[string]bool{}
	for _, r := range first {
		if !r.Verified || r.Status != 500 {
			t.Errorf("first try: %+v", r)
		}
		ids[r.ID] = true
	}
	if len(ids) != 3 {
		t.Fatalf("three events had %d webhook-ids: %+v", len(ids), first)
	}
	w.pass() // not due yet: nothing is sent
	if got := rc.got(); len(got) != 3 {
		t.Fatalf("a pass before the retry was due sent %d", len(got)-3)
	}
	w.clock.Advance(5 * time.Second)
	w.pass()
	all := rc.waitFor(t, 6)
	for _, r := range all[3:] {
		if !r.Verified || r.Status != 200 || !ids[r.ID] {
			t.Errorf("retry: %+v (ids of the first tries %v)", r, ids)
		}
	}
	page, err := w.store.ListDeliveries(w.ctx, "prj_a", "whe_a", "", 10)
	if err != nil || len(page.Items) != 3 {
		t.Fatalf("deliveries: %+v, %v", page.Items, err)
	}
	for _, d := range page.Items {
		if d.Status != store.DeliveryDelivered || d.Tries != 2 || d.Attempts[0].Status != 500 || d.Attempts[1].Status != 200 {
			t.Errorf("delivery %s: %s after %d tries %+v", d.ID, d.Status, d.Tries, d.Attempts)
		}
		var p notify.Payload
		if err := json.Unmarshal(d.Body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Data.RunID != "run_1" || p.Data.Agent != "refunds" || p.Data.ConsoleURL == "" || p.Data.Input != nil {
			t.Errorf("payload of %s: %+v", d.Type, p.Data)
		}
		if d.Type == "approval.approved" && (p.Data.DecidedByName != "Ana Diaz" || p.Data.Tool != "refundOrder" || p.Data.ExpiresAt.IsZero() ||
			!strings.HasPrefix(p.Data.ConsoleURL, "https://stead.example.com/console/#/approvals/apr_")) {
			t.Errorf("approval.approved payload: %+v", p.Data)
		}
	}
	// The outbox is empty: a second pass makes no second set.
	if es, err := w.store.ListOutbox(w.ctx, 10); err != nil || len(es) != 0 {
		t.Errorf("outbox after the fan-out: %+v, %v", es, err)
	}
}

// A 410 disables the endpoint: its other deliveries fail without being
// sent, and later events make none.
func TestGoneDisablesTheEndpoint(t *testing.T) {
	rc := startReceiver(t, secret)
	w := setup(t)
	w.endpoint("whe_gone", rc.url+"/gone")
	w.endpoint("whe_ok", rc.url+"/ok")
	w.run("run_1")
	w.pass()
	rc.waitFor(t, 1)
	time.Sleep(200 * time.Millisecond) // any other try in flight lands
	gone := func() int {
		n := 0
		for _, r := range rc.got() {
			if r.Path == "/gone" {
				n++
			}
		}
		return n
	}
	sent := gone()
	ep, err := w.store.GetEndpoint(w.ctx, "prj_a", "whe_gone")
	if err != nil || !ep.Disabled() || !strings.Contains(ep.DisabledReason, "410") {
		t.Fatalf("endpoint after a 410: %+v, %v", ep, err)
	}
	w.clock.Advance(time.Hour)
	w.pass()
	w.run("run_2")
	w.pass()
	time.Sleep(100 * time.Millisecond)
	if n := gone(); n != sent {
		t.Errorf("a disabled endpoint got %d requests after the 410 had disabled it", n-sent)
	}
	page, _ := w.store.ListDeliveries(w.ctx, "prj_a", "whe_gone", "", 10)
	for _, d := range page.Items {
		if d.Status == store.DeliveryPending {
			t.Errorf("delivery %s is still pending at a disabled endpoint", d.ID)
		}
	}
	// The project's other endpoint was told.
	told, _ := w.store.ListDeliveries(w.ctx, "prj_a", "whe_ok", "", 20)
	n := 0
	for _, d := range told.Items {
		if d.Type == notify.Disabled {
			n++
			var p notify.Payload
			if json.Unmarshal(d.Body, &p) != nil || p.Data.WebhookID != "whe_gone" || !strings.Contains(p.Data.Message, "410") {
				t.Errorf("webhook.disabled: %s", d.Body)
			}
		}
	}
	if n != 1 {
		t.Errorf("the other endpoint got %d webhook.disabled, want 1", n)
	}
}

// Retry-After defers the next try beyond the schedule's.
func TestRetryAfterHonoured(t *testing.T) {
	rc := startReceiver(t, secret)
	w := setup(t)
	w.endpoint("whe_a", rc.url+"/retry-after")
	w.run("run_1")
	w.pass()
	rc.waitFor(t, 3)
	w.clock.Advance(5 * time.Second)
	w.pass()
	time.Sleep(100 * time.Millisecond)
	if got := rc.got(); len(got) != 3 {
		t.Fatalf("retried after 5s although the receiver said Retry-After: 7 (%d requests)", len(got))
	}
	w.clock.Advance(2 * time.Second)
	w.pass()
	rc.waitFor(t, 6)
}

// After a rotation a delivery carries two signatures: a receiver that
// knows only the old secret, and one that knows only the new, both verify.
func TestRotationSignsWithBoth(t *testing.T) {
	const newer = "whsec_QXnZ8f1vJm0TdS6hL2pR4yWcE9kBuGaN"
	for _, known := range []string{secret, newer} {
		rc := startReceiver(t, known)
		w := setup(t)
		now := w.clock.Now()
		w.endpoint("whe_a", rc.url+"/ok",
			store.EndpointSecret{Secret: newer, CreatedAt: now},
			store.EndpointSecret{Secret: secret, CreatedAt: now.Add(-time.Hour), Until: now.Add(notify.RotationOverlap)})
		w.run("run_1")
		w.pass()
		for _, r := range rc.waitFor(t, 3) {
			if !r.Verified || len(strings.Fields(r.Signature)) != 2 {
				t.Errorf("knowing %s…: %+v", known[:10], r)
			}
		}
	}
}

// An endpoint whose every delivery fails for 5 days is disabled. (Past the
// first day the receiver answers 401 rather than 500: the clock has moved
// days ahead of its own, so timestamps fail its 5-minute tolerance — a
// failure all the same.)
func TestFailingForFiveDaysDisables(t *testing.T) {
	rc := startReceiver(t, secret)
	w := setup(t)
	w.endpoint("whe_a", rc.url+"/fail")
	w.run("run_1")
	w.pass()
	rc.waitFor(t, 3)
	ep, err := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a")
	if err != nil || ep.FailingSince.IsZero() || ep.Disabled() {
		t.Fatalf("after the first failures: %+v, %v", ep, err)
	}
	w.clock.Advance(5*24*time.Hour - time.Minute) // the documented limit, not notify.FailingLimit: a changed constant must fail here
	w.run("run_2")
	w.pass()
	if ep, _ := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a"); ep.Disabled() {
		t.Fatalf("disabled before 5 days of failures: %s", ep.DisabledReason)
	}
	w.clock.Advance(2 * time.Minute)
	w.run("run_3")
	w.pass()
	ep, _ = w.store.GetEndpoint(w.ctx, "prj_a", "whe_a")
	if !ep.Disabled() || !strings.Contains(ep.DisabledReason, "every delivery failed since") {
		t.Fatalf("after 5 days of failures: %+v", ep)
	}
}

// Notices: a reminder, the escalation and the expiry warning each go out
// once, at their time, after the request; none once the approval is
// settled. (A Go receiver: the clock moves hours ahead of the reference
// library's own, whose timestamps it would refuse.)
func TestNoticesOnceOnTime(t *testing.T) {
	var (
		mu  sync.Mutex
		got []notify.Payload
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	types := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, p := range got {
			out = append(out, p.Type)
		}
		return out
	}
	w := setup(t)
	ep := w.endpoint("whe_a", srv.URL)
	ep.Events = []string{"approval.requested", "approval.reminder", "approval.escalated", "approval.expiring"}
	if _, err := w.store.UpdateEndpoint(w.ctx, ep); err != nil {
		t.Fatal(err)
	}
	now := w.clock.Now()
	a := w.gated("run_1", []approvals.Notice{
		{Kind: approvals.Reminder, After: 30 * time.Minute},
		{Kind: approvals.Escalated, After: time.Hour, Group: "finance-leads"},
		{Kind: approvals.Expiring, After: 96 * time.Minute},
	}, 2*time.Hour)
	w.pass()
	if g := types(); fmt.Sprint(g) != "[approval.requested]" {
		t.Fatalf("at the request: %v", g)
	}
	for _, step := range []struct {
		at   time.Duration
		want string
	}{
		{29 * time.Minute, "[approval.requested]"},
		{30 * time.Minute, "[approval.requested approval.reminder]"},
		{59 * time.Minute, "[approval.requested approval.reminder]"},
		{time.Hour, "[approval.requested approval.reminder approval.escalated]"},
	} {
		w.clock.Set(now.Add(step.at))
		w.pass()
		w.pass()
		if g := fmt.Sprint(types()); g != step.want {
			t.Fatalf("at +%s: %s, want %s", step.at, g, step.want)
		}
	}
	mu.Lock()
	esc := got[2].Data
	mu.Unlock()
	if esc.EscalatedTo != "finance-leads" || esc.ApprovalID != a.ID || esc.Status != "pending" {
		t.Errorf("approval.escalated data: %+v", esc)
	}
	// Settled before the expiry warning: it is skipped, not sent.
	if _, _, err := w.store.DecideApproval(w.ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "prj_a", ApprovalID: a.ID, Status: approvals.Approved, By: "key_ana", At: w.clock.Now()},
		RunStatus: store.RunQueued, LeaseUntil: w.clock.Now().Add(time.Minute),
	}); err != nil {
		t.Fatal(err)
	}
	w.clock.Set(now.Add(97 * time.Minute))
	w.pass()
	if g := fmt.Sprint(types()); g != "[approval.requested approval.reminder approval.escalated]" {
		t.Errorf("after the decision: %s", g)
	}
	page, err := w.store.ListDeliveries(w.ctx, "prj_a", "whe_a", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]store.DeliveryStatus{}
	for _, d := range page.Items {
		statuses[d.Type] = d.Status
	}
	if statuses["approval.expiring"] != store.DeliverySkipped || statuses["approval.reminder"] != store.DeliveryDelivered {
		t.Errorf("delivery statuses: %v", statuses)
	}
}

// gated makes a run of prj_a waiting on an approval with notices.
func (w *world) gated(id string, notices []approvals.Notice, timeout time.Duration) approvals.Approval {
	w.t.Helper()
	now := w.clock.Now()
	r, err := w.store.CreateRun(w.ctx, store.Run{ID: id, ProjectID: "prj_a", Agent: "refunds", EndUserID: "alice", Deployment: 1,
		Status: store.RunRunning, Input: json.RawMessage(`{}`), Trust: store.Trusted, CreatedAt: now, UpdatedAt: now}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	a, err := approvals.New(approvals.Request{ProjectID: "prj_a", RunID: id, Agent: "refunds", EndUserID: "alice", Deployment: 1,
		StepID: "refund", CallID: "refund", Tool: "refundOrder", Input: json.RawMessage(`{}`), Reason: "asks",
		RequestedAt: now, Timeout: timeout, Notices: notices}, "n1")
	if err != nil {
		w.t.Fatal(err)
	}
	data, _ := json.Marshal(map[string]any{"approvalId": a.ID})
	r.Status, r.ApprovalID = store.RunAwaitingApproval, a.ID
	if _, err := w.store.CommitRun(w.ctx, store.RunCommit{Run: r, Approval: &a,
		Events: []store.Event{{Type: "approval.requested", At: now, Data: data, Notify: true}}}); err != nil {
		w.t.Fatal(err)
	}
	return a
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// A redirect is a failed attempt, not a delivery: the POST is not turned
// into a GET, nor its signed body sent where the receiver points.
func TestRedirectIsNoDelivery(t *testing.T) {
	var elsewhere atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(target.Close)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect} {
		srv := httptest.NewServer(http.RedirectHandler(target.URL, code))
		t.Cleanup(srv.Close)
		w := setup(t)
		w.endpoint("whe_a", srv.URL)
		w.run("run_1")
		w.pass()
		page, err := w.store.ListDeliveries(w.ctx, "prj_a", "whe_a", "", 10)
		if err != nil || len(page.Items) != 3 {
			t.Fatalf("deliveries: %+v, %v", page.Items, err)
		}
		for _, d := range page.Items {
			if d.Status != store.DeliveryPending || d.Attempts[0].Status != code || !strings.Contains(d.Attempts[0].Error, "redirected to") {
				t.Errorf("%d: delivery %s is %s after %+v", code, d.ID, d.Status, d.Attempts)
			}
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}

// InFlight holds while a notifier has a delivery taken, and not for one
// scheduled for later or settled.
func TestInFlight(t *testing.T) {
	now := time.Now()
	taken := store.Delivery{Status: store.DeliveryPending, UpdatedAt: now, NextAt: now.Add(notify.Timeout + 15*time.Second)}
	later := store.Delivery{Status: store.DeliveryPending, UpdatedAt: now, NextAt: now.Add(5 * time.Minute)}
	done := taken
	done.Status = store.DeliveryDelivered
	if !notify.InFlight(taken, now.Add(time.Second)) || notify.InFlight(taken, now.Add(time.Minute)) || notify.InFlight(taken, taken.NextAt) ||
		notify.InFlight(later, now) || notify.InFlight(done, now) {
		t.Error("InFlight")
	}
}

// A send that outlives its lease, while another notifier takes the
// delivery and a retry is asked for, still has its attempt recorded: the
// lost write is made again on the delivery as it stands.
func TestAttemptKeptWhenTheWriteLoses(t *testing.T) {
	w := setup(t)
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			// While this first try is in flight, something else writes
			// the delivery (as a retry from the API would).
			page, err := w.store.ListDeliveries(w.ctx, "prj_a", "whe_a", "", 10)
			if err != nil || len(page.Items) == 0 {
				t.Errorf("deliveries: %v", err)
				return
			}
			for _, d := range page.Items {
				if _, err := w.store.UpdateDelivery(w.ctx, d); err != nil {
					t.Errorf("concurrent write: %v", err)
				}
			}
		})
		rw.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	w.endpoint("whe_a", srv.URL)
	ep, _ := w.store.GetEndpoint(w.ctx, "prj_a", "whe_a")
	ep.Events = []string{"run.succeeded"}
	if _, err := w.store.UpdateEndpoint(w.ctx, ep); err != nil {
		t.Fatal(err)
	}
	w.run("run_1")
	w.pass()
	page, err := w.store.ListDeliveries(w.ctx, "prj_a", "whe_a", "", 10)
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("deliveries: %+v, %v", page.Items, err)
	}
	if d := page.Items[0]; d.Tries != 1 || len(d.Attempts) != 1 || d.Attempts[0].Status != 500 || d.Status != store.DeliveryPending {
		t.Errorf("delivery after a lost write: %s, %d tries, %+v", d.Status, d.Tries, d.Attempts)
	}
}

// payloads is a receiver that answers 200 and keeps every payload.
type payloads struct {
	mu  sync.Mutex
	got []notify.Payload
}

func recording(t *testing.T) (*httptest.Server, *payloads) {
	t.Helper()
	p := &payloads{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var pl notify.Payload
		if err := json.Unmarshal(body, &pl); err != nil {
			t.Errorf("payload %s: %v", body, err)
		}
		p.mu.Lock()
		p.got = append(p.got, pl)
		p.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, p
}

func (p *payloads) byType() map[string]notify.Payload {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]notify.Payload{}
	for _, pl := range p.got {
		out[pl.Type] = pl
	}
	return out
}

// A payload says what happened when it happened (the event's time, not
// the fan-out's): an approval.requested carries the quorum's progress,
// the input for an endpoint that includes it, and a link to the approval;
// a run.failed carries the run's error and a link to the run, also when
// PublicURL ends in "/". An endpoint filtered to the run's agent gets its
// events, and no event that does not notify.
func TestPayloadSaysWhatHappened(t *testing.T) {
	srv, rec := recording(t)
	w := setup(t)
	w.n = notify.New(notify.Config{Store: w.store, Now: w.clock.Now, PublicURL: "https://stead.example.com/"})
	ep := w.endpoint("whe_a", srv.URL)
	ep.IncludeInput, ep.Agents = true, []string{"refunds"}
	if _, err := w.store.UpdateEndpoint(w.ctx, ep); err != nil {
		t.Fatal(err)
	}
	requested := w.clock.Now()
	r, err := w.store.CreateRun(w.ctx, store.Run{ID: "run_1", ProjectID: "prj_a", Agent: "refunds", EndUserID: "alice", Deployment: 1,
		Status: store.RunRunning, Input: json.RawMessage(`{}`), Trust: store.Trusted, CreatedAt: requested, UpdatedAt: requested}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := approvals.New(approvals.Request{ProjectID: "prj_a", RunID: "run_1", Agent: "refunds", EndUserID: "alice", Deployment: 1,
		StepID: "refund", CallID: "refund", Tool: "refundOrder", Input: json.RawMessage(`{"orderId":"o-1"}`), Reason: "asks",
		RequestedAt: requested, Timeout: time.Hour, Requirements: []approvals.Requirement{{Group: "finance", Min: 2,
			Eligible: []approvals.Voter{{Member: "ana", Name: "Ana"}, {Member: "bo", Name: "Bo"}}}}}, "q1")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(map[string]any{"approvalId": a.ID})
	r.Status, r.ApprovalID = store.RunAwaitingApproval, a.ID
	if r, err = w.store.CommitRun(w.ctx, store.RunCommit{Run: r, Approval: &a,
		Events: []store.Event{{Type: "approval.requested", At: requested, Data: data, Notify: true}}}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Minute)
	failed := w.clock.Now()
	r.Status, r.Error = store.RunFailed, &store.RunError{Code: "handler_error", Message: "refund service down"}
	if _, err := w.store.CommitRun(w.ctx, store.RunCommit{Run: r, Events: []store.Event{
		{Type: "step.completed", At: failed},
		{Type: "run.failed", At: failed, Notify: true},
	}}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Minute)
	w.pass()

	got := rec.byType()
	if len(got) != 2 {
		t.Fatalf("the endpoint got %d event types, want approval.requested and run.failed: %+v", len(got), got)
	}
	req := got["approval.requested"]
	if !req.Timestamp.Equal(requested) || req.Data.Progress != a.ProgressText() || req.Data.Progress == "" ||
		string(req.Data.Input) != `{"orderId":"o-1"}` || req.Data.ConsoleURL != "https://stead.example.com/console/#/approvals/"+a.ID {
		t.Errorf("approval.requested: %+v", req)
	}
	fail := got["run.failed"]
	if !fail.Timestamp.Equal(failed) || fail.Data.RunStatus != "failed" || fail.Data.EndUserID != "alice" || fail.Data.Error == nil || fail.Data.Error.Message != "refund service down" ||
		fail.Data.ConsoleURL != "https://stead.example.com/console/#/runs/run_1" {
		t.Errorf("run.failed: %+v (error %+v)", fail, fail.Data.Error)
	}
}

// recipients is a channel that tells two people of every event, records
// the data it was given, and delivers every send.
type recipients struct {
	now  func() time.Time
	mu   sync.Mutex
	data map[string]notify.Data
}

func (c *recipients) Name() string { return "people" }

func (c *recipients) Deliveries(_ context.Context, _ store.Run, ev store.Event, data notify.Data) ([]store.Delivery, error) {
	c.mu.Lock()
	c.data[ev.Type] = data
	c.mu.Unlock()
	return []store.Delivery{{EndpointID: "people:ana", Body: []byte(`{}`)}, {EndpointID: "people:bo", Body: []byte(`{}`)}}, nil
}

func (c *recipients) Send(context.Context, store.Delivery) (store.Attempt, bool) {
	return store.Attempt{At: c.now(), Status: 250}, false
}

// A channel is given what a webhook with includeInput gets, and for an
// escalation the group it tells; each recipient's delivery has its own
// id, and a notice's deliveries are due at the notice's time.
func TestChannelGetsTheEventPerRecipient(t *testing.T) {
	w := setup(t)
	ch := &recipients{now: w.clock.Now, data: map[string]notify.Data{}}
	w.n = notify.New(notify.Config{Store: w.store, Now: w.clock.Now, PublicURL: "https://stead.example.com", Channels: []notify.Channel{ch}})
	now := w.clock.Now()
	w.gated("run_1", []approvals.Notice{{Kind: approvals.Escalated, After: time.Hour, Group: "finance-leads"}}, 2*time.Hour)
	w.pass()
	ch.mu.Lock()
	req, esc := ch.data["approval.requested"], ch.data["approval.escalated"]
	ch.mu.Unlock()
	if string(req.Input) != `{}` || esc.EscalatedTo != "finance-leads" {
		t.Errorf("the channel was given input %q and escalatedTo %q", req.Input, esc.EscalatedTo)
	}
	ids := map[string]string{}
	for _, who := range []string{"people:ana", "people:bo"} {
		page, err := w.store.ListDeliveries(w.ctx, "prj_a", who, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Items {
			ids[d.ID] = who
			switch d.Type {
			case "approval.requested":
				if d.Status != store.DeliveryDelivered {
					t.Errorf("%s's approval.requested is %s", who, d.Status)
				}
			case "approval.escalated":
				if d.Status != store.DeliveryPending || !d.NextAt.Equal(now.Add(time.Hour)) {
					t.Errorf("%s's approval.escalated is %s, due %s, want pending until %s", who, d.Status, d.NextAt, now.Add(time.Hour))
				}
			}
		}
	}
	if len(ids) != 4 {
		t.Errorf("two recipients of two events have %d delivery ids, want 4: %v", len(ids), ids)
	}
}

// A delivery of a channel this process does not have is tried like any
// other: the try fails, naming the channel, and counts on the schedule.
func TestChannelMissingFromThisProcessFailsTheTry(t *testing.T) {
	w := setup(t)
	ch := &fakeChannel{now: w.clock.Now, statuses: []int{451}}
	w.n = notify.New(notify.Config{Store: w.store, Now: w.clock.Now, PublicURL: "https://stead.example.com", Channels: []notify.Channel{ch}})
	w.run("run_1")
	w.pass()
	without := notify.New(notify.Config{Store: w.store, Now: w.clock.Now})
	w.clock.Advance(5 * time.Second)
	if err := without.Pass(w.ctx); err != nil {
		t.Fatal(err)
	}
	d := w.only("fake:ana")
	if d.Status != store.DeliveryPending || d.Tries != 2 || !strings.Contains(d.Attempts[1].Error, "no fake channel") ||
		!d.NextAt.Equal(d.Attempts[1].At.Add(5*time.Minute)) {
		t.Errorf("after a try without the channel: %s after %d tries, next at %s, %+v", d.Status, d.Tries, d.NextAt, d.Attempts)
	}
}

// A ping is delivered only on a 2xx and tried once: a redirect or an
// error fails it, and no pass tries it again.
func TestPingTriedOnce(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   store.DeliveryStatus
	}{
		{http.StatusNoContent, store.DeliveryDelivered},
		{http.StatusFound, store.DeliveryFailed},
		{http.StatusInternalServerError, store.DeliveryFailed},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			srv, sent := answering(t, tc.status, "")
			w := setup(t)
			ep := w.endpoint("whe_a", srv.URL)
			d, err := w.n.Ping(w.ctx, ep, "msg_ping")
			if err != nil || d.Status != tc.want || d.Tries != 1 || d.Attempts[0].Status != tc.status {
				t.Fatalf("ping answered %d: %+v, %v", tc.status, d, err)
			}
			w.clock.Advance(24 * time.Hour)
			w.pass()
			if n := sent.Load(); n != 1 {
				t.Errorf("the endpoint got the ping %d times, want once", n)
			}
			if got := w.only("whe_a"); got.Status != tc.want || got.Tries != 1 {
				t.Errorf("stored ping: %s after %d tries", got.Status, got.Tries)
			}
		})
	}
}
