package agent_test

import (
	"slices"
	"strings"
	"testing"

	"stead/runtime/agent"
)

// stead.json is read strictly: exact key names, no key twice, valid UTF-8,
// bounded depth; each problem has its pointer, and its line and column
// point at the offending key or byte.
func TestParseStrictJSON(t *testing.T) {
	t.Parallel()
	const ok = `{"agents": {"a": {"tools": {"t": {"effect": "read"}}, "steps": [{"id": "s", "tool": "t"}]}}}`
	deep := `{"agents": {"a": {"tools": {"t": {"effect": "read", "input": ` + strings.Repeat(`{"not":`, 70) + `{}` + strings.Repeat(`}`, 70) + `}}, "steps": [{"id": "s", "tool": "t"}]}}}`
	tests := []struct {
		name, src string
		want      []agent.Problem
	}{
		{"case-variant top-level key", `{"Agents": {}, "agents": {"a": {"tools": {"t": {"effect": "read"}}, "steps": [{"id": "s", "tool": "t"}]}}}`,
			[]agent.Problem{{Pointer: "/Agents", Message: `unknown key "Agents"; did you mean "agents"?`, Line: 1, Column: 2}}},
		{"case-variant tool key", strings.Replace(ok, `"effect"`, `"Effect"`, 1),
			[]agent.Problem{
				{Pointer: "/agents/a/tools/t/effect", Message: "is required", Line: 1, Column: 29},
				{Pointer: "/agents/a/tools/t/Effect", Message: `unknown key "Effect"; did you mean "effect"?`, Line: 1, Column: 35},
			}},
		{"duplicate by escape", strings.Replace(ok, `"effect": "read"`, `"effect": "read", "\u0065ffect": "write"`, 1),
			[]agent.Problem{{Pointer: "/agents/a/tools/t/effect", Message: `duplicate key "effect" (first at line 1, column 35); a key may appear once in an object, so remove one of them`, Line: 1, Column: 53}}},
		{"invalid UTF-8 value", strings.Replace(ok, `"read"`, "\"re\xffad\"", 1),
			[]agent.Problem{{Pointer: "/agents/a/tools/t/effect", Message: "is not valid UTF-8; send text as UTF-8", Line: 1, Column: 48}}},
		{"invalid UTF-8 key", "{\"agents\": {\"a\xff\": {}}}",
			[]agent.Problem{{Pointer: "/agents", Message: "has a member name that is not valid UTF-8; send text as UTF-8", Line: 1, Column: 15}}},
		{"half a surrogate pair", strings.Replace(ok, `"s"`, `"s\udc00"`, 1),
			[]agent.Problem{{Pointer: "/agents/a/steps/0/id", Message: `has a \u escape of half a surrogate pair, which is not text; escape characters outside the BMP as a pair ("\ud83d\ude00") or send them as UTF-8`, Line: 1, Column: 74}}},
		// Columns count characters, not bytes, past multibyte text and
		// escapes; a key with "/" or "~" is escaped in its pointer.
		{"after multibyte text and escapes", "{\"agents\": {\"a\": {\"tools\": {\"t\": {\n" +
			`  "description": "Zoë \"😀\" \u00e9", "effect": "read", "x/y~z": 1, "effect": "write"}},` +
			"\n \"steps\": [{\"id\": \"s\", \"tool\": \"t\"}]}}}",
			[]agent.Problem{
				{Pointer: "/agents/a/tools/t/x~1y~0z", Message: `unknown key "x/y~z" (allowed here: approvals, description, effect, input, label, mcp, name, output, requiresApproval, source, timeoutMs)`, Line: 2, Column: 56},
				{Pointer: "/agents/a/tools/t/effect", Message: `duplicate key "effect" (first at line 2, column 38); a key may appear once in an object, so remove one of them`, Line: 2, Column: 68},
			}},
		{"too deep", deep,
			[]agent.Problem{{Pointer: "/agents/a/tools/t/input" + strings.Repeat("/not", 58), Message: "nests objects and arrays deeper than 64 levels; flatten the data", Line: 1, Column: 475}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := problems(t, tt.src); !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
	if _, err := agent.Parse([]byte(ok)); err != nil {
		t.Errorf("the config the cases start from: %v", err)
	}
}
