package api_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"stead/api"
	"stead/api/wire"
)

func TestRequestBodyRefusals(t *testing.T) {
	t.Parallel()
	w := setup(t)
	before := w.runCount()
	path := "/v1/agents/plain/runs"
	big := `{"endUserId": "alice", "input": {"pad": "` + strings.Repeat("x", 1<<20) + `"}}`

	cases := []struct {
		name   string
		req    *http.Request
		status int
		code   string
		field  string
	}{
		{"too large", w.request("POST", path, w.developer, big), 413, api.CodePayloadTooLarge, ""},
		{"too large, chunked", func() *http.Request {
			r := w.request("POST", path, w.developer, nil)
			r.Body = io.NopCloser(io.MultiReader(strings.NewReader(big)))
			r.ContentLength = -1
			r.Header.Set("Content-Type", "application/json")
			return r
		}(), 413, api.CodePayloadTooLarge, ""},
		{"text/plain body", func() *http.Request {
			r := w.request("POST", path, w.developer, `{"endUserId": "alice"}`)
			r.Header.Set("Content-Type", "text/plain")
			return r
		}(), 415, api.CodeUnsupportedMediaType, ""},
		{"another JSON media type", func() *http.Request {
			r := w.request("POST", path, w.developer, `{"endUserId": "alice"}`)
			r.Header.Set("Content-Type", "application/vnd.stead+json")
			return r
		}(), 415, api.CodeUnsupportedMediaType, ""},
		{"form body", func() *http.Request {
			r := w.request("POST", path, w.developer, "endUserId=alice")
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}(), 415, api.CodeUnsupportedMediaType, ""},
		{"unknown field", w.request("POST", path, w.developer, `{"endUserId": "alice", "priority": 1}`), 400, api.CodeInvalidArgument, "priority"},
		{"trailing data", w.request("POST", path, w.developer, `{"endUserId": "alice"} {"endUserId": "bob"}`), 400, api.CodeInvalidArgument, ""},
		{"not an object", w.request("POST", path, w.developer, `["alice"]`), 400, api.CodeInvalidArgument, ""},
		{"broken JSON", w.request("POST", path, w.developer, `{"endUserId": "alice"`), 400, api.CodeInvalidArgument, ""},
		{"wrong type", w.request("POST", path, w.developer, `{"endUserId": ["alice"]}`), 400, api.CodeInvalidArgument, "endUserId"},
		{"control characters", w.request("POST", path, w.developer, `{"endUserId": "al\u0000ice"}`), 400, api.CodeInvalidArgument, "endUserId"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := w.send(c.req)
			if resp.status != c.status {
				t.Fatalf("status %d, want %d: %s", resp.status, c.status, resp.body)
			}
			e := resp.apiErr()
			if e.Code != c.code || e.Message == "" {
				t.Errorf("error %+v, want code %s", e, c.code)
			}
			if c.field != "" && !strings.Contains(string(resp.body), `"field":"`+c.field+`"`) {
				t.Errorf("error does not name %s: %s", c.field, resp.body)
			}
		})
	}
	if after := w.runCount(); after != before {
		t.Errorf("refused requests created runs: %d → %d", before, after)
	}
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	w := setup(t)
	resp := w.must(w.do("DELETE", "/v1/runs", w.owner, nil), 405)
	if allow := resp.header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Errorf("Allow %q", allow)
	}
	if e := resp.apiErr(); e.Code != api.CodeMethodNotAllowed {
		t.Errorf("error %+v", e)
	}
	resp = w.must(w.do("GET", "/v1/approvals/apr_1/approve", w.owner, nil), 405)
	if allow := resp.header.Get("Allow"); allow != "POST" {
		t.Errorf("Allow %q", allow)
	}
	resp = w.must(w.do("GET", "/v1/nothing", w.owner, nil), 404)
	if e := resp.apiErr(); e.Code != api.CodeNotFound {
		t.Errorf("error %+v", e)
	}
	w.must(w.do("GET", "/v1/runs/run_nope", w.owner, nil), 404)
	w.must(w.do("GET", "/v1/approvals/apr_nope", w.owner, nil), 404)
}

func TestHeadersAndLogs(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, r := range []*response{
		w.do("GET", "/healthz", "", nil),
		w.do("GET", "/v1/runs", w.owner, nil),
		w.do("GET", "/v1/runs", "", nil),
		w.do("GET", "/v1/nope", w.owner, nil),
	} {
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Cache-Control") != "no-store" ||
			!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || r.header.Get("X-Request-Id") == "" {
			t.Errorf("%s: headers %v", r.req, r.header)
		}
	}
	var health map[string]string
	w.must(w.do("GET", "/healthz", "", nil), 200).decode(&health)
	if health["status"] != "ok" {
		t.Errorf("healthz %v", health)
	}

	logs := w.logs.String()
	if !strings.Contains(logs, "method=GET path=/v1/runs status=200") || !strings.Contains(logs, "status=401") {
		t.Errorf("request log lacks lines:\n%s", logs)
	}
	for _, secret := range []string{w.owner, w.developer, w.customer, w.other} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log holds a credential")
		}
	}

	// A browser's preflight for a customer UI.
	resp := w.do("OPTIONS", "/v1/runs/run_x/events", "", nil, "Origin", "https://shop.example", "Access-Control-Request-Method", "GET")
	w.must(resp, 204)
	if resp.header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(resp.header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight headers %v", resp.header)
	}
}

func TestEmptyBodies(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	// Bodies whose fields are all optional may be empty, even without a
	// content type.
	req := w.request("POST", "/v1/approvals/"+run.Approval.ID+"/approve", w.owner, nil)
	req.Body = io.NopCloser(bytes.NewReader(nil))
	w.must(w.send(req), 200)
}

func TestInternalErrorsAreNotLeaked(t *testing.T) {
	t.Parallel()
	w := setup(t)
	// A store that fails: the request gets a bare 500, the log the cause.
	if err := w.store.Close(); err != nil {
		t.Fatal(err)
	}
	resp := w.must(w.do("GET", "/v1/runs", w.owner, nil), 500)
	e := resp.apiErr()
	if e.Code != api.CodeInternal || !strings.Contains(e.Message, resp.header.Get("X-Request-Id")) {
		t.Errorf("error %+v", e)
	}
	if strings.Contains(strings.ToLower(string(resp.body)), "database") || strings.Contains(string(resp.body), "bolt") {
		t.Errorf("the response leaks the cause: %s", resp.body)
	}
	if logs := w.logs.String(); !strings.Contains(logs, "request failed") || !strings.Contains(logs, "error=") {
		t.Errorf("the cause is not logged:\n%s", logs)
	}
}

func TestCloseStreams(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	s := w.stream("/v1/runs/"+run.ID+"/events", w.developer)
	s.skipTo("approval.requested")
	w.api.CloseStreams()
	if rest := s.rest(); len(rest) != 0 {
		t.Errorf("events after CloseStreams: %s", seqs(rest))
	}
	// Long-polls answer at once with the run as it stands.
	var got wire.Run
	w.must(w.do("GET", "/v1/runs/"+run.ID+"?wait=60s&until=terminal", w.developer, nil), 200).decode(&got)
	if got.Status != "awaiting-approval" {
		t.Errorf("run %s", got.Status)
	}
}
