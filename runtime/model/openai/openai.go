// Package openai is a model.Provider for any OpenAI-compatible
// chat-completions endpoint: OpenAI itself, gateways (LiteLLM, OpenRouter,
// Portkey, …) and local servers (Ollama, vLLM, llama.cpp), over net/http.
//
// It sends POST {BaseURL}/chat/completions with the conversation as
// "messages", tools as "tools" ({"type": "function", …}), and, for a JSON
// answer, "response_format": {"type": "json_schema", "json_schema":
// {"name", "schema", "strict": false}}. The API key, when there is one, is
// sent as "Authorization: Bearer …" and redacted from every error.
//
// Usage comes from the response's "usage": prompt_tokens and
// completion_tokens. A cost the gateway reports itself wins over configured
// prices: "usage.cost" (OpenRouter and others, in USD) or the
// "x-litellm-response-cost" header (LiteLLM proxy).
//
// Failures are *model.Error: 408, 409, 429 and 5xx answers and broken
// connections are retryable, with Retry-After (seconds or an HTTP date)
// honoured; other statuses are not. A destination the egress policy of
// Options.HTTPClient refused (a *egress.RefusedError) is not retryable and
// is the *model.Error's Err.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"stead/runtime/egress"
	"stead/runtime/model"
	"stead/runtime/redact"
)

// MaxResponse bounds the body of an answer read from the endpoint.
const MaxResponse = 8 << 20

// Options configure a Client.
type Options struct {
	// BaseURL is the API root, e.g. "https://api.openai.com/v1" or
	// "http://127.0.0.1:11434/v1"; "/chat/completions" is appended.
	BaseURL string
	// Model is the model name sent as "model".
	Model string
	// APIKey is sent as a bearer token; "" sends no Authorization header
	// (local servers).
	APIKey string
	// HTTPClient sends the requests; http.DefaultClient when nil. Timeouts
	// come from the request context.
	HTTPClient *http.Client
	// Now reads the clock for Retry-After dates; time.Now when nil.
	Now func() time.Time
}

// Client is a model.Provider for one model of one endpoint.
type Client struct {
	o    Options
	url  string
	name string
}

var _ model.Provider = (*Client)(nil)

// New returns a client. It fails if BaseURL or Model is empty.
func New(o Options) (*Client, error) {
	if o.BaseURL == "" || o.Model == "" {
		return nil, errors.New("openai: BaseURL and Model are required")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Client{o: o, url: strings.TrimRight(o.BaseURL, "/") + "/chat/completions", name: "openai " + o.Model}, nil
}

// Wire types of the chat-completions API (only the fields Stead uses).
type (
	chatRequest struct {
		Model          string          `json:"model"`
		Messages       []chatMessage   `json:"messages"`
		Tools          []chatTool      `json:"tools,omitempty"`
		ResponseFormat *responseFormat `json:"response_format,omitempty"`
		MaxTokens      int             `json:"max_tokens,omitempty"`
		Temperature    *float64        `json:"temperature,omitempty"`
	}
	chatMessage struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	chatTool struct {
		Type     string      `json:"type"`
		Function functionDef `json:"function"`
	}
	functionDef struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	responseFormat struct {
		Type       string      `json:"type"`
		JSONSchema *jsonSchema `json:"json_schema,omitempty"`
	}
	jsonSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict bool            `json:"strict"`
	}
	chatResponse struct {
		Choices []struct {
			Message struct {
				Content   *string        `json:"content"`
				Refusal   *string        `json:"refusal"`
				ToolCalls []chatToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int64    `json:"prompt_tokens"`
			CompletionTokens int64    `json:"completion_tokens"`
			Cost             *float64 `json:"cost"`
		} `json:"usage"`
		Error *apiError `json:"error"`
	}
	apiError struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
)

// Complete sends one chat-completions request.
func (c *Client) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	body, err := json.Marshal(c.wireRequest(req))
	if err != nil {
		return model.Response{}, fmt.Errorf("%s: encode request: %w", c.name, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return model.Response{}, &model.Error{Provider: c.name, Message: c.redact(err.Error())}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.o.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.o.APIKey)
	}
	res, err := c.o.HTTPClient.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return model.Response{}, ctx.Err()
		}
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			// The egress policy refused where the request (or a redirect)
			// went: the same request will be refused again.
			return model.Response{}, &model.Error{Provider: c.name, Message: c.redact("POST " + c.url + ": " + refused.Error()), Err: refused}
		}
		// No answer: a refused or broken connection, retryable.
		return model.Response{}, &model.Error{Provider: c.name, Message: c.redact(err.Error()), Retryable: true, Err: err}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, MaxResponse+1))
	if err != nil {
		if ctx.Err() != nil {
			return model.Response{}, ctx.Err()
		}
		return model.Response{}, &model.Error{Provider: c.name, Status: res.StatusCode, Message: "reading the answer: " + c.redact(err.Error()), Retryable: true}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return model.Response{}, c.statusError(res, data)
	}
	if len(data) > MaxResponse {
		return model.Response{}, &model.Error{Provider: c.name, Status: res.StatusCode, Message: fmt.Sprintf("the answer is larger than %d bytes", MaxResponse)}
	}
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return model.Response{}, &model.Error{Provider: c.name, Status: res.StatusCode, Message: "the answer is not chat-completions JSON: " + c.redact(err.Error())}
	}
	if cr.Error != nil && len(cr.Choices) == 0 {
		// Some gateways answer 200 with an error object.
		return model.Response{}, c.bodyError(res.StatusCode, res.Header, cr.Error)
	}
	if len(cr.Choices) == 0 {
		return model.Response{}, &model.Error{Provider: c.name, Status: res.StatusCode, Message: "the answer has no choices"}
	}
	ch := cr.Choices[0]
	out := model.Response{StopReason: ch.FinishReason}
	if ch.Message.Content != nil {
		out.Content = *ch.Message.Content
	}
	if out.Content == "" && ch.Message.Refusal != nil {
		out.Content = *ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if cr.Usage != nil {
		out.Usage = model.Usage{InputTokens: cr.Usage.PromptTokens, OutputTokens: cr.Usage.CompletionTokens, CostUSD: cr.Usage.Cost}
	}
	if h := res.Header.Get("x-litellm-response-cost"); h != "" && out.Usage.CostUSD == nil {
		if f, err := strconv.ParseFloat(h, 64); err == nil && f >= 0 {
			out.Usage.CostUSD = &f
		}
	}
	return out, nil
}

