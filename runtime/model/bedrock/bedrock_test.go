package bedrock_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"stead/runtime/egress"
	"stead/runtime/model"
	"stead/runtime/model/bedrock"
)

const modelID = "anthropic.claude-3-5-haiku-20241022-v1:0"

// fakeBedrock speaks the Converse wire protocol on loopback: it checks each
// request is a signed POST /model/{modelId}/converse and answers with the
// next recorded response from testdata.
type fakeBedrock struct {
	t      *testing.T
	mu     sync.Mutex
	script []recorded
	bodies []map[string]any
}

type recorded struct {
	status    int
	errorType string // x-amzn-ErrorType for error answers
	file      string
	header    map[string]string
}

func (f *fakeBedrock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/model/"+modelID+"/converse" {
		f.t.Errorf("request %s %s", r.Method, r.URL.Path)
	}
	if auth := r.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(auth, "/us-east-1/bedrock/aws4_request") {
		f.t.Errorf("Authorization = %q, want a SigV4 signature for bedrock in us-east-1", auth)
	}
	data, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		f.t.Errorf("body is not JSON: %s", data)
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	rec := f.script[0]
	f.script = f.script[1:]
	f.mu.Unlock()
	out, err := os.ReadFile(filepath.Join("testdata", rec.file))
	if err != nil {
		f.t.Fatal(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-RequestId", "5d2b8b3e-0000-4000-8000-000000000000")
	for k, v := range rec.header {
		w.Header().Set(k, v)
	}
	if rec.errorType != "" {
		w.Header().Set("x-amzn-ErrorType", rec.errorType+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(out)
}

func setup(t *testing.T, script ...recorded) (*bedrock.Client, *fakeBedrock) {
	t.Helper()
	f := &fakeBedrock{t: t, script: script}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := bedrock.New(context.Background(), bedrock.Options{
		ModelID: modelID, Region: "us-east-1", BaseEndpoint: srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-test-key", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, f
}

func compact(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConverseToolUseConversation(t *testing.T) {
	t.Parallel()
	c, f := setup(t, recorded{status: 200, file: "converse_tool_use.json"}, recorded{status: 200, file: "converse_text.json"})
	req := model.Request{
		System:   "You help with orders.",
		Messages: []model.Message{{Role: model.User, Content: "Refund my order"}},
		Tools: []model.Tool{
			{Name: "listOrders", Description: "List orders.", InputSchema: json.RawMessage(`{"type":"object","properties":{"user":{"type":"string"}}}`)},
			{Name: "refundOrder", InputSchema: json.RawMessage(`{"type":"object"}`)},
		},
		MaxTokens: 256,
	}
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "I'll look up the orders first." || resp.StopReason != "tool_use" ||
		resp.Usage.InputTokens != 375 || resp.Usage.OutputTokens != 67 || resp.Usage.CostUSD != nil {
		t.Errorf("response = %+v", resp)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q" || resp.ToolCalls[0].Name != "listOrders" {
		t.Fatalf("tool calls = %+v", resp.ToolCalls)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(resp.ToolCalls[0].Arguments), &args); err != nil || args["user"] != "alice" || args["limit"] != float64(5) {
		t.Errorf("arguments = %s (%v)", resp.ToolCalls[0].Arguments, err)
	}
	b := f.bodies[0]
	if compact(t, b["system"]) != `[{"text":"You help with orders."}]` ||
		compact(t, b["messages"]) != `[{"content":[{"text":"Refund my order"}],"role":"user"}]` ||
		compact(t, b["inferenceConfig"]) != `{"maxTokens":256}` {
		t.Errorf("request 1 = %s", compact(t, b))
	}
	if got := compact(t, b["toolConfig"]); got != `{"tools":[{"toolSpec":{"description":"List orders.","inputSchema":{"json":{"properties":{"user":{"type":"string"}},"type":"object"}},"name":"listOrders"}},{"toolSpec":{"inputSchema":{"json":{"type":"object"}},"name":"refundOrder"}}]}` {
		t.Errorf("toolConfig = %s", got)
	}

	// The second turn sends the call back and its result (and a second
	// result) in one user message, as Converse wants.
	req.Messages = append(req.Messages,
		model.Message{Role: model.Assistant, Content: resp.Content, ToolCalls: resp.ToolCalls},
		model.Message{Role: model.ToolRole, ToolCallID: resp.ToolCalls[0].ID, Content: `{"orders":[]}`},
		model.Message{Role: model.ToolRole, ToolCallID: "tooluse_other", Content: "Error: nope", IsError: true},
	)
	resp, err = c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Order o-1 was refunded." || len(resp.ToolCalls) != 0 || resp.StopReason != "end_turn" {
		t.Errorf("response = %+v", resp)
	}
	want := `[{"content":[{"text":"Refund my order"}],"role":"user"},` +
		`{"content":[{"text":"I'll look up the orders first."},{"toolUse":{"input":{"limit":5,"user":"alice"},"name":"listOrders","toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"}}],"role":"assistant"},` +
		`{"content":[{"toolResult":{"content":[{"text":"{\"orders\":[]}"}],"status":"success","toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"}},` +
		`{"toolResult":{"content":[{"text":"Error: nope"}],"status":"error","toolUseId":"tooluse_other"}}],"role":"user"}]`
	if got := compact(t, f.bodies[1]["messages"]); got != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
}

func TestConverseStructuredOutputUsesAForcedTool(t *testing.T) {
	t.Parallel()
	c, f := setup(t, recorded{status: 200, file: "converse_output_tool.json"})
	resp, err := c.Complete(context.Background(), model.Request{
		Messages:     []model.Message{{Role: model.User, Content: "Facts?"}},
		OutputSchema: json.RawMessage(`{"type":"object","required":["topic"]}`),
		OutputName:   "facts",
	})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(resp.Content), &v); err != nil || v["topic"] != "refunds" || v["urgent"] != true || len(resp.ToolCalls) != 0 {
		t.Errorf("response = %+v (%v)", resp, err)
	}
	if got := compact(t, f.bodies[0]["toolConfig"]); got != `{"toolChoice":{"tool":{"name":"stead_output"}},"tools":[{"toolSpec":{"description":"Give your answer by calling this tool: its input is your answer.","inputSchema":{"json":{"required":["topic"],"type":"object"}},"name":"stead_output"}}]}` {
		t.Errorf("toolConfig = %s", got)
	}
}

func TestConverseErrors(t *testing.T) {
	t.Parallel()
	c, _ := setup(t,
		recorded{status: 429, errorType: "ThrottlingException", file: "throttling.json"},
		recorded{status: 400, errorType: "ValidationException", file: "validation.json"},
	)
	_, err := c.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.User, Content: "x"}}})
	var pe *model.Error
	if !errors.As(err, &pe) || !pe.Retryable || pe.Status != 429 || pe.Code != "ThrottlingException" ||
		pe.Message != "Too many requests, please wait before trying again." {
		t.Fatalf("throttled: %#v", err)
	}
	_, err = c.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.User, Content: "x"}}})
	if !errors.As(err, &pe) || pe.Retryable || pe.Status != 400 || pe.Code != "ValidationException" ||
		err.Error() != "bedrock "+modelID+": HTTP 400 ValidationException: The provided model identifier is invalid." {
		t.Fatalf("refused: %v", err)
	}
}

