package agent_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"stead/runtime/agent"
)

const mcpConfig = `{
  "mcpServers": {
    "tracker": {"url": "https://tracker.example.com/mcp", "headersFromEnv": {"Authorization": "TRACKER_AUTH"}}
  },
  "agents": {
    "triage": {
      "tools": {
        "createIssue": {"mcp": "tracker", "name": "create_issue", "effect": "write", "requiresApproval": true},
        "search": {"mcp": "tracker", "effect": "read", "source": "internal", "input": {"type": "object"}},
        "listOrders": {"effect": "read"}
      },
      "steps": [
        {"id": "find", "tool": "search", "input": {"q": "$input.q"}},
        {"id": "file", "tool": "createIssue", "input": {"title": "$input.q"}}
      ]
    }
  }
}`

func TestMCPToolsParse(t *testing.T) {
	t.Parallel()
	c := mustParse(t, mcpConfig)
	s, ok := c.MCPServer("tracker")
	if !ok || s.URL != "https://tracker.example.com/mcp" || s.HeadersFromEnv["Authorization"] != "TRACKER_AUTH" {
		t.Fatalf("server = %+v", s)
	}
	a := c.Agents["triage"]
	ci := a.Tools["createIssue"]
	if ci.MCP == nil || *ci.MCP != (agent.MCPRef{Server: "tracker", Name: "create_issue"}) {
		t.Errorf("createIssue.MCP = %+v", ci.MCP)
	}
	if ci.Source != agent.SourceExternal || !ci.RequiresApproval || ci.Effect != agent.EffectWrite {
		t.Errorf("createIssue posture = %s %v %s; want external by default, gated write", ci.Source, ci.RequiresApproval, ci.Effect)
	}
	se := a.Tools["search"]
	if se.MCP == nil || se.MCP.Name != "search" || se.Source != agent.SourceInternal {
		t.Errorf("search = %+v %s; want the key as remote name and the declared source", se.MCP, se.Source)
	}
	if a.Tools["listOrders"].MCP != nil || a.Tools["listOrders"].Source != agent.SourceInternal {
		t.Errorf("a bundle tool became MCP-backed")
	}
	if got := c.MCPTools(); len(got) != 2 || got[0].Name != "createIssue" || got[1].Name != "search" {
		t.Errorf("MCPTools = %v", got)
	}
	// MCP-backed tools are not exports: only listOrders is demanded.
	if err := c.CheckExports([]string{"listOrders"}); err != nil {
		t.Errorf("CheckExports: %v", err)
	}
	err := c.CheckExports(nil)
	var ce *agent.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Pointer != "/agents/triage/tools/listOrders" {
		t.Errorf("CheckExports(nil) = %v", err)
	}
}

