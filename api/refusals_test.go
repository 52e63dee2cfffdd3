package api_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
	"stead/approvals"
	"stead/store"
)

// Refusals and bounds the rest of the suite did not pin: each test fails
// with a mutant of the API that hand-made mutation testing found surviving.

// signCustomerToken signs claims as a customer token of the key.
func signCustomerToken(t *testing.T, key []byte, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	payload := base64.RawURLEncoding.EncodeToString(b)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("stead/customer-token\x00"))
	m.Write([]byte(payload))
	return api.CustomerTokenPrefix + payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// wantUnauthenticated checks a 401 unauthenticated whose message says says.
func wantUnauthenticated(t *testing.T, r *response, says string) {
	t.Helper()
	if r.status != http.StatusUnauthorized {
		t.Fatalf("%s: status %d, want 401; body %s", r.req, r.status, r.body)
	}
	if e := r.apiErr(); e.Code != api.CodeUnauthenticated || !strings.Contains(e.Message, says) {
		t.Errorf("%s: error %s %q, want unauthenticated saying %q", r.req, e.Code, e.Message, says)
	}
}

// serveDirect sends a request straight to the handler, as the Lambda adapter
// does (no HTTP server trims its headers), from remote.
func (w *world) serveDirect(method, path, remote, authorization string) *response {
	w.t.Helper()
	req := httptest.NewRequest(method, path, nil)
	req.RemoteAddr = remote
	if authorization != "" {
		req.Header["Authorization"] = []string{authorization}
	}
	rec := httptest.NewRecorder()
	w.api.ServeHTTP(rec, req)
	checkExchange(w.t, exchange{req: req, status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()})
	return &response{t: w.t, req: method + " " + path + " from " + remote, status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// A customer token signed with the project's key is still refused when its
// claims are not a version 1 token's for one end user.
func TestCustomerTokenClaimsMustBeWhole(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	now := w.clock.Now()
	claims := func(v int, endUser string) map[string]any {
		return map[string]any{"v": v, "prj": w.project.ID, "sub": endUser, "jti": "ctk_test", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	}
	// The same claims as version 1 are good: the refusals below are for
	// the field each changes.
	w.must(w.do("GET", "/v1/runs/"+run.ID, signCustomerToken(t, w.project.SigningKey, claims(1, "alice")), nil), 200)
	for _, c := range []struct {
		name   string
		claims map[string]any
	}{
		{"version 2", claims(2, "alice")},
		{"version 0", claims(0, "alice")},
		{"no end user", claims(1, "")},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := signCustomerToken(t, w.project.SigningKey, c.claims)
			wantUnauthenticated(t, w.do("GET", "/v1/runs", tok, nil), "the customer token is not valid")
			wantUnauthenticated(t, w.do("GET", "/v1/runs/"+run.ID, tok, nil), "the customer token is not valid")
		})
	}
}

// A customer token of a project that does not exist is a 401, like any
// other token that is not one of Stead's, not a 500.
func TestCustomerTokenOfNoProject(t *testing.T) {
	t.Parallel()
	w := setup(t)
	now := w.clock.Now()
	tok := signCustomerToken(t, w.project.SigningKey, map[string]any{"v": 1, "prj": "prj_nope", "sub": "alice", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	wantUnauthenticated(t, w.do("GET", "/v1/runs", tok, nil), "the customer token is not valid")
}

// An API key whose stored role is not a key's (owner, developer, approver,
// viewer) authenticates as nothing: not as a customer of every end user.
func TestKeyWithoutAKeyRole(t *testing.T) {
	t.Parallel()
	w := setup(t)
	w.awaiting("alice")
	for _, role := range []approvals.Role{approvals.RoleCustomer, approvals.RoleRun, approvals.RoleMCP, "admin"} {
		t.Run(string(role), func(t *testing.T) {
			secret := api.KeyPrefix + strings.Repeat("a", 44) + strings.Repeat(string(role[0]), 8)
			sum := sha256.Sum256([]byte(secret))
			k := store.APIKey{
				ID: "key_" + strings.Repeat(string(role[0]), 16), ProjectID: w.project.ID, Name: "odd", Role: role,
				Hash: hex.EncodeToString(sum[:]), Prefix: secret[:12], CreatedAt: w.clock.Now(),
			}
			if err := w.store.CreateAPIKey(t.Context(), k); err != nil {
				t.Fatal(err)
			}
			wantUnauthenticated(t, w.do("GET", "/v1/runs", secret, nil), "has no usable role")
			wantUnauthenticated(t, w.do("GET", "/v1/me", secret, nil), "has no usable role")
		})
	}
}

// Only a GET may carry its customer token as access_token (EventSource
// cannot set headers); on any other method the query parameter is no
// credential.
func TestAccessTokenOnlyOnGET(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	for _, path := range []string{
		"/v1/runs/" + run.ID + "/cancel?access_token=" + w.customer,
		"/v1/approvals/" + run.Approval.ID + "/approve?access_token=" + w.customer,
	} {
		wantUnauthenticated(t, w.do("POST", path, "", map[string]any{}), "missing credential")
	}
	// The run still awaits approval.
	if got := w.wait(run.ID, "settled"); got.Status != "awaiting-approval" {
		t.Errorf("run %s is %s after refused requests, want awaiting-approval", run.ID, got.Status)
	}
}

// A refusal of a valid credential (403) is no failed authentication: it
// does not count toward the limits, which hold off guessing, not use.
func TestForbiddenDoesNotCountAsFailedAuth(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.AuthLimit = api.AuthLimit{PerAddress: 2, PerKey: 2, Window: time.Minute} })
	viewer := w.newKey("viewer").Key
	const from = "203.0.113.9:1"
	for range 5 {
		w.must(w.serveDirect("GET", "/v1/keys", from, "Bearer "+viewer), 403)
		w.must(w.serveDirect("GET", "/v1/keys", from, "Bearer "+w.customer), 403)
	}
	w.must(w.serveDirect("GET", "/v1/members", from, "Bearer "+viewer), 200)
	w.must(w.serveDirect("GET", "/v1/runs", from, "Bearer "+w.customer), 200)
	w.must(w.serveDirect("GET", "/v1/runs", from, "Bearer "+w.owner), 200)
}

// An Authorization header that is no bearer credential is refused as
// malformed, and, like a request without a credential, does not count
// toward the limits.
func TestMalformedAuthorization(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.AuthLimit = api.AuthLimit{PerAddress: 2, Window: time.Minute} })
	const from = "203.0.113.10:1"
	for range 3 {
		for _, h := range []string{"Bearer ", "Bearer \t ", "Basic " + w.owner, "bearer"} {
			wantUnauthenticated(t, w.serveDirect("GET", "/v1/runs", from, h), `the Authorization header must be "Bearer <API key or token>"`)
		}
	}
	w.must(w.serveDirect("GET", "/v1/runs", from, "Bearer "+w.owner), 200)
}

