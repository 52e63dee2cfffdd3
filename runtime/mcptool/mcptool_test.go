package mcptool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"stead/runtime/egress"
	"stead/runtime/mcptool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts a go-sdk MCP server on loopback with one tool, echo, whose
// description is desc; it answers each call with the key it got in _meta.
func serve(t *testing.T, desc string, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", Description: desc, InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(req.Params.Meta[mcptool.IdempotencyKeyMeta])}}}, nil
		})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func client() *mcptool.Client {
	return mcptool.New(mcptool.Options{Egress: egress.Policy{Allow: egress.Loopback}})
}

func TestFingerprintAndChanges(t *testing.T) {
	t.Parallel()
	base := mcptool.Definition{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}
	cases := []struct {
		name string
		edit func(*mcptool.Definition)
		want []string
	}{
		{"same", func(*mcptool.Definition) {}, nil},
		{"description", func(d *mcptool.Definition) { d.Description = "e" }, []string{"description"}},
		{"input", func(d *mcptool.Definition) { d.InputSchema = json.RawMessage(`{"type":"string"}`) }, []string{"inputSchema"}},
		{"output", func(d *mcptool.Definition) { d.OutputSchema = json.RawMessage(`{}`) }, []string{"outputSchema"}},
		{"name", func(d *mcptool.Definition) { d.Name = "u" }, nil}, // a different tool: the fingerprint differs, Changes compares one tool's
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := base
			tc.edit(&d)
			if got := mcptool.Changes(base, d); !slices.Equal(got, tc.want) {
				t.Errorf("Changes = %v, want %v", got, tc.want)
			}
			if same := d.Fingerprint() == base.Fingerprint(); same != (tc.name == "same") {
				t.Errorf("fingerprints equal: %v", same)
			}
		})
	}
	if fp := base.Fingerprint(); !strings.HasPrefix(fp, "sha256:") || len(fp) != 71 {
		t.Errorf("fingerprint %q", fp)
	}
}

func TestCallChecksThePinAndSendsTheKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := serve(t, "Echo.", nil)
	srv := mcptool.Server{Name: "s", URL: url}
	c := client()
	defs, err := c.Definitions(ctx, srv, []string{"echo"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(ctx, srv, mcptool.Call{Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`), IdempotencyKey: "idk_1", Fingerprint: defs["echo"].Fingerprint()})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `{"content":[{"type":"text","text":"idk_1"}]}` || res.Text != "idk_1" || res.IsError {
		t.Errorf("result = %+v (%s)", res, res.Output)
	}
	_, err = c.Call(ctx, srv, mcptool.Call{Tool: "echo", Fingerprint: "sha256:other"})
	var ce *mcptool.ChangedError
	if !errors.As(err, &ce) || ce.Now != defs["echo"].Fingerprint() {
		t.Errorf("a stale pin: %v", err)
	}
	_, err = c.Definitions(ctx, srv, []string{"echo", "nope"})
	var me *mcptool.MissingError
	if !errors.As(err, &me) || !slices.Equal(me.Tools, []string{"nope"}) || !slices.Equal(me.Listed, []string{"echo"}) {
		t.Errorf("a missing tool: %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	status := func(code int) func(http.Handler) http.Handler {
		return func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", code) })
		}
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	huge := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("x", 2<<20) + `"}}`))
		})
	}
	cases := []struct {
		name      string
		url       string
		client    *mcptool.Client
		retryable bool
		says      string
	}{
		{"down", down.URL + "/mcp", client(), true, "cannot be reached"},
		{"500", serve(t, "", status(500)), client(), true, "it answered 500 Internal Server Error"},
		{"429", serve(t, "", status(429)), client(), true, "it answered 429 Too Many Requests"},
		{"401", serve(t, "", status(401)), client(), false, "it refused the request (401 Unauthorized)"},
		{"403", serve(t, "", status(403)), client(), false, "could not be used: it refused the request (403 Forbidden)"},
		{"408", serve(t, "", status(408)), client(), true, "could not be used: it answered 408 Request Timeout"},
		{"404", serve(t, "", status(404)), client(), false, "could not be used: it answered 404 Not Found: is url its MCP endpoint?"},
		{"egress", serve(t, "", nil), mcptool.New(mcptool.Options{}), false, "is refused by the egress policy"},
		{"too large", serve(t, "", huge), mcptool.New(mcptool.Options{Egress: egress.Policy{Allow: egress.Loopback}, MaxResponse: 1 << 20}), false, "a response was over 1048576 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.client.Definitions(ctx, mcptool.Server{Name: "s", URL: tc.url}, []string{"echo"})
			var ue *mcptool.UnavailableError
			if !errors.As(err, &ue) || ue.Retryable != tc.retryable || !strings.Contains(err.Error(), tc.says) ||
				!strings.HasPrefix(err.Error(), "MCP server s ("+tc.url+") ") {
				t.Errorf("err = %v (%#v), want retryable %v saying %q", err, ue, tc.retryable, tc.says)
			}
			if ue != nil && errors.Unwrap(ue) == nil {
				t.Errorf("%v: Unwrap is nil, want the failure underneath", err)
			}
		})
	}
}

