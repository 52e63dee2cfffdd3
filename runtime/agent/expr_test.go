package agent_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"stead/runtime/agent"
)

// exprConfig declares two steps; the second one's input is the template under
// test, so it may refer to $steps.first.output.
func exprConfig(input string) string {
	return `{"agents": {"a": {"tools": {"t": {"effect": "read"}}, "steps": [
		{"id": "first", "tool": "t"},
		{"id": "second", "tool": "t", "input": ` + input + `}]}}}`
}

func secondStep(t testing.TB, input string) *agent.Step {
	t.Helper()
	s, ok := mustParse(t, exprConfig(input)).Agents["a"].Step("second")
	if !ok {
		t.Fatal("no step second")
	}
	return s
}

func decode(t testing.TB, s string) any {
	t.Helper()
	v, err := agent.DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func exprScope(t testing.TB) agent.Scope {
	return agent.Scope{
		Input: decode(t, `{"orderId": 42, "a": {"b": "deep"}, "maybe": null, "name": "Ada", "big": 12345678901234567890}`),
		Outputs: map[string]any{
			"first": decode(t, `{"items": [{"id": "o1", "amount": 5}, {"id": "o2", "amount": 30}], "next": null}`),
		},
		RunID:     "run_1",
		EndUserID: "user_7",
	}
}

func TestResolveInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string // the step's input in stead.json
		want  string // the resolved input as JSON
	}{
		{"whole input", `"$input"`, `{"a":{"b":"deep"},"big":12345678901234567890,"maybe":null,"name":"Ada","orderId":42}`},
		{"input path", `{"x": "$input.a.b"}`, `{"x":"deep"}`},
		{"typed number", `{"n": "$input.orderId"}`, `{"n":42}`},
		{"typed object", `{"item": "$input.a"}`, `{"item":{"b":"deep"}}`},
		{"explicit null", `{"m": "$input.maybe"}`, `{"m":null}`},
		{"step output", `"$steps.first.output"`, `{"items":[{"amount":5,"id":"o1"},{"amount":30,"id":"o2"}],"next":null}`},
		{"output path with brackets", `{"id": "$steps.first.output.items[1].id"}`, `{"id":"o2"}`},
		{"output path with dot index", `{"id": "$steps.first.output.items.0.id"}`, `{"id":"o1"}`},
		{"array from output", `"$steps.first.output.items"`, `[{"amount":5,"id":"o1"},{"amount":30,"id":"o2"}]`},
		{"run", `{"run": "$run.id", "user": "$run.endUserId"}`, `{"run":"run_1","user":"user_7"}`},
		{"escape", `{"price": "$$5", "word": "$$input", "two": "$$$x"}`, `{"price":"$5","two":"$$x","word":"$input"}`},
		{"literal strings", `{"a": "plain", "b": "costs 5$", "c": "a $input in the middle", "d": ""}`, `{"a":"plain","b":"costs 5$","c":"a $input in the middle","d":""}`},
		{"nested", `{"a": [1, "$input.name", {"b": ["$run.id", true, null, 2.5]}], "c": {"d": {"e": "$steps.first.output.items[0].amount"}}}`,
			`{"a":[1,"Ada",{"b":["run_1",true,null,2.5]}],"c":{"d":{"e":5}}}`},
		{"literal tree", `{"a": [1, {"b": "x"}], "n": 1e3}`, `{"a":[1,{"b":"x"}],"n":1e3}`},
		{"scalar input", `7`, `7`},
		{"template", `{"note": "Order {{ $input.orderId }} for {{$run.endUserId}}"}`, `{"note":"Order 42 for user_7"}`},
		{"template with JSON value", `"items: {{ $steps.first.output.items[0] }}, next: {{ $steps.first.output.next }}"`, `"items: {\"amount\":5,\"id\":\"o1\"}, next: null"`},
		{"template escape", `"\\{{ not an expression }} and {{ $input.name }}"`, `"{{ not an expression }} and Ada"`},
		{"escaped dollar and template", `"$${{ $input.orderId }} off"`, `"$42 off"`},
		{"closing braces alone", `"a }} b"`, `"a }} b"`},
		{"big number exact", `{"big": "$input.big"}`, `{"big":12345678901234567890}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := secondStep(t, tt.input).ResolveInput(exprScope(t))
			if err != nil {
				t.Fatalf("ResolveInput: %v", err)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("ResolveInput =\n %s\nwant\n %s", b, tt.want)
			}
		})
	}
}

func TestResolveInputTypes(t *testing.T) {
	t.Parallel()
	s := secondStep(t, `{"lit": 3, "fromJSON": "$input.orderId", "fromFloat": "$steps.first.output.n", "flag": "$steps.first.output.ok"}`)
	got, err := s.ResolveInput(agent.Scope{
		Input:   decode(t, `{"orderId": 42}`),
		Outputs: map[string]any{"first": map[string]any{"n": 1.5, "ok": true}}, // as exported from a JS VM
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"lit": json.Number("3"), "fromJSON": json.Number("42"), "fromFloat": 1.5, "flag": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ResolveInput = %#v, want %#v", got, want)
	}
}

func TestResolveInputNoInput(t *testing.T) {
	t.Parallel()
	s, _ := mustParse(t, exprConfig(`1`)).Agents["a"].Step("first")
	got, err := s.ResolveInput(agent.Scope{})
	if err != nil || !reflect.DeepEqual(got, map[string]any{}) {
		t.Errorf("ResolveInput = %#v, %v; want an empty object", got, err)
	}
}

// TestResolveInputDoesNotAlias checks that a resolved input shares no memory
// with the config or the scope: a handler or engine may change it freely.
func TestResolveInputDoesNotAlias(t *testing.T) {
	t.Parallel()
	s := secondStep(t, `{"lit": {"k": [1]}, "item": "$input.a", "items": "$steps.first.output.items"}`)
	sc := exprScope(t)
	first, err := s.ResolveInput(sc)
	if err != nil {
		t.Fatal(err)
	}
	m := first.(map[string]any)
	m["lit"].(map[string]any)["k"].([]any)[0] = "changed"
	m["item"].(map[string]any)["b"] = "changed"
	m["items"].([]any)[0].(map[string]any)["id"] = "changed"

	again, _ := s.ResolveInput(sc)
	b, _ := json.Marshal(again)
	if strings.Contains(string(b), "changed") {
		t.Errorf("second resolve sees the first one's changes: %s", b)
	}
	if in, _ := json.Marshal(sc.Input); strings.Contains(string(in), "changed") {
		t.Errorf("scope input changed: %s", in)
	}
	if raw, _ := json.Marshal(s.Input); string(raw) != `{"item":"$input.a","items":"$steps.first.output.items","lit":{"k":[1]}}` {
		t.Errorf("raw input changed: %s", raw)
	}
}

func TestResolveInputErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   string
		scope   func(sc *agent.Scope)
		want    string // Error()
		pointer string
		expr    string
	}{
		{"missing property in output", `{"x": "$steps.first.output.orders[0].id"}`, nil,
			`$steps.first.output.orders: no property "orders"`, "/x", "$steps.first.output.orders[0].id"},
		{"missing input property", `{"a": {"b": ["$input.order.id"]}}`, nil,
			`$input.order: no property "order"`, "/a/b/0", "$input.order.id"},
		{"index out of range", `"$steps.first.output.items[5].id"`, nil,
			`$steps.first.output.items[5]: no item at index 5 (the array has 2 items)`, "", "$steps.first.output.items[5].id"},
		{"dot index out of range", `"$steps.first.output.items.2"`, nil,
			`$steps.first.output.items.2: no item at index 2 (the array has 2 items)`, "", "$steps.first.output.items.2"},
		{"negative dot index", `"$steps.first.output.items.-1"`, nil,
			`$steps.first.output.items.-1: no property "-1" (the value is an array; use an index such as [0])`, "", "$steps.first.output.items.-1"},
		{"key on array", `"$steps.first.output.items.id"`, nil,
			`$steps.first.output.items.id: no property "id" (the value is an array; use an index such as [0])`, "", "$steps.first.output.items.id"},
		{"property of a string", `"$input.name.first"`, nil,
			`$input.name.first: no property "first" (the value is a string)`, "", "$input.name.first"},
		{"property of null", `"$input.maybe.x"`, nil,
			`$input.maybe.x: no property "x" (the value is null)`, "", "$input.maybe.x"},
		{"property of a boolean", `"$input.flag.x"`, func(sc *agent.Scope) { sc.Input = map[string]any{"flag": true} },
			`$input.flag.x: no property "x" (the value is a boolean)`, "", "$input.flag.x"},
		{"index of a number", `"$input.orderId[0]"`, nil,
			`$input.orderId[0]: no item at index 0 (the value is a number)`, "", "$input.orderId[0]"},
		{"no input at all", `"$input.orderId"`, func(sc *agent.Scope) { sc.Input = nil },
			`$input.orderId: no property "orderId" (the value is null)`, "", "$input.orderId"},
		{"step without output", `{"x": "$steps.first.output"}`, func(sc *agent.Scope) { sc.Outputs = nil },
			`$steps.first.output: step "first" has no output yet`, "/x", "$steps.first.output"},
		{"in a template", `{"note": "Order {{ $input.order.id }}"}`, nil,
			`$input.order: no property "order"`, "/note", "$input.order.id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc := exprScope(t)
			if tt.scope != nil {
				tt.scope(&sc)
			}
			got, err := secondStep(t, tt.input).ResolveInput(sc)
			if err == nil {
				t.Fatalf("ResolveInput = %v, want an error", got)
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q\n want %q", err, tt.want)
			}
			var re *agent.ResolveError
			if !errors.As(err, &re) {
				t.Fatalf("error is %T, want *agent.ResolveError", err)
			}
			if re.Step != "second" || re.Pointer != tt.pointer || re.Expr != tt.expr || re.Code() != "unresolved-expression" {
				t.Errorf("ResolveError = %+v", re)
			}
		})
	}
}

// TestExpressionConfigErrors checks that bad expressions are config errors
// at Parse, with the pointer of the string that holds them.
func TestExpressionConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   string
		pointer string
		msg     string // substring of the message
	}{
		{"unknown step", `{"x": "$steps.nope.output"}`, "/input/x", `$steps.nope.output refers to step "nope", which does not exist (steps: first, second, third)`},
		{"later step", `{"x": ["$steps.third.output.a"]}`, "/input/x/0", `$steps.third.output.a refers to step "third", which runs later (steps run in order)`},
		{"self reference", `"$steps.second.output"`, "/input", `$steps.second.output refers to this step's own output`},
		{"later step twice in a template, reported once", `"{{ $steps.third.output }} and {{ $steps.third.output }}"`, "/input", `$steps.third.output refers to step "third", which runs later`},
		{"self reference in template", `{"t": "n={{ $steps.second.output.n }}"}`, "/input/t", `refers to this step's own output`},
		{"unknown root", `{"x": "$foo"}`, "/input/x", `"$foo" is not an expression: expressions are $input, $steps.<id>.output, $run.id and $run.endUserId`},
		{"unknown root suggestion", `"$inputs.a"`, "/input", `(did you mean $input?)`},
		{"literal dollar needs escape", `"$5"`, "/input", `write "$$" ("$$5" is the text "$5")`},
		{"bare dollar", `"$"`, "/input", `"$" is not an expression`},
		{"steps without output", `"$steps.first"`, "/input", `$steps.first: add ".output" to use the step's result, as in $steps.first.output`},
		{"steps other field", `"$steps.first.status"`, "/input", `$steps.first.status: a step has only .output, not .status`},
		{"steps without id", `"$steps"`, "/input", `$steps: name a step, as in $steps.<id>.output`},
		{"run unknown field", `"$run.user"`, "/input", `$run.user: unknown field "user"; $run has $run.id and $run.endUserId`},
		{"run path", `"$run.id.x"`, "/input", `$run.id.x: $run.id is a string; it has no properties or items`},
		{"empty segment", `"$input..a"`, "/input", `$input..a: expected a property name after "." at position 7`},
		{"trailing dot", `"$input."`, "/input", `expected a property name after "."`},
		{"bad index", `"$input.items[x]"`, "/input", `[x] is not an array index; use a number such as [0]`},
		{"negative index", `"$input.items[-1]"`, "/input", `[-1] is not an array index`},
		{"index with a leading zero", `"$input.items[01]"`, "/input", `[01] is not an array index; use a number such as [0]`},
		{"index with a sign", `"$input.items[+1]"`, "/input", `[+1] is not an array index; use a number such as [0]`},
		{"unclosed bracket", `"$input.items[0"`, "/input", `"[" is not closed by "]"`},
		{"spaces", `"$input.a b"`, "/input", `$input.a b: unexpected " " after $input.a`},
		{"unclosed template", `"Hello {{ $input.name"`, "/input", `"{{" at position 7 is not closed by "}}"`},
		{"unclosed template after non-ASCII text", `"Grüße {{ $input.name"`, "/input", `"{{" at position 7 is not closed by "}}"`},
		{"root with a digit", `"$input9.a"`, "/input", `"$input9.a" is not an expression (did you mean $input?)`},
		{"empty template", `"Hello {{ }}"`, "/input", `"{{ }}" at position 7 holds no expression`},
		{"template without dollar", `"Hello {{ input.name }}"`, "/input", `"input.name" is not an expression: expressions start with "$"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := `{"agents": {"a": {"tools": {"t": {"effect": "read"}}, "steps": [
				{"id": "first", "tool": "t"},
				{"id": "second", "tool": "t", "input": ` + tt.input + `},
				{"id": "third", "tool": "t"}]}}}`
			ps := problems(t, src)
			if len(ps) != 1 {
				t.Fatalf("problems = %v, want one", ps)
			}
			if want := "/agents/a/steps/1" + tt.pointer; ps[0].Pointer != want {
				t.Errorf("pointer = %q, want %q", ps[0].Pointer, want)
			}
			if !strings.Contains(ps[0].Message, tt.msg) {
				t.Errorf("message = %q\n want it to contain %q", ps[0].Message, tt.msg)
			}
		})
	}
}

func TestParseExprAndTemplate(t *testing.T) {
	t.Parallel()
	e, err := agent.ParseExpr("$steps.orders.output.items[0].id")
	if err != nil {
		t.Fatal(err)
	}
	if e.String() != "$steps.orders.output.items[0].id" || e.Step() != "orders" {
		t.Errorf("expr = %q step %q", e, e.Step())
	}
	v, err := e.Resolve(agent.Scope{Outputs: map[string]any{"orders": decode(t, `{"items": [{"id": "o1"}]}`)}})
	if err != nil || v != "o1" {
		t.Errorf("Resolve = %v, %v", v, err)
	}
	if in, _ := agent.ParseExpr("$input"); in.Step() != "" {
		t.Errorf("$input has step %q", in.Step())
	}

	tpl, err := agent.ParseTemplate("Dear {{ $input.name }}, order {{ $input.id }} \\{{ok}}")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tpl.Exprs()); n != 2 {
		t.Errorf("%d expressions", n)
	}
	got, err := tpl.Resolve(agent.Scope{Input: decode(t, `{"name": "Ada", "id": 7}`)})
	if want := "Dear Ada, order 7 {{ok}}"; err != nil || got != want {
		t.Errorf("Resolve = %q, %v; want %q", got, err, want)
	}
	if tpl.String() != "Dear {{ $input.name }}, order {{ $input.id }} \\{{ok}}" {
		t.Errorf("String = %q", tpl)
	}
}

func jsonNumber(s string) json.Number { return json.Number(s) }
