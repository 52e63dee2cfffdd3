package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"stead/api"
	"stead/api/wire"
	"stead/notify"
)

// receiver is a webhook endpoint on loopback. It answers 500 to the first
// request it gets and 200 to every later one, and keeps each.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []received
}

// received is one request to the receiver.
type received struct {
	at                   time.Time
	id, stamp, signature string
	body                 []byte
	answered             int
}

func startReceiver(s *stack) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := http.StatusOK
		if len(r.got) == 0 {
			status = http.StatusInternalServerError
		}
		r.got = append(r.got, received{
			at: time.Now(), id: req.Header.Get("webhook-id"), stamp: req.Header.Get("webhook-timestamp"),
			signature: req.Header.Get("webhook-signature"), body: body, answered: status,
		})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	s.t.Cleanup(r.srv.Close)
	return r
}

// all is every request so far.
func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// since is the requests after the first n.
func (r *receiver) since(n int) []received { return r.all()[n:] }

// payload is what a delivery carries.
type payload struct {
	Type string      `json:"type"`
	Data notify.Data `json:"data"`
}

// check verifies a request's signature against the endpoint's secret, per
// the Standard Webhooks spec (notify.Sign), and its timestamp against when
// it arrived, and decodes its payload.
func (s *stack) check(secret string, r received) payload {
	s.t.Helper()
	key, err := notify.Key(secret)
	if err != nil {
		s.t.Fatalf("the endpoint's secret %q: %v", secret, err)
	}
	sec, err := strconv.ParseInt(r.stamp, 10, 64)
	if err != nil {
		s.t.Fatalf("webhook-timestamp %q: %v", r.stamp, err)
	}
	ts := time.Unix(sec, 0)
	if d := r.at.Sub(ts); d < -time.Second || d > time.Minute {
		s.t.Errorf("delivery %s is stamped %s but arrived %s", r.id, ts, r.at)
	}
	if !strings.HasPrefix(r.id, "msg_") {
		s.t.Errorf("webhook-id %q, want msg_…", r.id)
	}
	if want := notify.Sign(key, r.id, ts, r.body); !slices.Contains(strings.Fields(r.signature), want) {
		s.t.Errorf("delivery %s: webhook-signature %q, want %q (v1, HMAC-SHA256 of id.timestamp.body)", r.id, r.signature, want)
	}
	var p payload
	if err := json.Unmarshal(r.body, &p); err != nil {
		s.t.Fatalf("delivery %s: body %s: %v", r.id, r.body, err)
	}
	return p
}

// types is the event types of requests, checked, in order.
func (s *stack) types(secret string, rs []received) []string {
	s.t.Helper()
	var out []string
	for _, r := range rs {
		out = append(out, s.check(secret, r).Type)
	}
	slices.Sort(out)
	return out
}

