package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
	"stead/notify"
	"stead/notify/notifytest"
	"stead/runtime/egress"
	"stead/store"
)

// notifications is the API's notifier in these tests: a real
// notify.Notifier over the world's store, delivering through an egress
// policy that allows loopback, which counts the kicks it gets.
type notifications struct {
	*notify.Notifier
	kicks atomic.Int32
}

func (n *notifications) Kick() {
	n.kicks.Add(1)
	n.Notifier.Kick()
}

// withNotifier gives the API a notifier; the test drives its passes
// (pass), so every delivery is done when pass returns.
func withNotifier(t testing.TB, out **notifications) func(*api.Config) {
	return func(c *api.Config) {
		client := egress.Policy{Allow: egress.Loopback}.Client()
		client.Timeout = notify.Timeout
		t.Cleanup(client.CloseIdleConnections)
		n := &notifications{Notifier: notify.New(notify.Config{Store: c.Store, Client: client, Now: c.Now, Interval: time.Hour})}
		c.Notifications = n
		*out = n
	}
}

// pass makes one notifier pass: what is due is sent and recorded.
func (n *notifications) pass(t testing.TB) {
	t.Helper()
	if err := n.Pass(context.Background()); err != nil {
		t.Fatalf("notifier pass: %v", err)
	}
}

// newWebhook adds an endpoint of project A for url and returns it with its
// secret.
func (w *world) newWebhook(url string) wire.Webhook {
	w.t.Helper()
	var h wire.Webhook
	w.must(w.do("POST", "/v1/webhooks", w.owner, map[string]any{"url": url}), 201).decode(&h)
	return h
}

// ping pings a webhook and returns the delivery.
func (w *world) ping(id string) wire.WebhookDelivery {
	w.t.Helper()
	var d wire.WebhookDelivery
	w.must(w.do("POST", "/v1/webhooks/"+id+"/ping", w.owner, nil), 200).decode(&d)
	return d
}

func (w *world) delivery(hook, id string) wire.WebhookDelivery {
	w.t.Helper()
	var d wire.WebhookDelivery
	w.must(w.do("GET", "/v1/webhooks/"+hook+"/deliveries/"+id, w.owner, nil), 200).decode(&d)
	return d
}

func (w *world) getWebhook(id string) wire.Webhook {
	w.t.Helper()
	var h wire.Webhook
	w.must(w.do("GET", "/v1/webhooks/"+id, w.owner, nil), 200).decode(&h)
	return h
}

// signatures checks a request's Standard Webhooks headers: its id, a
// timestamp, and one valid signature per secret, in that order.
func signatures(t testing.TB, r notifytest.Request, id string, secrets ...string) {
	t.Helper()
	if got := r.Signed(t, secrets...); got != id {
		t.Errorf("webhook-id %q, want %q", got, id)
	}
}

