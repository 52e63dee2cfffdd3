package openapicompat_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"stead/api/openapicompat"
)

const base = `{
  "openapi": "3.1.0",
  "paths": {
    "/v1/runs/{id}": {"get": {"responses": {
      "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Run"}}}},
      "404": {"$ref": "#/components/responses/NotFound"}}}},
    "/v1/keys": {"post": {
      "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"name": {"type": "string"}, "role": {"type": "string"}}}}}},
      "responses": {"201": {"content": {"application/json": {"schema": {"type": "object", "properties": {"id": {"type": "string"}}}}}}}}},
    "/v1/agents": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"type": "object"}}}}}}}
  },
  "components": {
    "schemas": {
      "Run": {"type": "object", "properties": {"id": {"type": "string"}, "costs": {"type": "object", "properties": {"costUsd": {"type": "number"}}},
        "error": {"type": "object", "properties": {"stack": {"type": "string"}}}, "tags": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}}
    },
    "responses": {"NotFound": {"content": {"application/json": {"schema": {"type": "object"}}}}}
  }
}`

// Parts of base the cases edit.
const (
	agents200  = `"/v1/agents": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"type": "object"}}}}}}}`
	keysSchema = `{"type": "object", "properties": {"name": {"type": "string"}, "role": {"type": "string"}}}`
	keysBody   = `"requestBody": {"content": {"application/json": {"schema": ` + keysSchema + `}}}`
)

