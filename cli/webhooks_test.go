package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"stead/notify"
	"stead/notify/notifytest"
	"stead/runtime/egress"
	"stead/store"
)

var (
	webhookIDRe = regexp.MustCompile(`\bwhe_[a-z2-7]+\b`)
	secretRe    = regexp.MustCompile(`\bwhsec_[A-Za-z0-9+/=]+`)
	messageIDRe = regexp.MustCompile(`\bmsg_[a-z2-7]+\b`)
)

// TestWebhooks: add an endpoint (its secret printed once), get an
// approval.requested signed with it, list, show, ping, rotate (two
// signatures), the delivery log, a failed ping retried, a range retried,
// a disabled endpoint enabled again, rm; --json on each.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	rc := notifytest.NewReceiver(t, "/hooks")
	s := newTestStack(t, func(c *StackConfig) { c.Egress = egress.Policy{Allow: egress.Loopback} })
	if r := s.mustCLI("webhooks", "list"); !strings.Contains(r.stdout, "no webhooks") {
		t.Errorf("webhooks list before any: %s", r.stdout)
	}

	r := s.mustCLI("webhooks", "add", rc.URL, "--events", "approval.requested,run.succeeded", "--agent", "refunds", "--include-input")
	id, secret := webhookIDRe.FindString(r.stdout), secretRe.FindString(r.stdout)
	if !strings.HasPrefix(r.stdout, "added webhook "+id+"  "+rc.URL) || secret == "" || !strings.Contains(r.stdout, "only time the secret is shown") ||
		!strings.Contains(r.stdout, "approval.requested, run.succeeded") || !strings.Contains(r.stdout, "sent with approval events") {
		t.Fatalf("webhooks add: %s", r.stdout)
	}

	// The project's events reach it, signed.
	run := s.startAwaiting("o-1001")
	got := rc.Next()
	requested := got.Signed(t, secret)
	var p notify.Payload
	if err := json.Unmarshal(got.Body, &p); err != nil || p.Type != "approval.requested" || p.Data.ApprovalID != run.ApprovalID || p.Data.RunID != run.ID || len(p.Data.Input) == 0 {
		t.Errorf("approval.requested payload %s (%v)", got.Body, err)
	}

	r = s.mustCLI("webhooks", "list")
	for _, want := range []string{"ID", "URL", "EVENTS", "AGENTS", "STATE", id, rc.URL, "approval.requested, run.succeeded", "refunds", "enabled"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("webhooks list lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := s.mustCLI("--json", "webhooks", "list"); jsonField(t, r.stdout, "webhooks.0.id") != id || strings.Contains(r.stdout, "whsec_") {
		t.Errorf("webhooks list --json: %s", r.stdout)
	}
	if r := s.mustCLI("webhooks", "show", id); !strings.HasPrefix(r.stdout, "webhook "+id) || !strings.Contains(r.stdout, "state       enabled") || strings.Contains(r.stdout, "whsec_") {
		t.Errorf("webhooks show: %s", r.stdout)
	}
	if r := s.mustCLI("--json", "webhooks", "show", id); jsonField(t, r.stdout, "state") != "enabled" || jsonField(t, r.stdout, "includeInput") != "true" {
		t.Errorf("webhooks show --json: %s", r.stdout)
	}

	// Ping: the status and latency; the receiver gets it signed.
	r = s.mustCLI("webhooks", "ping", id)
	pinged := rc.Next().Signed(t, secret)
	if !strings.HasPrefix(r.stdout, "ping "+id+": 200 OK in ") || !strings.Contains(r.stdout, "(webhook-id "+pinged+")") {
		t.Errorf("webhooks ping: %s", r.stdout)
	}
	if r := s.mustCLI("--json", "webhooks", "ping", id); jsonField(t, r.stdout, "status") != "delivered" || jsonField(t, r.stdout, "attempts.0.status") != "200" {
		t.Errorf("webhooks ping --json: %s", r.stdout)
	}
	rc.Next()

	// Rotate: the new secret once; both sign for a day.
	r = s.mustCLI("webhooks", "rotate", id)
	secret1 := secretRe.FindString(r.stdout)
	if !strings.HasPrefix(r.stdout, "rotated the secret of webhook "+id) || secret1 == "" || secret1 == secret ||
		!strings.Contains(r.stdout, "The old secret keeps signing beside it until 2026-11-30 12:00:00Z (24h)") {
		t.Errorf("webhooks rotate: %s", r.stdout)
	}
	s.mustCLI("webhooks", "ping", id)
	rc.Next().Signed(t, secret1, secret)
	if r := s.mustCLI("webhooks", "show", id); !strings.Contains(r.stdout, "old secret  signs beside the current one until 2026-11-30 12:00:00Z") {
		t.Errorf("webhooks show after rotate: %s", r.stdout)
	}

	// A failed ping says why and exits 1; a retry sends it again, under
	// the same webhook-id.
	rc.Status.Store(http.StatusInternalServerError)
	r = s.cli("webhooks", "ping", id)
	failed := messageIDRe.FindString(r.stderr)
	if r.code != 1 || !strings.Contains(r.stderr, "ping of webhook "+id+" failed: 500 Internal Server Error in ") || !strings.Contains(r.stderr, "receiver says 500") || failed == "" {
		t.Errorf("a failed ping: %s", r)
	}
	rc.Next()
	if r := s.cli("--json", "webhooks", "ping", id); r.code != 1 || jsonField(t, r.stdout, "status") != "failed" {
		t.Errorf("a failed ping --json: %s", r)
	}
	rc.Next()
	rc.Status.Store(http.StatusOK)
	r = s.mustCLI("webhooks", "retry", id, "--delivery", failed)
	if !strings.HasPrefix(r.stdout, "retrying 1 delivery of webhook "+id+" now") {
		t.Errorf("webhooks retry --delivery: %s", r.stdout)
	}
	if again := rc.Next().Signed(t, secret1, secret); again != failed {
		t.Errorf("the retry came as %s, want %s", again, failed)
	}
	// Its result is recorded before the range below retries it again: the
	// clock moved past its lease, so a retry would not wait for that send.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d, err := s.stack.Store.GetDelivery(context.Background(), s.project, failed)
		if err == nil && d.Status == store.DeliveryDelivered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retried delivery %s is not recorded delivered: %+v (%v)", failed, d, err)
		}
	}

	// The log: newest first, each with its type, status, tries and last
	// attempt.
	r = s.mustCLI("webhooks", "deliveries", id)
	for _, want := range []string{"ID", "TIME", "TYPE", "STATUS", "TRIES", "LAST ATTEMPT", requested, pinged, "approval.requested", "webhook.ping", "2026-11-29 12:00:00Z", "delivered", "failed", "500 Internal Server Error in"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("webhooks deliveries lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := s.mustCLI("--json", "webhooks", "deliveries", id, "--limit", "2"); jsonField(t, r.stdout, "nextCursor") == "" || len(jsonValue(t, r.stdout, "deliveries").([]any)) != 2 {
		t.Errorf("webhooks deliveries --json --limit 2: %s", r.stdout)
	}

	// A range: every delivery made in the last hour (all six so far).
	s.clock.Advance(time.Minute)
	r = s.mustCLI("webhooks", "retry", id, "--since", "1h")
	if !strings.HasPrefix(r.stdout, "retrying 6 deliveries of webhook "+id) {
		t.Errorf("webhooks retry --since 1h: %s", r.stdout)
	}
	ids := map[string]bool{}
	for range 6 {
		ids[rc.Next().Signed(t, secret1, secret)] = true
	}
	if len(ids) != 6 || !ids[requested] || !ids[pinged] || !ids[failed] {
		t.Errorf("the range retried %v", ids)
	}
	if r := s.mustCLI("--json", "webhooks", "retry", id, "--since", "2026-11-29T11:00:00Z", "--until", "2026-11-29T11:30:00Z"); jsonField(t, r.stdout, "retried") != "0" {
		t.Errorf("webhooks retry of an empty range: %s", r.stdout)
	}

	// Disabled (as a 410 does): retry refuses, enable undoes it.
	ctx := context.Background()
	for {
		ep, err := s.stack.Store.GetEndpoint(ctx, s.project, id)
		if err != nil {
			t.Fatal(err)
		}
		ep.DisabledAt, ep.DisabledReason = s.clock.Now(), "it answered 410 Gone"
		if _, err := s.stack.Store.UpdateEndpoint(ctx, ep); err == nil {
			break
		}
	}
	if r := s.mustCLI("webhooks", "show", id); !strings.Contains(r.stdout, "disabled 2026-11-29 12:01:00Z (0s ago): it answered 410 Gone; enable it again with stead webhooks enable "+id) {
		t.Errorf("webhooks show of a disabled endpoint: %s", r.stdout)
	}
	if r := s.mustCLI("webhooks", "list"); !strings.Contains(r.stdout, "disabled 0s ago") {
		t.Errorf("webhooks list of a disabled endpoint: %s", r.stdout)
	}
	if r := s.cli("webhooks", "retry", id, "--delivery", failed); r.code != 1 || !strings.Contains(r.stderr, "is disabled (it answered 410 Gone") {
		t.Errorf("webhooks retry of a disabled endpoint: %s", r)
	}
	if r := s.mustCLI("webhooks", "enable", id); !strings.HasPrefix(r.stdout, "enabled webhook "+id) || !strings.Contains(r.stdout, "state       enabled") {
		t.Errorf("webhooks enable: %s", r.stdout)
	}
	if r := s.mustCLI("--json", "webhooks", "enable", id); jsonField(t, r.stdout, "state") != "enabled" {
		t.Errorf("webhooks enable --json: %s", r.stdout)
	}

	// Remove it; --json add prints the endpoint with its secret.
	if r := s.mustCLI("webhooks", "rm", id); !strings.HasPrefix(r.stdout, "removed webhook "+id) || !strings.Contains(r.stdout, "delivery log is deleted") {
		t.Errorf("webhooks rm: %s", r.stdout)
	}
	if r := s.mustCLI("webhooks", "list"); strings.Contains(r.stdout, id) {
		t.Errorf("webhooks list after rm: %s", r.stdout)
	}
	r = s.mustCLI("--json", "webhooks", "add", rc.URL)
	if !strings.HasPrefix(jsonField(t, r.stdout, "secret"), "whsec_") || !strings.HasPrefix(jsonField(t, r.stdout, "id"), "whe_") {
		t.Errorf("webhooks add --json: %s", r.stdout)
	}
	if r := s.mustCLI("--json", "webhooks", "rm", jsonField(t, r.stdout, "id")); strings.Contains(r.stdout, "whsec_") {
		t.Errorf("webhooks rm --json shows the secret: %s", r.stdout)
	}
}

