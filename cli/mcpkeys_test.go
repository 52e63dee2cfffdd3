package cli

import (
	"strings"
	"testing"
)

// TestMCPKeysCLI: create prints the key once with a warning, list never
// shows it, revoke ends it; usage mistakes exit 2, an agent not deployed
// exits 1 naming agent.
func TestMCPKeysCLI(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	r := s.mustCLI("mcp-keys", "create", "--agent", "refunds", "--end-user", "demo-user", "--name", "claude-desktop")
	if !strings.Contains(r.stdout, "agent refunds and end user demo-user (claude-desktop)") || !strings.Contains(r.stdout, "only time the key is shown") ||
		!strings.Contains(r.stdout, "MCP endpoint (Streamable HTTP): "+s.srv.URL+"/mcp") {
		t.Fatalf("create: %s", r)
	}
	var secret string
	for _, f := range strings.Fields(r.stdout) {
		if strings.HasPrefix(f, "stm_") {
			secret = f
		}
	}
	if len(secret) != len("stm_")+52 {
		t.Fatalf("no key in %q", r.stdout)
	}

	r = s.mustCLI("mcp-keys", "create", "--agent", "refunds", "--end-user", "other-user", "--json")
	id := jsonField(t, r.stdout, "id")
	if !strings.HasPrefix(id, "mck_") || !strings.HasPrefix(jsonField(t, r.stdout, "key"), "stm_") || jsonField(t, r.stdout, "endUserId") != "other-user" {
		t.Fatalf("create --json: %s", r.stdout)
	}

	r = s.mustCLI("mcp-keys", "list")
	if strings.Contains(r.stdout, secret) || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "claude-desktop") || !strings.Contains(r.stdout, secret[:12]+"…") {
		t.Errorf("list: %s", r.stdout)
	}

	r = s.mustCLI("mcp-keys", "revoke", id)
	if !strings.HasPrefix(r.stdout, "revoked MCP key "+id+" (agent refunds, end user other-user,") {
		t.Errorf("revoke: %s", r.stdout)
	}
	r = s.mustCLI("mcp-keys", "list", "--json")
	if !strings.Contains(r.stdout, `"revokedAt"`) {
		t.Errorf("list --json after revoke: %s", r.stdout)
	}

	if r := s.cli("mcp-keys", "create", "--agent", "nope", "--end-user", "demo-user"); r.code != 1 || !strings.Contains(r.stderr, "agent") || !strings.Contains(r.stderr, "nope") {
		t.Errorf("create for an agent not deployed: %s", r)
	}
	if r := s.cli("mcp-keys", "revoke", "mck_missing"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("revoke a missing key: %s", r)
	}
	for _, args := range [][]string{
		{"mcp-keys"},
		{"mcp-keys", "create", "--agent", "refunds"},
		{"mcp-keys", "create", "--end-user", "demo-user"},
		{"mcp-keys", "revoke"},
	} {
		if r := s.cli(args...); r.code != ExitUsage {
			t.Errorf("%v: %s, want exit 2", args, r)
		}
	}
}
