package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"stead/api/wire"
	steadclient "stead/client"
)

// client calls the Stead API through package client (stead/client), the
// Go client of the HTTP API: every call the CLI makes goes through it.
type client struct {
	set settings
	api *steadclient.Client
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
	return a.clientOf(s), nil
}

// clientOf is a client with settings s.
func (a *app) clientOf(s settings) *client {
	return &client{set: s, api: &steadclient.Client{BaseURL: s.URL, Key: s.Key, HTTP: a.env.HTTPClient, UserAgent: "stead-cli/" + Version()}}
}

// apiError is an error response of the API; unreachableError a server
// that could not be reached.
type (
	apiError         = steadclient.Error
	unreachableError = steadclient.UnreachableError
)

// request is one API call.
type request struct {
	method string
	path   string
	query  url.Values
	body   any
	header http.Header
}

func (r request) of() steadclient.Request {
	return steadclient.Request{Method: r.method, Path: r.path, Query: r.query, Body: r.body, Header: r.header}
}

// call sends req and decodes a 2xx answer into out (unless nil); it returns
// the body as sent. Any other answer is an *apiError; a transport failure
// an *unreachableError.
func (c *client) call(ctx context.Context, req request, out any) ([]byte, error) {
	body, err := c.api.Call(ctx, req.of(), out)
	return body, c.explain(err)
}

// send sends req and returns the response, whatever its status.
func (c *client) send(ctx context.Context, req request) (*http.Response, error) {
	return c.api.Send(ctx, req.of())
}

// errorOf turns an error answer into an *apiError with the CLI's hints.
func (c *client) errorOf(status int, body []byte) *apiError {
	e := c.api.ErrorOf(status, body)
	_ = c.explain(e)
	return e
}

// explain adds what the CLI knows to an error answer: where a refused key
// came from, and every problem of an invalid request, one per line (the
// API's message names the first).
func (c *client) explain(err error) error {
	var e *apiError
	if !errors.As(err, &e) {
		return err
	}
	if e.Status == http.StatusUnauthorized {
		e.Hint = "the credential comes from " + c.set.KeyFrom
		if strings.HasPrefix(c.set.Key, "stk_") {
			// The API's advice after "; " guesses where an API key came
			// from; the CLI knows.
			e.Message, _, _ = strings.Cut(e.Message, "; ")
			e.Hint = keyAdvice(c.set.KeyFrom)
		}
	}
	if lines := fieldProblems(e); len(lines) > 1 {
		e.Message = (&problemsError{headline: fmt.Sprintf("the request is not valid (%d problems)", len(lines)), lines: lines}).Error()
	}
	return err
}

// keyAdvice is what to do about a refused API key, for where it came
// from: --key, $STEAD_KEY or the config file.
func keyAdvice(from string) string {
	if from == "--key" || from == "$"+EnvKey {
		return "the key comes from " + from + "; check it, or ask an owner for one (`stead keys create`)"
	}
	return "the key comes from " + from + "; run `stead login` (or `stead dev`) to write a new one"
}

// fieldProblems renders an invalid request's details.fields as
// "field: message" lines.
func fieldProblems(e *apiError) []string {
	raw, ok := e.Details["fields"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var ps []wire.FieldProblem
	if json.Unmarshal(b, &ps) != nil {
		return nil
	}
	lines := make([]string, 0, len(ps))
	for _, p := range ps {
		if p.Field == "" {
			lines = append(lines, p.Message)
		} else {
			lines = append(lines, p.Field+": "+p.Message)
		}
	}
	return lines
}

// path joins escaped segments: path("v1", "runs", id).
func path(segments ...string) string { return steadclient.Path(segments...) }

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