// TestWebhooks: create an endpoint, ping it (signed with its secret),
// rotate (two signatures for a day, then one), read the delivery log,
// retry one delivery and a time range, a 500 and a 410, disable and enable
// by PATCH, and delete.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	rc := notifytest.NewReceiver(t, "/hooks/stead")
	var n *notifications
	w := setup(t, withNotifier(t, &n))
	ctx := context.Background()

	// The notifier caches that the project has no endpoints; creating one
	// drops that at once.
	if n.Notifies(ctx, w.project.ID) {
		t.Fatal("a project without endpoints notifies")
	}
	var h wire.Webhook
	w.must(w.do("POST", "/v1/webhooks", w.owner, map[string]any{
		"url": rc.URL, "events": []string{"approval.requested", "run.failed", "approval.requested"}, "agents": []string{"refunds"}, "includeInput": true,
	}), 201).decode(&h)
	if !strings.HasPrefix(h.ID, "whe_") || !strings.HasPrefix(h.Secret, "whsec_") || h.State != api.WebhookEnabled || h.URL != rc.URL ||
		strings.Join(h.Events, ",") != "approval.requested,run.failed" || strings.Join(h.Agents, ",") != "refunds" || !h.IncludeInput {
		t.Fatalf("created %+v", h)
	}
	if !n.Notifies(ctx, w.project.ID) {
		t.Error("the notifier still thinks the project has no endpoints: the API did not tell it")
	}
	secret0 := h.Secret

	// The secret is shown once.
	list := w.must(w.do("GET", "/v1/webhooks", w.owner, nil), 200)
	var hooks wire.WebhookList
	list.decode(&hooks)
	if len(hooks.Webhooks) != 1 || hooks.Webhooks[0].ID != h.ID || strings.Contains(string(list.body), "whsec_") {
		t.Errorf("list %s", list.body)
	}
	// An enabled endpoint that never failed nor rotated shows none of that.
	list.lacks([]string{"webhooks", "0"}, "secret", "disabledAt", "disabledReason", "failingSince", "previousSecretUntil")
	one := w.must(w.do("GET", "/v1/webhooks/"+h.ID, w.owner, nil), 200)
	if strings.Contains(string(one.body), "whsec_") || !strings.Contains(string(one.body), `"state":"enabled"`) {
		t.Errorf("get %s", one.body)
	}

	// A ping reaches the receiver, signed with the secret.
	d := w.ping(h.ID)
	got := rc.Next()
	signatures(t, got, d.ID, secret0)
	if !strings.HasPrefix(d.ID, "msg_") || d.Type != notify.Ping || d.Status != "delivered" || d.Tries != 1 || len(d.Attempts) != 1 ||
		d.Attempts[0].Status != 200 || d.Attempts[0].Response != "receiver says 200" || d.WebhookID != h.ID || d.Body != nil {
		t.Errorf("ping delivery %+v", d)
	}
	var payload notify.Payload
	if err := json.Unmarshal(got.Body, &payload); err != nil || payload.Type != notify.Ping || payload.Data.Message == "" || !payload.Timestamp.Equal(w.clock.Now()) {
		t.Errorf("ping payload %s (%v)", got.Body, err)
	}
	if again := w.ping(h.ID); again.ID == d.ID {
		t.Errorf("two pings share the webhook-id %s", d.ID)
	} else {
		signatures(t, rc.Next(), again.ID, secret0)
	}

	// Rotate: the new secret signs first, the old one beside it for 24 h.
	var rot wire.Webhook
	w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/rotate", w.owner, nil), 200).decode(&rot)
	if !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == secret0 || !rot.PreviousSecretUntil.Equal(w.clock.Now().Add(notify.RotationOverlap)) {
		t.Fatalf("rotated %+v", rot)
	}
	secret1 := rot.Secret
	if strings.Contains(string(w.must(w.do("GET", "/v1/webhooks/"+h.ID, w.owner, nil), 200).body), "whsec_") {
		t.Error("GET shows the rotated secret")
	}
	d = w.ping(h.ID)
	signatures(t, rc.Next(), d.ID, secret1, secret0)
	w.clock.Advance(notify.RotationOverlap + time.Second)
	d = w.ping(h.ID)
	last := rc.Next()
	signatures(t, last, d.ID, secret1)
	if g := w.getWebhook(h.ID); !g.PreviousSecretUntil.IsZero() {
		t.Errorf("the old secret still signs until %s", g.PreviousSecretUntil)
	}
	// A second rotation drops the secret whose time has passed.
	w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/rotate", w.owner, nil), 200).decode(&rot)
	ep, err := w.store.GetEndpoint(ctx, w.project.ID, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ep.Secrets) != 2 || ep.Secrets[0].Secret != rot.Secret || ep.Secrets[1].Secret != secret1 {
		t.Errorf("secrets after two rotations: %+v", ep.Secrets)
	}
	secret2 := rot.Secret

	// The log: newest first, without bodies; one delivery with its body.
	var log wire.WebhookDeliveryList
	resp := w.must(w.do("GET", "/v1/webhooks/"+h.ID+"/deliveries", w.owner, nil), 200)
	resp.decode(&log)
	if len(log.Deliveries) != 4 || log.Deliveries[0].ID != d.ID || strings.Contains(string(resp.body), `"body"`) {
		t.Fatalf("log %s", resp.body)
	}
	var page wire.WebhookDeliveryList
	w.must(w.do("GET", "/v1/webhooks/"+h.ID+"/deliveries?limit=3", w.owner, nil), 200).decode(&page)
	if len(page.Deliveries) != 3 || page.NextCursor == "" {
		t.Fatalf("first page %+v", page)
	}
	w.must(w.do("GET", "/v1/webhooks/"+h.ID+"/deliveries?limit=3&cursor="+url.QueryEscape(page.NextCursor), w.owner, nil), 200).decode(&page)
	if len(page.Deliveries) != 1 || page.Deliveries[0].ID != log.Deliveries[3].ID {
		t.Errorf("second page %+v", page)
	}
	if full := w.delivery(h.ID, d.ID); string(full.Body) != string(last.Body) || full.Attempts[0].LatencyMs < 0 {
		t.Errorf("delivery %+v", full)
	}

	// A 500 fails a ping; a retry of that delivery, once the receiver
	// works, sends it again under the same webhook-id.
	rc.Status.Store(http.StatusInternalServerError)
	failed := w.ping(h.ID)
	rc.Next()
	if failed.Status != "failed" || failed.Attempts[0].Status != 500 || failed.Attempts[0].Response != "receiver says 500" {
		t.Errorf("a ping answered 500: %+v", failed)
	}
	rc.Status.Store(http.StatusOK)
	kicks := n.kicks.Load()
	var retried wire.WebhookRetry
	w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/retry", w.owner, map[string]any{"deliveryId": failed.ID}), 200).decode(&retried)
	if retried.Retried != 1 || n.kicks.Load() != kicks+1 {
		t.Errorf("retried %d (kicked %d times)", retried.Retried, n.kicks.Load()-kicks)
	}
	if pending := w.delivery(h.ID, failed.ID); pending.Status != "pending" || !pending.NextAt.Equal(w.clock.Now()) {
		t.Errorf("a retried delivery is %s, next at %s", pending.Status, pending.NextAt)
	}
	n.pass(t)
	signatures(t, rc.Next(), failed.ID, secret2, secret1)
	rc.None()
	if after := w.delivery(h.ID, failed.ID); after.Status != "delivered" || after.Tries != 2 || after.Attempts[1].Status != 200 {
		t.Errorf("after the retry: %+v", after)
	}

	// A time range: the pings made from since to until.
	w.clock.Advance(time.Hour)
	from := w.clock.Now()
	a := w.ping(h.ID)
	w.clock.Advance(time.Minute)
	b := w.ping(h.ID)
	w.clock.Advance(time.Minute)
	w.ping(h.ID)
	rc.Next()
	rc.Next()
	rc.Next()
	w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/retry", w.owner, map[string]any{
		"since": from.Format(time.RFC3339), "until": from.Add(time.Minute).Format(time.RFC3339),
	}), 200).decode(&retried)
	if retried.Retried != 2 {
		t.Errorf("retried %d of the range, want 2", retried.Retried)
	}
	n.pass(t)
	ids := map[string]bool{rc.Next().Header.Get("webhook-id"): true, rc.Next().Header.Get("webhook-id"): true}
	if !ids[a.ID] || !ids[b.ID] {
		t.Errorf("the range retried %v, want %s and %s", ids, a.ID, b.ID)
	}
	rc.None()
	w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/retry", w.owner, map[string]any{"since": from.Add(-time.Minute).Format(time.RFC3339)}), 200).decode(&retried)
	if retried.Retried != 3 {
		t.Errorf("retried %d since a minute before the range, want the 3 pings since", retried.Retried)
	}
	n.pass(t)
	for range 3 {
		rc.Next()
	}

	// Failing, then a 410: the endpoint is disabled, with why and when.
	rc.Status.Store(http.StatusInternalServerError)
	w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/retry", w.owner, map[string]any{"deliveryId": a.ID}), 200)
	n.pass(t)
	rc.Next()
	failingAt := w.clock.Now()
	if g := w.getWebhook(h.ID); g.State != api.WebhookEnabled || !g.FailingSince.Equal(failingAt) {
		t.Errorf("after a failure: %+v", g)
	}
	if p := w.delivery(h.ID, a.ID); p.Status != "pending" || !p.NextAt.After(failingAt) {
		t.Errorf("a failed retry is not tried again later: %+v", p)
	}
	rc.Status.Store(http.StatusGone)
	w.clock.Advance(time.Second)
	w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/retry", w.owner, map[string]any{"deliveryId": b.ID}), 200)
	n.pass(t)
	rc.Next()
	rc.None()
	g := w.getWebhook(h.ID)
	if g.State != api.WebhookDisabled || !strings.Contains(g.DisabledReason, "410") || !g.DisabledAt.Equal(w.clock.Now()) {
		t.Errorf("after a 410: %+v", g)
	}
	resp = w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/retry", w.owner, map[string]any{"deliveryId": b.ID}), 409)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "stead webhooks enable "+h.ID) || !strings.Contains(msg, "410") {
		t.Errorf("retry of a disabled endpoint: %s", msg)
	}
	// A ping still checks it.
	rc.Status.Store(http.StatusOK)
	if p := w.ping(h.ID); p.Status != "delivered" {
		t.Errorf("a ping of a disabled endpoint: %+v", p)
	}
	rc.Next()
	g = wire.Webhook{}
	w.must(w.do("PATCH", "/v1/webhooks/"+h.ID, w.owner, map[string]any{"enabled": true}), 200).decode(&g)
	if g.State != api.WebhookEnabled || !g.DisabledAt.IsZero() || g.DisabledReason != "" || !g.FailingSince.IsZero() {
		t.Errorf("enabled again: %+v", g)
	}

	// PATCH changes what it names and nothing else; enabled: false stops
	// deliveries by hand, naming who.
	g = wire.Webhook{}
	w.must(w.do("PATCH", "/v1/webhooks/"+h.ID, w.owner, map[string]any{"events": []string{}, "includeInput": false, "enabled": false}), 200).decode(&g)
	if len(g.Events) != 0 || g.IncludeInput || strings.Join(g.Agents, ",") != "refunds" || g.URL != rc.URL ||
		g.State != api.WebhookDisabled || !strings.HasPrefix(g.DisabledReason, "disabled by ") || !strings.Contains(g.DisabledReason, "key_") {
		t.Errorf("patched %+v", g)
	}
	w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/retry", w.owner, map[string]any{"deliveryId": b.ID}), 409)
	w.must(w.do("PATCH", "/v1/webhooks/"+h.ID, w.owner, map[string]any{"enabled": true}), 200)

	// Delete: gone with its log, and the notifier knows at once.
	w.must(w.do("DELETE", "/v1/webhooks/"+h.ID, w.owner, nil), 200)
	w.must(w.do("GET", "/v1/webhooks/"+h.ID, w.owner, nil), 404)
	w.must(w.do("GET", "/v1/webhooks/"+h.ID+"/deliveries", w.owner, nil), 404)
	w.must(w.do("GET", "/v1/webhooks", w.owner, nil), 200).decode(&hooks)
	if len(hooks.Webhooks) != 0 {
		t.Errorf("after delete: %+v", hooks.Webhooks)
	}
	if n.Notifies(ctx, w.project.ID) {
		t.Error("the notifier still thinks the project has endpoints")
	}
	if _, err := w.store.GetDelivery(ctx, w.project.ID, d.ID); err == nil {
		t.Error("a deleted endpoint's deliveries are kept")
	}
}

