package cli

import (
	"strings"
	"testing"
	"time"
)

// TestTokensRevoke: one token, then every token of an end user; the revoked
// tokens are refused, later ones work; usage mistakes exit 2.
func TestTokensRevoke(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	z := newNormalizer()
	run := s.startAwaiting("o-1001")
	tok := strings.TrimSpace(s.mustCLI("token", "demo-user", "--ttl", "30m").stdout)
	sibling := strings.TrimSpace(s.mustCLI("token", "demo-user").stdout)
	as := func(token string) cliEnv { return cliEnv{EnvKey: token} }
	if r := s.run(as(tok), "trace", run.ID); r.code != 0 {
		t.Fatalf("trace with the token before revoking it: %s", r)
	}

	r := s.mustCLI("tokens", "revoke", "--token", tok)
	golden(t, "tokens_revoke", z.replace(r.stdout))
	r = s.run(as(tok), "trace", run.ID)
	if r.code != 1 || !strings.Contains(r.stderr, "was revoked") {
		t.Errorf("trace with a revoked token: %s", r)
	}
	if r := s.run(as(sibling), "trace", run.ID); r.code != 0 {
		t.Errorf("trace with another token of the end user: %s", r)
	}

	s.clock.Advance(time.Second)
	r = s.mustCLI("tokens", "revoke", "--end-user", "demo-user", "--json")
	if got := jsonField(t, r.stdout, "endUserId"); got != "demo-user" {
		t.Errorf("endUserId = %s", got)
	}
	if got := jsonField(t, r.stdout, "issuedBefore"); got != "2026-11-29T12:00:01Z" {
		t.Errorf("issuedBefore = %s", got)
	}
	if r := s.run(as(sibling), "trace", run.ID); r.code != 1 || !strings.Contains(r.stderr, "was revoked") {
		t.Errorf("trace with a token issued before the end user's revocation: %s", r)
	}
	later := strings.TrimSpace(s.mustCLI("token", "demo-user").stdout)
	if r := s.run(as(later), "trace", run.ID); r.code != 0 {
		t.Errorf("trace with a token issued after the end user's revocation: %s", r)
	}
	r = s.mustCLI("tokens", "revoke", "--end-user", "demo-user")
	if want := "revoked every customer token of end user demo-user issued before 2026-11-29 12:00:01Z\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}

	// A token past its expiry needs no revoking, and the answer says so.
	short := strings.TrimSpace(s.mustCLI("token", "demo-user", "--ttl", "1s").stdout)
	s.clock.Advance(2 * time.Second)
	r = s.mustCLI("tokens", "revoke", "--token", short)
	if !strings.Contains(r.stdout, "of end user demo-user had already expired at 2026-11-29 12:00:02Z; nothing to revoke") {
		t.Errorf("revoke an expired token: %s", r)
	}

	for _, args := range [][]string{
		{"tokens", "revoke"},
		{"tokens", "revoke", "--token", tok, "--end-user", "demo-user"},
		{"tokens"},
	} {
		if r := s.cli(args...); r.code != ExitUsage {
			t.Errorf("%v: %s, want exit 2", args, r)
		}
	}
	// The API's refusals exit 1 and say what is wrong; --json prints them.
	r = s.cli("tokens", "revoke", "--token", "stc_garbage", "--json")
	if r.code != 1 || jsonField(t, r.stdout, "error.code") != "invalid_argument" || !strings.Contains(r.stderr, "not a customer token of this project") {
		t.Errorf("revoke a garbage token: %s", r)
	}
}
