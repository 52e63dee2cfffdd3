// Package mcptool is the client side of MCP-backed tools: it reaches a
// remote MCP server over Streamable HTTP (the official Go SDK, which
// negotiates the protocol revision), lists the tools it declares,
// fingerprints their definitions and calls them.
//
// Each operation opens its own connection and closes it: a Stead call is
// short and may run in any process (a runner Lambda), so no session
// outlives it. A call lists the server's tools first, in the same
// connection, so that a definition that changed since it was pinned is
// refused before the call is made (*ChangedError): what an owner approved
// to run against one definition never runs against another.
//
// Errors say what happened and whether trying again may help: an
// *UnavailableError (the server cannot be reached, or answered 5xx, 408 or
// 429: Retryable; it refused the credentials, 401 or 403, or the egress
// policy refused its address: not), a *MissingError (a declared tool the
// server does not list), a *ChangedError (a definition that is not the
// pinned one).
package mcptool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"stead/runtime/egress"
)

// IdempotencyKeyMeta is the _meta key of tools/call that carries the call's
// idempotency key: the same key a handler sees as context.idempotencyKey,
// stable across retries and across the approval pause.
const IdempotencyKeyMeta = "io.getstead/idempotencyKey"

// DefaultMaxResponse bounds one response body from a server, in bytes.
const DefaultMaxResponse = 4 << 20

// Server is a remote MCP server as a call reaches it.
type Server struct {
	// Name is the server's name in stead.json, for messages.
	Name string
	// URL is its MCP endpoint.
	URL string
	// Headers are sent with every request (values already read from the
	// environment).
	Headers map[string]string
}

// Definition is a remote tool's definition: what deploy pins.
type Definition struct {
	Name        string
	Description string
	// InputSchema and OutputSchema are the tool's JSON Schemas as the server
	// declared them, with object keys sorted; nil when absent.
	InputSchema, OutputSchema json.RawMessage
}

// Fingerprint is "sha256:" and the hex sha256 of the definition's name,
// description, input and output schemas (canonical JSON: keys sorted).
func (d Definition) Fingerprint() string {
	b, _ := json.Marshal(struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
		OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	}{d.Name, d.Description, d.InputSchema, d.OutputSchema})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Changes names what differs between two definitions of one tool:
// "description", "inputSchema", "outputSchema" (none when they are equal).
func Changes(was, now Definition) []string {
	var out []string
	if was.Description != now.Description {
		out = append(out, "description")
	}
	if string(was.InputSchema) != string(now.InputSchema) {
		out = append(out, "inputSchema")
	}
	if string(was.OutputSchema) != string(now.OutputSchema) {
		out = append(out, "outputSchema")
	}
	return out
}

// Client reaches MCP servers. The zero value is not usable; use New.
type Client struct {
	http        *http.Client
	maxResponse int64
}

// Options configure a Client.
type Options struct {
	// HTTPClient sends every request; nil uses Egress.Client(), so every
	// connection passes the egress policy like handlers' fetch.
	HTTPClient *http.Client
	// Egress is the destination policy when HTTPClient is nil.
	Egress egress.Policy
	// MaxResponse bounds one response body (DefaultMaxResponse when zero).
	MaxResponse int64
}

// New returns a Client.
func New(o Options) *Client {
	c := &Client{http: o.HTTPClient, maxResponse: o.MaxResponse}
	if c.http == nil {
		c.http = o.Egress.Client()
	}
	if c.maxResponse <= 0 {
		c.maxResponse = DefaultMaxResponse
	}
	return c
}

