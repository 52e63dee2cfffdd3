package jsvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const fetchHandlers = `
export async function get(input) {
  try {
    const res = await fetch(input.url, input.init);
    const body = input.as === "json" ? await res.json() : input.as === "length" ? (await res.text()).length : await res.text();
    return { status: res.status, ok: res.ok, type: res.headers.get("Content-Type"), x: res.headers.get("x-multi"),
             redirected: res.redirected, url: res.url, body };
  } catch (e) {
    return { error: e.name + ": " + e.message };
  }
}`

func fetchInput(url string, extra string) string {
	return fmt.Sprintf(`{"url":%q%s}`, url, extra)
}

type fetchResult struct {
	Status     int
	OK         bool
	Type, X    string
	Redirected bool
	URL        string
	Body       any
	Error      string
}

func doFetch(t *testing.T, r *Runtime, input string) fetchResult {
	t.Helper()
	b := load(t, r, fetchHandlers)
	out := mustDo(t, r, b, "get", input)
	var res fetchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

func TestFetchLoopbackRefusedByDefault(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	r := newRuntime(t, Options{})
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/"} {
		res := doFetch(t, r, fetchInput(u, ""))
		if !strings.HasPrefix(res.Error, "TypeError: ") || !strings.Contains(res.Error, "refused") || !strings.Contains(res.Error, "loopback") {
			t.Errorf("fetch %s: %+v, want a TypeError saying the loopback destination is refused", u, res)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server saw %d requests", n)
	}
}

func TestFetchAllowlisted(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"method": req.Method, "auth": req.Header.Get("Authorization"), "ctype": req.Header.Get("Content-Type"),
			"body": string(body), "path": req.URL.RequestURI(),
		})
	}))
	defer srv.Close()
	r := newRuntime(t, Options{Fetch: FetchOptions{Allow: loopback}})
	res := doFetch(t, r, fetchInput(srv.URL+"/orders?id=1",
		`,"as":"json","init":{"method":"post","headers":{"Authorization":"Bearer x"},"body":{"amount":5}}`))
	if res.Error != "" {
		t.Fatal(res.Error)
	}
	body, _ := res.Body.(map[string]any)
	if res.Status != 201 || !res.OK || res.Type != "application/json" || res.X != "a, b" || res.Redirected ||
		body["method"] != "POST" || body["auth"] != "Bearer x" || body["ctype"] != "application/json" ||
		body["body"] != `{"amount":5}` || body["path"] != "/orders?id=1" {
		t.Errorf("got %+v", res)
	}
	res = doFetch(t, r, fetchInput(srv.URL, `,"init":{"method":"GET","body":"x"}`))
	if !strings.Contains(res.Error, "cannot have a body") {
		t.Errorf("GET with a body: %+v", res)
	}
	res = doFetch(t, r, fetchInput("file:///etc/passwd", ""))
	if !strings.Contains(res.Error, "only http and https") {
		t.Errorf("file URL: %+v", res)
	}
}

// Every redirect is dialled through the same policy.
func TestFetchRedirectToRefusedAddress(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer target.Close()
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	var next string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, next, http.StatusFound)
	}))
	defer srv.Close()
	r := newRuntime(t, Options{Fetch: FetchOptions{Allow: loopback}})
	for _, dest := range []string{
		"http://127.0.0.2:" + port + "/",          // loopback, outside the allowlist
		"http://[::ffff:127.0.0.1]:" + port + "/", // IPv4-mapped form of an allowed address
	} {
		next = dest
		res := doFetch(t, r, fetchInput(srv.URL, ""))
		if !strings.Contains(res.Error, "refused") {
			t.Errorf("redirect to %s: %+v, want refused", dest, res)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the redirect target saw %d requests", n)
	}
}