func TestConverseRetriedThroughComplete(t *testing.T) {
	t.Parallel()
	c, f := setup(t,
		recorded{status: 429, errorType: "ThrottlingException", file: "throttling.json"},
		recorded{status: 200, file: "converse_text.json"},
	)
	var waits int
	resp, n, err := model.Complete(context.Background(), c, model.Request{Messages: []model.Message{{Role: model.User, Content: "x"}}},
		model.RetryPolicy{MaxRetries: 2, Sleep: func(context.Context, time.Duration) error { waits++; return nil }})
	if err != nil || n != 2 || waits != 1 || resp.Content != "Order o-1 was refunded." || len(f.bodies) != 2 {
		t.Fatalf("Complete = %+v, %d attempts, %d waits, %v", resp, n, waits, err)
	}
}

func TestEgressRefusedEndpointIsNotRetryable(t *testing.T) {
	t.Parallel()
	f := &fakeBedrock{t: t}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, endpoint := range []string{srv.URL, "http://localhost:" + port} {
		c, err := bedrock.New(context.Background(), bedrock.Options{
			ModelID: modelID, Region: "us-east-1", BaseEndpoint: endpoint, HTTPClient: egress.Policy{}.Client(),
			Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-test-key", ""),
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.User, Content: "x"}}})
		var pe *model.Error
		var refused *egress.RefusedError
		if !errors.As(err, &pe) || pe.Retryable || !errors.As(err, &refused) || !refused.Addr.IsLoopback() ||
			err.Error() != "bedrock "+modelID+": "+refused.Error() {
			t.Errorf("%s: %v, want a non-retryable *model.Error wrapping the refusal", endpoint, err)
		}
	}
	if len(f.bodies) != 0 {
		t.Errorf("the endpoint saw %d requests", len(f.bodies))
	}
}

