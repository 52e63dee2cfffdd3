package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"stead/runtime/egress"
	"stead/runtime/model"
	"stead/runtime/model/openai"
)

// server answers every request with status, headers and body, and keeps the
// last request body.
func server(t *testing.T, status int, header map[string]string, body string) (*openai.Client, *[]byte) {
	t.Helper()
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-secret-key-123" {
			t.Errorf("request %s with %q", r.URL.Path, r.Header.Get("Authorization"))
		}
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := openai.New(openai.Options{BaseURL: srv.URL + "/v1/", Model: "m", APIKey: "sk-secret-key-123",
		Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return c, &got
}

func TestWireFormat(t *testing.T) {
	t.Parallel()
	c, got := server(t, 200, map[string]string{"x-litellm-response-cost": "0.25"}, `{"choices":[{"message":{"content":null,
	  "tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":1}"}}]},"finish_reason":"tool_calls"}],
	  "usage":{"prompt_tokens":11,"completion_tokens":4}}`)
	temp := 0.0
	resp, err := c.Complete(context.Background(), model.Request{
		System: "sys",
		Messages: []model.Message{
			{Role: model.User, Content: "hi"},
			{Role: model.Assistant, ToolCalls: []model.ToolCall{{ID: "call_0", Name: "lookup", Arguments: `{"q":0}`}}},
			{Role: model.ToolRole, ToolCallID: "call_0", ToolName: "lookup", Content: "result", IsError: true},
		},
		Tools:        []model.Tool{{Name: "lookup", Description: "Look up.", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		OutputSchema: json.RawMessage(`{"type":"object"}`), OutputName: "answer",
		MaxTokens: 50, Temperature: &temp,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"lookup","arguments":"{\"q\":0}"}}]},` +
		`{"role":"tool","content":"result","tool_call_id":"call_0"}],` +
		`"tools":[{"type":"function","function":{"name":"lookup","description":"Look up.","parameters":{"type":"object"}}}],` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object"},"strict":false}},` +
		`"max_tokens":50,"temperature":0}`
	if string(*got) != want {
		t.Errorf("request\n got %s\nwant %s", *got, want)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0] != (model.ToolCall{ID: "call_1", Name: "lookup", Arguments: `{"q":1}`}) ||
		resp.StopReason != "tool_calls" || resp.Usage.InputTokens != 11 || resp.Usage.OutputTokens != 4 ||
		resp.Usage.CostUSD == nil || *resp.Usage.CostUSD != 0.25 {
		t.Errorf("response = %+v", resp)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		retryable bool
		after     time.Duration
		contains  string
	}{
		{"rate limit with date", 429, map[string]string{"Retry-After": "Thu, 01 Jan 2026 00:00:09 GMT"},
			`{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`, true, 9 * time.Second, "HTTP 429 rate_limit_exceeded: slow down"},
		{"server error, text body", 502, nil, `<html>bad gateway</html>`, true, 0, "HTTP 502: <html>bad gateway</html>"},
		{"refusal echoing the key", 401, nil, `{"error":{"message":"bad key sk-secret-key-123"}}`, false, 0, "HTTP 401: bad key [REDACTED]"},
		{"string error", 400, nil, `{"error":"model not found"}`, false, 0, "HTTP 400: model not found"},
		{"error inside a 200", 200, nil, `{"error":{"message":"upstream overloaded","code":503}}`, true, 0, "HTTP 503: upstream overloaded"},
		{"not JSON", 200, nil, `hello`, false, 0, "not chat-completions JSON"},
		{"no choices", 200, nil, `{"choices":[]}`, false, 0, "no choices"},
		{"conflict", 409, nil, `{"error":{"message":"busy"}}`, true, 0, "HTTP 409: busy"},
		{"request timeout", 408, nil, `{"error":{"message":"too slow"}}`, true, 0, "HTTP 408: too slow"},
		{"server error with seconds", 500, map[string]string{"Retry-After": "1.5"}, `{"error":{"message":"oops"}}`, true, 1500 * time.Millisecond, "HTTP 500: oops"},
		{"a negative Retry-After", 503, map[string]string{"Retry-After": "-5"}, `{"error":{"message":"down"}}`, true, 0, "HTTP 503: down"},
		{"a Retry-After date past", 503, map[string]string{"Retry-After": "Wed, 31 Dec 2025 23:59:00 GMT"}, `{"error":{"message":"down"}}`, true, 0, "HTTP 503: down"},
		{"a timeout inside a 200", 200, nil, `{"error":{"message":"slow","code":408}}`, true, 0, "HTTP 408: slow"},
		{"a redirect answer", 300, nil, `{"choices":[{"message":{"content":"hi"}}]}`, false, 0, "HTTP 300"},
		{"a long text body is cut", 502, nil, strings.Repeat("x", 400), true, 0, "HTTP 502: " + strings.Repeat("x", 300) + "…"},
		{"a key across the cut", 502, nil, strings.Repeat("x", 290) + "sk-secret-key-123" + strings.Repeat("y", 100), true, 0, strings.Repeat("x", 290) + "[REDACTED]…"},
		{"a key as the code", 400, nil, `{"error":{"message":"bad","code":"sk-secret-key-123"}}`, false, 0, "HTTP 400 [REDACTED]: bad"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := server(t, tc.status, tc.header, tc.body)
			_, err := c.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.User, Content: "x"}}})
			var pe *model.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			if pe.Retryable != tc.retryable || pe.RetryAfter != tc.after || !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("err = %q retryable=%v after=%v", err, pe.Retryable, pe.RetryAfter)
			}
			if strings.Contains(err.Error(), "sk-secret-key-123") {
				t.Error("the key leaked into the error")
			}
		})
	}
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, _ := openai.New(openai.Options{BaseURL: url, Model: "m"})
	_, err := c.Complete(context.Background(), model.Request{})
	if !model.IsRetryable(err) {
		t.Errorf("err = %v, want retryable", err)
	}
}