// ttlSeconds is from 1 to 86400: both ends are taken, and nothing past
// them; a refused request issues no token.
func TestCustomerTokenTTLBounds(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, ttl := range []int64{1, 86400} {
		var tok wire.CustomerToken
		w.must(w.do("POST", "/v1/customer-tokens", w.developer, map[string]any{"endUserId": "alice", "ttlSeconds": ttl}), 201).decode(&tok)
		if want := w.clock.Now().Add(time.Duration(ttl) * time.Second); !tok.ExpiresAt.Equal(want) {
			t.Errorf("ttlSeconds %d: expires at %s, want %s", ttl, tok.ExpiresAt, want)
		}
	}
	for _, ttl := range []int64{0, -1, 86401} {
		refused(t, w.do("POST", "/v1/customer-tokens", w.developer, map[string]any{"endUserId": "alice", "ttlSeconds": ttl}), "ttlSeconds", "must be from 1 to 86400 (24h)")
	}
}

// A key for a removed member is refused as a bad field (400 naming
// member), as for a member who never was, and makes no key.
func TestKeyForARemovedMember(t *testing.T) {
	t.Parallel()
	w := setup(t)
	gone := w.newMember("Ex Member")
	w.must(w.do("DELETE", "/v1/members/"+gone, w.owner, nil), 200)
	before := w.snapshot()
	refused(t, w.do("POST", "/v1/keys", w.owner, map[string]any{"member": gone}), "member", "no member "+gone+" in this project")
	if after := w.snapshot(); after != before {
		t.Errorf("a refused key changed state:\nbefore %s\nafter  %s", before, after)
	}
}

