package openapicompat_test

import (
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
			to := strings.Replace(base, tc.from, tc.to, 1)
			if tc.from != "" && to == base {
				t.Fatalf("the edit %q does not apply", tc.from)
			}
			got, err := openapicompat.Breaking([]byte(base), []byte(to))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