func TestHeadersAreSent(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got []string
	)
	url := serve(t, "", func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, r.Header.Get("X-Key"))
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	})
	if _, err := client().Definitions(context.Background(), mcptool.Server{Name: "s", URL: url, Headers: map[string]string{"X-Key": "k1"}}, []string{"echo"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || slices.ContainsFunc(got, func(v string) bool { return v != "k1" }) {
		t.Errorf("X-Key on the requests: %q", got)
	}
}

func ExampleClient_Call() {
	ctx := context.Background()
	s := mcp.NewServer(&mcp.Implementation{Name: "tracker", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "create_issue", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"id": "ISS-1"}}, nil
		})
	httpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer httpSrv.Close()

	c := mcptool.New(mcptool.Options{Egress: egress.Policy{Allow: egress.Loopback}})
	srv := mcptool.Server{Name: "tracker", URL: httpSrv.URL}
	defs, err := c.Definitions(ctx, srv, []string{"create_issue"}) // what deploy pins
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Call(ctx, srv, mcptool.Call{
		Tool: "create_issue", Arguments: json.RawMessage(`{"title":"Broken"}`),
		IdempotencyKey: "idk_0123", Fingerprint: defs["create_issue"].Fingerprint(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.Output))
	// Output: {"id":"ISS-1"}
}

// BenchmarkCall is one pinned call over loopback HTTP: connect, list (the
// pin check), call, close.
func BenchmarkCall(b *testing.B) {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"ok": true}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer srv.Close()
	ctx := context.Background()
	c := client()
	target := mcptool.Server{Name: "s", URL: srv.URL}
	defs, err := c.Definitions(ctx, target, []string{"echo"})
	if err != nil {
		b.Fatal(err)
	}
	call := mcptool.Call{Tool: "echo", Arguments: json.RawMessage(`{}`), IdempotencyKey: "idk", Fingerprint: defs["echo"].Fingerprint()}
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Call(ctx, target, call); err != nil {
			b.Fatal(err)
		}
	}
}

// swappable is one MCP endpoint whose server a test replaces between
// sessions: the "same" remote server declaring something else after deploy.
type swappable struct{ cur atomic.Pointer[mcp.Server] }

func serveSwappable(t *testing.T, first *mcp.Server) (*swappable, string) {
	t.Helper()
	sw := &swappable{}
	sw.cur.Store(first)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sw.cur.Load() }, nil))
	t.Cleanup(srv.Close)
	return sw, srv.URL + "/mcp"
}

// createIssue is a server with one tool, create_issue, declared with desc
// and the input and output schemas; calls counts the calls that reach it.
func createIssue(desc, in, out string, calls *atomic.Int32) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tracker", Version: "1"}, nil)
	tool := &mcp.Tool{Name: "create_issue", Description: desc, InputSchema: json.RawMessage(in)}
	if out != "" {
		tool.OutputSchema = json.RawMessage(out)
	}
	s.AddTool(tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		return &mcp.CallToolResult{StructuredContent: map[string]any{"id": "ISS-1"}}, nil
	})
	return s
}

const (
	issueIn  = `{"type":"object","properties":{"title":{"type":"string"}}}`
	issueOut = `{"type":"object","properties":{"id":{"type":"string"}}}`
)