// Failures count in fixed windows: a window ends Window after its first
// failure, exactly, and the failures in it are forgotten with it.
func TestFailuresCountInWindows(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.AuthLimit = api.AuthLimit{PerAddress: 3, PerKey: -1, Window: time.Minute} })
	const from = "203.0.113.11:1"
	fail := func(i int) { w.must(w.from(from, unknownKey(i)), 401) }
	fail(0)
	w.clock.Advance(30 * time.Second)
	fail(1)
	w.clock.Advance(30 * time.Second) // the window of failure 0 ends now
	fail(2)
	fail(3)
	w.must(w.from(from, w.owner), 200)
	fail(4) // the third in this window
	limited(t, w.from(from, w.owner), "60")
}

// Revoking a key that is not the project's is a 404 that changes nothing:
// another project's key keeps working.
func TestRevokeUnknownKey(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var other wire.KeyList
	w.must(w.do("GET", "/v1/keys", w.other, nil), 200).decode(&other)
	before := w.snapshot()
	for _, id := range []string{"key_nope", other.Keys[0].ID} {
		r := w.must(w.do("DELETE", "/v1/keys/"+id, w.owner, nil), 404)
		if e := r.apiErr(); e.Code != api.CodeNotFound || e.Message != "API key "+id+" not found" {
			t.Errorf("DELETE /v1/keys/%s: %s %q", id, e.Code, e.Message)
		}
	}
	if after := w.snapshot(); after != before {
		t.Errorf("a refused revocation changed state:\nbefore %s\nafter  %s", before, after)
	}
	w.must(w.do("GET", "/v1/keys", w.other, nil), 200)
}

// A negative window, bound or size in the configuration is an error, not
// a limiter that never forgets or a body limit that refuses everything.
func TestConfigRefusesNegatives(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, l := range []api.AuthLimit{{Window: -time.Second}, {MaxTracked: -1}} {
		_, err := api.New(api.Config{Engine: w.eng, Store: w.store, AuthLimit: l})
		if err == nil || err.Error() != "api config: AuthLimit.Window and MaxTracked must not be negative" {
			t.Errorf("AuthLimit %+v: error %v", l, err)
		}
	}
	for _, c := range []api.Config{{MaxBody: -1}, {MaxBundle: -1}, {Heartbeat: -1}, {Recheck: -1}, {MCPWait: -1}} {
		c.Engine, c.Store = w.eng, w.store
		_, err := api.New(c)
		if err == nil || err.Error() != "api config: MaxBody, MaxBundle, Heartbeat, Recheck and MCPWait must not be negative" {
			t.Errorf("config %+v: error %v", c, err)
		}
	}
}

