package engine_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// llm is a scripted OpenAI-compatible chat-completions server on loopback.
// Each request takes the next reply of the script; the test then asserts
// what the server received. A request past the end of the script fails the
// test.
type llm struct {
	t   *testing.T
	srv *httptest.Server
	key string

	mu       sync.Mutex
	script   []reply
	requests []llmRequest
}

// reply is one scripted answer.
type reply struct {
	status int
	header map[string]string
	body   string
}

// llmRequest is what the server received.
type llmRequest struct {
	Auth string
	Body map[string]any
}

// Messages returns the request's messages.
func (r llmRequest) Messages() []any {
	m, _ := r.Body["messages"].([]any)
	return m
}

func newLLM(t *testing.T, key string) *llm {
	l := &llm{t: t, key: key}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *llm) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		l.t.Errorf("llm: %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
	}
	data, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		l.t.Errorf("llm: request body is not JSON: %v", err)
	}
	l.mu.Lock()
	l.requests = append(l.requests, llmRequest{Auth: r.Header.Get("Authorization"), Body: body})
	if len(l.script) == 0 {
		l.mu.Unlock()
		l.t.Errorf("llm: unexpected request %d: %s", len(l.requests), data)
		http.Error(w, `{"error":{"message":"script is over"}}`, http.StatusInternalServerError)
		return
	}
	rep := l.script[0]
	l.script = l.script[1:]
	l.mu.Unlock()
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.status == 0 {
		rep.status = http.StatusOK
	}
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

// url is the base URL a models entry uses.
func (l *llm) url() string { return l.srv.URL + "/v1" }

// then appends replies to the script.
func (l *llm) then(rs ...reply) *llm {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.script = append(l.script, rs...)
	return l
}

// request returns the n-th request received (from 1).
func (l *llm) request(n int) llmRequest {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n > len(l.requests) {
		l.t.Fatalf("llm: request %d asked, %d received", n, len(l.requests))
	}
	return l.requests[n-1]
}

func (l *llm) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.requests)
}

// done checks the script was used up and every request carried the key.
func (l *llm) done() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.script) != 0 {
		l.t.Errorf("llm: %d scripted replies never asked for", len(l.script))
	}
	for i, r := range l.requests {
		if r.Auth != "Bearer "+l.key {
			l.t.Errorf("llm: request %d Authorization = %q", i+1, r.Auth)
		}
	}
}

// answer is a final text answer with usage.
func answer(content string, in, out int) reply {
	return reply{body: fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","model":"test-model",
	  "choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],
	  "usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, jsonString(content), in, out, in+out)}
}

// call is one scripted tool call: provider id, tool name, arguments text.
type tcall struct{ id, name, args string }

// calls is an answer that calls tools.
func calls(in, out int, cs ...tcall) reply {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf(`{"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}`,
			jsonString(c.id), jsonString(c.name), jsonString(c.args))
	}
	return reply{body: fmt.Sprintf(`{"id":"chatcmpl-2","object":"chat.completion","model":"test-model",
	  "choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[%s]},"finish_reason":"tool_calls"}],
	  "usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, strings.Join(parts, ","), in, out, in+out)}
}

// failure is an error answer.
func failure(status int, body string, header map[string]string) reply {
	return reply{status: status, body: body, header: header}
}

// msg reads message i of a request as a map.
func msg(t *testing.T, r llmRequest, i int) map[string]any {
	t.Helper()
	ms := r.Messages()
	if i >= len(ms) {
		t.Fatalf("request has %d messages, want message %d: %s", len(ms), i, jsonString(ms))
	}
	m, _ := ms[i].(map[string]any)
	return m
}
