package api_test

import (
	"strings"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
)

// issue returns a customer token of end user as the API issued it.
func (w *world) issue(endUser string, ttl int) wire.CustomerToken {
	w.t.Helper()
	var tok wire.CustomerToken
	w.must(w.do("POST", "/v1/customer-tokens", w.developer, map[string]any{"endUserId": endUser, "ttlSeconds": ttl}), 201).decode(&tok)
	return tok
}

// revokedWith checks a 401 saying the token was revoked.
func revokedWith(t *testing.T, r *response) {
	t.Helper()
	if r.status != 401 {
		t.Fatalf("%s: status %d, want 401; body %s", r.req, r.status, r.body)
	}
	if e := r.apiErr(); e.Code != api.CodeUnauthenticated || !strings.Contains(e.Message, "was revoked") || !strings.Contains(e.Message, "ask the application for a new one") {
		t.Errorf("%s: error %s %q", r.req, e.Code, e.Message)
	}
}

func TestRevokeCustomerToken(t *testing.T) {
	t.Parallel()
	w := setup(t)
	tok, other := w.issue("alice", 3600), w.issue("alice", 3600)
	if !strings.HasPrefix(tok.TokenID, "ctk_") || tok.TokenID == other.TokenID {
		t.Fatalf("token ids %q and %q", tok.TokenID, other.TokenID)
	}
	w.must(w.do("GET", "/v1/runs", tok.Token, nil), 200)

	var rev wire.CustomerTokenRevocation
	resp := w.must(w.do("POST", "/v1/customer-tokens/revoke", w.developer, map[string]any{"token": tok.Token}), 200)
	resp.decode(&rev)
	resp.lacks(nil, "issuedBefore")
	if rev.TokenID != tok.TokenID || rev.EndUserID != "alice" || !rev.ExpiresAt.Equal(tok.ExpiresAt) || !rev.IssuedBefore.IsZero() {
		t.Errorf("revocation %+v, want token %s of alice until %s", rev, tok.TokenID, tok.ExpiresAt)
	}
	r := w.do("GET", "/v1/runs", tok.Token, nil)
	revokedWith(t, r)
	if msg := r.apiErr().Message; !strings.Contains(msg, tok.TokenID) {
		t.Errorf("message %q does not name the token", msg)
	}
	// Its sibling of the same end user still works; so does revoking again.
	w.must(w.do("GET", "/v1/runs", other.Token, nil), 200)
	w.must(w.do("POST", "/v1/customer-tokens/revoke", w.owner, map[string]any{"token": tok.Token}), 200)
	revokedWith(t, w.do("GET", "/v1/runs", tok.Token, nil))
	// After its expiry it reads as expired, as any token.
	w.clock.Advance(time.Hour)
	r = w.must(w.do("GET", "/v1/runs", tok.Token, nil), 401)
	if msg := r.apiErr().Message; !strings.Contains(msg, "expired") {
		t.Errorf("message after expiry %q", msg)
	}
}

func TestRevokeCustomerTokenRefusals(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var foreign wire.CustomerToken
	w.must(w.do("POST", "/v1/customer-tokens", w.other, map[string]any{"endUserId": "alice"}), 201).decode(&foreign)
	mine := w.issue("alice", 600)
	tampered := mine.Token[:len(mine.Token)-2] + "xx"
	for _, c := range []struct {
		name, field, says string
		body              any
	}{
		{"nothing", "token", "is required", map[string]any{}},
		{"both", "endUserId", "cannot be sent with token", map[string]any{"token": mine.Token, "endUserId": "alice"}},
		{"not a token", "token", "is not a customer token of this project", map[string]any{"token": "stc_garbage"}},
		{"an API key", "token", "is not a customer token of this project", map[string]any{"token": w.owner}},
		{"tampered", "token", "is not a customer token of this project", map[string]any{"token": tampered}},
		{"another project's", "token", "is not a customer token of this project", map[string]any{"token": foreign.Token}},
		{"empty end user", "token", "is required", map[string]any{"endUserId": ""}},
		{"end user too long", "endUserId", "", map[string]any{"endUserId": strings.Repeat("a", 300)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := w.must(w.do("POST", "/v1/customer-tokens/revoke", w.developer, c.body), 400)
			e := r.apiErr()
			fields, _ := e.Details["fields"].([]any)
			if e.Code != api.CodeInvalidArgument || len(fields) != 1 || fields[0].(map[string]any)["field"] != c.field || !strings.Contains(e.Message, c.says) {
				t.Errorf("error %s %q %v, want %q naming %s", e.Code, e.Message, fields, c.says, c.field)
			}
		})
	}
	// Refusals changed nothing: every token still works.
	w.must(w.do("GET", "/v1/runs", mine.Token, nil), 200)
	w.must(w.do("GET", "/v1/runs", foreign.Token, nil), 200)
	// Customers cannot revoke, not even their own token.
	w.must(w.do("POST", "/v1/customer-tokens/revoke", mine.Token, map[string]any{"token": mine.Token}), 403)
	w.must(w.do("GET", "/v1/runs", mine.Token, nil), 200)
	// A token that expired already is answered, not recorded.
	w.clock.Advance(11 * time.Minute)
	var rev wire.CustomerTokenRevocation
	w.must(w.do("POST", "/v1/customer-tokens/revoke", w.developer, map[string]any{"token": mine.Token}), 200).decode(&rev)
	if !rev.ExpiresAt.Before(w.clock.Now()) {
		t.Errorf("revocation of an expired token says it expires at %s", rev.ExpiresAt)
	}
}

