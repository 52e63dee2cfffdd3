package agent_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"stead/runtime/agent"
	"stead/strictjson"
)

// FuzzParse parses stead.json files. Parse never panics; it accepts only
// JSON that strictjson accepts (so no duplicate key, no invalid UTF-8, no
// deep nesting gets through) and then the accepted config parses again
// from its Raw text; a refusal is a *ConfigError whose every problem has a
// message, and a line and column inside the file.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"agents": {"a": {"tools": {"t": {"effect": "read"}}, "steps": [{"id": "s", "tool": "t", "input": {"x": "$input.a", "y": "{{ $run.id }}"}}]}}}`))
	f.Add([]byte(`{"agents": {"a": {"tools": {"t": {"effect": "read"}}, "steps": [{"id": "s", "tool": "t"}], "Steps": []}}}`))
	f.Add([]byte(`{"agents": {}, "agents": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := agent.Parse(data)
		if err == nil {
			if cerr := strictjson.Check(data); cerr != nil {
				t.Fatalf("Parse accepted %q, which strictjson refuses: %v", data, cerr)
			}
			if _, err := agent.Parse(c.Raw); err != nil {
				t.Fatalf("Parse accepted %q but not its Raw text: %v", data, err)
			}
			return
		}
		var ce *agent.ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) == 0 {
			t.Fatalf("Parse(%q) = %v (%T), want a *ConfigError with problems", data, err, err)
		}
		lines := bytes.Count(data, []byte{'\n'}) + 1
		for _, p := range ce.Problems {
			empty := len(bytes.TrimSpace(data)) == 0
			if p.Message == "" || p.Line > lines || (!empty && (p.Line < 1 || p.Column < 1)) {
				t.Fatalf("Parse(%q): problem %+v has no message or is placed outside the file", data, p)
			}
		}
	})
}

// FuzzExpr parses expressions and templates and resolves them. Nothing
// panics; an expression reads back as written and parses again to the same
// text; a failed resolution is a *ResolveError naming a prefix of the
// expression.
func FuzzExpr(f *testing.F) {
	for _, s := range []string{
		"$input", "$input.a.b", "$input.items[0].id", "$steps.first.output.items[1].amount", "$run.id", "$run.endUserId",
		"$inptu.x", "$input..x", "$steps.first", "$input[99999999999999999999]", "{{ $input.a.b }} and {{ $run.id }}", `\{{ x`, "{{ $input",
	} {
		f.Add(s)
	}
	sc := agent.Scope{
		Input:   map[string]any{"a": map[string]any{"b": "deep"}, "items": []any{map[string]any{"id": "o1"}}},
		Outputs: map[string]any{"first": map[string]any{"items": []any{map[string]any{"amount": 5}, "x"}}, "nil": nil},
		RunID:   "run_1", EndUserID: "user_7",
	}
	f.Fuzz(func(t *testing.T, s string) {
		if e, err := agent.ParseExpr(s); err == nil {
			if e.String() != s {
				t.Fatalf("ParseExpr(%q).String() = %q", s, e.String())
			}
			if again, err := agent.ParseExpr(e.String()); err != nil || again.String() != s {
				t.Fatalf("%q does not parse again: %v", s, err)
			}
			if _, err := e.Resolve(sc); err != nil {
				var re *agent.ResolveError
				if !errors.As(err, &re) || re.Message == "" || !strings.HasPrefix(s, re.At) {
					t.Fatalf("Resolve(%q) = %v, want a *ResolveError naming a prefix", s, err)
				}
			}
		} else if err.Error() == "" {
			t.Fatalf("ParseExpr(%q): an empty error", s)
		}
		if tm, err := agent.ParseTemplate(s); err == nil {
			if tm.String() != s {
				t.Fatalf("ParseTemplate(%q).String() = %q", s, tm.String())
			}
			if _, err := tm.Resolve(sc); err != nil {
				var re *agent.ResolveError
				if !errors.As(err, &re) {
					t.Fatalf("template %q: Resolve = %v (%T), want a *ResolveError", s, err, err)
				}
			}
		}
	})
}
