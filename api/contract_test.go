// The contract test: api/openapi.json is proven against the code, not
// hoped to match it.
//
// The document is written by hand and the handlers by hand; neither is
// generated from the other. Generating the document from Go types would
// describe the structs, not what the handlers write (statuses, headers,
// which errors a route answers, what a customer token is shown), and
// generating handlers from the document would make the HTTP edge a
// second, generated owner of shapes that package api already owns. So
// they are checked against each other, here, on every exchange the tests
// make: the harness (w.send, w.stream, w.from, and the MCP Go SDK
// client's checkedTransport) hands each request and response to
// checkExchange, which fails the test that made it when the
// route, a request or response field, a status, a query parameter or a
// header is not in the document (libopenapi-validator for the schemas,
// this file for parameters and headers, which the validator lets through
// outside its strict mode). A request the document refuses is allowed
// only when the server refused it too (a 4xx the document lists): tests
// send bad requests on purpose. TestMain then fails the run when a
// documented operation was exercised by no test (checkCoverage), so the
// document cannot describe routes that do not exist either. Event streams
// and the HTML pages are checked for status and content type only.
package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	oaerrors "github.com/pb33f/libopenapi-validator/errors"

	"stead/api"
)

// oaDoc is what the checks read of the document beyond its schemas.
type oaDoc struct {
	Paths      map[string]map[string]oaOperation `json:"paths"`
	Components struct {
		Parameters map[string]oaParameter `json:"parameters"`
		Responses  map[string]oaResponse  `json:"responses"`
	} `json:"components"`
}

type oaOperation struct {
	OperationID string                `json:"operationId"`
	Tags        []string              `json:"tags"`
	Parameters  []oaParameter         `json:"parameters"`
	Responses   map[string]oaResponse `json:"responses"`
}

type oaParameter struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

type oaResponse struct {
	Ref     string                     `json:"$ref"`
	Headers map[string]json.RawMessage `json:"headers"`
	Content map[string]json.RawMessage `json:"content"`
}

// contract is the document, its validator, and the operations exercised.
type contract struct {
	doc oaDoc

	mu   sync.Mutex // guards v (not documented as safe for concurrent use) and seen
	v    validator.Validator
	seen map[string]bool // "GET /v1/runs/{id}"
}