func TestFetchRedirectLimit(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(req.URL.Path, "/")) // "/" is hop 0
		if n < 10 {
			http.Redirect(w, req, fmt.Sprintf("/%d", n+1), http.StatusFound)
			return
		}
		fmt.Fprint(w, "end")
	}))
	defer srv.Close()
	r := newRuntime(t, Options{Fetch: FetchOptions{Allow: loopback}})
	res := doFetch(t, r, fetchInput(srv.URL+"/5", "")) // 5 redirects: fine
	if res.Error != "" || res.Body != "end" || !res.Redirected || !strings.HasSuffix(res.URL, "/10") {
		t.Errorf("5 redirects: %+v", res)
	}
	res = doFetch(t, r, fetchInput(srv.URL+"/4", "")) // 6 redirects: refused
	if !strings.Contains(res.Error, "stopped after 5 redirects") {
		t.Errorf("6 redirects: %+v", res)
	}
}

func TestFetchResponseCap(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length: the cap is found while reading
		}
		fmt.Fprint(w, strings.Repeat("x", 3<<20))
	}))
	defer srv.Close()
	r := newRuntime(t, Options{Fetch: FetchOptions{Allow: loopback}})
	for _, path := range []string{"/sized", "/chunked"} {
		res := doFetch(t, r, fetchInput(srv.URL+path, ""))
		if !strings.Contains(res.Error, "over the 2.0 MiB limit") {
			t.Errorf("%s: %+v", path, res.Error)
		}
	}
	small := newRuntime(t, Options{Fetch: FetchOptions{Allow: loopback, MaxResponse: 3 << 20}})
	if res := doFetch(t, small, fetchInput(srv.URL, `,"as":"length"`)); res.Error != "" || res.Body != float64(3<<20) {
		t.Errorf("with a 3 MiB cap: %+v", res)
	}
}

func TestFetchBoundByDeadline(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		<-req.Context().Done() // never answers
	}))
	defer srv.Close()
	r := newRuntime(t, Options{Fetch: FetchOptions{Allow: loopback}})
	b := load(t, r, `export async function slow(input) { await fetch(input.url); return 1; }`)
	start := time.Now()
	_, e := doCtx(t, ctxTimeout(t, 100*time.Millisecond), r, b, Invocation{Export: "slow", Input: json.RawMessage(fetchInput(srv.URL, ""))})
	wantCode(t, e, CodeTimeout)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %s", d)
	}
}

// fakeFetcher answers every request with err, and counts them.
type fakeFetcher struct {
	err   error
	calls atomic.Int32
}

func (f *fakeFetcher) Fetch(context.Context, FetchRequest) (FetchResponse, error) {
	f.calls.Add(1)
	return FetchResponse{}, f.err
}

// A Fetcher's *FetchError is what the handler's TypeError says, word for
// word; another error is described with the URL.
func TestFetcherErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"FetchError", &FetchError{Message: "refused by the parent"}, "TypeError: refused by the parent"},
		{"other error", errors.New("connection reset"), "TypeError: fetch https://example.com/x failed: connection reset"},
	} {
		r := newRuntime(t, Options{Fetcher: &fakeFetcher{err: c.err}})
		if res := doFetch(t, r, fetchInput("https://example.com/x", "")); res.Error != c.want {
			t.Errorf("%s: got %q, want %q", c.name, res.Error, c.want)
		}
	}
}

// A URL without a host is refused in the VM, never handed to the Fetcher.
func TestFetchURLWithoutHostRefused(t *testing.T) {
	t.Parallel()
	f := &fakeFetcher{err: errors.New("sent")}
	r := newRuntime(t, Options{Fetcher: f})
	res := doFetch(t, r, fetchInput("http:///x", ""))
	if !strings.HasPrefix(res.Error, "TypeError: ") || !strings.Contains(res.Error, "has no host") || f.calls.Load() != 0 {
		t.Errorf("got %q after %d requests, want a TypeError saying the URL has no host and none sent", res.Error, f.calls.Load())
	}
}
