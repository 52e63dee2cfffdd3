// Package apigw serves an http.Handler to Amazon API Gateway HTTP APIs:
// it turns a Lambda event of payload format 2.0 into an *http.Request, runs
// the handler with a buffered response writer and answers with the
// response event. Stead's API function is apigw.Handler(api.New(…)).
//
// It is small on purpose (instead of aws-lambda-go-api-proxy's
// httpadapter): header values are passed exactly as API Gateway sent them
// (the proxy splits every value on commas, which changes an Idempotency-Key
// or an Accept header), a body that is not valid base64 is a 400 and not a
// failed invocation, a handler that writes nothing answers 200 like
// net/http, the adapter logs nothing in plain text, and the dependency
// tree stays aws-lambda-go's.
//
// API Gateway buffers responses. Event streams (Accept: text/event-stream)
// still work, as one buffered chunk: the stream is cut after
// Options.StreamWindow and the client reconnects with Last-Event-ID, as
// Server-Sent Events clients do. Every request ends Options.Reserve before
// the invocation's deadline, so long-polls answer in time.
package apigw

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"stead/strictjson"
)

// Defaults of Options.
const (
	// DefaultReserve is the time kept back from the invocation's deadline to
	// send the answer.
	DefaultReserve = time.Second
	// DefaultStreamWindow is how long one buffered event stream lasts.
	DefaultStreamWindow = 10 * time.Second
	// MaxResponse is the largest body the adapter returns: a synchronous
	// Lambda response carries at most 6 MB, base64 and envelope included.
	MaxResponse = 4 << 20
)

// Options tune a Handler.
type Options struct {
	// Reserve is kept back from the invocation's deadline; DefaultReserve
	// when zero.
	Reserve time.Duration
	// StreamWindow bounds a buffered event stream; DefaultStreamWindow when
	// zero.
	StreamWindow time.Duration
	// Logger hears events that are not API Gateway requests and oversized
	// responses; nothing is logged when nil.
	Logger *slog.Logger
}

// EventError is a Lambda event that is not an API Gateway HTTP API request
// of payload format 2.0. It fails the invocation (errorType "EventError").
type EventError struct {
	Problem string
}

func (e *EventError) Error() string {
	return "api function: " + e.Problem + "; it serves API Gateway HTTP API requests, payload format 2.0 (PayloadFormatVersion: '2.0')"
}

// Handler serves h to API Gateway. It implements lambda.Handler: pass it
// to lambda.Start, or call Invoke in tests.
type Handler struct {
	h    http.Handler
	opts Options
}

// New returns a Handler of h.
func New(h http.Handler, o Options) *Handler {
	if o.Reserve <= 0 {
		o.Reserve = DefaultReserve
	}
	if o.StreamWindow <= 0 {
		o.StreamWindow = DefaultStreamWindow
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{h: h, opts: o}
}

// Invoke serves one event. Only an event that is not an HTTP API request
// is an error; every request gets a response, errors included.
func (a *Handler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	ev, err := Parse(payload)
	if err != nil {
		a.opts.Logger.ErrorContext(ctx, "refused a Lambda event", "error", err)
		return nil, err
	}
	res := a.Serve(ctx, ev)
	return json.Marshal(res)
}

// Parse decodes and checks an event, strictly (strictjson) but tolerating
// fields API Gateway may add.
func Parse(payload []byte) (events.APIGatewayV2HTTPRequest, error) {
	var ev events.APIGatewayV2HTTPRequest
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return ev, &EventError{Problem: fmt.Sprintf("the event is not a JSON object (it starts %q)", prefix(trimmed, 20))}
	}
	// Not Stead's shape: API Gateway adds fields, so unknown names are
	// ignored, but names match exactly and a duplicate name, invalid UTF-8
	// or deep nesting is refused (strictjson).
	if err := strictjson.UnmarshalForeign(trimmed, &ev); err != nil {
		return ev, &EventError{Problem: fmt.Sprintf("the event is not valid JSON of the expected shape: %s", err.Error())}
	}
	switch {
	case ev.Version != "2.0":
		return ev, &EventError{Problem: fmt.Sprintf("the event's version is %q, not \"2.0\"", ev.Version)}
	case ev.RequestContext.HTTP.Method == "":
		return ev, &EventError{Problem: "the event has no requestContext.http.method"}
	case !strings.HasPrefix(ev.RawPath, "/"):
		return ev, &EventError{Problem: fmt.Sprintf("the event's rawPath %q does not start with \"/\"", ev.RawPath)}
	}
	return ev, nil
}

