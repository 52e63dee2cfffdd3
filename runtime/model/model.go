// Package model is how Stead talks to language models: the provider-neutral
// conversation types (messages, tool calls, usage), the Provider interface
// every backend implements, the provider error with its retry advice, and
// Complete, which calls a provider with retries, backoff and deadlines.
//
// Backends live in their own packages and translate their wire formats and
// failures into these types, once each:
//
//   - stead/runtime/model/openai: any OpenAI-compatible chat-completions
//     endpoint (OpenAI, gateways such as LiteLLM or OpenRouter, local
//     servers such as Ollama or vLLM), over net/http.
//   - stead/runtime/model/bedrock: AWS Bedrock's Converse API, over
//     aws-sdk-go-v2.
//
// No SDK type crosses this package's boundary. Arguments of tool calls are
// kept as the JSON text the model produced (it may be malformed; the caller
// decides what to tell the model), never re-encoded.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Role is who said a message.
type Role string

// The roles. A system prompt is not a message; it is Request.System.
const (
	User      Role = "user"
	Assistant Role = "assistant"
	// ToolRole is the result of one tool call, answering the assistant
	// message that proposed it.
	ToolRole Role = "tool"
)

// Message is one turn of a conversation.
type Message struct {
	Role Role `json:"role"`
	// Content is the text of the message: a user prompt, the assistant's
	// answer (possibly empty when it only calls tools), or a tool result.
	Content string `json:"content"`
	// ToolCalls are the calls an assistant message proposes, in the model's
	// order.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and ToolName say which call a tool message answers.
	ToolCallID string `json:"toolCallId,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	// IsError marks a tool result that reports a failure (a refused or
	// failed call); providers that have such a flag send it.
	IsError bool `json:"isError,omitempty"`
}

// ToolCall is one tool call proposed by the model.
type ToolCall struct {
	// ID is the provider's id of the call; tool results refer to it.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text the model produced for the call's input,
	// as is: it may not be valid JSON.
	Arguments string `json:"arguments"`
}

// Tool describes a tool offered to the model.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool's input (an object schema).
	InputSchema json.RawMessage
}

// Request is one completion request.
type Request struct {
	// System is the system prompt; "" for none.
	System   string
	Messages []Message
	// Tools are offered to the model; nil offers none.
	Tools []Tool
	// OutputSchema, when set, asks for an answer that is JSON matching this
	// JSON Schema, using the provider's structured-output mode where it has
	// one. Response.Content then holds the JSON text. OutputName names the
	// schema where the provider wants a name ([A-Za-z0-9_-], at most 64).
	OutputSchema json.RawMessage
	OutputName   string
	// MaxTokens bounds the answer; 0 leaves the provider's default.
	MaxTokens int
	// Temperature, when set, is sent as is.
	Temperature *float64
}

// Response is the model's answer.
type Response struct {
	// Content is the answer's text ("" when it only calls tools).
	Content string
	// ToolCalls are the calls it proposes, in its order.
	ToolCalls []ToolCall
	// StopReason is the provider's reason for stopping ("stop", "tool_calls",
	// "end_turn", "max_tokens", …), for the trace.
	StopReason string
	Usage      Usage
}

// Usage is what the provider reported a request cost.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	// CostUSD is the cost the provider or gateway reported itself, nil when
	// it reported none (then the configured prices apply).
	CostUSD *float64
}

// Provider completes conversations. Implementations are safe for concurrent
// use. Complete returns a *Error for anything the provider refused or
// failed to answer (with Retryable set for rate limits, server errors,
// timeouts and broken connections), or ctx's error when ctx ended.
type Provider interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Error is a request the provider refused or did not answer.
type Error struct {
	// Provider names the backend and model: "openai gpt-4o-mini".
	Provider string
	// Status is the HTTP status, 0 when there was no response (a broken
	// connection, a timeout).
	Status int
	// Code is the provider's error code or type when it sent one
	// ("rate_limit_exceeded", "ThrottlingException"), else "".
	Code string
	// Message is the provider's explanation, with credentials redacted.
	Message string
	// Retryable says whether the same request may succeed later: 408, 429,
	// 5xx, timeouts and connection failures.
	Retryable bool
	// RetryAfter is the wait the provider asked for (Retry-After), 0 if none.
	RetryAfter time.Duration
	// Err is the cause when there was no answer, for errors.As: a
	// *egress.RefusedError when the egress policy refused the destination
	// (never retryable). Error does not repeat it; Message says it.
	Err error
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// IsRetryable reports whether err is a provider error worth retrying.
func IsRetryable(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Retryable
}