func TestMCPToolsProblems(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "servers",
			src: `{"mcpServers": {
			  "a": {"url": "ftp://x.example/mcp"},
			  "b": {"url": "https://user:pw@x.example/mcp"},
			  "c": {"url": "https://x.example/mcp", "headersFromEnv": {"Authorization": "AWS_SECRET_ACCESS_KEY", "X-Key": "stead_owner", "Bad Header": "K", "Mcp-Session-Id": "K", "X-Ok": "1X", "X-TRACE": "TRACE", "X-Trace": "TRACE", "X-Api-Key2": "KEY2", "": "K"}},
			  "d": {"headersFromEnv": {}},
			  "e": {"url": "https://x.example/mcp", "token": "t"}
			}, "agents": {"x": {"steps": [{"id": "s", "tool": "t"}], "tools": {"t": {"effect": "read"}}}}}`,
			want: []string{
				`/mcpServers/a/url: must be an http or https URL such as https://tracker.example.com/mcp (got "ftp://x.example/mcp")`,
				`/mcpServers/b/url: must not hold credentials; send them in a header whose value an environment variable holds: "headersFromEnv": {"Authorization": "TRACKER_AUTH"}`,
				`/mcpServers/c/headersFromEnv/Authorization: "AWS_SECRET_ACCESS_KEY" is a variable the platform or Stead sets (AWS_…, LAMBDA_…, STEAD_…, _…), never a header value: a config could send the server's own credentials to its url; put the value in a variable of your own, e.g. TRACKER_AUTH`,
				`/mcpServers/c/headersFromEnv/X-Key: "stead_owner" is a variable the platform or Stead sets (AWS_…, LAMBDA_…, STEAD_…, _…), never a header value: a config could send the server's own credentials to its url; put the value in a variable of your own, e.g. TRACKER_AUTH`,
				"/mcpServers/c/headersFromEnv/Bad Header: \"Bad Header\" is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)",
				`/mcpServers/c/headersFromEnv/Mcp-Session-Id: "Mcp-Session-Id" is a header the MCP transport sets itself; it cannot be configured`,
				`/mcpServers/c/headersFromEnv/X-Ok: must match the pattern /^[A-Za-z_][A-Za-z0-9_]*$/`,
				`/mcpServers/c/headersFromEnv/: "" is not an HTTP header name (letters, digits and !#$%&'*+-.^_` + "`" + `|~)`,
				`/mcpServers/c/headersFromEnv/X-Trace: header "X-Trace" is already set by "X-TRACE" (header names are case-insensitive)`,
				`/mcpServers/d/url: is required`,
				`/mcpServers/e/token: unknown key "token" (allowed here: headersFromEnv, url)`,
			},
		},
		{
			name: "tools",
			src: `{"mcpServers": {"tracker": {"url": "https://x.example/mcp"}}, "agents": {"x": {
			  "steps": [{"id": "s", "tool": "t"}],
			  "tools": {
			    "t": {"mcp": "trackr", "effect": "read"},
			    "u": {"name": "create_issue", "effect": "write"},
			    "get-sum": {"mcp": "tracker", "effect": "read"},
			    "v": {"mcp": "", "effect": "read"}
			  }}}}`,
			want: []string{
				`/agents/x/tools/t/mcp: MCP server "trackr" is not declared in /mcpServers (declared: tracker)`,
				`/agents/x/tools/u/name: "name" is the name of an MCP-backed tool on its server; it needs "mcp", the server that runs it`,
				`/agents/x/tools/v/mcp: must start with a letter and use only letters, digits, "_" and "-" (at most 64 characters)`,
				`/agents/x/tools/get-sum: tool name "get-sum" contains "-"; it must be a JavaScript identifier (letters, digits, "_" and "$", not starting with a digit) as every tool name is; the remote tool's own name goes in "name"`,
			},
		},
		{
			name: "no servers section",
			src:  `{"agents": {"x": {"steps": [{"id": "s", "tool": "t"}], "tools": {"t": {"mcp": "tracker", "effect": "read"}}}}}`,
			want: []string{`/agents/x/tools/t/mcp: MCP server "tracker" is not declared in /mcpServers (no servers are declared; add an "mcpServers" section)`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantProblems(t, tc.src, tc.want)
		})
	}
}

func TestAdoptRemote(t *testing.T) {
	t.Parallel()
	c := mustParse(t, mcpConfig)
	remote := map[string][2]json.RawMessage{
		"create_issue": {json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`), json.RawMessage(`{"type":"object","required":["id"]}`)},
		// search declares its own input schema: the remote one is ignored.
		"search": {json.RawMessage(`{"type":"object","required":["never"]}`), nil},
	}
	digest := c.Agents["triage"].PostureDigest("createIssue")
	if err := c.AdoptRemote(func(ref agent.MCPRef) agent.RemoteTool {
		r := remote[ref.Name]
		return agent.RemoteTool{InputSchema: r[0], OutputSchema: r[1], Fingerprint: "sha256:" + ref.Name}
	}); err != nil {
		t.Fatal(err)
	}
	ci := c.Agents["triage"].Tools["createIssue"]
	if err := ci.ValidateInput(map[string]any{"title": "x"}); err != nil {
		t.Errorf("valid input refused: %v", err)
	}
	if err := ci.ValidateInput(map[string]any{}); err == nil || !strings.Contains(err.Error(), `Invalid arguments for "createIssue"`) {
		t.Errorf("input without title: %v", err)
	}
	if err := ci.ValidateOutput(map[string]any{}); err == nil {
		t.Errorf("output without id passed the remote output schema")
	}
	if string(ci.InputSchema) != string(remote["create_issue"][0]) {
		t.Errorf("InputSchema = %s", ci.InputSchema)
	}
	if err := c.Agents["triage"].Tools["search"].ValidateInput(map[string]any{}); err != nil {
		t.Errorf("the declared input schema was replaced: %v", err)
	}
	// The pinned definition is part of the posture: remembered decisions
	// end when it changes.
	if c.Agents["triage"].PostureDigest("createIssue") == digest {
		t.Errorf("the pinned fingerprint is not part of the posture digest")
	}

	bad := mustParse(t, mcpConfig)
	err := bad.AdoptRemote(func(ref agent.MCPRef) agent.RemoteTool {
		return agent.RemoteTool{InputSchema: json.RawMessage(`{"type":"objekt"}`)}
	})
	var ce *agent.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "the inputSchema of tracker/create_issue on the server: not a valid JSON Schema") ||
		!strings.Contains(err.Error(), `declare "input" in stead.json to use your own`) {
		t.Errorf("a remote schema that does not compile: %v", err)
	}
}