// TestWebhookMistakes: usage mistakes exit 2 before any request; the
// API's refusals exit 1 naming the field.
func TestWebhookMistakes(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	for _, args := range [][]string{
		{"webhooks"},
		{"webhooks", "add"},
		{"webhooks", "add", "https://hooks.example.com/", "--events", "approval.maybe"},
		{"webhooks", "retry", "whe_x"},
		{"webhooks", "retry", "whe_x", "--delivery", "msg_x", "--since", "1h"},
		{"webhooks", "retry", "whe_x", "--until", "1h"},
		{"webhooks", "retry", "whe_x", "--since", "yesterday"},
		{"webhooks", "deliveries", "whe_x", "--limit", "0"},
	} {
		if r := s.cli(args...); r.code != 2 {
			t.Errorf("stead %s: %s", strings.Join(args, " "), r)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"webhooks", "retry", "whe_x", "--delivery", "msg_x", "--until", "1h"}, "retry takes --delivery, or --since (and --until), not both"},
		{[]string{"webhooks", "retry", "whe_x", "--until", "1h"}, "--until needs --since: the range is from --since to --until"},
		{[]string{"webhooks", "retry", "whe_x", "--since", "-1h"}, `--since "-1h" is neither an RFC 3339 time (2026-11-29T12:00:00Z) nor a duration ago (2h)`},
	} {
		if r := s.cli(c.args...); r.code != 2 || !strings.HasPrefix(r.stderr, "error: "+c.want+"\n") {
			t.Errorf("stead %s: want exit 2 and %q: %s", strings.Join(c.args, " "), c.want, r)
		}
	}
	if r := s.cli("webhooks", "add", "hooks.example.com/x"); r.code != 1 || !strings.Contains(r.stderr, "url: must be an absolute http or https URL") {
		t.Errorf("a relative URL: %s", r)
	}
	if r := s.cli("webhooks", "show", "whe_nope"); r.code != 1 || !strings.Contains(r.stderr, "webhook whe_nope not found") {
		t.Errorf("an unknown webhook: %s", r)
	}
	// The default egress policy (public addresses only) refuses a loopback
	// receiver: the ping says so.
	r := s.mustCLI("webhooks", "add", "http://127.0.0.1:9/hooks")
	if r := s.cli("webhooks", "ping", webhookIDRe.FindString(r.stdout)); r.code != 1 || !strings.Contains(r.stderr, "no response: ") || !strings.Contains(r.stderr, "is refused: it is a loopback address") {
		t.Errorf("a ping the egress policy refuses: %s", r)
	}
}