// The zero AuthLimit limits at the documented defaults: the failure that
// reaches DefaultAuthFailuresPerKey (one key prefix, any address) or
// DefaultAuthFailuresPerAddress (one address, any key) refuses, not one
// before it.
func TestAuthLimitDefaults(t *testing.T) {
	t.Parallel()
	w := setup(t)
	addr := func(i int) string { return fmt.Sprintf("192.0.2.%d:1", i+1) }
	for i := range api.DefaultAuthFailuresPerKey - 1 {
		w.must(w.from(addr(i), w.revoked), 401)
	}
	w.must(w.from(addr(100), w.revoked), 401)
	limited(t, w.from(addr(101), w.revoked), "60")

	const from = "198.51.100.7:1"
	for i := range api.DefaultAuthFailuresPerAddress - 1 {
		w.must(w.from(from, unknownKey(i)), 401)
	}
	w.must(w.from(from, w.owner), 200)
	w.must(w.from(from, unknownKey(1000)), 401)
	limited(t, w.from(from, w.owner), "60")
}

// A member's keys are shown to who manages keys (an owner), never to
// other roles reading members.
func TestMemberKeysOnlyToOwners(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var ana wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana Diaz", "email": "ana@example.com", "role": "approver", "key": true}), 201).decode(&ana)
	var got wire.Member
	w.must(w.do("GET", "/v1/members/"+ana.ID, w.owner, nil), 200).decode(&got)
	if len(got.Keys) != 1 || got.Keys[0].ID != ana.Key.ID || got.Keys[0].Key != "" {
		t.Errorf("the owner reads Ana's keys as %+v, want her one key without its secret", got.Keys)
	}
	for _, cred := range []string{w.developer, ana.Key.Key, w.newKey("viewer").Key} {
		got = wire.Member{}
		w.must(w.do("GET", "/v1/members/"+ana.ID, cred, nil), 200).decode(&got)
		if got.Keys != nil || got.Email != "" || got.Name != "Ana Diaz" {
			t.Errorf("a %s reads Ana as %+v, want her name without keys or email", got.Role, got)
		}
	}
}