func (c *Client) wireRequest(req model.Request) chatRequest {
	w := chatRequest{Model: c.o.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature}
	if req.System != "" {
		w.Messages = append(w.Messages, chatMessage{Role: "system", Content: ptr(req.System)})
	}
	for _, m := range req.Messages {
		cm := chatMessage{Role: string(m.Role), Content: ptr(m.Content), ToolCallID: m.ToolCallID}
		if m.Role == model.Assistant && len(m.ToolCalls) > 0 {
			if m.Content == "" {
				cm.Content = nil
			}
			for _, tc := range m.ToolCalls {
				cm.ToolCalls = append(cm.ToolCalls, chatToolCall{ID: tc.ID, Type: "function", Function: chatFunction{Name: tc.Name, Arguments: tc.Arguments}})
			}
		}
		w.Messages = append(w.Messages, cm)
	}
	for _, t := range req.Tools {
		params := t.InputSchema
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		w.Tools = append(w.Tools, chatTool{Type: "function", Function: functionDef{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	if len(req.OutputSchema) > 0 {
		name := req.OutputName
		if name == "" {
			name = "output"
		}
		w.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: &jsonSchema{Name: name, Schema: req.OutputSchema}}
	}
	return w
}

func ptr(s string) *string { return &s }

// statusError turns a non-2xx answer into a *model.Error.
func (c *Client) statusError(res *http.Response, data []byte) error {
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	ae := &apiError{}
	if json.Unmarshal(data, &body) == nil && len(body.Error) > 0 {
		if json.Unmarshal(body.Error, ae) != nil {
			// {"error": "text"}
			var s string
			_ = json.Unmarshal(body.Error, &s)
			ae = &apiError{Message: s}
		}
	}
	if ae.Message == "" {
		ae.Message = snippet(c.redact(string(data)))
	}
	return c.bodyError(res.StatusCode, res.Header, ae)
}

func (c *Client) bodyError(status int, h http.Header, ae *apiError) *model.Error {
	code := ae.Type
	if s, ok := ae.Code.(string); ok && s != "" {
		code = s
	}
	e := &model.Error{
		Provider:   c.name,
		Status:     status,
		Code:       c.redact(code),
		Message:    c.redact(ae.Message),
		Retryable:  status == 408 || status == 409 || status == 429 || status >= 500,
		RetryAfter: retryAfter(h.Get("Retry-After"), c.o.Now()),
	}
	if status == http.StatusOK {
		// An error inside a 200: judge by its own code, if numeric.
		if n, ok := ae.Code.(float64); ok {
			e.Status = int(n)
			e.Retryable = n == 408 || n == 429 || n >= 500
		}
	}
	return e
}

// snippet is the start of a body that is not a JSON error, for the message.
// Redact before cutting: a key cut in half would no longer be found.
func snippet(body string) string {
	s := strings.TrimSpace(body)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func (c *Client) redact(s string) string { return redact.String(s, c.o.APIKey) }

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(strings.TrimSpace(h), 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