// TestDefinitionsHoldWhatTheServerDeclares: what deploy pins is the
// server's description and both schemas, keys sorted.
func TestDefinitionsHoldWhatTheServerDeclares(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	_, url := serveSwappable(t, createIssue("Creates an issue.", issueIn, issueOut, &calls))
	defs, err := client().Definitions(context.Background(), mcptool.Server{Name: "tracker", URL: url}, []string{"create_issue"})
	if err != nil {
		t.Fatal(err)
	}
	want := mcptool.Definition{
		Name:         "create_issue",
		Description:  "Creates an issue.",
		InputSchema:  json.RawMessage(`{"properties":{"title":{"type":"string"}},"type":"object"}`),
		OutputSchema: json.RawMessage(`{"properties":{"id":{"type":"string"}},"type":"object"}`),
	}
	if got := defs["create_issue"]; got.Name != want.Name || got.Description != want.Description ||
		string(got.InputSchema) != string(want.InputSchema) || string(got.OutputSchema) != string(want.OutputSchema) {
		t.Errorf("definition = %+v\n(%s, %s)\nwant %+v", got, got.InputSchema, got.OutputSchema, want)
	}
}

// TestPinnedToolWhoseDefinitionChangedIsRefused: a call pinned to one
// definition is refused, before it reaches the tool, when the server now
// declares another description, input schema or output schema; the same
// definition served again is called.
func TestPinnedToolWhoseDefinitionChangedIsRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		desc, in, out string
		want          []string // what Changes names; nil: unchanged
	}{
		{"unchanged", "Creates an issue.", issueIn, issueOut, nil},
		{"description", "Deletes every issue.", issueIn, issueOut, []string{"description"}},
		{"input schema", "Creates an issue.", `{"type":"object","properties":{"title":{"type":"string"},"assignee":{"type":"string"}}}`, issueOut, []string{"inputSchema"}},
		{"output schema", "Creates an issue.", issueIn, `{"type":"object","properties":{"id":{"type":"number"}}}`, []string{"outputSchema"}},
		{"output schema dropped", "Creates an issue.", issueIn, "", []string{"outputSchema"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var before, after atomic.Int32
			sw, url := serveSwappable(t, createIssue("Creates an issue.", issueIn, issueOut, &before))
			srv := mcptool.Server{Name: "tracker", URL: url}
			c := client()
			pinned, err := c.Definitions(ctx, srv, []string{"create_issue"})
			if err != nil {
				t.Fatal(err)
			}
			sw.cur.Store(createIssue(tc.desc, tc.in, tc.out, &after))
			res, err := c.Call(ctx, srv, mcptool.Call{Tool: "create_issue", Arguments: json.RawMessage(`{"title":"Broken"}`),
				IdempotencyKey: "idk_1", Fingerprint: pinned["create_issue"].Fingerprint()})
			if tc.want == nil {
				if err != nil || string(res.Output) != `{"id":"ISS-1"}` || after.Load() != 1 {
					t.Fatalf("unchanged definition: %v, %s, %d calls", err, res.Output, after.Load())
				}
				return
			}
			var ce *mcptool.ChangedError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ChangedError", err)
			}
			if n := after.Load() + before.Load(); n != 0 {
				t.Errorf("the tool was called %d times", n)
			}
			now, err2 := c.Definitions(ctx, srv, []string{"create_issue"})
			if err2 != nil {
				t.Fatal(err2)
			}
			if ce.Pinned != pinned["create_issue"].Fingerprint() || ce.Now != now["create_issue"].Fingerprint() || ce.Tool != "create_issue" || ce.Server != "tracker" {
				t.Errorf("ChangedError = %+v", ce)
			}
			if got := mcptool.Changes(pinned["create_issue"], now["create_issue"]); !slices.Equal(got, tc.want) {
				t.Errorf("Changes = %v, want %v", got, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "the definition of create_issue on MCP server tracker changed since it was deployed") {
				t.Errorf("error = %q", err)
			}
		})
	}
}

// TestCallToAToolTheServerNoLongerListsIsMissing: the call names the tool
// and what the server lists, rather than a changed definition.
func TestCallToAToolTheServerNoLongerListsIsMissing(t *testing.T) {
	t.Parallel()
	url := serve(t, "Echo.", nil)
	_, err := client().Call(context.Background(), mcptool.Server{Name: "s", URL: url}, mcptool.Call{Tool: "gone", Fingerprint: "sha256:pinned"})
	var me *mcptool.MissingError
	if !errors.As(err, &me) || !slices.Equal(me.Tools, []string{"gone"}) || !slices.Equal(me.Listed, []string{"echo"}) {
		t.Errorf("err = %v, want a *MissingError for gone", err)
	}
}