// An email is at most 254 characters (RFC 5321's bound on a path).
func TestMemberEmailLength(t *testing.T) {
	t.Parallel()
	w := setup(t)
	email := func(n int) string { return strings.Repeat("a", n-len("@example.com")) + "@example.com" }
	before := w.snapshot()
	for _, bad := range []string{email(255), "ana.example.com"} {
		refused(t, w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Long", "role": "viewer", "email": bad}), "email", "must be an email address")
	}
	if after := w.snapshot(); after != before {
		t.Errorf("a refused member changed state:\nbefore %s\nafter  %s", before, after)
	}
	var m wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Long", "role": "viewer", "email": email(254)}), 201).decode(&m)
	if m.Email != email(254) {
		t.Errorf("email %q, want %q", m.Email, email(254))
	}
}

// Chat links: at most 10 per member; a Slack user linked to one member
// cannot be linked to a new one either (409, and no member is made); a
// member's own links do not stand in the way of changing them.
func TestMemberChatLinks(t *testing.T) {
	t.Parallel()
	w := setup(t)
	slackID := func(team, user string) map[string]string {
		return map[string]string{"kind": "slack", "team": team, "user": user}
	}
	many := func(n int) []map[string]string {
		var out []map[string]string
		for i := range n {
			out = append(out, slackID(fmt.Sprintf("T0%02d", i), "U0ANA"))
		}
		return out
	}
	ana := w.newMember("Ana Diaz")
	refused(t, w.do("PATCH", "/v1/members/"+ana, w.owner, map[string]any{"chat": many(11)}), "chat", "links at most 10 chat accounts (got 11)")
	var m wire.Member
	w.must(w.do("PATCH", "/v1/members/"+ana, w.owner, map[string]any{"chat": many(10)}), 200).decode(&m)
	if len(m.Chat) != 10 {
		t.Fatalf("linked %d chat accounts, want 10", len(m.Chat))
	}
	// Ana keeps her links and adds none: not taken by herself.
	w.must(w.do("PATCH", "/v1/members/"+ana, w.owner, map[string]any{"chat": many(2)}), 200).decode(&m)
	if len(m.Chat) != 2 {
		t.Errorf("relinked %d chat accounts, want 2", len(m.Chat))
	}

	before := w.snapshot()
	r := w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Bo Li", "role": "approver", "chat": many(1)}), 409)
	if e := r.apiErr(); e.Code != api.CodeConflict || !strings.Contains(e.Message, "already linked to member Ana Diaz ("+ana+")") {
		t.Errorf("a new member with Ana's Slack user: %s %q", e.Code, e.Message)
	}
	if after := w.snapshot(); after != before {
		t.Errorf("a refused member changed state:\nbefore %s\nafter  %s", before, after)
	}
}

// ?removed= is true or false; anything else is a 400 naming it, not a
// list read some other way.
func TestMembersRemovedParam(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, v := range []string{"yes", "1", "TRUE"} {
		refused(t, w.do("GET", "/v1/members?removed="+v, w.owner, nil), "removed", fmt.Sprintf("must be true or false (got %q)", v))
	}
}

// Disabling a disabled endpoint keeps when and why it was first disabled.
func TestWebhookDisabledTwice(t *testing.T) {
	t.Parallel()
	w := setup(t)
	h := w.newWebhook("https://hooks.example.com/stead")
	// An empty PATCH changes nothing, not even when it was updated.
	w.clock.Advance(time.Minute)
	var same wire.Webhook
	w.must(w.do("PATCH", "/v1/webhooks/"+h.ID, w.owner, map[string]any{}), 200).decode(&same)
	if !same.UpdatedAt.Equal(h.UpdatedAt) || !w.getWebhook(h.ID).UpdatedAt.Equal(h.UpdatedAt) {
		t.Errorf("an empty PATCH moved updatedAt from %s to %s", h.UpdatedAt, same.UpdatedAt)
	}
	var first, again wire.Webhook
	w.must(w.do("PATCH", "/v1/webhooks/"+h.ID, w.owner, map[string]any{"enabled": false}), 200).decode(&first)
	w.clock.Advance(time.Hour)
	w.must(w.do("PATCH", "/v1/webhooks/"+h.ID, w.developer, map[string]any{"enabled": false}), 403)
	w.must(w.do("PATCH", "/v1/webhooks/"+h.ID, w.owner, map[string]any{"enabled": false}), 200).decode(&again)
	if again.State != api.WebhookDisabled || !again.DisabledAt.Equal(first.DisabledAt) || again.DisabledReason != first.DisabledReason {
		t.Errorf("disabled again: %+v, want disabled at %s as %q", again, first.DisabledAt, first.DisabledReason)
	}
}

// A retry range may be one instant: since equal to until is a range, only
// until before since is refused.
func TestWebhookRetryInstant(t *testing.T) {
	t.Parallel()
	w := setup(t)
	h := w.newWebhook("https://hooks.example.com/stead")
	at := w.clock.Now().Format(time.RFC3339)
	var retried wire.WebhookRetry
	w.must(w.do("POST", "/v1/webhooks/"+h.ID+"/retry", w.owner, map[string]any{"since": at, "until": at}), 200).decode(&retried)
	if retried.Retried != 0 {
		t.Errorf("retried %d of an endpoint without deliveries", retried.Retried)
	}
	before := w.clock.Now().Add(-time.Second).Format(time.RFC3339)
	refused(t, w.do("POST", "/v1/webhooks/"+h.ID+"/retry", w.owner, map[string]any{"since": at, "until": before}), "until", "must not be before since")
	// One delivery, or a range: until alone does not make a range.
	refused(t, w.do("POST", "/v1/webhooks/"+h.ID+"/retry", w.owner, map[string]any{"deliveryId": "msg_x", "until": at}), "deliveryId", "not both")
}

// forgetRecorder is a notifier that records which projects it was told to
// forget.
type forgetRecorder struct {
	mu     sync.Mutex
	forgot []string
}

func (n *forgetRecorder) Ping(context.Context, store.Endpoint, string) (store.Delivery, error) {
	return store.Delivery{}, errors.New("not in this test")
}
func (n *forgetRecorder) Kick() {}
func (n *forgetRecorder) Forget(projectID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.forgot = append(n.forgot, projectID)
}

func (n *forgetRecorder) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.forgot)
}

