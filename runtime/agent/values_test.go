package agent_test

import (
	"errors"
	"strings"
	"testing"

	"stead/runtime/agent"
)

// refundsAgent has schemas on the tool input, the tool output and the run
// input.
func refundsAgent(t testing.TB) *agent.Agent {
	t.Helper()
	c := mustParse(t, `{"agents": {"refunds": {
		"input": {"type": "object", "required": ["orderId"], "properties": {"orderId": {"type": "string"}}},
		"tools": {
			"refundOrder": {"effect": "write",
				"input": {
					"type": "object",
					"properties": {
						"item": {"type": "object", "required": ["id"], "properties": {
							"id": {"type": "string", "minLength": 1},
							"amount": {"type": "number", "maximum": 20, "minimum": 0}}},
						"reason": {"enum": ["damaged", "late", "other"]},
						"items": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
						"count": {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 2},
						"note": {"type": ["string", "null"], "maxLength": 5},
						"email": {"type": "string", "format": "email"},
						"meta": {"type": "object", "properties": {"a b": {"type": "string"}}, "additionalProperties": false},
						"code": {"type": "string", "pattern": "^[A-Z]{3}$"},
						"kind": {"const": "refund"},
						"choice": {"anyOf": [{"type": "string"}, {"type": "number"}]},
						"shape": {"oneOf": [{"type": "object", "required": ["a"]}, {"type": "array"}]}
					},
					"additionalProperties": false
				},
				"output": {"type": "object", "required": ["refundId"]}},
			"noSchemas": {"effect": "read"}},
		"steps": [{"id": "s", "tool": "refundOrder"}]}}}`)
	return c.Agents["refunds"]
}

func TestValidateInputMessages(t *testing.T) {
	t.Parallel()
	tool, _ := refundsAgent(t).Tool("refundOrder")
	tests := []struct {
		name  string
		input string
		want  string // Error()
	}{
		{"the wording models are told", `{"item": {"id": "o1", "amount": "12"}}`, `Invalid arguments for "refundOrder": item.amount: must be a number`},
		{"required", `{"item": {}}`, `Invalid arguments for "refundOrder": item.id: is required`},
		{"maximum", `{"item": {"id": "o1", "amount": 25}}`, `Invalid arguments for "refundOrder": item.amount: must be at most 20`},
		{"minimum", `{"item": {"id": "o1", "amount": -1}}`, `Invalid arguments for "refundOrder": item.amount: must be at least 0`},
		{"enum", `{"reason": "bored"}`, `Invalid arguments for "refundOrder": reason: must be one of "damaged", "late", "other"`},
		{"unknown property", `{"x": 1}`, `Invalid arguments for "refundOrder": must not have property "x"`},
		{"unknown nested property", `{"meta": {"a b": "ok", "c": 1}}`, `Invalid arguments for "refundOrder": meta: must not have property "c"`},
		{"key that is not an identifier", `{"meta": {"a b": 1}}`, `Invalid arguments for "refundOrder": meta["a b"]: must be a string`},
		{"array index", `{"items": [{"id": "a"}, {"id": 2}]}`, `Invalid arguments for "refundOrder": items[1].id: must be a string`},
		{"max items", `{"items": [{}, {}, {}]}`, `Invalid arguments for "refundOrder": items: must have at most 2 items`},
		{"integer", `{"count": 2.5}`, `Invalid arguments for "refundOrder": count: must be an integer`},
		{"exclusive minimum", `{"count": 0}`, `Invalid arguments for "refundOrder": count: must be greater than 0`},
		{"multiple of", `{"count": 3}`, `Invalid arguments for "refundOrder": count: must be a multiple of 2`},
		{"type union", `{"note": 5}`, `Invalid arguments for "refundOrder": note: must be a string or null`},
		{"max length", `{"note": "too long"}`, `Invalid arguments for "refundOrder": note: must be at most 5 characters long`},
		{"min length", `{"item": {"id": ""}}`, `Invalid arguments for "refundOrder": item.id: must not be empty`},
		{"format", `{"email": "nobody"}`, `Invalid arguments for "refundOrder": email: must be a valid email (missing @)`},
		{"pattern", `{"code": "abc"}`, `Invalid arguments for "refundOrder": code: must match the pattern /^[A-Z]{3}$/`},
		{"const", `{"kind": "sale"}`, `Invalid arguments for "refundOrder": kind: must be "refund"`},
		{"anyOf of types", `{"choice": true}`, `Invalid arguments for "refundOrder": choice: must be a number or a string`},
		{"oneOf, one branch got further", `{"shape": {"b": 1}}`, `Invalid arguments for "refundOrder": shape.a: is required`},
		{"root type", `"refund it"`, `Invalid arguments for "refundOrder": must be an object`},
		{"several problems, ordered by path", `{"item": {"amount": "x"}, "count": "y", "reason": 1}`,
			"Invalid arguments for \"refundOrder\": count: must be an integer\n" +
				"item.amount: must be a number\n" +
				"item.id: is required\n" +
				"reason: must be one of \"damaged\", \"late\", \"other\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tool.ValidateInput(decode(t, tt.input))
			if err == nil {
				t.Fatal("ValidateInput = nil, want an error")
			}
			if err.Error() != tt.want {
				t.Errorf("error =\n %s\nwant\n %s", err, tt.want)
			}
			var ie *agent.InputError
			if !errors.As(err, &ie) || ie.Tool != "refundOrder" || ie.Agent != "refunds" || ie.Code() != "invalid-arguments" {
				t.Errorf("error = %#v", err)
			}
		})
	}
}

