package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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