// Definitions lists srv's tools and returns the definitions of the named
// ones. A name the server does not list is a *MissingError naming each;
// the server's other tools are ignored.
func (c *Client) Definitions(ctx context.Context, srv Server, names []string) (map[string]Definition, error) {
	var out map[string]Definition
	err := c.session(ctx, srv, func(cs *mcp.ClientSession, _ *observer) error {
		all, err := list(ctx, cs)
		if err != nil {
			return err
		}
		out = map[string]Definition{}
		var missing []string
		for _, n := range names {
			d, ok := all[n]
			if !ok {
				missing = append(missing, n)
				continue
			}
			out[n] = d
		}
		if len(missing) > 0 {
			return &MissingError{Server: srv.Name, URL: srv.URL, Tools: missing, Listed: slices.Sorted(maps.Keys(all))}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Call is one tools/call.
type Call struct {
	// Tool is the remote tool's name.
	Tool string
	// Arguments is the call's input, a JSON object.
	Arguments json.RawMessage
	// IdempotencyKey is sent in _meta under IdempotencyKeyMeta.
	IdempotencyKey string
	// Fingerprint is the pinned definition's; a server whose definition
	// differs is refused with a *ChangedError before the call is made.
	Fingerprint string
}

// Result is what a call returned.
type Result struct {
	// Output is the result as a step output: the structured content when
	// the server sent one, else {"content": [the content blocks]}.
	Output json.RawMessage
	// IsError: the tool reported a failure (isError); Text holds what it
	// said.
	IsError bool
	// Text is the text of the result's text content blocks, one per line.
	Text string
}

// Call calls a tool on srv after checking its definition against the
// pinned fingerprint. Errors: *ChangedError, *MissingError,
// *UnavailableError, or a protocol error the server returned (wrapped).
func (c *Client) Call(ctx context.Context, srv Server, call Call) (Result, error) {
	var res Result
	err := c.session(ctx, srv, func(cs *mcp.ClientSession, obs *observer) error {
		all, err := list(ctx, cs)
		if err != nil {
			return err
		}
		d, ok := all[call.Tool]
		if !ok {
			return &MissingError{Server: srv.Name, URL: srv.URL, Tools: []string{call.Tool}, Listed: slices.Sorted(maps.Keys(all))}
		}
		if fp := d.Fingerprint(); fp != call.Fingerprint {
			return &ChangedError{Server: srv.Name, Tool: call.Tool, Pinned: call.Fingerprint, Now: fp}
		}
		var args any
		if len(call.Arguments) > 0 {
			args = call.Arguments
		}
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{
			Meta:      mcp.Meta{IdempotencyKeyMeta: call.IdempotencyKey},
			Name:      call.Tool,
			Arguments: args,
		})
		if err != nil {
			return fmt.Errorf("call %s: %w", call.Tool, err)
		}
		res, err = result(r)
		return err
	})
	return res, err
}

func result(r *mcp.CallToolResult) (Result, error) {
	var text []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	out := Result{IsError: r.IsError, Text: strings.Join(text, "\n")}
	var err error
	if r.StructuredContent != nil {
		out.Output, err = json.Marshal(r.StructuredContent)
	} else {
		content := r.Content
		if content == nil {
			content = []mcp.Content{}
		}
		out.Output, err = json.Marshal(map[string]any{"content": content})
	}
	if err != nil {
		return Result{}, fmt.Errorf("encode result: %w", err)
	}
	return out, nil
}

// list returns every tool the server lists, by name.
func list(ctx context.Context, cs *mcp.ClientSession) (map[string]Definition, error) {
	out := map[string]Definition{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		d := Definition{Name: t.Name, Description: t.Description}
		var err error
		if d.InputSchema, err = canonical(t.InputSchema); err != nil {
			return nil, fmt.Errorf("tool %s: inputSchema: %w", t.Name, err)
		}
		if d.OutputSchema, err = canonical(t.OutputSchema); err != nil {
			return nil, fmt.Errorf("tool %s: outputSchema: %w", t.Name, err)
		}
		out[t.Name] = d
	}
	return out, nil
}

// canonical is v as JSON with object keys sorted; nil for no schema.
func canonical(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, err
	}
	if generic == nil {
		return nil, nil
	}
	return json.Marshal(generic) // maps marshal with sorted keys
}

// session connects to srv, runs f, and closes the connection. A failure
// the transport saw (unreachable, an HTTP status, the egress policy)
// becomes an *UnavailableError.
func (c *Client) session(ctx context.Context, srv Server, f func(*mcp.ClientSession, *observer) error) error {
	obs := &observer{next: c.http.Transport, headers: srv.Headers, max: c.maxResponse}
	if obs.next == nil {
		obs.next = http.DefaultTransport
	}
	hc := *c.http
	hc.Transport = obs
	client := mcp.NewClient(&mcp.Implementation{Name: "stead", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: srv.URL, HTTPClient: &hc, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return obs.explain(srv, fmt.Errorf("connect: %w", err))
	}
	// Closed after f's failure is explained: one closing the session (a
	// server answering DELETE with 501) is not why f failed.
	defer func() { _ = cs.Close() }()
	if err := f(cs, obs); err != nil {
		var (
			me *MissingError
			ce *ChangedError
		)
		if errors.As(err, &me) || errors.As(err, &ce) {
			return err
		}
		return obs.explain(srv, err)
	}
	return nil
}

// observer adds the server's headers to every request and keeps the first
// transport-level failure, which the SDK's errors do not carry in a form
// a caller can act on.
type observer struct {
	next    http.RoundTripper
	headers map[string]string
	max     int64

	mu     sync.Mutex
	failed *UnavailableError
}

func (o *observer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range o.headers {
		req.Header.Set(k, v)
	}
	resp, err := o.next.RoundTrip(req)
	if err != nil {
		if req.Context().Err() == nil {
			var refused *egress.RefusedError
			o.fail(&UnavailableError{Reason: err.Error(), Retryable: !errors.As(err, &refused), Refused: errors.As(err, &refused), cause: err})
		}
		return nil, err
	}
	switch s := resp.StatusCode; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		o.fail(&UnavailableError{Status: s, Reason: fmt.Sprintf("it refused the request (%d %s): check the headers headersFromEnv sends", s, http.StatusText(s))})
	case s >= 500 || s == http.StatusRequestTimeout || s == http.StatusTooManyRequests:
		o.fail(&UnavailableError{Status: s, Reason: fmt.Sprintf("it answered %d %s", s, http.StatusText(s)), Retryable: true})
	case s == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") == "":
		o.fail(&UnavailableError{Status: s, Reason: "it answered 404 Not Found: is url its MCP endpoint?"})
	}
	resp.Body = &cappedBody{r: resp.Body, left: o.max, o: o}
	return resp, nil
}

func (o *observer) fail(e *UnavailableError) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed == nil {
		o.failed = e
	}
}

// explain turns err into an *UnavailableError when the transport saw why.
func (o *observer) explain(srv Server, err error) error {
	o.mu.Lock()
	f := o.failed
	o.mu.Unlock()
	if f == nil {
		return fmt.Errorf("MCP server %s (%s): %w", srv.Name, srv.URL, err)
	}
	out := *f
	out.Server, out.URL = srv.Name, srv.URL
	if out.cause == nil {
		out.cause = err
	}
	return &out
}

// cappedBody fails a response body past its limit.
type cappedBody struct {
	r    io.ReadCloser
	left int64
	o    *observer
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.o.fail(&UnavailableError{Reason: fmt.Sprintf("a response was over %d bytes", b.o.max)})
		return 0, errors.New("response too large")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.r.Close() }

// UnavailableError: the server could not be used: unreachable, an HTTP
// error status, refused by the egress policy, or a response too large.
type UnavailableError struct {
	Server, URL string
	// Status is the HTTP status when the server answered with an error.
	Status int
	Reason string
	// Retryable: the failure may pass (unreachable, 5xx, 408, 429).
	Retryable bool
	// Refused: the egress policy refused the server's address.
	Refused bool
	cause   error
}

func (e *UnavailableError) Error() string {
	what := "cannot be reached"
	switch {
	case e.Refused:
		what = "is refused by the egress policy (an owner setting: stead dev --egress-allow, STEAD_EGRESS_ALLOW on AWS)"
	case e.Status != 0:
		what = "could not be used"
	}
	return fmt.Sprintf("MCP server %s (%s) %s: %s", e.Server, e.URL, what, e.Reason)
}

func (e *UnavailableError) Unwrap() error { return e.cause }

// MissingError: the server does not list tools that stead.json declares.
type MissingError struct {
	Server, URL string
	Tools       []string
	// Listed is what the server does list.
	Listed []string
}

func (e *MissingError) Error() string {
	listed := "none"
	if len(e.Listed) > 0 {
		listed = strings.Join(e.Listed, ", ")
	}
	return fmt.Sprintf("MCP server %s (%s) does not list %s (it lists: %s)", e.Server, e.URL, quoteAll(e.Tools), listed)
}

// ChangedError: a tool's definition is not the one deploy pinned.
type ChangedError struct {
	Server, Tool string
	Pinned, Now  string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("the definition of %s on MCP server %s changed since it was deployed (pinned %s, now %s); refusing to call it: review the change and deploy again to pin it",
		e.Tool, e.Server, short(e.Pinned), short(e.Now))
}

func short(fp string) string {
	if len(fp) > len("sha256:")+12 {
		return fp[:len("sha256:")+12]
	}
	return fp
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