// TestWebhookRefusals: every refusal names the field and what to do, and
// changes nothing.
func TestWebhookRefusals(t *testing.T) {
	t.Parallel()
	rc := notifytest.NewReceiver(t, "/hooks/stead")
	var n *notifications
	w := setup(t, withNotifier(t, &n))
	tooMany := make([]string, api.MaxWebhookFilter+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("agent-%d", i)
	}
	for _, c := range []struct {
		name        string
		body        map[string]any
		field, says string
	}{
		{"no url", map[string]any{"events": []string{"run.failed"}}, "url", "is required"},
		{"a relative url", map[string]any{"url": "hooks.example.com/stead"}, "url", "absolute http or https URL"},
		{"another scheme", map[string]any{"url": "ftp://hooks.example.com/stead"}, "url", "absolute http or https URL"},
		{"no host", map[string]any{"url": "https:///stead"}, "url", "absolute http or https URL"},
		{"an opaque url", map[string]any{"url": "https:hooks.example.com"}, "url", "absolute http or https URL"},
		{"a password", map[string]any{"url": "https://ana:pw@hooks.example.com/"}, "url", "user name or password"},
		{"control characters", map[string]any{"url": "https://hooks.example.com/\x01"}, "url", "control characters"},
		{"too long", map[string]any{"url": "https://hooks.example.com/" + strings.Repeat("a", api.MaxWebhookURL)}, "url", "at most 2000"},
		{"an unknown event", map[string]any{"url": rc.URL, "events": []string{"run.failed", "approval.maybe"}}, "events[1]", `"approval.maybe" is not an event type; the types are approval.requested`},
		{"ping is no event", map[string]any{"url": rc.URL, "events": []string{notify.Ping}}, "events[0]", "is not an event type"},
		{"21 events", map[string]any{"url": rc.URL, "events": tooMany}, "events", "at most 20 event types (got 21); leave it out"},
		{"21 agents", map[string]any{"url": rc.URL, "agents": tooMany}, "agents", "at most 20 agents (got 21)"},
		{"an empty agent", map[string]any{"url": rc.URL, "agents": []string{""}}, "agents[0]", "is required"},
		{"enabled on create", map[string]any{"url": rc.URL, "enabled": true}, "enabled", "a new endpoint is enabled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			prev := w.t
			w.t = t
			defer func() { w.t = prev }()
			refused(t, w.do("POST", "/v1/webhooks", w.owner, c.body), c.field, c.says)
		})
	}
	var hooks wire.WebhookList
	if w.must(w.do("GET", "/v1/webhooks", w.owner, nil), 200).decode(&hooks); len(hooks.Webhooks) != 0 {
		t.Fatalf("refused creates made %+v", hooks.Webhooks)
	}
	if n.kicks.Load() != 0 {
		t.Error("refused requests kicked the notifier")
	}

	h := w.newWebhook(rc.URL)
	other := w.newWebhook(rc.URL + "/other")
	before := w.getWebhook(h.ID)
	refused(t, w.do("PATCH", "/v1/webhooks/"+h.ID, w.owner, map[string]any{"events": []string{"run.failed"}, "url": "mailto:ops@example.com"}), "url", "absolute http or https URL")
	if after := w.getWebhook(h.ID); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a refused PATCH changed %+v to %+v", before, after)
	}
	for _, path := range []string{"/v1/webhooks/whe_nope", "/v1/webhooks/whe_nope/deliveries"} {
		if msg := w.must(w.do("GET", path, w.owner, nil), 404).apiErr().Message; !strings.Contains(msg, "webhook whe_nope not found (list them with stead webhooks list, or GET /v1/webhooks)") {
			t.Errorf("GET %s: %s", path, msg)
		}
	}
	w.must(w.do("PATCH", "/v1/webhooks/whe_nope", w.owner, map[string]any{"enabled": true}), 404)
	w.must(w.do("DELETE", "/v1/webhooks/whe_nope", w.owner, nil), 404)
	w.must(w.do("POST", "/v1/webhooks/whe_nope/rotate", w.owner, nil), 404)
	w.must(w.do("POST", "/v1/webhooks/whe_nope/ping", w.owner, nil), 404)
	w.must(w.do("GET", "/v1/webhooks/"+h.ID+"/deliveries?limit=0", w.owner, nil), 400)
	w.must(w.do("GET", "/v1/webhooks/"+h.ID+"/deliveries?cursor=garbage", w.owner, nil), 400)

	// Retry: say what, once; a delivery of another endpoint is not found.
	d := w.ping(other.ID)
	rc.Next()
	retry := "/v1/webhooks/" + h.ID + "/retry"
	for _, c := range []struct {
		name        string
		body        map[string]any
		field, says string
	}{
		{"nothing", map[string]any{}, "deliveryId", "is required, or since"},
		{"both", map[string]any{"deliveryId": d.ID, "since": "2026-11-29T12:00:00Z"}, "deliveryId", "not both"},
		{"until alone", map[string]any{"until": "2026-11-29T12:00:00Z"}, "since", "is required with until"},
		{"not a time", map[string]any{"since": "yesterday"}, "since", "RFC 3339"},
		{"backwards", map[string]any{"since": "2026-11-29T12:00:00Z", "until": "2026-11-29T11:00:00Z"}, "until", "must not be before since"},
	} {
		t.Run("retry "+c.name, func(t *testing.T) {
			prev := w.t
			w.t = t
			defer func() { w.t = prev }()
			refused(t, w.do("POST", retry, w.owner, c.body), c.field, c.says)
		})
	}
	resp := w.must(w.do("POST", retry, w.owner, map[string]any{"deliveryId": d.ID}), 404)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "webhook "+h.ID+" has no delivery "+d.ID) {
		t.Errorf("retry of another endpoint's delivery: %s", msg)
	}
	// More than 1000 deliveries in the range: refused, and none retried.
	at := w.clock.Now()
	ds := make([]store.Delivery, api.MaxWebhookRetry+1)
	for i := range ds {
		ds[i] = store.Delivery{
			ID: fmt.Sprintf("msg_bulk%04d", i), ProjectID: w.project.ID, EndpointID: h.ID, Type: "run.failed", Body: json.RawMessage(`{}`),
			Status: store.DeliveryFailed, Tries: 8, CreatedAt: at.Add(time.Duration(i) * time.Millisecond), UpdatedAt: at,
		}
	}
	if err := w.store.PutDeliveries(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Minute)
	refused(t, w.do("POST", retry, w.owner, map[string]any{"since": at.Format(time.RFC3339)}), "since", "more than 1000 deliveries")
	if got := w.delivery(h.ID, ds[0].ID); got.Status != "failed" {
		t.Errorf("a refused retry changed a delivery to %s", got.Status)
	}
	if n.kicks.Load() != 0 {
		t.Error("refused retries kicked the notifier")
	}
	// Exactly 1000 is taken, and the notifier kicked once.
	var retried wire.WebhookRetry
	w.must(w.do("POST", retry, w.owner, map[string]any{"since": at.Add(time.Millisecond).Format(time.RFC3339Nano)}), 200).decode(&retried)
	if got := w.delivery(h.ID, ds[1].ID); retried.Retried != api.MaxWebhookRetry || got.Status != "pending" || n.kicks.Load() != 1 {
		t.Errorf("retried %d (the first %s; %d kicks), want %d", retried.Retried, got.Status, n.kicks.Load(), api.MaxWebhookRetry)
	}
	if got := w.delivery(h.ID, ds[0].ID); got.Status != "failed" {
		t.Errorf("the delivery before since was retried: %s", got.Status)
	}
	w.must(w.do("POST", retry, w.owner, map[string]any{"since": at.Add(2 * time.Second).Format(time.RFC3339)}), 200).decode(&retried)
	if retried.Retried != 0 || n.kicks.Load() != 1 {
		t.Errorf("retried %d after the last delivery (%d kicks)", retried.Retried, n.kicks.Load())
	}
}

