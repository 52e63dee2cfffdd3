package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"stead/client"
)

// recorded is one request a fake server saw.
type recorded struct {
	method, uri, auth, accept, agent string
	body                             string
}

// fake answers every request with status and body and records it.
func fake(t *testing.T, status int, body string) (*client.Client, *recorded) {
	t.Helper()
	got := &recorded{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got = recorded{method: r.Method, uri: r.RequestURI, auth: r.Header.Get("Authorization"),
			accept: r.Header.Get("Accept"), agent: r.Header.Get("User-Agent"), body: string(b)}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return &client.Client{BaseURL: srv.URL, Key: "k-1", UserAgent: "stead-test/1"}, got
}

// TestRequests pins what each typed method sends.
func TestRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		call      func(context.Context, *client.Client) error
		uri, body string
	}{
		{"approve with a note and input", func(ctx context.Context, c *client.Client) error {
			_, err := c.Approve(ctx, "apr 1", "fine", json.RawMessage(`{"amount":5}`))
			return err
		}, "/v1/approvals/apr%201/approve", `{"input":{"amount":5},"note":"fine"}`},
		{"approve bare", func(ctx context.Context, c *client.Client) error {
			_, err := c.Approve(ctx, "apr_1", "", nil)
			return err
		}, "/v1/approvals/apr_1/approve", `{}`},
		{"deny with a note", func(ctx context.Context, c *client.Client) error {
			_, err := c.Deny(ctx, "apr_1", "no")
			return err
		}, "/v1/approvals/apr_1/deny", `{"note":"no"}`},
		{"a token with a ttl", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateCustomerToken(ctx, "u1", 600)
			return err
		}, "/v1/customer-tokens", `{"endUserId":"u1","ttlSeconds":600}`},
		{"a token with the default ttl", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateCustomerToken(ctx, "u1", 0)
			return err
		}, "/v1/customer-tokens", `{"endUserId":"u1"}`},
		{"a run waited for until terminal", func(ctx context.Context, c *client.Client) error {
			_, err := c.GetRun(ctx, "run/1", "30s", "terminal")
			return err
		}, "/v1/runs/run%2F1?until=terminal&wait=30s", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, got := fake(t, http.StatusOK, `{}`)
			if err := tc.call(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			if got.uri != tc.uri || got.body != tc.body || got.auth != "Bearer k-1" || got.accept != "application/json" || got.agent != "stead-test/1" {
				t.Errorf("sent %+v, want %s with %s", *got, tc.uri, tc.body)
			}
		})
	}
}

func TestCallerAcceptIsKept(t *testing.T) {
	t.Parallel()
	c, got := fake(t, http.StatusOK, ``)
	if _, err := c.Do(t.Context(), client.Request{Method: http.MethodGet, Path: "/v1/runs/r/events",
		Header: http.Header{"Accept": {"text/event-stream"}}}); err != nil {
		t.Fatal(err)
	}
	if got.accept != "text/event-stream" {
		t.Errorf("Accept %q, want the caller's text/event-stream", got.accept)
	}
}

func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 250)
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string // the error's text; "{URL}" is the server's
	}{
		{"an API error", 409, `{"error":{"code":"conflict","message":"approval apr_1 was decided already"}}`,
			"approval apr_1 was decided already"},
		{"an API error without a message", 503, `{"error":{"code":"unavailable"}}`,
			"the API answered 503 Service Unavailable"},
		{"not an API error", 502, "<html>bad gateway</html>\n",
			"the server at {URL} answered 502 Bad Gateway, not a Stead API error: <html>bad gateway</html>; is {URL} a Stead server?"},
		{"an empty answer", 500, "",
			"the server at {URL} answered 500 Internal Server Error, not a Stead API error; is {URL} a Stead server?"},
		{"a long answer is cut", 502, long,
			"the server at {URL} answered 502 Bad Gateway, not a Stead API error: " + long[:200] + "…; is {URL} a Stead server?"},
		{"a 3xx answer", 304, "", "the server at {URL} answered 304 Not Modified, not a Stead API error; is {URL} a Stead server?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := fake(t, tc.status, tc.body)
			_, err := c.Call(t.Context(), client.Request{Method: http.MethodGet, Path: "/v1/agents"}, nil)
			var e *client.Error
			if !errors.As(err, &e) || e.Status != tc.status || string(e.Body) != tc.body {
				t.Fatalf("err = %#v", err)
			}
			if want := strings.ReplaceAll(tc.want, "{URL}", c.BaseURL); err.Error() != want {
				t.Errorf("err = %q\nwant  %q", err, want)
			}
		})
	}
}

func TestErrorHintOnItsOwnLine(t *testing.T) {
	t.Parallel()
	e := &client.Error{Message: "2 problems:\n  a\n  b", Hint: "fix stead.json"}
	if got, want := e.Error(), "2 problems:\n  a\n  b\nfix stead.json"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAnswerNotUnderstood(t *testing.T) {
	t.Parallel()
	c, _ := fake(t, http.StatusOK, `{"id": 5}`)
	_, err := c.GetRun(t.Context(), "run_1", "", "")
	if err == nil || !strings.Contains(err.Error(), "answered GET /v1/runs/run_1 with JSON this client does not understand") {
		t.Errorf("err = %v", err)
	}
}

func TestLargeAnswerIsRead(t *testing.T) {
	t.Parallel()
	big := `"` + strings.Repeat("a", 1<<20) + `"`
	c, _ := fake(t, http.StatusOK, big)
	var s string
	if _, err := c.Call(t.Context(), client.Request{Method: http.MethodGet, Path: "/v1/x"}, &s); err != nil || len(s) != 1<<20 {
		t.Errorf("%d bytes, %v", len(s), err)
	}
}

func TestCancelledIsNotUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := (&client.Client{BaseURL: "http://127.0.0.1:1"}).Do(ctx, client.Request{Method: http.MethodGet, Path: "/v1/agents"})
	var ue *client.UnreachableError
	if !errors.Is(err, context.Canceled) || errors.As(err, &ue) {
		t.Errorf("err = %#v, want context.Canceled", err)
	}
}

func TestUnreachableNamesTheCause(t *testing.T) {
	t.Parallel()
	_, err := (&client.Client{BaseURL: "http://127.0.0.1:1"}).Do(t.Context(), client.Request{Method: http.MethodGet, Path: "/v1/agents"})
	var ue *client.UnreachableError
	if !errors.As(err, &ue) || ue.URL != "http://127.0.0.1:1" ||
		!strings.HasPrefix(err.Error(), "cannot reach Stead at http://127.0.0.1:1: dial tcp 127.0.0.1:1: ") ||
		!strings.HasSuffix(err.Error(), " — is `stead dev` running?") {
		t.Errorf("err = %v", err)
	}
}
