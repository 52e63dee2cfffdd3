package apigw_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"stead/api"
	"stead/functions/apigw"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/store/boltstore"
	"stead/store/fsblob"
)

// golden reads an API Gateway event from functions/testdata/apigw, with
// ${NAME} placeholders filled from vars.
func golden(t *testing.T, name string, vars map[string]string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "apigw", name))
	if err != nil {
		t.Fatal(err)
	}
	pairs := []string{}
	for k, v := range vars {
		pairs = append(pairs, "${"+k+"}", v)
	}
	return []byte(strings.NewReplacer(pairs...).Replace(string(raw)))
}

// seen is what a test handler saw.
type seen struct {
	r    *http.Request
	body []byte
}

// recorder is an http.Handler that records its request and answers with
// answer.
func recorder(s *seen, answer func(w http.ResponseWriter, r *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.r = r
		s.body, _ = io.ReadAll(r.Body)
		if answer != nil {
			answer(w, r)
		}
	})
}

func invoke(t *testing.T, h lambda.Handler, payload []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	out, err := lambda.NewHandler(h).Invoke(context.Background(), payload)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var res events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	return res
}

func TestRequestFromGoldenEvent(t *testing.T) {
	t.Parallel()
	var s seen
	h := apigw.New(recorder(&s, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}), apigw.Options{})
	res := invoke(t, h, golden(t, "put-broker.json", map[string]string{"KEY": "stk_abc", "ORDER": "o-1", "BODY": `{\"value\":{\"id\":\"o-1\"}}`}))

	if res.StatusCode != 201 || res.Body != `{"ok":true}` || res.IsBase64Encoded || res.Headers["Content-Type"] != "application/json" {
		t.Fatalf("response %+v", res)
	}
	r := s.r
	if r.Method != http.MethodPut || r.URL.Path != "/v1/broker/orders/o-1" || r.URL.RawQuery != "endUserId=demo-user" {
		t.Errorf("request %s %s?%s", r.Method, r.URL.Path, r.URL.RawQuery)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer stk_abc" {
		t.Errorf("Authorization %q", got)
	}
	// An event without cookies makes a request without a Cookie header
	// (not an empty one).
	if v, ok := r.Header["Cookie"]; ok {
		t.Errorf("Cookie %q, want no Cookie header", v)
	}
	if string(s.body) != `{"value":{"id":"o-1"}}` || r.ContentLength != int64(len(s.body)) {
		t.Errorf("body %q (ContentLength %d)", s.body, r.ContentLength)
	}
	if r.Host != "abc123defg.execute-api.us-east-1.amazonaws.com" || r.RemoteAddr != "203.0.113.7:0" || r.RequestURI != "/v1/broker/orders/o-1?endUserId=demo-user" {
		t.Errorf("Host %q RemoteAddr %q RequestURI %q", r.Host, r.RemoteAddr, r.RequestURI)
	}
	if r.URL.Scheme != "https" || r.URL.Host != r.Host {
		t.Errorf("URL %s, want https on the API's domain", r.URL)
	}
}

func TestBase64Body(t *testing.T) {
	t.Parallel()
	var s seen
	h := apigw.New(recorder(&s, nil), apigw.Options{})
	res := invoke(t, h, golden(t, "approve.json", map[string]string{"KEY": "k", "APPROVAL": "apr_1"}))
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if string(s.body) != `{"note": "refund approved in the e2e"}` {
		t.Errorf("decoded body %q", s.body)
	}
	if s.r.URL.Path != "/v1/approvals/apr_1/approve" {
		t.Errorf("path %q", s.r.URL.Path)
	}
}

