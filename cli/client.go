package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// client calls the Stead API.
type client struct {
	set  settings
	http *http.Client
}

// client returns an API client with the resolved settings.
func (a *app) client() (*client, error) {
	s, err := a.settings()
	if err != nil {
		return nil, err
	}
	if _, err := url.ParseRequestURI(s.URL); err != nil || !strings.HasPrefix(s.URL, "http") {
		return nil, fmt.Errorf("the API URL %q (from %s) is not an http(s) URL; use e.g. %s", s.URL, s.URLFrom, DefaultURL)
	}
	return &client{set: s, http: a.env.HTTPClient}, nil
}

// apiError is an error response of the API:
// {"error": {"code", "message", "details"}}.
type apiError struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// Body is the response as sent, for --json.
	Body []byte `json:"-"`
	// hint says what to do, when the CLI knows better than the message.
	hint string
}

func (e *apiError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = fmt.Sprintf("the API answered %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.hint != "" {
		msg += "; " + e.hint
	}
	return msg
}

// unreachableError: the server could not be reached at all.
type unreachableError struct {
	url string
	err error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach Stead at %s: %v — is `stead dev` running?", e.url, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// request is one API call.
type request struct {
	method string
	path   string
	query  url.Values
	body   any
	header http.Header
}

// do sends req and returns the response body of a 2xx answer. Any other
// answer is an *apiError; a transport failure an *unreachableError.
func (c *client) do(ctx context.Context, req request) ([]byte, error) {
	resp, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, c.errorOf(resp.StatusCode, body)
	}
	return body, nil
}

// call sends req and decodes a 2xx answer into out (unless nil); it returns
// the body as sent.
func (c *client) call(ctx context.Context, req request, out any) ([]byte, error) {
	body, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return body, fmt.Errorf("the API at %s answered %s %s with JSON this CLI does not understand (%w); are the CLI and server the same version?", c.set.URL, req.method, req.path, err)
		}
	}
	return body, nil
}

// send sends req and returns the response, whatever its status.
func (c *client) send(ctx context.Context, req request) (*http.Response, error) {
	u := c.set.URL + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	var body io.Reader
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, vs := range req.header {
		hr.Header[k] = vs
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if hr.Header.Get("Accept") == "" {
		hr.Header.Set("Accept", "application/json")
	}
	hr.Header.Set("Authorization", "Bearer "+c.set.Key)
	hr.Header.Set("User-Agent", "stead-cli/"+Version())
	resp, err := c.http.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.unreachable(err)
	}
	return resp, nil
}

func (c *client) unreachable(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &unreachableError{url: c.set.URL, err: err}
}

// errorOf turns an error answer into an *apiError with a hint for the
// statuses where the CLI knows what to do.
func (c *client) errorOf(status int, body []byte) *apiError {
	var doc struct {
		Error *apiError `json:"error"`
	}
	e := &apiError{}
	if json.Unmarshal(body, &doc) == nil && doc.Error != nil {
		e = doc.Error
	} else {
		snippet := strings.TrimSpace(string(body))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "…"
		}
		e.Message = fmt.Sprintf("the server at %s answered %d %s, not a Stead API error", c.set.URL, status, http.StatusText(status))
		if snippet != "" {
			e.Message += ": " + snippet
		}
		e.hint = "is " + c.set.URL + " a Stead server?"
	}
	e.Status = status
	e.Body = body
	switch status {
	case http.StatusUnauthorized:
		e.hint = fmt.Sprintf("the key comes from %s; check it, or run `stead login` (or `stead dev`) to write a new one", c.set.KeyFrom)
	}
	return e
}

// path joins escaped segments: path("v1", "runs", id).
func path(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// callOrPrint makes req and decodes its answer into out; with --json it
// prints the answer as it came and reports done, so that the caller prints
// nothing more.
func (a *app) callOrPrint(ctx context.Context, req request, out any) (done bool, err error) {
	c, err := a.client()
	if err != nil {
		return false, err
	}
	body, err := c.call(ctx, req, out)
	if err != nil {
		return false, err
	}
	if a.jsonFlag {
		return true, printJSON(a.stdout(), body)
	}
	return false, nil
}
