package agent_test

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stead/runtime/agent"
)

func TestCompileWhen(t *testing.T) {
	t.Parallel()
	w, err := agent.CompileWhen(json.RawMessage(`{"required": ["amount"], "properties": {"amount": {"type": "number", "maximum": 50}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		input string
		want  bool
	}{
		{`{"amount": 20}`, true},
		{`{"amount": 50.5}`, false},
		{`{"amount": "20"}`, false},
		{`{"orderId": "o-1"}`, false},
	} {
		v, err := agent.DecodeJSON([]byte(c.input))
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Allows(v); got != c.want {
			t.Errorf("Allows(%s) = %v, want %v", c.input, got, c.want)
		}
	}
	for _, c := range []struct{ schema, want string }{
		{`{"properties": {"amount": {"maximum": "50"}}}`, "/properties/amount/maximum"},
		{`{"$ref": "other.json"}`, "does not load"},
		{`[{"type": "object"}]`, "must be a JSON Schema object"},
		{`{"type": "object", "type": "array"}`, "more than once"},
	} {
		_, err := agent.CompileWhen(json.RawMessage(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CompileWhen(%s): error %v, want one saying %q", c.schema, err, c.want)
		}
	}
}

// TestCompileWhenDraft2020: a remembered decision's schema is read as draft
// 2020-12, so its 2020 keywords constrain: under draft 7, prefixItems would
// be an unknown keyword and the decision would cover every call.
func TestCompileWhenDraft2020(t *testing.T) {
	t.Parallel()
	w, err := agent.CompileWhen(json.RawMessage(`{"properties": {"amounts": {"prefixItems": [{"maximum": 50}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Allows(decode(t, `{"amounts": [500]}`)) {
		t.Error("a when schema with prefixItems [{maximum 50}] allowed amounts [500]")
	}
	if !w.Allows(decode(t, `{"amounts": [5]}`)) {
		t.Error("a when schema with prefixItems [{maximum 50}] refused amounts [5]")
	}
}

// TestCompileWhenLoadsNoFile: a $ref to a file of the server is refused,
// even when the file exists and holds a schema.
func TestCompileWhenLoadsNoFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(path, []byte(`{"type": "object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
	_, err := agent.CompileWhen(json.RawMessage(`{"$ref": "` + ref + `"}`))
	if err == nil || !strings.Contains(err.Error(), "which Stead does not load") {
		t.Errorf("CompileWhen($ref %s): error %v, want one saying Stead does not load it", ref, err)
	}
}

// BenchmarkCompileWhen: what compiling a remembered decision's schema
// costs against checking an input with it, the figure that says whether
// the engine should cache compiled schemas (a gated call that may be
// remembered already waits on a store read).
func BenchmarkCompileWhen(b *testing.B) {
	raw := json.RawMessage(`{"required": ["amount"], "properties": {"amount": {"type": "number", "maximum": 50}, "orderId": {"type": "string", "pattern": "^o-[0-9]+$"}}}`)
	input, _ := agent.DecodeJSON([]byte(`{"orderId": "o-12", "amount": 20}`))
	b.Run("compile", func(b *testing.B) {
		for b.Loop() {
			if _, err := agent.CompileWhen(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	w, _ := agent.CompileWhen(raw)
	b.Run("allows", func(b *testing.B) {
		for b.Loop() {
			if !w.Allows(input) {
				b.Fatal("not allowed")
			}
		}
	})
}