// The adapter passes header values as API Gateway sent them: a value with
// commas is one value (the proxy library splits it, which changes an
// Idempotency-Key).
func TestHeadersAndCookies(t *testing.T) {
	t.Parallel()
	var s seen
	h := apigw.New(recorder(&s, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "a=1; Secure")
		w.Header().Add("Set-Cookie", "b=2; Secure")
		w.Header().Add("Vary", "Accept")
		w.Header().Add("Vary", "Authorization")
	}), apigw.Options{})
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: "/v1/runs", RawQueryString: "status=queued&limit=5",
		Headers: map[string]string{"idempotency-key": "order,1001", "accept": "text/html, application/json"},
		Cookies: []string{"s=1", "t=2"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default", DomainName: "x.example",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Protocol: "HTTP/1.1", SourceIP: "2001:db8::1"},
		},
	}
	res := h.Serve(context.Background(), ev)
	if got := s.r.Header.Values("Idempotency-Key"); len(got) != 1 || got[0] != "order,1001" {
		t.Errorf("Idempotency-Key %q", got)
	}
	if got := s.r.Header.Get("Accept"); got != "text/html, application/json" {
		t.Errorf("Accept %q", got)
	}
	if got := s.r.Header.Get("Cookie"); got != "s=1; t=2" {
		t.Errorf("Cookie %q", got)
	}
	if s.r.URL.Query().Get("limit") != "5" || s.r.RemoteAddr != "[2001:db8::1]:0" {
		t.Errorf("query %q remote %q", s.r.URL.RawQuery, s.r.RemoteAddr)
	}
	// A handler that wrote nothing answers 200, like net/http.
	if res.StatusCode != 200 || res.Body != "" {
		t.Errorf("status %d body %q", res.StatusCode, res.Body)
	}
	if len(res.Cookies) != 2 || res.Cookies[0] != "a=1; Secure" || res.Headers["Set-Cookie"] != "" {
		t.Errorf("cookies %q headers %q", res.Cookies, res.Headers)
	}
	if res.Headers["Vary"] != "Accept, Authorization" {
		t.Errorf("Vary %q", res.Headers["Vary"])
	}
	if cl, ok := res.Headers["Content-Length"]; ok {
		t.Errorf("Content-Length %q, want none: the handler set none", cl)
	}
}

// The request's protocol is the event's when it names one, else HTTP/1.1.
func TestRequestProtocol(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		protocol, want string
		major, minor   int
	}{
		{"", "HTTP/1.1", 1, 1},
		{"HTTP/1.0", "HTTP/1.0", 1, 0},
		{"HTTP/2.0", "HTTP/2.0", 2, 0},
		{"SPDY", "HTTP/1.1", 1, 1},
	} {
		r, err := apigw.Request(context.Background(), events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/v1/runs",
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Protocol: c.protocol}}})
		if err != nil || r.Proto != c.want || r.ProtoMajor != c.major || r.ProtoMinor != c.minor {
			t.Errorf("protocol %q: %s %d.%d (%v), want %s", c.protocol, r.Proto, r.ProtoMajor, r.ProtoMinor, err, c.want)
		}
	}
}

func TestStagePrefix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ stage, raw, want string }{
		{"$default", "/v1/runs", "/v1/runs"},
		{"prod", "/prod/v1/runs", "/v1/runs"},
		{"prod", "/prod", "/"},
		{"prod", "/production/v1", "/production/v1"},
		{"$default", "/$default/v1/runs", "/$default/v1/runs"},
	} {
		var s seen
		h := apigw.New(recorder(&s, nil), apigw.Options{})
		h.Serve(context.Background(), events.APIGatewayV2HTTPRequest{
			Version: "2.0", RawPath: c.raw,
			RequestContext: events.APIGatewayV2HTTPRequestContext{Stage: c.stage, HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}},
		})
		if s.r.URL.Path != c.want {
			t.Errorf("stage %s path %s: handler saw %s, want %s", c.stage, c.raw, s.r.URL.Path, c.want)
		}
	}
}

func TestBinaryResponse(t *testing.T) {
	t.Parallel()
	png := []byte{0x89, 'P', 'N', 'G', 0xff, 0x00}
	h := apigw.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(png)
	}), apigw.Options{})
	res := h.Serve(context.Background(), events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/logo.png",
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}}})
	got, err := base64.StdEncoding.DecodeString(res.Body)
	if !res.IsBase64Encoded || err != nil || !bytes.Equal(got, png) {
		t.Fatalf("binary body: base64 %v %q (%v)", res.IsBase64Encoded, res.Body, err)
	}
}

