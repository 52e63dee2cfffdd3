package cli

import (
	"strings"
	"testing"

	"stead/runtime/egress"
	"stead/runtime/mcptool/mcptooltest"
)

// TestDeployPinsMCPTools: stead deploy lists the pins of a deployment's
// MCP-backed tools (server-everything's get-sum, pinned on loopback), new
// the first time and unchanged after; --json carries them; a tool step
// calls it like a handler.
func TestDeployPinsMCPTools(t *testing.T) {
	t.Parallel()
	url := mcptooltest.StartEverything(t)
	s := newTestStack(t, func(c *StackConfig) { c.Egress = egress.Policy{Allow: egress.Loopback} })
	dir := writeExample(t, func(cfg string) string {
		cfg = strings.Replace(cfg, `"agents": {`, `"mcpServers": { "everything": { "url": "`+url+`" } },
  "agents": {
    "adder": {
      "tools": { "sum": { "mcp": "everything", "name": "get-sum", "effect": "read" } },
      "steps": [ { "id": "sum", "tool": "sum", "input": { "a": 2, "b": 3 } } ]
    },`, 1)
		return cfg
	})
	r := s.mustCLI("deploy", dir)
	if !strings.Contains(r.stdout, "  mcp     everything/get-sum pinned sha256:") || !strings.Contains(r.stdout, "(new)") {
		t.Fatalf("deploy: %s", r)
	}
	r = s.mustCLI("deploy", dir)
	if !strings.Contains(r.stdout, "everything/get-sum pinned sha256:") || !strings.Contains(r.stdout, "(unchanged)") {
		t.Errorf("deploy again: %s", r)
	}
	r = s.mustCLI("deploy", dir, "--json")
	if got := jsonField(t, r.stdout, "mcpTools.0.tool"); got != "get-sum" {
		t.Errorf("deploy --json mcpTools: %s", r.stdout)
	}
	r = s.mustCLI("run", "adder", "--end-user", "u1", "--wait", "--json")
	if st := jsonField(t, r.stdout, "status"); st != "succeeded" || !strings.Contains(r.stdout, "5") {
		t.Errorf("run adder: %s", r.stdout)
	}
}