// Without a notifier the endpoints can be managed, and a ping says why it
// cannot be sent.
func TestWebhookPingWithoutNotifier(t *testing.T) {
	t.Parallel()
	w := setup(t)
	h := w.newWebhook("https://hooks.example.com/stead")
	resp := w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/ping", w.owner, nil), 503)
	if e := resp.apiErr(); e.Code != api.CodeUnavailable || !strings.Contains(e.Message, "runs no notifier") {
		t.Errorf("ping without a notifier: %+v", e)
	}
	w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/rotate", w.owner, nil), 200)
	w.must(w.do("DELETE", "/v1/webhooks/"+h.ID, w.owner, nil), 200)
}

// The API's URL rule is stricter than the store's, never looser: every URL
// the API takes, the store takes.
func TestWebhookURLRuleWithinTheStore(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, u := range []string{
		"https://hooks.example.com/stead", "http://127.0.0.1:9/x?y=1", "https://[::1]:8443/", "https://hooks.example.com",
		"hooks.example.com", "ftp://x/", "https:///x", "https:x", "https://a:b@x/", "https://x/\x7f", "https://x:port/",
	} {
		resp := w.do("POST", "/v1/webhooks", w.owner, map[string]any{"url": u})
		e := store.Endpoint{ID: "whe_check", ProjectID: w.project.ID, URL: u, Secrets: []store.EndpointSecret{{Secret: "whsec_eA=="}}}
		if resp.status == 201 && e.Validate() != nil {
			t.Errorf("the API takes %q, which the store refuses: %v", u, e.Validate())
		}
		if resp.status != 201 && resp.status != 400 {
			t.Errorf("%q: status %d %s", u, resp.status, resp.body)
		}
	}
}