// webhooks: an endpoint created through the API function, on a receiver
// that answers 500 to the first try. The runner delivers what an
// execution wrote (approval.requested; then approval.approved, which the
// API recorded, and run.succeeded after the approval resumed the run);
// the sweeper makes the retry after the 500 when it is due, 5 s later,
// and delivers a denial, which dispatches no run. The API delivers
// nothing: its answers never wait on a receiver.
func (s *stack) webhooks(ctx context.Context) {
	t := s.t
	start := time.Now()
	rcv := startReceiver(s)
	body, _ := json.Marshal(map[string]any{"url": rcv.srv.URL + "/stead"})
	var ep wire.Webhook
	if err := json.Unmarshal(s.mustCall(ctx, 201, "create-webhook.json", map[string]string{"BODY": string(body)}), &ep); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ep.ID, "whe_") || !strings.HasPrefix(ep.Secret, "whsec_") || ep.State != api.WebhookEnabled {
		t.Fatalf("created endpoint %+v, want whe_… enabled with a whsec_ secret", ep)
	}

	// An order of its own, since this run refunds it (the demo orders are
	// the other subtests').
	order, _ := json.Marshal(map[string]any{"value": map[string]any{"id": "o-2001", "item": "Signed socks", "amount": 7, "currency": "USD"}})
	s.mustCall(ctx, 200, "put-broker.json", map[string]string{"ORDER": "o-2001", "BODY": string(order)})

	// The runner takes the run to its gate and delivers approval.requested
	// before its invocation returns; the receiver answers 500.
	run := s.startRun(ctx, "o-2001")
	if got := rcv.all(); len(got) != 0 {
		t.Fatalf("the API delivered %d requests when it started a run", len(got))
	}
	before := time.Now()
	s.drainRunner(ctx, run.ID)
	after := time.Now()
	t.Logf("runner: first invocation (cold, to the approval gate, approval.requested delivered) %s", after.Sub(before).Round(time.Millisecond))
	run = s.getRun(ctx, run.ID)
	if run.Status != "awaiting-approval" || run.Approval == nil {
		t.Fatalf("after the runner: %+v, want awaiting-approval", run)
	}
	got := rcv.all()
	if len(got) != 1 {
		t.Fatalf("the receiver got %d requests during the runner's invocation, want 1 (approval.requested)", len(got))
	}
	first := got[0]
	if first.at.Before(before) || first.at.After(after) {
		t.Errorf("approval.requested arrived at %s, outside the runner's invocation (%s to %s)", first.at, before, after)
	}
	p := s.check(ep.Secret, first)
	if p.Type != "approval.requested" || p.Data.ApprovalID != run.Approval.ID || p.Data.RunID != run.ID || p.Data.Tool != "refundOrder" {
		t.Fatalf("first delivery %s %+v, want approval.requested of %s (refundOrder) in run %s", p.Type, p.Data, run.Approval.ID, run.ID)
	}
	if want := publicURL + "/console/#/approvals/" + run.Approval.ID; p.Data.ConsoleURL != want {
		t.Errorf("consoleUrl %q, want %q (STEAD_PUBLIC_URL)", p.Data.ConsoleURL, want)
	}
	if p.Data.Input != nil {
		t.Errorf("the endpoint did not opt in to inputs, but got %s", p.Data.Input)
	}
	d := s.delivery(ctx, ep.ID, first.id)
	if d.Status != "pending" || d.Tries != 1 || len(d.Attempts) != 1 || d.Attempts[0].Status != 500 {
		t.Fatalf("after the 500, delivery %+v; want pending after 1 try answered 500", d)
	}
	if wait := d.NextAt.Sub(d.Attempts[0].At); wait != notify.Schedule[1] {
		t.Errorf("the retry is due %s after the first try, want %s", wait, notify.Schedule[1])
	}

	// A sweep before the retry is due sends nothing.
	var res struct{ Expired, Redispatched int }
	s.invokeJSON(ctx, s.sweeper, []byte(`{"source":"stead.sweeper"}`), &res)
	if got := rcv.since(1); len(got) != 0 {
		t.Fatalf("a sweep %s before the retry was due sent %d requests", time.Until(d.NextAt).Round(time.Millisecond), len(got))
	}
	// Wall clock (the functions run on it, in their own processes): the
	// first sweep after the retry is due makes it.
	time.Sleep(time.Until(d.NextAt) + 100*time.Millisecond)
	t1 := time.Now()
	s.invokeJSON(ctx, s.sweeper, []byte(`{"source":"stead.sweeper"}`), &res)
	t.Logf("sweeper: the retry %s after the first try; invocation %s", time.Since(first.at).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
	got = rcv.since(1)
	if len(got) != 1 {
		t.Fatalf("the sweep after the retry was due sent %d requests, want 1", len(got))
	}
	retry := got[0]
	if retry.id != first.id || string(retry.body) != string(first.body) || retry.answered != 200 {
		t.Errorf("retry %s (%d) %s, want the same webhook-id %s and body as the first try, answered 200", retry.id, retry.answered, retry.body, first.id)
	}
	s.check(ep.Secret, retry)
	if d := s.delivery(ctx, ep.ID, first.id); d.Status != "delivered" || d.Tries != 2 || len(d.Attempts) != 2 || d.Attempts[1].Status != 200 {
		t.Errorf("after the retry, delivery %+v; want delivered after 2 tries, the second answered 200", d)
	}

	// Approve: the API records approval.approved and dispatches the run, and
	// answers without delivering; the runner delivers it with run.succeeded.
	s.mustCall(ctx, 200, "approve.json", map[string]string{"APPROVAL": run.Approval.ID})
	if got := rcv.since(2); len(got) != 0 {
		t.Fatalf("the API delivered %d requests while it approved", len(got))
	}
	s.drainRunner(ctx, run.ID)
	if r := s.getRun(ctx, run.ID); r.Status != "succeeded" {
		t.Fatalf("after the approval the run is %s (%+v), want succeeded", r.Status, r.Error)
	}
	if got, want := s.types(ep.Secret, rcv.since(2)), []string{"approval.approved", "run.succeeded"}; !slices.Equal(got, want) {
		t.Fatalf("the runner's invocation after the approval delivered %v, want %v", got, want)
	}

	// Deny: no run is dispatched, so the next sweep delivers it.
	denied := s.startRun(ctx, "o-1002")
	s.drainRunner(ctx, denied.ID)
	denied = s.getRun(ctx, denied.ID)
	if got, want := s.types(ep.Secret, rcv.since(4)), []string{"approval.requested"}; !slices.Equal(got, want) {
		t.Fatalf("the second run's gate delivered %v, want %v", got, want)
	}
	s.mustCall(ctx, 200, "deny.json", map[string]string{"APPROVAL": denied.Approval.ID})
	if evs := s.queue.Take(runnerName); len(evs) != 0 {
		t.Fatalf("a denial dispatched the runner: %q", evs)
	}
	if got := rcv.since(5); len(got) != 0 {
		t.Fatalf("the API delivered %d requests while it denied", len(got))
	}
	s.invokeJSON(ctx, s.sweeper, []byte(`{"source":"stead.sweeper"}`), &res)
	if got, want := s.types(ep.Secret, rcv.since(5)), []string{"approval.denied", "run.failed"}; !slices.Equal(got, want) {
		t.Fatalf("the sweep after the denial delivered %v, want %v", got, want)
	}

	// One webhook-id per event: the retry shares its first try's, and
	// nothing else shares any.
	all := rcv.all()
	ids := map[string]int{}
	for _, r := range all {
		ids[r.id]++
	}
	if len(all) != 7 || len(ids) != 6 || ids[first.id] != 2 {
		t.Errorf("%d requests with %d webhook-ids (%v), want 7 with 6: the retry's the same as its first try's, the others distinct", len(all), len(ids), ids)
	}

	// The endpoint goes; later runs notify no one.
	s.mustCall(ctx, 200, "delete-webhook.json", map[string]string{"WEBHOOK": ep.ID})
	t.Logf("webhooks: %d deliveries from the runner and the sweeper in %s (5 s of it waiting for the retry)", len(all), time.Since(start).Round(time.Millisecond))
}

// delivery reads one delivery of endpoint id through the API function.
func (s *stack) delivery(ctx context.Context, endpoint, id string) wire.WebhookDelivery {
	s.t.Helper()
	var list wire.WebhookDeliveryList
	if err := json.Unmarshal(s.mustCall(ctx, 200, "webhook-deliveries.json", map[string]string{"WEBHOOK": endpoint}), &list); err != nil {
		s.t.Fatal(err)
	}
	for _, d := range list.Deliveries {
		if d.ID == id {
			return d
		}
	}
	s.t.Fatalf("webhook %s has no delivery %s: %+v", endpoint, id, list.Deliveries)
	return wire.WebhookDelivery{}
}