// TestCallReportsTheToolsResult: the arguments reach the tool, a result's
// structured content is the output, and a tool's isError comes back with
// its text blocks, one per line.
func TestCallReportsTheToolsResult(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "refund", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: req.Params.Arguments}, nil
		})
	s.AddTool(&mcp.Tool{Name: "charge", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
				&mcp.TextContent{Text: "card declined"},
				&mcp.ImageContent{Data: []byte("png"), MIMEType: "image/png"},
				&mcp.TextContent{Text: "try another card"},
			}}, nil
		})
	httpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(httpSrv.Close)
	ctx := context.Background()
	c := client()
	srv := mcptool.Server{Name: "shop", URL: httpSrv.URL}
	defs, err := c.Definitions(ctx, srv, []string{"refund", "charge"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(ctx, srv, mcptool.Call{Tool: "refund", Arguments: json.RawMessage(`{"orderId":"o-1","amount":1250}`), Fingerprint: defs["refund"].Fingerprint()})
	if err != nil || string(res.Output) != `{"amount":1250,"orderId":"o-1"}` || res.IsError {
		t.Errorf("refund = %+v (%s), %v; want the arguments back", res, res.Output, err)
	}
	res, err = c.Call(ctx, srv, mcptool.Call{Tool: "charge", Arguments: json.RawMessage(`{}`), Fingerprint: defs["charge"].Fingerprint()})
	if err != nil || !res.IsError || res.Text != "card declined\ntry another card" {
		t.Errorf("charge = %+v, %v; want isError with its text", res, err)
	}
	only, err := c.Definitions(ctx, srv, []string{"refund"})
	if _, ok := only["refund"]; err != nil || len(only) != 1 || !ok {
		t.Errorf("Definitions(refund) = %v, %v; want refund's alone", only, err)
	}
}

// TestResponseLimit: a response of exactly MaxResponse bytes is read, one
// byte more is refused (not retryable); the default is 4 MiB.
func TestResponseLimit(t *testing.T) {
	t.Parallel()
	// serveSized serves echo described so that its tools/list response is
	// want bytes, and reports the size the server wrote.
	var mu sync.Mutex
	written := map[string]int{}
	serveSized := func(desc string) string {
		var url string
		url = serve(t, desc, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				cw := &countingWriter{ResponseWriter: w}
				h.ServeHTTP(cw, r)
				if bytes.Contains(body, []byte(`"tools/list"`)) {
					mu.Lock()
					written[url] = cw.n
					mu.Unlock()
				}
			})
		})
		return url
	}
	url := serveSized("x")
	if _, err := client().Definitions(context.Background(), mcptool.Server{Name: "s", URL: url}, []string{"echo"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	base := written[url] // with a one-byte description
	mu.Unlock()
	cases := []struct {
		name    string
		max     int64 // MaxResponse; 0 for the default
		size    int   // of the tools/list response
		refused bool
	}{
		{"at the limit", 64 << 10, 64 << 10, false},
		{"one byte over", 64 << 10, 64<<10 + 1, true},
		{"at the default", 0, 4 << 20, false},
		{"one byte over the default", 0, 4<<20 + 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := serveSized(strings.Repeat("x", 1+tc.size-base))
			c := mcptool.New(mcptool.Options{Egress: egress.Policy{Allow: egress.Loopback}, MaxResponse: tc.max})
			_, err := c.Definitions(context.Background(), mcptool.Server{Name: "s", URL: url}, []string{"echo"})
			mu.Lock()
			got := written[url]
			mu.Unlock()
			if got != tc.size {
				t.Fatalf("tools/list answered %d bytes, want %d", got, tc.size)
			}
			if !tc.refused {
				if err != nil {
					t.Errorf("a response of %d bytes: %v", tc.size, err)
				}
				return
			}
			var ue *mcptool.UnavailableError
			if !errors.As(err, &ue) || ue.Retryable || !strings.Contains(err.Error(), fmt.Sprintf("a response was over %d bytes", tc.size-1)) {
				t.Errorf("a response of %d bytes: err = %v (%#v)", tc.size, err, ue)
			}
		})
	}
}

// countingWriter counts the body bytes a handler writes.
type countingWriter struct {
	http.ResponseWriter
	n int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += n
	return n, err
}