// Bad events fail the invocation with a clear EventError; a bad request
// inside a good event is an HTTP 400, and a handler's panic a 500. Nothing
// panics out of the adapter.
func TestBadInput(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var called bool
	h := apigw.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called = true
		switch r.URL.Path {
		case "/panic":
			panic("boom")
		case "/abort":
			panic(http.ErrAbortHandler)
		}
	}), apigw.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

	bad := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "bad", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name     string
		payload  []byte
		contains string
	}{
		{"not JSON", []byte("GET /v1/runs"), "not a JSON object"},
		{"empty", nil, "not a JSON object"},
		{"array", []byte(`[1]`), "not a JSON object"},
		{"wrong types", []byte(`{"version": 2}`), "not valid JSON of the expected shape"},
		{"payload 1.0", bad("api-payload-v1.json"), `version is "1.0"`},
		{"runner event", bad("api-runner-event.json"), `version is ""`},
		{"no method", []byte(`{"version":"2.0","rawPath":"/"}`), "no requestContext.http.method"},
		{"no path", []byte(`{"version":"2.0","rawPath":"","requestContext":{"http":{"method":"GET"}}}`), "rawPath"},
		{"relative path", []byte(`{"version":"2.0","rawPath":"v1/runs","requestContext":{"http":{"method":"GET"}}}`), `rawPath "v1/runs" does not start with "/"`},
	} {
		_, err := lambda.NewHandler(h).Invoke(context.Background(), c.payload)
		var ee *apigw.EventError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), c.contains) || !strings.Contains(err.Error(), "payload format 2.0") {
			t.Errorf("%s: %v, want an EventError mentioning %q", c.name, err, c.contains)
		}
	}
	if called {
		t.Error("the handler ran for a bad event")
	}

	res := invoke(t, h, []byte(`{"version":"2.0","rawPath":"/v1/x","isBase64Encoded":true,"body":"%%%","requestContext":{"http":{"method":"POST"}}}`))
	if res.StatusCode != 400 || !strings.Contains(res.Body, `"invalid_argument"`) || !strings.Contains(res.Body, "base64") {
		t.Errorf("bad base64 body: %d %s", res.StatusCode, res.Body)
	}
	if res.Headers["Content-Type"] != "application/json; charset=utf-8" || res.Headers["Cache-Control"] != "no-store" {
		t.Errorf("bad base64 body: headers %v, want JSON and Cache-Control: no-store", res.Headers)
	}
	res = invoke(t, h, []byte(`{"version":"2.0","rawPath":"/abort","requestContext":{"http":{"method":"GET"}}}`))
	if res.StatusCode != 500 || strings.Contains(logs.String(), "handler panicked") {
		t.Errorf("aborted handler: %d %s, want a 500 that is not logged as a panic: %s", res.StatusCode, res.Body, logs.String())
	}
	res = invoke(t, h, []byte(`{"version":"2.0","rawPath":"/panic","requestContext":{"http":{"method":"GET"}}}`))
	if res.StatusCode != 500 || !strings.Contains(res.Body, `"internal"`) {
		t.Errorf("panicking handler: %d %s", res.StatusCode, res.Body)
	}
	if !strings.Contains(logs.String(), `"msg":"handler panicked"`) || !strings.Contains(logs.String(), "boom") {
		t.Errorf("the panic is not logged: %s", logs.String())
	}
}

// A handler writing past MaxResponse learns it from Write (a short write
// with io.ErrShortWrite, so it stops), and the answer is a 500.
func TestResponseTooLarge(t *testing.T) {
	t.Parallel()
	var writes int
	var writeErr error
	h := apigw.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		for range 6 {
			writes++
			if _, writeErr = w.Write(chunk); writeErr != nil {
				return
			}
		}
	}), apigw.Options{})
	res := h.Serve(context.Background(), events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/big",
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}}})
	if res.StatusCode != 500 || !strings.Contains(res.Body, "limit=") {
		t.Fatalf("oversized response: %d %.200s", res.StatusCode, res.Body)
	}
	if !errors.Is(writeErr, io.ErrShortWrite) || writes != 5 {
		t.Errorf("the handler wrote %d chunks and got %v; want io.ErrShortWrite on the 5th", writes, writeErr)
	}
}

// A response of exactly MaxResponse bytes is served whole; one byte more is
// the 500 of TestResponseTooLarge.
func TestResponseAtTheLimit(t *testing.T) {
	t.Parallel()
	h := apigw.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("a"), apigw.MaxResponse))
	}), apigw.Options{})
	res := h.Serve(context.Background(), events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/big",
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}}})
	if res.StatusCode != 200 || len(res.Body) != apigw.MaxResponse {
		t.Fatalf("a response of MaxResponse bytes: %d, %d bytes; want 200 with all of it", res.StatusCode, len(res.Body))
	}
}

// Content-Length is the body's, both ways: the handler sees the decoded
// body's length and no Content-Length header of API Gateway's (base64
// changes the length), and the response's header, when the handler set
// one, is recomputed from what it wrote.
func TestContentLengthFollowsTheBody(t *testing.T) {
	t.Parallel()
	var s seen
	h := apigw.New(recorder(&s, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "999")
		_, _ = w.Write([]byte("abc"))
	}), apigw.Options{})
	res := h.Serve(context.Background(), events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: "/v1/x", Body: base64.StdEncoding.EncodeToString([]byte("hello")), IsBase64Encoded: true,
		Headers:        map[string]string{"content-length": "8"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"}},
	})
	if got := s.r.Header.Get("Content-Length"); got != "" || s.r.ContentLength != 5 || string(s.body) != "hello" {
		t.Errorf("request: Content-Length header %q, ContentLength %d, body %q; want no header, 5, hello", got, s.r.ContentLength, s.body)
	}
	if res.Headers["Content-Length"] != "3" || res.Body != "abc" {
		t.Errorf("response: Content-Length %q, body %q; want 3, abc", res.Headers["Content-Length"], res.Body)
	}
}