// Every change of a project's endpoints tells the notifier, whatever it
// caches: create, PATCH, rotate and delete.
func TestWebhookChangesReachTheNotifier(t *testing.T) {
	t.Parallel()
	n := &forgetRecorder{}
	w := setup(t, func(c *api.Config) { c.Notifications = n })
	h := w.newWebhook("https://hooks.example.com/stead")
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"PATCH", "/v1/webhooks/" + h.ID, map[string]any{"includeInput": true}},
		{"POST", "/v1/webhooks/" + h.ID + "/rotate", nil},
		{"DELETE", "/v1/webhooks/" + h.ID, nil},
	} {
		before := n.count()
		w.must(w.do(c.method, c.path, w.owner, c.body), 200)
		if n.count() != before+1 {
			t.Errorf("%s %s told the notifier %d times, want once", c.method, c.path, n.count()-before)
		}
	}
	for _, p := range n.forgot {
		if p != w.project.ID {
			t.Errorf("the notifier was told to forget project %s, want %s", p, w.project.ID)
		}
	}
}

// An MCP key whose agent a later deployment dropped gets a 404 that says
// so, not an internal error.
func TestMCPKeyOfAnUndeployedAgent(t *testing.T) {
	t.Parallel()
	w := setup(t)
	k := w.newMCPKey("refunds", "alice")
	plainOnly := `{"agents": {"plain": {"tools": {"addNote": {"effect": "write"}}, "steps": [{"id": "note", "tool": "addNote", "input": {"text": "hello"}}]}}}`
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(plainOnly)}), 201)
	req := w.request("POST", "/mcp", k.Key, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, "Accept", "application/json, text/event-stream")
	r := w.must(w.send(req), 404)
	if e := r.apiErr(); e.Code != api.CodeNotFound || !strings.Contains(e.Message, `agent "refunds" of this MCP key is not in the latest deployment`) {
		t.Errorf("error %s %q", e.Code, e.Message)
	}
}

// stead_call_result needs a callId: an empty one is a tool error saying
// so, not a search for a call without an id.
func TestMCPCallResultNeedsACallID(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cs := w.mcpClient(w.newMCPKey("refunds", "alice").Key, false)
	res := callTool(t, cs, "stead_call_result", map[string]any{"callId": ""})
	if !res.IsError || !strings.HasPrefix(text(res), "callId is required") {
		t.Errorf("stead_call_result with an empty callId: isError %v, %q", res.IsError, text(res))
	}
}

// Every answer carries the security headers, and the request's log line
// names the authenticated caller.
func TestSecurityHeadersAndActorLogged(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var k wire.KeyList
	// Straight to the handler: its log line is written when it returns.
	r := w.must(w.serveDirect("GET", "/v1/keys", "192.0.2.1:1", "Bearer "+w.owner), 200)
	r.decode(&k)
	for name, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	// CORS headers answer a request from a page (with Origin) only.
	if got := r.header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("Access-Control-Allow-Origin %q on a request without Origin", got)
	}
	cors := w.must(w.do("GET", "/v1/keys", w.owner, nil, "Origin", "https://app.example.com"), 200)
	if got := cors.header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Errorf("Access-Control-Allow-Origin %q on a request with Origin, want *", got)
	}
	id := r.header.Get("X-Request-Id")
	var owner string
	for _, key := range k.Keys {
		if key.Role == "owner" {
			owner = key.ID
		}
	}
	for _, line := range strings.Split(w.logs.String(), "\n") {
		if strings.Contains(line, "request="+id) {
			if !strings.Contains(line, "actor="+owner) {
				t.Errorf("the log line of %s does not name the actor %s: %s", id, owner, line)
			}
			return
		}
	}
	t.Errorf("no log line for request %s", id)
}