func TestBreaking(t *testing.T) {
	for _, tc := range []struct {
		name, from, to string
		want           []string
	}{
		{"same", "", "", nil},
		{"a field added", `"costUsd": {"type": "number"}`, `"costUsd": {"type": "number"}, "costEur": {"type": "number"}`, nil},
		{"an optional request field added", `"role": {"type": "string"}}`, `"role": {"type": "string"}, "note": {"type": "string"}}`, nil},
		{"a response field removed", `
        "error": {"type": "object", "properties": {"stack": {"type": "string"}}}, `, `
        `,
			[]string{"GET /v1/runs/{id} 200: response field error removed", "GET /v1/runs/{id} 200: response field error.stack removed"}},
		{"a nested array field removed", `"items": {"type": "object", "properties": {"name": {"type": "string"}}}`, `"items": {"type": "object", "properties": {}}`,
			[]string{"GET /v1/runs/{id} 200: response field tags[].name removed"}},
		{"a response type changed", `"costUsd": {"type": "number"}`, `"costUsd": {"type": "string"}`,
			[]string{"GET /v1/runs/{id} 200: response field costs.costUsd changed type from number to string"}},
		{"a response type narrowed is fine", `"costUsd": {"type": "number"}`, `"costUsd": {"type": "integer"}`, nil},
		{"a request field narrowed", `"role": {"type": "string"}`, `"role": {"type": "integer"}`,
			[]string{"POST /v1/keys: request field role narrowed from string to integer"}},
		{"a request field newly required", `"role": {"type": "string"}}}`, `"role": {"type": "string"}}, "required": ["role"]}`,
			[]string{"POST /v1/keys: request field role now required"}},
		{"a request field removed", `"name": {"type": "string"}, `, ``, []string{"POST /v1/keys: request field name removed"}},
		{"an operation removed", `,
    "/v1/agents": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"type": "object"}}}}}}}`, ``,
			[]string{"GET /v1/agents: operation removed"}},
		{"an object split into oneOf variants keeps its fields", `"error": {"type": "object", "properties": {"stack": {"type": "string"}}}`,
			`"error": {"oneOf": [{"type": "object", "properties": {"stack": {"type": "string"}}}, {"type": "object", "properties": {"code": {"type": "string"}}}]}`, nil},
		{"a field only one variant had removed", `"error": {"type": "object", "properties": {"stack": {"type": "string"}}}`,
			`"error": {"oneOf": [{"type": "object", "properties": {"code": {"type": "string"}}}, {"type": "object", "properties": {"line": {"type": "integer"}}}]}`,
			[]string{"GET /v1/runs/{id} 200: response field error.stack removed"}},
		{"a status removed", `,
      "404": {"$ref": "#/components/responses/NotFound"}`, ``, []string{"GET /v1/runs/{id}: response 404 removed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			older := base
			to := strings.Replace(older, tc.from, tc.to, 1)
			if tc.from != "" && to == older {
				t.Fatalf("the edit %q does not apply", tc.from)
			}
			got, err := openapicompat.Breaking([]byte(older), []byte(to))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBreakingFromEdited compares base with pre applied (from, to, from,
// to…) to that with one more edit.
func TestBreakingFromEdited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, from, to string
		want           []string
		pre            []string
	}{
		{"a 2XX range's field removed", `"n": {"type": "integer"}`, ``, []string{"GET /v1/agents 2XX: response field n removed"},
			[]string{agents200, `"/v1/agents": {"get": {"responses": {"2XX": {"content": {"application/json": {"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}}}`}},
		{"an error document's field removed is fine", `"code": {"type": "string"}`, ``, nil,
			[]string{`"NotFound": {"content": {"application/json": {"schema": {"type": "object"}}}}`, `"NotFound": {"content": {"application/json": {"schema": {"type": "object", "properties": {"code": {"type": "string"}}}}}}`}},
		{"a request field widened is fine", `"role": {"type": "string"}`, `"role": {"type": ["string", "null"]}`, nil, nil},
		{"a request body newly required", `"requestBody": {"content"`, `"requestBody": {"required": true, "content"`,
			[]string{"POST /v1/keys: request body now required"}, nil},
		{"a request body removed", keysBody + `,`, ``, []string{"POST /v1/keys: request body removed"}, nil},
		{"a field required before stays required", `"role": {"type": "string"}}`, `"role": {"type": "string"}, "note": {"type": "string"}}`, nil,
			[]string{`"role": {"type": "string"}}}`, `"role": {"type": "string"}}, "required": ["role"]}`}},
		{"an array answer's item field removed", `"label": {"type": "string"}`, ``, []string{"GET /v1/agents 200: response field [].label removed"},
			[]string{agents200, `"/v1/agents": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"type": "array", "items": {"type": "object", "properties": {"label": {"type": "string"}}}}}}}}}}`}},
		{"a field that was any in one variant may become anything", `"costUsd": {"oneOf": [{"type": "number"}, {}]}`, `"costUsd": {"type": "string"}`, nil,
			[]string{`"costUsd": {"type": "number"}`, `"costUsd": {"oneOf": [{"type": "number"}, {}]}`}},
		{"a field only one variant requires is not required", keysSchema,
			`{"oneOf": [{"type": "object", "properties": {"name": {"type": "string"}, "role": {"type": "string"}}, "required": ["name"]}, {"type": "object", "properties": {"name": {"type": "string"}, "role": {"type": "string"}}}]}`, nil, nil},
		{"a field only one variant has is not required", keysSchema,
			`{"oneOf": [{"type": "object", "properties": {"name": {"type": "string"}, "role": {"type": "string"}}, "required": ["name"]}, {"type": "object", "properties": {"role": {"type": "string"}}}]}`, nil, nil},
		{"a variant field of any type may become anything", `"error": {"oneOf": [{"type": "object", "properties": {"stack": {"type": "string"}}}, {"type": "object", "properties": {"stack": {}}}]}`,
			`"error": {"type": "object", "properties": {"stack": {"type": "integer"}}}`, nil,
			[]string{`"error": {"type": "object", "properties": {"stack": {"type": "string"}}}`, `"error": {"oneOf": [{"type": "object", "properties": {"stack": {"type": "string"}}}, {"type": "object", "properties": {"stack": {}}}]}`}},
		{"a response field's type dropped", `"stack": {"type": "string"}`, `"stack": {}`,
			[]string{"GET /v1/runs/{id} 200: response field error.stack changed type from string to any"}, nil},
		{"a response field of any type given one is fine", `"stack": {}`, `"stack": {"type": "string"}`, nil,
			[]string{`"stack": {"type": "string"}`, `"stack": {}`}},
		{"an answer not in JSON is not compared", `"data": {"type": "string"}`, ``, nil,
			[]string{`"/v1/agents": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"type": "object"}}}}}}}`,
				`"/v1/agents": {"get": {"responses": {"200": {"content": {"text/event-stream": {"schema": {"type": "object", "properties": {"data": {"type": "string"}}}}}}}}}`}},
		{"a field of a shared response removed", `"agents": {"type": "array"}`, `"count": {"type": "integer"}`, []string{"GET /v1/agents 200: response field agents removed"},
			[]string{agents200, `"/v1/agents": {"get": {"responses": {"200": {"$ref": "#/components/responses/Agents"}}}}`,
				`"responses": {"NotFound":`, `"responses": {"Agents": {"content": {"application/json": {"schema": {"type": "object", "properties": {"agents": {"type": "array"}}}}}}, "NotFound":`}},
		{"a DELETE removed", `"delete": {"responses": {"204": {}}}, `, ``, []string{"DELETE /v1/agents: operation removed"},
			[]string{`"/v1/agents": {"get":`, `"/v1/agents": {"delete": {"responses": {"204": {}}}, "get":`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			older := base
			for i := 0; i+1 < len(tc.pre); i += 2 {
				edited := strings.Replace(older, tc.pre[i], tc.pre[i+1], 1)
				if edited == older {
					t.Fatalf("the edit %q does not apply", tc.pre[i])
				}
				older = edited
			}
			newer := strings.Replace(older, tc.from, tc.to, 1)
			if newer == older {
				t.Fatalf("the edit %q does not apply", tc.from)
			}
			got, err := openapicompat.Breaking([]byte(older), []byte(newer))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBreakingIsSorted removes many operations at once: the lines come
// sorted whatever the order the maps are walked in.
func TestBreakingIsSorted(t *testing.T) {
	t.Parallel()
	var paths, want []string
	for c := 'a'; c <= 'z'; c++ {
		paths = append(paths, fmt.Sprintf(`"/v1/%c": {"get": {"responses": {"200": {}}}}`, c))
		want = append(want, fmt.Sprintf("GET /v1/%c: operation removed", c))
	}
	older := `{"paths": {` + strings.Join(paths, ", ") + `}}`
	got, err := openapicompat.Breaking([]byte(older), []byte(`{"paths": {}}`))
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

func TestBreakingRefusesBrokenDocuments(t *testing.T) {
	t.Parallel()
	if _, err := openapicompat.Breaking([]byte(base), []byte(`{"paths": `)); err == nil || !strings.HasPrefix(err.Error(), "the newer document: ") {
		t.Errorf("a broken newer document: %v", err)
	}
	if _, err := openapicompat.Breaking([]byte(`{"paths": `), []byte(base)); err == nil || !strings.HasPrefix(err.Error(), "the older document: ") {
		t.Errorf("a broken older document: %v", err)
	}
}

// TestRecursiveSchemasEnd: a oneOf that refers to itself is read to a
// bounded depth.
func TestRecursiveSchemasEnd(t *testing.T) {
	t.Parallel()
	doc := `{"paths": {"/v1/tree": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Tree"}}}}}}}},
  "components": {"schemas": {
    "Tree": {"type": "object", "properties": {"node": {"$ref": "#/components/schemas/Node"}}},
    "Node": {"oneOf": [{"$ref": "#/components/schemas/Node"}, {"type": "string"}]}}}}`
	got, err := openapicompat.Breaking([]byte(doc), []byte(doc))
	if err != nil || len(got) != 0 {
		t.Errorf("got %q, %v", got, err)
	}
}