// The handler's context ends Reserve before the invocation's deadline, and
// an event stream is cut after StreamWindow with what it wrote so far;
// without Options, DefaultReserve and DefaultStreamWindow.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name            string
		opts            apigw.Options
		reserve, window time.Duration
	}{
		{"set", apigw.Options{Reserve: 2 * time.Second, StreamWindow: 5 * time.Second}, 2 * time.Second, 5 * time.Second},
		{"defaults", apigw.Options{}, apigw.DefaultReserve, apigw.DefaultStreamWindow},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { testDeadlines(t, c.opts, c.reserve, c.window) })
		})
	}
}

func testDeadlines(t *testing.T, opts apigw.Options, reserve, window time.Duration) {
	var got time.Time
	h := apigw.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = r.Context().Deadline()
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: 1\ndata: {}\n\n")
			if err := http.NewResponseController(w).Flush(); err != nil {
				_, _ = io.WriteString(w, "flush: "+err.Error())
				return
			}
			<-r.Context().Done()
		}
	}), opts)

	deadline := time.Now().Add(29 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/v1/runs/r/events",
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}}}
	h.Serve(ctx, ev)
	if want := deadline.Add(-reserve); !got.Equal(want) {
		t.Errorf("handler deadline %s, want %s", got, want)
	}

	ev.Headers = map[string]string{"accept": "text/event-stream"}
	start := time.Now()
	res := h.Serve(ctx, ev)
	if took := time.Since(start); took != window {
		t.Errorf("the stream lasted %s, want the %s window", took, window)
	}
	if res.StatusCode != 200 || res.Body != "id: 1\ndata: {}\n\n" || res.Headers["Content-Type"] != "text/event-stream" {
		t.Errorf("stream response %d %q %v", res.StatusCode, res.Body, res.Headers)
	}

	// An Accept that lists the stream among other types is a stream.
	ev.Headers = map[string]string{"accept": "application/json, text/event-stream"}
	start = time.Now()
	h.Serve(ctx, ev)
	if took := time.Since(start); took != window {
		t.Errorf("Accept: application/json, text/event-stream: the stream lasted %s, want the %s window", took, window)
	}
}

// A stream also ends at the request's own deadline when that comes before
// the window: the invocation's deadline less Reserve.
func TestStreamEndsAtTheInvocationDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := apigw.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "id: 1\ndata: {}\n\n")
			<-r.Context().Done()
		}), apigw.Options{Reserve: time.Second, StreamWindow: 10 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		res := h.Serve(ctx, events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/v1/runs/r/events",
			Headers:        map[string]string{"accept": "text/event-stream"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}}})
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("the stream lasted %s, want 2s: the 3s deadline less the 1s reserve", took)
		}
		if res.StatusCode != 200 || res.Body != "id: 1\ndata: {}\n\n" {
			t.Errorf("stream response %d %q", res.StatusCode, res.Body)
		}
	})
}

type noDispatch struct{}

func (noDispatch) Dispatch(context.Context, string) error { return nil }

// Stead's own API behind the adapter, on the embedded store: the golden
// events reach their routes, and an unknown route is the API's JSON 404.
func TestSteadAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := boltstore.Open(filepath.Join(dir, "stead.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	blobs, err := fsblob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	rt := jsvm.New(jsvm.Options{})
	t.Cleanup(rt.Close)
	eng, err := engine.New(engine.Config{Store: st, Blobs: blobs, Invoker: rt, Dispatch: noDispatch{}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Engine: eng, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := api.Bootstrap(t.Context(), st, "adapter test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h := apigw.New(srv, apigw.Options{})

	for _, c := range []struct {
		file   string
		vars   map[string]string
		status int
		code   string
	}{
		{"healthz.json", nil, 200, ""},
		{"unknown-route.json", map[string]string{"KEY": key}, 404, "not_found"},
		{"get-run.json", map[string]string{"KEY": key, "RUN": "run_nope"}, 404, "not_found"},
		{"get-run.json", map[string]string{"KEY": "stk_wrong", "RUN": "run_nope"}, 401, "unauthenticated"},
		{"start-run.json", map[string]string{"KEY": key, "ORDER": "o-1"}, 404, "not_found"}, // nothing deployed
	} {
		res := invoke(t, h, golden(t, c.file, c.vars))
		if res.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.file, res.StatusCode, c.status, res.Body)
			continue
		}
		if c.code != "" && !strings.Contains(res.Body, `"code":"`+c.code+`"`) {
			t.Errorf("%s: body %s, want error code %s", c.file, res.Body, c.code)
		}
		if res.Headers["X-Request-Id"] == "" {
			t.Errorf("%s: no X-Request-Id: %v", c.file, res.Headers)
		}
	}
}