func TestValidateInputProblems(t *testing.T) {
	t.Parallel()
	tool, _ := refundsAgent(t).Tool("refundOrder")
	err := tool.ValidateInput(decode(t, `{"items": [{"id": 1}], "meta": {"a b": 2}}`))
	var ie *agent.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error = %v", err)
	}
	want := []agent.FieldProblem{
		{Path: "items[0].id", Pointer: "/items/0/id", Message: "must be a string"},
		{Path: `meta["a b"]`, Pointer: "/meta/a b", Message: "must be a string"},
	}
	if len(ie.Problems) != len(want) {
		t.Fatalf("problems = %+v", ie.Problems)
	}
	for i := range want {
		if ie.Problems[i] != want[i] {
			t.Errorf("problem %d = %+v, want %+v", i, ie.Problems[i], want[i])
		}
	}
}

// TestValidateInputProblemOnce: two parts of a schema that refuse a value
// for the same reason give one problem, not the same line twice.
func TestValidateInputProblemOnce(t *testing.T) {
	t.Parallel()
	tool, _ := mustParse(t, `{"agents": {"a": {"tools": {"w": {"effect": "write", "input": {"allOf": [
		{"properties": {"amount": {"maximum": 5}}},
		{"properties": {"amount": {"maximum": 5}}}]}}},
		"steps": [{"id": "s", "tool": "w"}]}}}`).Agents["a"].Tool("w")
	err := tool.ValidateInput(decode(t, `{"amount": 9}`))
	if want := `Invalid arguments for "w": amount: must be at most 5`; err == nil || err.Error() != want {
		t.Errorf("error = %v\n want %s", err, want)
	}
}

// TestValidateInputProblemOrder: problems read in the order of the value,
// the outer one first and items by their index (2 before 10).
func TestValidateInputProblemOrder(t *testing.T) {
	t.Parallel()
	tool, _ := mustParse(t, `{"agents": {"a": {"tools": {"w": {"effect": "write",
		"input": {"type": "array", "maxItems": 11, "items": {"type": "string"}}}},
		"steps": [{"id": "s", "tool": "w"}]}}}`).Agents["a"].Tool("w")
	err := tool.ValidateInput(decode(t, `["a", "b", 2, "d", "e", "f", "g", "h", "i", "j", 10, "l"]`))
	want := "Invalid arguments for \"w\": must have at most 11 items\n[2]: must be a string\n[10]: must be a string"
	if err == nil || err.Error() != want {
		t.Errorf("error =\n%v\nwant\n%s", err, want)
	}
}

func TestValidateInputAccepts(t *testing.T) {
	t.Parallel()
	a := refundsAgent(t)
	tool, _ := a.Tool("refundOrder")
	for _, v := range []any{
		decode(t, `{"item": {"id": "o1", "amount": 12.5}, "items": [{"id": "x"}], "count": 4, "note": null, "email": "a@b.example", "choice": 3}`),
		// Values as a JS VM exports them: float64 and int64.
		map[string]any{"item": map[string]any{"id": "o1", "amount": float64(20)}, "count": int64(2)},
	} {
		if err := tool.ValidateInput(v); err != nil {
			t.Errorf("ValidateInput(%v) = %v", v, err)
		}
	}
	none, _ := a.Tool("noSchemas")
	if err := none.ValidateInput("anything"); err != nil {
		t.Errorf("no schema: %v", err)
	}
	if err := none.ValidateOutput(nil); err != nil {
		t.Errorf("no output schema: %v", err)
	}
}