// TestConverseRequestEdges: temperature alone, a max beyond int32, an
// assistant turn of tool calls only (no text block) or of nothing (one
// blank text block), arguments that are no object, and a schema that is no
// JSON.
func TestConverseRequestEdges(t *testing.T) {
	t.Parallel()
	c, f := setup(t, recorded{status: 200, file: "converse_text.json"}, recorded{status: 200, file: "converse_text.json"})
	temp := 0.5
	_, err := c.Complete(context.Background(), model.Request{
		Temperature: &temp, MaxTokens: 1 << 33,
		Messages: []model.Message{
			{Role: model.User, Content: "x"},
			{Role: model.Assistant, ToolCalls: []model.ToolCall{{ID: "t1", Name: "n", Arguments: "[1]"}}},
			{Role: model.ToolRole, ToolCallID: "t1", Content: "r"},
			{Role: model.Assistant},
		},
		Tools: []model.Tool{{Name: "bad", InputSchema: json.RawMessage(`nope`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := f.bodies[0]
	if got := compact(t, b["inferenceConfig"]); got != `{"maxTokens":2147483647,"temperature":0.5}` {
		t.Errorf("inferenceConfig = %s", got)
	}
	want := `[{"content":[{"text":"x"}],"role":"user"},` +
		`{"content":[{"toolUse":{"input":{},"name":"n","toolUseId":"t1"}}],"role":"assistant"},` +
		`{"content":[{"toolResult":{"content":[{"text":"r"}],"status":"success","toolUseId":"t1"}}],"role":"user"},` +
		`{"content":[{"text":" "}],"role":"assistant"}]`
	if got := compact(t, b["messages"]); got != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
	if got := compact(t, b["toolConfig"]); got != `{"tools":[{"toolSpec":{"inputSchema":{"json":{"type":"object"}},"name":"bad"}}]}` {
		t.Errorf("toolConfig = %s", got)
	}

	if _, err := c.Complete(context.Background(), model.Request{Temperature: &temp, Messages: []model.Message{{Role: model.User}}}); err != nil {
		t.Fatal(err)
	}
	if got := compact(t, f.bodies[1]["inferenceConfig"]); got != `{"temperature":0.5}` {
		t.Errorf("a temperature alone: inferenceConfig = %s", got)
	}
}

func TestOutputToolIsACallWithoutASchema(t *testing.T) {
	t.Parallel()
	c, _ := setup(t, recorded{status: 200, file: "converse_output_tool.json"})
	resp, err := c.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.User, Content: "x"}}})
	if err != nil || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != bedrock.OutputTool {
		t.Errorf("response = %+v, %v", resp, err)
	}
}

func TestConverseErrorsRetryable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		rec       recorded
		retryable bool
		after     time.Duration
	}{
		{"an unknown code in a 5xx", recorded{status: 503, errorType: "SomethingNewException", file: "validation.json"}, true, 0},
		{"a model not ready", recorded{status: 400, errorType: "ModelNotReadyException", file: "validation.json"}, true, 0},
		{"throttled with Retry-After", recorded{status: 429, errorType: "ThrottlingException", file: "throttling.json", header: map[string]string{"Retry-After": "2"}}, true, 2 * time.Second},
		{"a negative Retry-After", recorded{status: 429, errorType: "ThrottlingException", file: "throttling.json", header: map[string]string{"Retry-After": "-2"}}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := setup(t, tc.rec)
			_, err := c.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.User, Content: "x"}}})
			var pe *model.Error
			if !errors.As(err, &pe) || pe.Retryable != tc.retryable || pe.RetryAfter != tc.after || pe.Status != tc.rec.status {
				t.Errorf("err = %#v", err)
			}
		})
	}
}

func TestNoAnswerIsRetryable(t *testing.T) {
	t.Parallel()
	c, err := bedrock.New(context.Background(), bedrock.Options{
		ModelID: modelID, Region: "us-east-1", BaseEndpoint: "http://127.0.0.1:1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-test-key", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.User, Content: "x"}}})
	if !model.IsRetryable(err) {
		t.Errorf("err = %v, want retryable", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Complete(ctx, model.Request{Messages: []model.Message{{Role: model.User, Content: "x"}}}); err != context.Canceled {
		t.Errorf("cancelled: err = %#v, want context.Canceled itself", err)
	}
}

func TestRefusedInput(t *testing.T) {
	t.Parallel()
	creds := credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-test-key", "")
	if _, err := bedrock.New(context.Background(), bedrock.Options{ModelID: modelID, Credentials: creds}); err == nil {
		t.Error("New without a region: no error")
	}
	c, _ := setup(t)
	_, err := c.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: "system", Content: "x"}}})
	if err == nil || !strings.Contains(err.Error(), `message role "system" is not user, assistant or tool`) {
		t.Errorf("err = %v", err)
	}
}