// Serve answers one request.
func (a *Handler) Serve(ctx context.Context, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-a.opts.Reserve))
		defer cancel()
	}
	r, err := Request(ctx, ev)
	if err != nil {
		return errorResponse(http.StatusBadRequest, "invalid_argument", err.Error())
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(r.Context(), a.opts.StreamWindow)
		defer cancel()
		r = r.WithContext(ctx)
	}
	w := &responseWriter{header: http.Header{}}
	if !a.serve(w, r) {
		return errorResponse(http.StatusInternalServerError, "internal", "internal error: the request failed; it was logged")
	}
	if w.body.Len() > MaxResponse {
		a.opts.Logger.ErrorContext(ctx, "response too large for API Gateway", "path", ev.RawPath)
		return errorResponse(http.StatusInternalServerError, "internal",
			fmt.Sprintf("the response is over %d bytes, more than a Lambda response carries; ask for a smaller page (limit=)", MaxResponse))
	}
	return w.response()
}

// serve runs the handler, recovering a panic as net/http would (the
// request fails, the process lives on) instead of letting aws-lambda-go
// end the execution environment. It reports whether the handler returned.
func (a *Handler) serve(w http.ResponseWriter, r *http.Request) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				return
			}
			a.opts.Logger.ErrorContext(r.Context(), "handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		}
	}()
	a.h.ServeHTTP(w, r)
	return true
}

// Request builds the *http.Request of an event, with ctx. Its URL is the
// path the API sees: the stage's prefix is taken off when the stage is not
// $default.
func Request(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("the request body is marked base64 but does not decode: %w", err)
		}
		body = b
	}
	path := ev.RawPath
	if st := ev.RequestContext.Stage; st != "" && st != "$default" {
		if rest, ok := strings.CutPrefix(path, "/"+st); ok && (rest == "" || rest[0] == '/') {
			path = rest
			if path == "" {
				path = "/"
			}
		}
	}
	u, err := url.ParseRequestURI(path)
	if err != nil {
		return nil, fmt.Errorf("the request path %q is not valid: %w", path, err)
	}
	u.RawQuery = ev.RawQueryString
	u.Scheme = "https"
	u.Host = ev.RequestContext.DomainName
	r, err := http.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("the request cannot be built: %w", err)
	}
	for k, v := range ev.Headers {
		r.Header.Set(k, v) // API Gateway joined repeated headers with commas already
	}
	if len(ev.Cookies) > 0 {
		r.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	r.Header.Del("Content-Length")
	r.ContentLength = int64(len(body))
	r.Host = ev.RequestContext.DomainName
	r.RequestURI = u.RequestURI()
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	if p := ev.RequestContext.HTTP.Protocol; p != "" {
		if major, minor, ok := http.ParseHTTPVersion(p); ok {
			r.Proto, r.ProtoMajor, r.ProtoMinor = p, major, minor
		}
	}
	if ip := ev.RequestContext.HTTP.SourceIP; ip != "" {
		r.RemoteAddr = net.JoinHostPort(ip, "0")
	}
	return r, nil
}

// responseWriter buffers a response. Flush is a no-op that succeeds, so
// streaming handlers run (their output arrives in one piece).
type responseWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.Len()+len(p) > MaxResponse+1 {
		n := max(0, MaxResponse+1-w.body.Len())
		w.body.Write(p[:n])
		return n, io.ErrShortWrite
	}
	return w.body.Write(p)
}

func (w *responseWriter) Flush() {}

func (w *responseWriter) response() events.APIGatewayV2HTTPResponse {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	res := events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: map[string]string{}}
	for k, vs := range w.header {
		if k == "Set-Cookie" {
			res.Cookies = append(res.Cookies, vs...)
			continue
		}
		res.Headers[k] = strings.Join(vs, ", ")
	}
	b := w.body.Bytes()
	if utf8.Valid(b) {
		res.Body = string(b)
	} else {
		res.Body = base64.StdEncoding.EncodeToString(b)
		res.IsBase64Encoded = true
	}
	if _, ok := res.Headers["Content-Length"]; ok {
		res.Headers["Content-Length"] = strconv.Itoa(len(b))
	}
	return res
}

// errorResponse is an answer in the API's error format.
func errorResponse(status int, code, msg string) events.APIGatewayV2HTTPResponse {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store"},
		Body:       string(b) + "\n",
	}
}

func prefix(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
