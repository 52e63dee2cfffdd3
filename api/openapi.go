package api

import (
	_ "embed"
	"net/http"
	"strconv"
)

// OpenAPI is the OpenAPI 3.1 document of this API (openapi.json), served
// at GET /v1/openapi.json. It is written by hand, next to the handlers, and
// proven against them rather than generated from them: contract_test.go
// validates every request and response the package's tests make against it
// and fails on an undocumented route, field, status or header, and on a
// documented operation no test exercised. `make lint` lints it (redocly).
//
//go:embed openapi.json
var OpenAPI []byte

// openAPI serves the document; no credential is needed.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(OpenAPI)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(OpenAPI)
}