var theContract = sync.OnceValues(func() (*contract, error) {
	c := &contract{seen: map[string]bool{}}
	if err := json.Unmarshal(api.OpenAPI, &c.doc); err != nil {
		return nil, fmt.Errorf("read openapi.json: %w", err)
	}
	doc, err := libopenapi.NewDocument(api.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("parse openapi.json: %w", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		return nil, fmt.Errorf("build the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("openapi.json is not a valid OpenAPI document: %v", verrs)
	}
	c.v = v
	return c, nil
})

// Headers every response or request may carry without the document naming
// them: transport, caching, security and CORS headers the server sets on
// every response (api.go's ServeHTTP), or that any HTTP client sends.
var (
	plainResponseHeaders = []string{
		"Content-Type", "Content-Length", "Date", "Cache-Control", "X-Content-Type-Options", "X-Frame-Options",
		"Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Vary", "Transfer-Encoding", "Connection",
	}
	plainRequestHeaders = []string{
		"Authorization", "Content-Type", "Content-Length", "Accept", "Accept-Encoding", "User-Agent", "Origin", "Host",
	}
)

// exchange is one request and its response as the test saw them.
type exchange struct {
	req     *http.Request
	reqBody []byte
	status  int
	header  http.Header
	body    []byte
	// stream: the body was not read (an event stream).
	stream bool
}

// checkExchange fails t unless the document describes the exchange.
func checkExchange(t testing.TB, x exchange) {
	t.Helper()
	c, err := theContract()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.problems(x) {
		t.Errorf("openapi.json does not describe %s %s → %d: %s", x.req.Method, x.req.URL.RequestURI(), x.status, p)
	}
}

// zeroTime is Go's zero time.Time as JSON. No field of the API means it:
// a time that is not set is left out (omitzero), and a schema's
// date-time format would take the zero value as valid.
var zeroTime = []byte(`"0001-01-01T00:00:00Z"`)

func (c *contract) problems(x exchange) []string {
	tmpl := c.route(x.req.URL.EscapedPath())
	op, ok := c.doc.Paths[tmpl][strings.ToLower(x.req.Method)]
	if tmpl == "" || !ok {
		// What no route serves: the mux's 404 and 405 (api.go's noRoute)
		// and the CORS preflight, the same for every path.
		code := ""
		var b api.ErrorBody
		if json.Unmarshal(x.body, &b) == nil {
			code = b.Error.Code
		}
		switch {
		case x.req.Method == http.MethodOptions && x.status == http.StatusNoContent:
			return nil
		case x.status == http.StatusNotFound && code == api.CodeNotFound, x.status == http.StatusMethodNotAllowed && code == api.CodeMethodNotAllowed:
			return nil
		}
		return []string{"no such operation"}
	}
	key := strings.ToUpper(x.req.Method) + " " + tmpl
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[key] = true

	resp, ok := op.Responses[strconv.Itoa(x.status)]
	if !ok {
		return []string{fmt.Sprintf("status %d is not a response of %s (body %s)", x.status, key, x.body)}
	}
	resp = c.resolve(resp)
	ct := x.header.Get("Content-Type")
	if ct != "" || len(resp.Content) > 0 {
		mt, _, _ := mime.ParseMediaType(ct)
		if _, ok := resp.Content[mt]; !ok {
			return []string{fmt.Sprintf("content type %q is not one of response %d's", ct, x.status)}
		}
	}
	if mt, _, _ := mime.ParseMediaType(ct); x.stream || mt == "text/event-stream" || slices.Contains(op.Tags, "pages") {
		return nil // status and content type only
	}

	var out []string
	refused := x.status >= 400 && x.status < 500
	req := x.req.Clone(x.req.Context())
	req.Body = io.NopCloser(bytes.NewReader(x.reqBody))
	if ok, errs := c.v.ValidateHttpRequestSync(req); !ok && !refused {
		for _, e := range errs {
			out = append(out, "request: "+describe(e))
		}
	}
	declared := map[string]bool{}
	for _, p := range op.Parameters {
		p = c.param(p)
		declared[p.In+":"+http.CanonicalHeaderKey(p.Name)] = true
	}
	for name := range x.req.URL.Query() {
		if !declared["query:"+http.CanonicalHeaderKey(name)] && !refused {
			out = append(out, fmt.Sprintf("query parameter %q is not a parameter of %s", name, key))
		}
	}
	for name := range x.req.Header {
		if !declared["header:"+name] && !slices.Contains(plainRequestHeaders, name) && !refused {
			out = append(out, fmt.Sprintf("request header %s is not a parameter of %s", name, key))
		}
	}

	if bytes.Contains(x.body, zeroTime) {
		out = append(out, "response: a zero time ("+string(zeroTime)+"), which stands for an unset one: the API leaves unset fields out (body "+string(x.body)+")")
	}
	hr := &http.Response{StatusCode: x.status, Header: x.header, Body: io.NopCloser(bytes.NewReader(x.body)), Request: req}
	if ok, errs := c.v.ValidateHttpResponse(req, hr); !ok {
		for _, e := range errs {
			msg := "response: " + describe(e)
			out = append(out, msg+" (body "+string(x.body)+")")
		}
	}
	for name := range x.header {
		if slices.Contains(plainResponseHeaders, name) {
			continue
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(resp.Headers)), func(h string) bool { return strings.EqualFold(h, name) }) {
			out = append(out, fmt.Sprintf("response header %s is not a header of response %d", name, x.status))
		}
	}
	return out
}

// describe words a validation error: what, why, and each schema failure
// at its field.
func describe(e *oaerrors.ValidationError) string {
	msg := e.Message
	if e.Reason != "" && e.Reason != e.Message {
		msg += ": " + e.Reason
	}
	for _, se := range e.SchemaValidationErrors {
		msg += fmt.Sprintf("; %s at %s", se.Reason, se.FieldPath)
	}
	return msg
}

// route is the document's path template that matches path ("" when none):
// the one with the most literal segments, as net/http's mux prefers.
func (c *contract) route(path string) string {
	segs := strings.Split(path, "/")
	best, bestScore := "", -1
	for tmpl := range c.doc.Paths {
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		score := 0
		for i, s := range ts {
			switch {
			case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && segs[i] != "":
			case s == segs[i]:
				score++
			default:
				score = -1
			}
			if score < 0 {
				break
			}
		}
		if score > bestScore {
			best, bestScore = tmpl, score
		}
	}
	return best
}

func (c *contract) resolve(r oaResponse) oaResponse {
	if name, ok := strings.CutPrefix(r.Ref, "#/components/responses/"); ok {
		return c.doc.Components.Responses[name]
	}
	return r
}

func (c *contract) param(p oaParameter) oaParameter {
	if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
		return c.doc.Components.Parameters[name]
	}
	return p
}

// checkCoverage reports the documented operations no test exercised. It
// says nothing when only some tests ran (-run, -skip), since then most
// were not meant to be.
func checkCoverage() error {
	for _, f := range []string{"test.run", "test.skip"} {
		if fl := flag.Lookup(f); fl != nil && fl.Value.String() != "" {
			return nil
		}
	}
	c, err := theContract()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	for p, ops := range c.doc.Paths {
		for m := range ops {
			if key := strings.ToUpper(m) + " " + p; !c.seen[key] {
				missing = append(missing, key)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return fmt.Errorf("openapi.json documents operations no api test exercised (test them, or remove them from the document):\n\t%s", strings.Join(missing, "\n\t"))
}

// GET /v1/openapi.json serves the document, with no credential.
func TestServesOpenAPI(t *testing.T) {
	t.Parallel()
	w := setup(t)
	r := w.must(w.do(http.MethodGet, "/v1/openapi.json", "", nil), http.StatusOK)
	if !bytes.Equal(r.body, api.OpenAPI) {
		t.Errorf("GET /v1/openapi.json served %d bytes, not the embedded document (%d bytes)", len(r.body), len(api.OpenAPI))
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	r.decode(&doc)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
}

// The pages the other tests do not ask for: /console and / redirect to
// /console/ (the exchange before the redirect is the one checked), and
// embed.js's styles.
func TestServesConsoleRedirectAndStyles(t *testing.T) {
	t.Parallel()
	w := setup(t)
	req := w.request(http.MethodGet, "/console", "", nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	checkExchange(t, exchange{req: req, status: resp.StatusCode, header: resp.Header, body: body})
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console: %d to %q, want 301 to /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The root, the address stead dev prints, sends a browser to the console.
	req = w.request(http.MethodGet, "/", "", nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	checkExchange(t, exchange{req: req, status: resp.StatusCode, header: resp.Header, body: body})
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" {
		t.Errorf("GET /: %d to %q, want 302 to /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	w.must(w.do(http.MethodGet, "/nope", "", nil), http.StatusNotFound) // only the root itself
	r := w.must(w.do(http.MethodGet, "/embed.css", "", nil), http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/css") {
		t.Errorf("GET /embed.css: content type %q", ct)
	}
}