// legacyToken signs a customer token as Stead signed them before tokens had
// ids: no jti, iat in seconds.
func legacyToken(t *testing.T, key []byte, project, endUser string, iat, exp time.Time) string {
	t.Helper()
	return signCustomerToken(t, key, map[string]any{"v": 1, "prj": project, "sub": endUser, "iat": iat.Unix(), "exp": exp.Unix()})
}

func TestRevokeEndUserTokens(t *testing.T) {
	t.Parallel()
	w := setup(t)
	now := w.clock.Now()
	before := w.issue("alice", 3600)
	legacy := legacyToken(t, w.project.SigningKey, w.project.ID, "alice", now, now.Add(time.Hour))
	legacyBob := legacyToken(t, w.project.SigningKey, w.project.ID, "bob", now, now.Add(time.Hour))
	bob := w.issue("bob", 3600)
	// Tokens without an id keep working.
	w.must(w.do("GET", "/v1/runs", legacy, nil), 200)

	w.clock.Advance(1500 * time.Millisecond)
	var rev wire.CustomerTokenRevocation
	resp := w.must(w.do("POST", "/v1/customer-tokens/revoke", w.owner, map[string]any{"endUserId": "alice"}), 200)
	resp.decode(&rev)
	resp.lacks(nil, "tokenId", "expiresAt")
	if rev.EndUserID != "alice" || !rev.IssuedBefore.Equal(w.clock.Now()) || rev.TokenID != "" {
		t.Errorf("revocation %+v, want alice's tokens issued before %s", rev, w.clock.Now())
	}
	revokedWith(t, w.do("GET", "/v1/runs", before.Token, nil))
	revokedWith(t, w.do("GET", "/v1/runs", legacy, nil))
	revokedWith(t, w.do("GET", "/v1/runs", w.customer, nil)) // alice's, from setup
	// Another end user's tokens are not touched.
	w.must(w.do("GET", "/v1/runs", bob.Token, nil), 200)
	w.must(w.do("GET", "/v1/runs", legacyBob, nil), 200)

	// Tokens issued from the revocation on work, to the millisecond.
	after := w.issue("alice", 3600)
	w.must(w.do("GET", "/v1/runs", after.Token, nil), 200)
	w.clock.Advance(time.Millisecond)
	w.must(w.do("GET", "/v1/runs", w.issue("alice", 60).Token, nil), 200)

	// A token without an id can be revoked on its own too.
	w.must(w.do("POST", "/v1/customer-tokens/revoke", w.owner, map[string]any{"token": legacyBob}), 200)
	revokedWith(t, w.do("GET", "/v1/runs", legacyBob, nil))
	w.must(w.do("GET", "/v1/runs", bob.Token, nil), 200)

	// The revocation outlives every token it covers (24h at most).
	w.clock.Advance(23 * time.Hour)
	w.must(w.do("GET", "/v1/runs", after.Token, nil), 401) // expired
}

// An open event stream ends within the recheck interval after its token is
// revoked.
func TestStreamEndsWhenItsTokenIsRevoked(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.Recheck = 20 * time.Millisecond })
	run := w.awaiting("alice")
	tok := w.issue("alice", 3600)
	s := w.stream("/v1/runs/"+run.ID+"/events", tok.Token)
	if ev, ok := s.next(); !ok || ev.event != "run.created" {
		t.Fatalf("first event %+v (ok %v), want run.created", ev, ok)
	}
	w.must(w.do("POST", "/v1/customer-tokens/revoke", w.developer, map[string]any{"token": tok.Token}), 200)
	s.waitEnd(5*time.Second, "its revoked token")
	revokedWith(t, w.do("GET", "/v1/runs/"+run.ID, tok.Token, nil))
	// The run did not move: the stream ended because of the token.
	var got wire.Run
	w.must(w.do("GET", "/v1/runs/"+run.ID, w.developer, nil), 200).decode(&got)
	if got.Status != "awaiting-approval" {
		t.Errorf("run is %s", got.Status)
	}
}