func TestEgressRefusedIsNotRetryable(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	c, _ := openai.New(openai.Options{BaseURL: "http://localhost:" + port + "/v1", Model: "m", APIKey: "sk-secret-key-123",
		HTTPClient: egress.Policy{}.Client()})
	_, err := c.Complete(context.Background(), model.Request{})
	var pe *model.Error
	var refused *egress.RefusedError
	if !errors.As(err, &pe) || pe.Retryable || !errors.As(err, &refused) || !refused.Addr.IsLoopback() ||
		!strings.Contains(err.Error(), "POST http://localhost:"+port+"/v1/chat/completions: destination") ||
		!strings.Contains(err.Error(), "a loopback address") {
		t.Errorf("err = %v, want a non-retryable *model.Error wrapping the refusal", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server saw %d requests", n)
	}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	cost := func(f float64) *float64 { return &f }
	for _, tc := range []struct {
		name    string
		header  map[string]string
		body    string
		content string
		cost    *float64
	}{
		{"content wins over a refusal", nil, `{"choices":[{"message":{"content":"yes","refusal":"no"}}]}`, "yes", nil},
		{"a refusal when no content", nil, `{"choices":[{"message":{"content":"","refusal":"no"}}]}`, "no", nil},
		{"choices win over an error", nil, `{"choices":[{"message":{"content":"yes"}}],"error":{"message":"warn"}}`, "yes", nil},
		{"the usage's cost wins over the header", map[string]string{"x-litellm-response-cost": "0.25"},
			`{"choices":[{"message":{"content":"c"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"cost":0.5}}`, "c", cost(0.5)},
		{"a negative header cost is ignored", map[string]string{"x-litellm-response-cost": "-1"}, `{"choices":[{"message":{"content":"c"}}]}`, "c", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := server(t, 200, tc.header, tc.body)
			resp, err := c.Complete(context.Background(), model.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != tc.content || (resp.Usage.CostUSD == nil) != (tc.cost == nil) || (tc.cost != nil && *resp.Usage.CostUSD != *tc.cost) {
				t.Errorf("response = %+v (cost %v)", resp, resp.Usage.CostUSD)
			}
		})
	}
}

func TestDefaultsSent(t *testing.T) {
	t.Parallel()
	c, got := server(t, 200, nil, `{"choices":[{"message":{"content":"{}"}}]}`)
	if _, err := c.Complete(context.Background(), model.Request{Tools: []model.Tool{{Name: "t"}}, OutputSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":null,"tools":[{"type":"function","function":{"name":"t","parameters":{"type":"object"}}}],` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"output","schema":{"type":"object"},"strict":false}}}`
	if string(*got) != want {
		t.Errorf("request\n got %s\nwant %s", *got, want)
	}
}

func TestNoKeyNoAuthorization(t *testing.T) {
	t.Parallel()
	auths := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auths <- r.Header.Get("Authorization")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"hi"}}]}`)
	}))
	t.Cleanup(srv.Close)
	c, err := openai.New(openai.Options{BaseURL: srv.URL, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(context.Background(), model.Request{})
	if auth := <-auths; err != nil || auth != "" {
		t.Errorf("Authorization %q, %v; want none", auth, err)
	}
}

func TestTooLargeAnswer(t *testing.T) {
	t.Parallel()
	body := `{"choices":[{"message":{"content":"hi"}}]}`
	c, _ := server(t, 200, nil, body+strings.Repeat(" ", openai.MaxResponse+1-len(body)))
	_, err := c.Complete(context.Background(), model.Request{})
	var pe *model.Error
	if !errors.As(err, &pe) || pe.Retryable || !strings.Contains(err.Error(), "the answer is larger than 8388608 bytes") {
		t.Errorf("err = %v", err)
	}
}

func TestCancelledIsTheContextsError(t *testing.T) {
	t.Parallel()
	c, _ := openai.New(openai.Options{BaseURL: "http://127.0.0.1:1", Model: "m"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Complete(ctx, model.Request{}); err != context.Canceled {
		t.Errorf("err = %#v, want context.Canceled itself", err)
	}
}

func TestNewRequiresBaseURLAndModel(t *testing.T) {
	t.Parallel()
	for _, o := range []openai.Options{{Model: "m"}, {BaseURL: "http://127.0.0.1:1"}} {
		if _, err := openai.New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
}
