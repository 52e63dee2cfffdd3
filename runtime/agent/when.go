package agent

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// When is a JSON Schema from outside a config that a call's input must
// satisfy: a remembered decision's scope. It compiles as the schemas in
// stead.json do (draft 2020-12, formats asserted, no $ref outside itself)
// and is safe for concurrent use.
type When struct{ s *jsonschema.Schema }

// CompileWhen compiles raw, strictly parsed. The error says what is wrong
// with the schema, without naming where it came from: "not a valid JSON
// Schema: /properties/amount/minimum: must be a number".
func CompileWhen(raw json.RawMessage) (*When, error) {
	doc, err := DecodeJSON(raw)
	if err != nil {
		return nil, err
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("must be a JSON Schema object, like {\"properties\": {\"amount\": {\"maximum\": 50}}}")
	}
	s, problems := compileSchema("", doc)
	if len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.Message
			if p.Pointer != "" {
				msgs[i] = p.Pointer + ": " + p.Message
			}
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	return &When{s: s}, nil
}

// Allows reports whether input (as tools get it: DecodeJSON's values)
// satisfies the schema. An input the schema cannot judge is not allowed,
// as for allow rules: uncertainty never lets a call through.
func (w *When) Allows(input any) bool {
	return w.s.Validate(input) == nil
}