func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestMissingAndChangedErrorsSayWhatHappened: a missing tool's error names
// each tool quoted and what the server lists, as the server's own message
// (not wrapped); a changed definition shows both fingerprints shortened.
func TestMissingAndChangedErrorsSayWhatHappened(t *testing.T) {
	t.Parallel()
	url := serve(t, "Echo.", nil)
	_, err := client().Definitions(context.Background(), mcptool.Server{Name: "s", URL: url}, []string{"echo", "nope", "gone"})
	if want := `MCP server s (` + url + `) does not list "nope", "gone" (it lists: echo)`; fmt.Sprint(err) != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&mcptool.MissingError{Server: "s", URL: "u", Tools: []string{"a"}}, `MCP server s (u) does not list "a" (it lists: none)`},
		{&mcptool.ChangedError{Server: "s", Tool: "t", Pinned: "sha256:0123456789abcdef", Now: "sha256:fedcba9876543210"},
			"the definition of t on MCP server s changed since it was deployed (pinned sha256:0123456789ab, now sha256:fedcba987654); " +
				"refusing to call it: review the change and deploy again to pin it"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q\nwant %q", got, tc.want)
		}
	}
}

// fakeServer is an MCP server over plain JSON responses that opens a
// session on initialize and answers every other request as answer says:
// for a JSON-RPC method (or "DELETE", closing the session), an HTTP status
// and, for 200, the response's result or error member ("result":{…});
// status 0 accepts a notification or the DELETE.
func fakeServer(t *testing.T, answer func(method string) (status int, member string)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		method := r.Method
		if r.Method == http.MethodPost {
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			method = req.Method
		}
		status, member := http.StatusOK, fmt.Sprintf(`"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`, req.Params.ProtocolVersion)
		switch method {
		case "server/discover": // a revision this server predates
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, req.ID)
			return
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "session-1")
		default:
			status, member = answer(method)
		}
		switch {
		case status == 0:
			w.WriteHeader(http.StatusAccepted)
		case status != http.StatusOK:
			http.Error(w, http.StatusText(status), status)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,%s}`, req.ID, member)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestHTTPClientSendsEveryRequest: Options.HTTPClient, when set, carries
// every request in place of the egress policy's client, with http's default
// transport when it has none.
func TestHTTPClientSendsEveryRequest(t *testing.T) {
	t.Parallel()
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	url := serve(t, "Echo.", nil)
	var sent atomic.Int32
	own := &http.Transport{}
	t.Cleanup(own.CloseIdleConnections)
	counting := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return own.RoundTrip(r)
	})
	for _, tc := range []struct {
		name string
		hc   *http.Client
	}{
		{"its own transport", &http.Client{Transport: counting}},
		{"no transport", &http.Client{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The zero egress policy refuses loopback: only the client given can reach the server.
			c := mcptool.New(mcptool.Options{HTTPClient: tc.hc})
			if _, err := c.Definitions(context.Background(), mcptool.Server{Name: "s", URL: url}, []string{"echo"}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if sent.Load() == 0 {
		t.Error("no request went through the HTTPClient's transport")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestCallWithoutArgumentsSendsAnObject: a call with no input reaches a
// tool whose schema wants an object as an empty one, not as null.
func TestCallWithoutArgumentsSendsAnObject(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "clock", Version: "1"}, nil)
	var got atomic.Value
	s.AddTool(&mcp.Tool{Name: "now", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			got.Store(string(req.Params.Arguments))
			return &mcp.CallToolResult{StructuredContent: map[string]any{"t": "12:03"}}, nil
		})
	httpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(httpSrv.Close)
	ctx, c := context.Background(), client()
	srv := mcptool.Server{Name: "clock", URL: httpSrv.URL}
	defs, err := c.Definitions(ctx, srv, []string{"now"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(ctx, srv, mcptool.Call{Tool: "now", Fingerprint: defs["now"].Fingerprint()})
	if err != nil || string(res.Output) != `{"t":"12:03"}` {
		t.Errorf("now() = %s, %v", res.Output, err)
	}
	if args, _ := got.Load().(string); args != "{}" {
		t.Errorf("the tool got arguments %q, want {}", args)
	}
}

// TestResultWithoutContentIsAnEmptyList: a server that sends a result with
// no content (nor structured content) gives the handler {"content": []},
// never null.
func TestResultWithoutContentIsAnEmptyList(t *testing.T) {
	t.Parallel()
	url := fakeServer(t, func(method string) (int, string) {
		switch method {
		case "tools/list":
			return http.StatusOK, `"result":{"tools":[{"name":"ping","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			return http.StatusOK, `"result":{}`
		}
		return 0, ""
	})
	ctx, c := context.Background(), client()
	srv := mcptool.Server{Name: "s", URL: url}
	defs, err := c.Definitions(ctx, srv, []string{"ping"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(ctx, srv, mcptool.Call{Tool: "ping", Fingerprint: defs["ping"].Fingerprint()})
	if err != nil || string(res.Output) != `{"content":[]}` || res.IsError || res.Text != "" {
		t.Errorf("ping() = %+v (%s), %v; want {\"content\":[]}", res, res.Output, err)
	}
}

// TestCancelledCallIsNotUnavailable: a call its caller cancels while the
// server works is the cancellation, not a retryable *UnavailableError (the
// engine tells a timed-out tool from a server that is down by it).
func TestCancelledCallIsNotUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	url := fakeServer(t, func(method string) (int, string) {
		switch method {
		case "tools/list":
			return http.StatusOK, `"result":{"tools":[{"name":"slow","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			cancel()
			<-release
			return http.StatusServiceUnavailable, ""
		}
		return 0, ""
	})
	t.Cleanup(func() { close(release) }) // before the server closes: cleanups run last first
	srv := mcptool.Server{Name: "s", URL: url}
	defs, err := client().Definitions(ctx, srv, []string{"slow"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client().Call(ctx, srv, mcptool.Call{Tool: "slow", Fingerprint: defs["slow"].Fingerprint()})
	var ue *mcptool.UnavailableError
	if errors.As(err, &ue) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v (%#v), want the cancellation", err, ue)
	}
}

// TestTransportFailuresSayWhatHappened: the first failure the transport saw
// is the one reported (a 408, not its error page being over the limit), and
// a 404 for a session the server no longer knows does not blame the URL.
func TestTransportFailuresSayWhatHappened(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, strings.Repeat("slow ", 1<<10), http.StatusRequestTimeout)
	}))
	t.Cleanup(busy.Close)
	c := mcptool.New(mcptool.Options{Egress: egress.Policy{Allow: egress.Loopback}, MaxResponse: 1 << 10})
	_, err := c.Definitions(ctx, mcptool.Server{Name: "s", URL: busy.URL}, []string{"echo"})
	var ue *mcptool.UnavailableError
	if !errors.As(err, &ue) || ue.Status != http.StatusRequestTimeout || !ue.Retryable {
		t.Errorf("a 408 with a 5 KiB page: err = %v (%#v), want the 408, retryable", err, ue)
	}
	url := fakeServer(t, func(string) (int, string) { return http.StatusNotFound, "" })
	_, err = client().Definitions(ctx, mcptool.Server{Name: "s", URL: url}, []string{"echo"})
	if err == nil || strings.Contains(err.Error(), "is url its MCP endpoint?") || !strings.HasPrefix(err.Error(), "MCP server s ("+url+")") {
		t.Errorf("a 404 for the session: err = %v, want one that does not blame the URL", err)
	}
}

// TestAFailureClosingTheSessionDoesNotExplainTheCall: a call the server
// refused (a JSON-RPC error) is reported as that, not as the server being
// unavailable because closing the session afterwards failed (a server that
// answers DELETE with 501 Not Implemented).
func TestAFailureClosingTheSessionDoesNotExplainTheCall(t *testing.T) {
	t.Parallel()
	url := fakeServer(t, func(method string) (int, string) {
		switch method {
		case "tools/list":
			return http.StatusOK, `"result":{"tools":[{"name":"ping","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			return http.StatusOK, `"error":{"code":-32602,"message":"unknown argument: color"}`
		case "DELETE":
			return http.StatusNotImplemented, ""
		}
		return 0, ""
	})
	ctx, c := context.Background(), client()
	srv := mcptool.Server{Name: "s", URL: url}
	defs, err := c.Definitions(ctx, srv, []string{"ping"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(ctx, srv, mcptool.Call{Tool: "ping", Arguments: json.RawMessage(`{"color":"red"}`), Fingerprint: defs["ping"].Fingerprint()})
	var ue *mcptool.UnavailableError
	if errors.As(err, &ue) || err == nil || !strings.Contains(err.Error(), "unknown argument: color") {
		t.Errorf("err = %v (%#v), want the server's refusal of the call", err, ue)
	}
}