func TestValidateInputNotJSON(t *testing.T) {
	t.Parallel()
	tool, _ := refundsAgent(t).Tool("refundOrder")
	err := tool.ValidateInput(map[string]any{"item": map[string]any{"id": "o1", "amount": struct{}{}}})
	if err == nil || !strings.Contains(err.Error(), "item.amount: holds a Go value of type struct {}, which is not a JSON value") {
		t.Errorf("error = %v", err)
	}
}

func TestValidateOutput(t *testing.T) {
	t.Parallel()
	tool, _ := refundsAgent(t).Tool("refundOrder")
	if err := tool.ValidateOutput(decode(t, `{"refundId": "r1"}`)); err != nil {
		t.Errorf("valid output: %v", err)
	}
	err := tool.ValidateOutput(decode(t, `{"ok": true}`))
	if want := `Invalid result from "refundOrder": refundId: is required`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
	var oe *agent.OutputError
	if !errors.As(err, &oe) || oe.Code() != "invalid-result" || oe.Tool != "refundOrder" {
		t.Errorf("error = %#v", err)
	}
}

func TestValidateRunInput(t *testing.T) {
	t.Parallel()
	a := refundsAgent(t)
	if err := a.ValidateRunInput(decode(t, `{"orderId": "o1"}`)); err != nil {
		t.Errorf("valid run input: %v", err)
	}
	err := a.ValidateRunInput(decode(t, `{}`))
	if want := `Invalid run input for agent "refunds": orderId: is required`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
	var ie *agent.InputError
	if !errors.As(err, &ie) || ie.Tool != "" || ie.Code() != "invalid-run-input" {
		t.Errorf("error = %#v", err)
	}
	noSchema := mustParse(t, exprConfig(`1`)).Agents["a"]
	if err := noSchema.ValidateRunInput(nil); err != nil {
		t.Errorf("no schema: %v", err)
	}
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	v, err := agent.DecodeJSON([]byte(` {"n": 12345678901234567890} `))
	if err != nil {
		t.Fatal(err)
	}
	if n := v.(map[string]any)["n"]; n != any(jsonNumber("12345678901234567890")) {
		t.Errorf("n = %#v", n)
	}
	if _, err := agent.DecodeJSON([]byte(`{} {}`)); err == nil {
		t.Error("trailing data accepted")
	}
	if _, err := agent.DecodeJSON([]byte(`{`)); err == nil {
		t.Error("truncated JSON accepted")
	}
	// A model's tool arguments are read as strictly as any edge.
	for _, bad := range []string{`{"amount": 1, "amount": 1000}`, "{\"note\": \"\xff\"}", strings.Repeat("[", 65) + strings.Repeat("]", 65)} {
		if _, err := agent.DecodeJSON([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "decode JSON: ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestEmbeddedSchemaDrafts(t *testing.T) {
	t.Parallel()
	a := mustParse(t, `{"agents": {"a": {"tools": {
		"old":   {"effect": "read", "input": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
		          "properties": {"n": {"type": "integer"}}, "definitions": {"x": {"type": "string"}}}},
		"any":   {"effect": "read", "input": true},
		"never": {"effect": "read", "input": false},
		"refs":  {"effect": "read", "input": {"type": "array", "items": {"$ref": "#/$defs/item"},
		          "$defs": {"item": {"type": "object", "required": ["id"]}}}}},
		"steps": [{"id": "s", "tool": "any"}]}}}`).Agents["a"]
	check := func(tool, input, want string) {
		t.Helper()
		tl, _ := a.Tool(tool)
		err := tl.ValidateInput(decode(t, input))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s(%s) = %q, want %q", tool, input, got, want)
		}
	}
	check("old", `{"n": 1}`, "")
	check("old", `{"n": 1.5}`, `Invalid arguments for "old": n: must be an integer`)
	check("any", `[1, "x"]`, "")
	check("never", `{}`, `Invalid arguments for "never": is not allowed`)
	check("refs", `[{"id": 1}, {}]`, `Invalid arguments for "refs": [1].id: is required`)
}
