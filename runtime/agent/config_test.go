package agent_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"stead/approvals"
	"stead/runtime/agent"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// mustParse parses a config that must be valid.
func mustParse(t testing.TB, src string) *agent.Config {
	t.Helper()
	c, err := agent.Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// problems parses a config that must be invalid and returns its problems.
func problems(t testing.TB, src string) []agent.Problem {
	t.Helper()
	_, err := agent.Parse([]byte(src))
	var ce *agent.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Parse error = %v (%T), want *agent.ConfigError", err, err)
	}
	if len(ce.Problems) == 0 {
		t.Fatal("ConfigError without problems")
	}
	return ce.Problems
}

// wantProblems checks that src is invalid with exactly the problems want,
// in any order.
func wantProblems(t *testing.T, src string, want []string) {
	t.Helper()
	var got []string
	for _, p := range problems(t, src) {
		got = append(got, p.String())
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("missing problem\n  %s\ngot:\n  %s", w, strings.Join(got, "\n  "))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d problems, want %d:\n  %s", len(got), len(want), strings.Join(got, "\n  "))
	}
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseExample(t *testing.T) {
	t.Parallel()
	c, err := agent.Parse(readFile(t, "stead.json"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.Handlers != "src/index.ts" {
		t.Errorf("Handlers = %q", c.Handlers)
	}
	if got := c.AgentNames(); !slices.Equal(got, []string{"refunds"}) {
		t.Errorf("AgentNames = %v", got)
	}
	a, ok := c.Agent("refunds")
	if !ok {
		t.Fatal("no agent refunds")
	}
	if _, ok := c.Agent("nope"); ok {
		t.Error("Agent(nope) found")
	}
	if a.Name != "refunds" || !strings.HasPrefix(a.Description, "Refunds one order") {
		t.Errorf("agent = %q %q", a.Name, a.Description)
	}
	if got := string(a.InputSchema); got != `{"type":"object","required":["orderId"]}` {
		t.Errorf("InputSchema = %s", got)
	}
	if a.ApprovalTimeout != 15*time.Minute {
		t.Errorf("agent ApprovalTimeout = %v", a.ApprovalTimeout)
	}
	if got := a.ToolNames(); !slices.Equal(got, []string{"fetchReviews", "listOrders", "refundOrder"}) {
		t.Errorf("ToolNames = %v", got)
	}

	tests := []struct {
		name             string
		effect           agent.Effect
		source           agent.Source
		requiresApproval bool
		timeout          time.Duration
		approvalTimeout  time.Duration
		description      string
		hasInput         bool
	}{
		{"listOrders", agent.EffectRead, agent.SourceInternal, false, 30 * time.Second, 15 * time.Minute, "List the end user's orders.", false},
		{"refundOrder", agent.EffectWrite, agent.SourceInternal, true, 10 * time.Second, time.Hour, "", true},
		{"fetchReviews", agent.EffectRead, agent.SourceExternal, false, 30 * time.Second, 15 * time.Minute, "", false},
	}
	for _, tt := range tests {
		tool, ok := a.Tool(tt.name)
		if !ok {
			t.Fatalf("no tool %s", tt.name)
		}
		got := fmt.Sprint(tool.Name, tool.Agent, tool.Effect, tool.Source, tool.RequiresApproval, tool.Timeout, tool.ApprovalTimeout, tool.Description, tool.InputSchema != nil)
		want := fmt.Sprint(tt.name, "refunds", tt.effect, tt.source, tt.requiresApproval, tt.timeout, tt.approvalTimeout, tt.description, tt.hasInput)
		if got != want {
			t.Errorf("tool %s:\n got %s\nwant %s", tt.name, got, want)
		}
	}
	refund, _ := a.Tool("refundOrder")
	if got := string(refund.OutputSchema); got != `{"type":"object","required":["refundId"]}` {
		t.Errorf("OutputSchema = %s", got)
	}

	if len(a.Steps) != 2 {
		t.Fatalf("%d steps", len(a.Steps))
	}
	for i, want := range []struct{ id, tool string }{{"orders", "listOrders"}, {"refund", "refundOrder"}} {
		s := a.Steps[i]
		if s.Index != i || s.ID != want.id || s.Kind != agent.ToolStep || s.Tool != want.tool {
			t.Errorf("step %d = %+v", i, s)
		}
		if byID, ok := a.Step(want.id); !ok || byID != s {
			t.Errorf("Step(%q) = %v, %v", want.id, byID, ok)
		}
	}
	if got, _ := json.Marshal(a.Steps[1].Input); string(got) != `{"item":"$input"}` {
		t.Errorf("raw step input = %s", got)
	}

	if len(a.Policy) != 1 {
		t.Fatalf("%d rules", len(a.Policy))
	}
	r := a.Policy[0]
	if r.Index != 0 || r.Tool != "refundOrder" || r.Outcome != agent.Allow || r.Reason != "small refunds are automatic" ||
		string(r.When) != `{"properties":{"item":{"properties":{"amount":{"maximum":20}}}}}` {
		t.Errorf("rule = %+v (when %s)", r, r.When)
	}

	// The example's allow rule targets a tool that requires approval: legal,
	// but it can never take effect, so Parse says so.
	if len(c.Warnings) != 1 || c.Warnings[0].Pointer != "/agents/refunds/policy/0" ||
		!strings.Contains(c.Warnings[0].Message, "never lets a call through") || c.Warnings[0].Line == 0 {
		t.Errorf("Warnings = %+v", c.Warnings)
	}
	if string(c.Raw) != string(readFile(t, "stead.json")) {
		t.Error("Raw differs from the file")
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `{
		"$schema": "./stead.schema.json",
		"agents": { "a": {
			"tools": {
				"t": { "effect": "read" },
				"u": { "effect": "write", "approvals": { "timeout": "90s" } }
			},
			"steps": [ { "id": "one", "tool": "t" } ] } } }`)
	a, _ := c.Agent("a")
	if c.Handlers != "" || a.Description != "" || a.InputSchema != nil || len(a.Policy) != 0 || len(c.Warnings) != 0 {
		t.Errorf("unexpected values: %+v %+v", c, a)
	}
	if a.ApprovalTimeout != approvals.DefaultTimeout {
		t.Errorf("agent ApprovalTimeout = %v, want %v", a.ApprovalTimeout, approvals.DefaultTimeout)
	}
	tool, _ := a.Tool("t")
	if tool.Source != agent.SourceInternal || tool.RequiresApproval || tool.Timeout != agent.DefaultToolTimeout ||
		tool.ApprovalTimeout != approvals.DefaultTimeout || tool.InputSchema != nil || tool.OutputSchema != nil {
		t.Errorf("tool defaults = %+v", tool)
	}
	if u, _ := a.Tool("u"); u.ApprovalTimeout != 90*time.Second {
		t.Errorf("tool approval timeout = %v", u.ApprovalTimeout)
	}
	if a.Steps[0].Input != nil {
		t.Errorf("step without input has Input %v", a.Steps[0].Input)
	}
	// A schema-valid edge: the largest timeoutMs and longest approval timeout.
	c = mustParse(t, `{"agents": {"a": {"approvals": {"timeout": "168h"},
		"tools": {"t": {"effect": "read", "timeoutMs": 900000}}, "steps": [{"id": "s", "tool": "t"}]}}}`)
	tool, _ = c.Agents["a"].Tool("t")
	if tool.Timeout != agent.MaxToolTimeout || tool.ApprovalTimeout != agent.MaxApprovalTimeout {
		t.Errorf("limits: timeout %v, approval %v", tool.Timeout, tool.ApprovalTimeout)
	}
}

// TestParseBadConfigGolden checks that one file with many problems reports
// all of them, each with its pointer, in file order.
func TestParseBadConfigGolden(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for _, p := range problems(t, string(readFile(t, "bad.json"))) {
		fmt.Fprintf(&b, "%d:%d %s\n", p.Line, p.Column, p)
	}
	got := b.String()
	golden := filepath.Join("testdata", "bad.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := string(readFile(t, "bad.golden"))
	if got != want {
		t.Errorf("problems differ from %s (go test -run TestParseBadConfigGolden -update to rewrite)\n got:\n%s\nwant:\n%s", golden, got, want)
	}
}

func TestParseProblems(t *testing.T) {
	t.Parallel()
	// wrap puts an agent body into a config.
	wrap := func(agentBody string) string { return `{"agents": {"refunds": {` + agentBody + `}}}` }
	const tools = `"tools": {"listOrders": {"effect": "read"}, "refundOrder": {"effect": "write"}, "fetchReviews": {"effect": "read", "source": "external"}}`
	tests := []struct {
		name string
		src  string
		want []string // every problem, as Problem.String()
	}{
		{
			name: "bad branding and label",
			src: `{"branding": {"name": "", "logoUrl": "http://shop.example/logo.png", "accentColor": "blue", "colour": 1},
				"agents": {"refunds": {"tools": {"refundOrder": {"effect": "write", "label": ""}}, "steps": [{"id": "a", "tool": "refundOrder"}]}}}`,
			want: []string{
				`/branding/name: must not be empty`,
				`/branding/logoUrl: must be an https:// URL or a data:image/… URL (png, jpeg, gif, webp or svg+xml)`,
				`/branding/accentColor: must be a colour written #rrggbb, like "#1d4ed8"`,
				`/branding/colour: unknown key "colour" (allowed here: accentColor, logoUrl, name)`,
				`/agents/refunds/tools/refundOrder/label: must not be empty`,
			},
		},
		{
			name: "bad effect",
			src:  wrap(`"tools": {"refundOrder": {"effect": "delete"}}, "steps": [{"id": "a", "tool": "refundOrder"}]`),
			want: []string{`/agents/refunds/tools/refundOrder/effect: must be one of "read", "write"`},
		},
		{
			name: "undeclared step tool",
			src:  wrap(tools + `, "steps": [{"id": "orders", "tool": "listOrders"}, {"id": "refund", "tool": "refundOrdr"}]`),
			want: []string{`/agents/refunds/steps/1/tool: tool "refundOrdr" is not declared in /agents/refunds/tools (declared: fetchReviews, listOrders, refundOrder)`},
		},
		{
			name: "no tools declared",
			src:  wrap(`"steps": [{"id": "a", "tool": "listOrders"}]`),
			want: []string{`/agents/refunds/steps/0/tool: tool "listOrders" is not declared in /agents/refunds/tools (no tools are declared)`},
		},
		{
			name: "missing required keys",
			src:  wrap(`"tools": {"t": {}}, "steps": [{"input": 1}]`),
			want: []string{
				`/agents/refunds/tools/t/effect: is required`,
				`/agents/refunds/steps/0/id: is required`,
				`/agents/refunds/steps/0/tool: is required`,
			},
		},
		{
			name: "no agents",
			src:  `{"handlers": "x.js"}`,
			want: []string{`/agents: is required`},
		},
		{
			name: "empty agents",
			src:  `{"agents": {}}`,
			want: []string{`/agents: must not be empty`},
		},
		{
			name: "not an object",
			src:  `[1, 2]`,
			want: []string{`(root): must be an object`},
		},
		{
			name: "unknown key with suggestion",
			src:  wrap(`"tools": {"t": {"effect": "write", "requireApproval": true}}, "steps": [{"id": "a", "tool": "t"}]`),
			want: []string{`/agents/refunds/tools/t/requireApproval: unknown key "requireApproval"; did you mean "requiresApproval"?`},
		},
		{
			name: "unknown key without suggestion",
			src:  wrap(`"retries": 3, "steps": [{"id": "a", "tool": "t"}], "tools": {"t": {"effect": "read"}}`),
			want: []string{`/agents/refunds/retries: unknown key "retries" (allowed here: approvals, description, input, policy, steps, tools)`},
		},
		{
			name: "agent name",
			src:  `{"agents": {"9lives": {"steps": [{"id": "a", "tool": "t"}], "tools": {"t": {"effect": "read"}}}}}`,
			want: []string{`/agents/9lives: invalid name "9lives": must start with a letter and use only letters, digits, "_" and "-" (at most 64 characters)`},
		},
		{
			name: "step id and duplicate",
			src:  wrap(`"tools": {"t": {"effect": "read"}}, "steps": [{"id": "a b", "tool": "t"}, {"id": "x", "tool": "t"}, {"id": "x", "tool": "t"}]`),
			want: []string{
				`/agents/refunds/steps/0/id: must start with a letter and use only letters, digits, "_" and "-" (at most 64 characters)`,
				`/agents/refunds/steps/2/id: duplicate step id "x" (also the id of /agents/refunds/steps/1)`,
			},
		},
		{
			name: "tool names",
			src:  wrap(`"tools": {"refund-order": {"effect": "write"}, "class": {"effect": "read"}, "eval": {"effect": "read"}, "1st": {"effect": "read"}, "$ok_ñ1": {"effect": "read"}, "Ⅻ\u200cx": {"effect": "read"}}, "steps": [{"id": "a", "tool": "$ok_ñ1"}]`),
			want: []string{
				`/agents/refunds/tools/refund-order: tool name "refund-order" contains "-"; it must be a JavaScript identifier (letters, digits, "_" and "$", not starting with a digit) because it names an exported function`,
				`/agents/refunds/tools/class: tool name "class" is a reserved word in JavaScript, so no exported function can have it`,
				`/agents/refunds/tools/eval: tool name "eval" is a reserved word in JavaScript, so no exported function can have it`,
				`/agents/refunds/tools/1st: tool name "1st" starts with "1"; it must be a JavaScript identifier (letters, digits, "_" and "$", not starting with a digit) because it names an exported function`,
			},
		},
		{
			name: "timeouts",
			src: wrap(`"approvals": {"timeout": "-5m"}, "tools": {
				"a": {"effect": "read", "timeoutMs": 0, "approvals": {"timeout": "soon"}},
				"b": {"effect": "read", "timeoutMs": 900001, "approvals": {"timeout": "169h"}},
				"c": {"effect": "read", "timeoutMs": "10s", "approvals": {"timeout": 60}},
				"d": {"effect": "read", "timeoutMs": 2.5}}, "steps": [{"id": "s", "tool": "a"}]`),
			want: []string{
				`/agents/refunds/approvals/timeout: must be longer than 0 (got "-5m")`,
				`/agents/refunds/tools/a/timeoutMs: must be at least 1`,
				`/agents/refunds/tools/a/approvals/timeout: must be a duration such as "90s", "15m" or "1h" (got "soon")`,
				`/agents/refunds/tools/b/timeoutMs: must be at most 900000`,
				`/agents/refunds/tools/b/approvals/timeout: must be at most 168h (7 days) (got "169h")`,
				`/agents/refunds/tools/c/timeoutMs: must be an integer`,
				`/agents/refunds/tools/c/approvals/timeout: must be a string`,
				`/agents/refunds/tools/d/timeoutMs: must be an integer`,
			},
		},
		{
			name: "policy",
			src: wrap(tools + `, "steps": [{"id": "a", "tool": "listOrders"}], "policy": [
				{"tool": "refundOrdr", "decision": "deny"},
				{"tool": "*", "decision": "block"},
				{"decision": "ask", "reason": 7},
				{"tool": "listOrders", "decision": "allow", "when": "amount < 20"}]`),
			want: []string{
				`/agents/refunds/policy/0/tool: tool "refundOrdr" is not declared in /agents/refunds/tools (declared: fetchReviews, listOrders, refundOrder); use "*" for every tool`,
				`/agents/refunds/policy/1/decision: must be one of "allow", "ask", "deny"`,
				`/agents/refunds/policy/2/tool: is required`, // missing: reported where the rule starts
				`/agents/refunds/policy/2/reason: must be a string`,
				`/agents/refunds/policy/3/when: must be a boolean or an object`,
			},
		},
		{
			name: "embedded schemas must compile",
			src: wrap(`"input": {"type": "objekt"}, "tools": {
				"a": {"effect": "read", "input": {"$ref": "other.json"}},
				"b": {"effect": "read", "input": {"$ref": "file:///etc/passwd"}},
				"c": {"effect": "read", "output": {"$ref": "#/$defs/missing"}},
				"d": {"effect": "read", "output": {"properties": {"x": {"pattern": "(", "minimum": "1"}}}},
				"e": {"effect": "read", "input": {"$schema": "https://example.com/my-draft"}}},
				"steps": [{"id": "s", "tool": "a"}],
				"policy": [{"tool": "a", "decision": "deny", "when": {"required": "x"}}]`),
			want: []string{
				`/agents/refunds/input/type: not a valid JSON Schema: must be one of "array", "boolean", "integer", "null", "number", "object", "string"`,
				`/agents/refunds/tools/a/input: refers to "other.json", which Stead does not load: a schema here may only $ref its own parts, like "#/$defs/item"`,
				`/agents/refunds/tools/b/input: refers to "file:///etc/passwd", which Stead does not load: a schema here may only $ref its own parts, like "#/$defs/item"`,
				`/agents/refunds/tools/c/output: $ref "#/$defs/missing" points to nothing in this schema`,
				`/agents/refunds/tools/d/output/properties/x/pattern: not a valid JSON Schema: must be a valid regex (error parsing regexp: missing closing ): ` + "`(`)",
				`/agents/refunds/tools/d/output/properties/x/minimum: not a valid JSON Schema: must be a number`,
				`/agents/refunds/tools/e/input: refers to "https://example.com/my-draft", which Stead does not load: a schema here may only $ref its own parts, like "#/$defs/item"`,
				`/agents/refunds/policy/0/when/required: not a valid JSON Schema: must be an array`,
			},
		},
		{
			name: "duplicate keys",
			src:  "{\"agents\": {\"a\": {\"tools\": {\"t\": {\"effect\": \"read\"}},\n \"steps\": [{\"id\": \"s\", \"tool\": \"t\"}], \"tools\": {\"t\": {\"effect\": \"read\"}}}}}",
			want: []string{`/agents/a/tools: duplicate key "tools" (first at line 1, column 19); a key may appear once in an object, so remove one of them`},
		},
		{
			name: "duplicate keys and other problems",
			src:  `{"agents": {"a": {"tools": {"t": {"effect": "read", "effect": "write"}}, "steps": [{"id": "s", "tool": "u"}]}}}`,
			want: []string{
				`/agents/a/tools/t/effect: duplicate key "effect" (first at line 1, column 35); a key may appear once in an object, so remove one of them`,
				`/agents/a/steps/0/tool: tool "u" is not declared in /agents/a/tools (declared: t)`,
			},
		},
		{
			name: "tools of the wrong type: no cascade",
			src:  wrap(`"tools": ["listOrders"], "steps": [{"id": "a", "tool": "listOrders"}], "policy": [{"tool": "listOrders", "decision": "deny"}]`),
			want: []string{`/agents/refunds/tools: must be an object`},
		},
		{
			name: "handlers",
			src:  `{"handlers": 5, "agents": {"a": {"tools": {"t": {"effect": "read"}}, "steps": [{"id": "s", "tool": "t"}]}}}`,
			want: []string{`/handlers: must be a string`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, p := range problems(t, tt.src) {
				got = append(got, p.String())
				if p.Line == 0 || p.Column == 0 {
					t.Errorf("%s: no line/column", p)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tt.want, "\n     "))
			}
		})
	}
}

func TestParseBrandingAndLabel(t *testing.T) {
	t.Parallel()
	c, err := agent.Parse([]byte(`{"branding": {"name": "Acme Shop", "logoUrl": "data:image/svg+xml;base64,PHN2Zy8+", "accentColor": "#0a7d5a"},
		"agents": {"refunds": {"tools": {"refundOrder": {"effect": "write", "label": "Refund"}, "listOrders": {"effect": "read"}},
		"steps": [{"id": "a", "tool": "refundOrder"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := agent.Branding{Name: "Acme Shop", LogoURL: "data:image/svg+xml;base64,PHN2Zy8+", AccentColor: "#0a7d5a"}
	if c.Branding == nil || *c.Branding != want {
		t.Errorf("Branding = %+v, want %+v", c.Branding, want)
	}
	ag, _ := c.Agent("refunds")
	if got := ag.Tools["refundOrder"].Label; got != "Refund" {
		t.Errorf("refundOrder label = %q, want Refund", got)
	}
	if got := ag.Tools["listOrders"].Label; got != "" {
		t.Errorf("listOrders label = %q, want none", got)
	}
	plain, err := agent.Parse([]byte(`{"agents": {"a": {"tools": {"t": {"effect": "read"}}, "steps": [{"id": "s", "tool": "t"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Branding != nil {
		t.Errorf("no branding: Branding = %+v, want nil", plain.Branding)
	}
}

func TestParseSyntaxError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		src        string
		line, col  int
		msgContain string
	}{
		{"trailing comma", "{\n  \"agents\": {},\n}", 2, 15, "a comma before the closing bracket or brace; remove the trailing comma"},
		{"missing value", "{\n  \"agents\": {\n    \"a\": \n  }\n}", 4, 3, "missing value after object name"},
		{"unclosed", "{\n  \"agents\": [1, 2\n", 3, 1, "unexpected end of file"},
		{"after value", "{}\n{}", 2, 1, "unexpected data after the top-level value"},
		{"multibyte column", "{\"é\": ,}", 1, 7, "invalid character ','"},
		{"empty", "  \n", 0, 0, "the file is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ps := problems(t, tt.src)
			if len(ps) != 1 {
				t.Fatalf("problems = %v, want one", ps)
			}
			p := ps[0]
			if p.Pointer != "" || p.Line != tt.line || p.Column != tt.col || !strings.Contains(p.Message, tt.msgContain) {
				t.Errorf("problem = %+v, want line %d column %d containing %q", p, tt.line, tt.col, tt.msgContain)
			}
			if tt.line > 0 && !strings.Contains(p.Message, fmt.Sprintf("line %d, column %d", tt.line, tt.col)) {
				t.Errorf("message %q does not say line %d, column %d", p.Message, tt.line, tt.col)
			}
		})
	}
}

func TestConfigErrorFormat(t *testing.T) {
	t.Parallel()
	_, err := agent.Parse([]byte(`{"agents": {"a": {"steps": [], "x": 1}}}`))
	want := "/agents/a/steps: must not be empty\n/agents/a/x: unknown key \"x\" (allowed here: approvals, description, input, policy, steps, tools)"
	if err == nil || err.Error() != want {
		t.Errorf("Error() =\n%v\nwant\n%s", err, want)
	}
	var ce *agent.ConfigError
	if errors.As(err, &ce); ce.Code() != "invalid-config" {
		t.Errorf("Code = %q", ce.Code())
	}

	// Problems at one place in the file: the outer pointer first.
	_, err = agent.Parse([]byte(`{"models": {"bad name": {"provider": "openai", "model": "m"}},
		"agents": {"a": {"tools": {"t": {"effect": "read"}}, "steps": [{"id": "s", "tool": "t"}]}}}`))
	want = "/models/bad name: invalid name \"bad name\": must start with a letter and use only letters, digits, \"_\" and \"-\" (at most 64 characters)\n" +
		"/models/bad name/baseUrl: is required"
	if err == nil || err.Error() != want {
		t.Errorf("Error() =\n%v\nwant\n%s", err, want)
	}
}

func TestCheckExports(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `{"agents": {
		"refunds": {"tools": {"listOrders": {"effect": "read"}, "refundOrdr": {"effect": "write"}}, "steps": [{"id": "a", "tool": "listOrders"}]},
		"alerts": {"tools": {"notify": {"effect": "write"}}, "steps": [{"id": "a", "tool": "notify"}]}}}`)
	if err := c.CheckExports([]string{"refundOrdr", "listOrders", "notify", "other"}); err != nil {
		t.Errorf("all exported: %v", err)
	}
	err := c.CheckExports([]string{"refundOrder", "listOrders", "listOrders"})
	// In file order, like every ConfigError.
	want := `/agents/refunds/tools/refundOrdr: config names tool "refundOrdr", bundle exports: listOrders, refundOrder` + "\n" +
		`/agents/alerts/tools/notify: config names tool "notify", bundle exports: listOrders, refundOrder`
	if err == nil || err.Error() != want {
		t.Fatalf("CheckExports =\n%v\nwant\n%s", err, want)
	}
	var ce *agent.ConfigError
	if !errors.As(err, &ce) || ce.Problems[0].Line != 2 || ce.Problems[1].Line != 3 {
		t.Errorf("problems = %+v", ce)
	}
	err = c.CheckExports(nil)
	if err == nil || !strings.Contains(err.Error(), `config names tool "listOrders", bundle exports: nothing`) {
		t.Errorf("no exports: %v", err)
	}
}

func TestConfigSchemaIsValid(t *testing.T) {
	t.Parallel()
	var v map[string]any
	if err := json.Unmarshal(agent.ConfigSchema(), &v); err != nil {
		t.Fatal(err)
	}
	if v["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", v["$schema"])
	}
	// The returned bytes are a copy.
	b := agent.ConfigSchema()
	b[0] = 'x'
	if agent.ConfigSchema()[0] != '{' {
		t.Error("ConfigSchema returns shared memory")
	}
}
