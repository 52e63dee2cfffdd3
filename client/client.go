// Package client is the Go client of Stead's HTTP API (api/openapi.json).
// The stead CLI makes every API call through it, so it cannot rot: the
// CLI's goldens and end-to-end tests exercise it against a real server.
//
// Call sends any request and decodes its answer; the typed methods
// (StartRun, GetRun, ListApprovals, Approve, Deny, CreateCustomerToken)
// cover what a backend integrating Stead calls most. An error answer is an
// *Error (the API's error document, and the body as sent); a transport
// failure an *UnreachableError. The shapes are package wire's (api/wire):
// the client imports nothing of the server (make lint holds it to that).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"stead/api/wire"
	"strings"
)

// Client calls one Stead with one credential. The zero HTTP is
// http.DefaultClient.
type Client struct {
	// BaseURL is where Stead is: "http://127.0.0.1:8720".
	BaseURL string
	// Key is the credential sent as Authorization: Bearer (an API key, a
	// customer token, …).
	Key string
	// HTTP sends the requests; http.DefaultClient when nil.
	HTTP *http.Client
	// UserAgent names the caller.
	UserAgent string
}

// Request is one API call.
type Request struct {
	Method string
	// Path is the route with escaped segments (Path helps).
	Path   string
	Query  url.Values
	Body   any
	Header http.Header
}

// Error is an error answer of the API: {"error": {"code", "message",
// "details"}}.
type Error struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// Body is the answer as sent.
	Body []byte `json:"-"`
	// Hint says what to do, when the caller knows better than the message.
	Hint string `json:"-"`
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = fmt.Sprintf("the API answered %d %s", e.Status, http.StatusText(e.Status))
	}
	switch {
	case e.Hint == "":
	case strings.Contains(msg, "\n"): // a list of problems: the hint on a line of its own
		msg += "\n" + e.Hint
	default:
		msg += "; " + e.Hint
	}
	return msg
}

// UnreachableError is a server that could not be reached at all.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach Stead at %s: %v — is `stead dev` running?", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Path joins escaped segments: Path("v1", "runs", id).
func Path(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// Send sends req and returns the response, whatever its status.
func (c *Client) Send(ctx context.Context, req Request) (*http.Response, error) {
	u := c.BaseURL + req.Path
	if len(req.Query) > 0 {
		u += "?" + req.Query.Encode()
	}
	var body io.Reader
	if req.Body != nil {
		b, err := json.Marshal(req.Body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, u, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, vs := range req.Header {
		hr.Header[k] = vs
	}
	if req.Body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if hr.Header.Get("Accept") == "" {
		hr.Header.Set("Accept", "application/json")
	}
	hr.Header.Set("Authorization", "Bearer "+c.Key)
	if c.UserAgent != "" {
		hr.Header.Set("User-Agent", c.UserAgent)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.unreachable(err)
	}
	return resp, nil
}

// Do sends req and returns the body of a 2xx answer. Any other answer is
// an *Error; a transport failure an *UnreachableError.
func (c *Client) Do(ctx context.Context, req Request) ([]byte, error) {
	resp, err := c.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, c.ErrorOf(resp.StatusCode, body)
	}
	return body, nil
}

// Call sends req and decodes a 2xx answer into out (unless nil); it
// returns the body as sent.
func (c *Client) Call(ctx context.Context, req Request, out any) ([]byte, error) {
	body, err := c.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return body, fmt.Errorf("the API at %s answered %s %s with JSON this client does not understand (%w); are the client and server the same version?", c.BaseURL, req.Method, req.Path, err)
		}
	}
	return body, nil
}

func (c *Client) unreachable(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &UnreachableError{URL: c.BaseURL, Err: err}
}

// ErrorOf turns an error answer into an *Error; one that is no API error
// document says so, with a hint.
func (c *Client) ErrorOf(status int, body []byte) *Error {
	var doc struct {
		Error *Error `json:"error"`
	}
	e := &Error{}
	if json.Unmarshal(body, &doc) == nil && doc.Error != nil {
		e = doc.Error
	} else {
		snippet := strings.TrimSpace(string(body))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "…"
		}
		e.Message = fmt.Sprintf("the server at %s answered %d %s, not a Stead API error", c.BaseURL, status, http.StatusText(status))
		if snippet != "" {
			e.Message += ": " + snippet
		}
		e.Hint = "is " + c.BaseURL + " a Stead server?"
	}
	e.Status, e.Body = status, body
	return e
}

// StartRun starts a run of agent (POST /v1/agents/{agent}/runs). With an
// idempotency key a repeat of the same request is the same run; wait
// ("30s") holds the answer until the run settles.
func (c *Client) StartRun(ctx context.Context, agent string, input json.RawMessage, endUserID, idempotencyKey, wait string) (wire.Run, error) {
	req := Request{Method: http.MethodPost, Path: Path("v1", "agents", agent, "runs"), Body: map[string]any{"input": input, "endUserId": endUserID}}
	if idempotencyKey != "" {
		req.Header = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	if wait != "" {
		req.Query = url.Values{"wait": {wait}}
	}
	var run wire.Run
	_, err := c.Call(ctx, req, &run)
	return run, err
}

// GetRun reads a run; with wait, once it settles (until "terminal": ends).
func (c *Client) GetRun(ctx context.Context, id, wait, until string) (wire.Run, error) {
	q := url.Values{}
	if wait != "" {
		q.Set("wait", wait)
	}
	if until != "" {
		q.Set("until", until)
	}
	var run wire.Run
	_, err := c.Call(ctx, Request{Method: http.MethodGet, Path: Path("v1", "runs", id), Query: q}, &run)
	return run, err
}

// ListApprovals lists approvals (GET /v1/approvals): status, order,
// runId, cursor, limit.
func (c *Client) ListApprovals(ctx context.Context, query url.Values) (wire.ApprovalList, error) {
	var list wire.ApprovalList
	_, err := c.Call(ctx, Request{Method: http.MethodGet, Path: "/v1/approvals", Query: query}, &list)
	return list, err
}

// Approve approves an approval, with a note and, when set, an edited
// input.
func (c *Client) Approve(ctx context.Context, id, note string, input json.RawMessage) (wire.Approval, error) {
	body := map[string]any{}
	if note != "" {
		body["note"] = note
	}
	if input != nil {
		body["input"] = input
	}
	var a wire.Approval
	_, err := c.Call(ctx, Request{Method: http.MethodPost, Path: Path("v1", "approvals", id, "approve"), Body: body}, &a)
	return a, err
}

// Deny denies an approval, with a note.
func (c *Client) Deny(ctx context.Context, id, note string) (wire.Approval, error) {
	body := map[string]any{}
	if note != "" {
		body["note"] = note
	}
	var a wire.Approval
	_, err := c.Call(ctx, Request{Method: http.MethodPost, Path: Path("v1", "approvals", id, "deny"), Body: body}, &a)
	return a, err
}

// CreateCustomerToken mints a customer token for an end user (ttlSeconds 0:
// the API's default).
func (c *Client) CreateCustomerToken(ctx context.Context, endUserID string, ttlSeconds int) (wire.CustomerToken, error) {
	body := map[string]any{"endUserId": endUserID}
	if ttlSeconds > 0 {
		body["ttlSeconds"] = ttlSeconds
	}
	var tok wire.CustomerToken
	_, err := c.Call(ctx, Request{Method: http.MethodPost, Path: "/v1/customer-tokens", Body: body}, &tok)
	return tok, err
}
