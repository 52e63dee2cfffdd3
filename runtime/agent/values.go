package agent

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"stead/strictjson"
)

// DecodeJSON decodes one JSON value the way this package expects values:
// objects as map[string]any, arrays as []any, numbers as json.Number (exact;
// no float64 rounding of large ids). It reads strictly (strictjson): a key
// twice in an object, invalid UTF-8, nesting deeper than
// strictjson.MaxDepth or data after the value is an error, a
// *strictjson.Error naming the place.
func DecodeJSON(data []byte) (any, error) {
	v, err := strictjson.Value(data)
	if err != nil {
		return nil, fmt.Errorf("decode JSON: %w", err)
	}
	return v, nil
}

// FieldProblem is one way a value fails its JSON Schema.
type FieldProblem struct {
	// Path names the field: "item.amount", "items[0].id", `meta["a b"]`.
	// Object keys are joined with dots (keys that are not identifiers are
	// written ["key"]); array indices are written [n]. "" is the value
	// itself.
	Path string
	// Pointer is the same place as a JSON pointer: "/items/0/id".
	Pointer string
	// Message says what is wrong: "must be a number", "is required".
	Message string
}

// String reads "item.amount: must be a number", or just the message for
// the value itself.
func (p FieldProblem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// InputError is a tool call's arguments, or a run's input, that do not match
// their schema. Nothing ran.
type InputError struct {
	// Agent names the agent.
	Agent string
	// Tool names the tool whose arguments failed; "" when the run input
	// failed the agent's input schema.
	Tool string
	// Problems lists every problem, ordered by path.
	Problems []FieldProblem
}

// Error reads, in the words of the tool contract,
//
//	Invalid arguments for "refundOrder": item.amount: must be a number
//
// or `Invalid run input for agent "refunds": orderId: is required`. With
// several problems, the first is on that line and each other one follows on
// a line of its own.
func (e *InputError) Error() string {
	head := fmt.Sprintf("Invalid run input for agent %q: ", e.Agent)
	if e.Tool != "" {
		head = fmt.Sprintf("Invalid arguments for %q: ", e.Tool)
	}
	return head + joinProblems(e.Problems)
}

// Code is the stable machine-readable code the API and CLI show:
// "invalid-arguments" or "invalid-run-input".
func (e *InputError) Code() string {
	if e.Tool != "" {
		return "invalid-arguments"
	}
	return "invalid-run-input"
}

// OutputError is a tool result that does not match the tool's output
// schema (the handler ran; its result is not passed on), or a model step's
// answer that does not match the step's output schema.
type OutputError struct {
	Agent, Tool string
	// Step is set, and Tool empty, for a model step's answer.
	Step     string
	Problems []FieldProblem
}

// Error reads `Invalid result from "refundOrder": refundId: is required`,
// or `Invalid output of step "summary": title: is required` for a model
// step, with further problems on lines of their own.
func (e *OutputError) Error() string {
	if e.Tool == "" && e.Step != "" {
		return fmt.Sprintf("Invalid output of step %q: ", e.Step) + joinProblems(e.Problems)
	}
	return fmt.Sprintf("Invalid result from %q: ", e.Tool) + joinProblems(e.Problems)
}

// Code is the stable machine-readable code: "invalid-result".
func (e *OutputError) Code() string { return "invalid-result" }

func joinProblems(ps []FieldProblem) string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// ValidateInput checks a call's resolved input against the tool's input
// schema. It returns nil when the tool has none. On failure the error is an
// *InputError.
func (t *Tool) ValidateInput(v any) error {
	if ps := valueProblems(t.input, v); ps != nil {
		return &InputError{Agent: t.Agent, Tool: t.Name, Problems: ps}
	}
	return nil
}

// ValidateOutput checks a handler's result against the tool's output
// schema. It returns nil when the tool has none. On failure the error is an
// *OutputError.
func (t *Tool) ValidateOutput(v any) error {
	if ps := valueProblems(t.output, v); ps != nil {
		return &OutputError{Agent: t.Agent, Tool: t.Name, Problems: ps}
	}
	return nil
}

// ValidateRunInput checks a run's input against the agent's input schema.
// It returns nil when the agent has none. On failure the error is an
// *InputError with an empty Tool.
func (a *Agent) ValidateRunInput(v any) error {
	if ps := valueProblems(a.input, v); ps != nil {
		return &InputError{Agent: a.Name, Problems: ps}
	}
	return nil
}

// valueProblems validates v; nil means it is valid (or there is no schema).
func valueProblems(sch *jsonschema.Schema, v any) []FieldProblem {
	if sch == nil {
		return nil
	}
	err := sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []FieldProblem{{Message: err.Error()}}
	}
	var ps []FieldProblem
	for _, is := range (translator{instance: v}).issues(ve) {
		ps = append(ps, FieldProblem{Path: fieldPath(v, is.loc), Pointer: jsonPointer(is.loc...), Message: is.msg})
	}
	if len(ps) == 0 { // cannot happen: a failed validation has a leaf
		ps = []FieldProblem{{Message: "does not match the schema"}}
	}
	slices.SortFunc(ps, func(a, b FieldProblem) int {
		return cmp.Or(comparePointers(a.Pointer, b.Pointer), cmp.Compare(a.Message, b.Message))
	})
	return slices.Compact(ps)
}

// fieldPath writes instance location tokens as a path: keys joined with
// dots, array indices in brackets. It walks v to tell an index from a key
// that looks like a number.
func fieldPath(v any, loc []string) string {
	var b strings.Builder
	cur := v
	for _, tok := range loc {
		switch c := cur.(type) {
		case []any:
			b.WriteString("[" + tok + "]")
			n, err := strconv.Atoi(tok)
			if err == nil && n >= 0 && n < len(c) {
				cur = c[n]
			} else {
				cur = nil
			}
			continue
		case map[string]any:
			cur = c[tok]
		default:
			cur = nil
		}
		switch {
		case strictjson.IsPlainName(tok) && b.Len() == 0:
			b.WriteString(tok)
		case strictjson.IsPlainName(tok):
			b.WriteString("." + tok)
		default:
			b.WriteString("[" + strconv.Quote(tok) + "]")
		}
	}
	return b.String()
}
