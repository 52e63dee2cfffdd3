package jsvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dop251/goja"
	"golang.org/x/net/http/httpguts"

	"stead/runtime/bundle"
	"stead/runtime/egress"
)

// fetcher is a Runtime's HTTP client for the fetch global. Every connection
// it opens, redirects included, is checked against the egress policy at
// dial time, on the address actually dialled, so a hostname that resolves
// (or re-resolves) to a refused address cannot get through.
type fetcher struct {
	policy      egress.Policy
	client      *http.Client
	transport   *http.Transport
	maxResponse int64
}

func newFetcher(o FetchOptions) *fetcher {
	policy := egress.Policy{Allow: o.Allow}
	f := &fetcher{policy: policy, maxResponse: o.MaxResponse}
	dialer := &net.Dialer{
		Timeout:        o.Timeout,
		KeepAlive:      30 * time.Second,
		ControlContext: policy.Control,
	}
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would be dialled instead of the destination
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		IdleConnTimeout:        30 * time.Second,
		TLSHandshakeTimeout:    o.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
	}
	maxRedirects := o.MaxRedirects
	f.transport = tr
	f.client = &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to a %s: URL is not allowed", req.URL.Scheme)
			}
			return policy.CheckLiteral(req.URL.Hostname())
		},
	}
	return f
}

func (f *fetcher) close() { f.transport.CloseIdleConnections() }

var errTooLarge = errors.New("response too large")

// Fetcher sends the requests of the fetch global. A Runtime uses an
// *HTTPFetcher of its Options.Fetch unless Options.Fetcher replaces it (a
// sandbox worker sends them to its parent, which owns the egress policy).
// Fetch is called on a host goroutine; an error's text is what the handler's
// TypeError says.
type Fetcher interface {
	Fetch(ctx context.Context, req FetchRequest) (FetchResponse, error)
}

// FetchRequest is one request of the fetch global, checked by the VM's side
// (http or https URL with a host, a token method, valid header fields).
type FetchRequest struct {
	URL    string      `json:"url"`
	Method string      `json:"method"`
	Header [][2]string `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

// FetchResponse is what a fetch resolves to.
type FetchResponse struct {
	Status     int         `json:"status"`
	StatusText string      `json:"statusText"`
	URL        string      `json:"url"`
	Redirected bool        `json:"redirected"`
	Header     [][2]string `json:"header,omitempty"`
	Body       []byte      `json:"body,omitempty"`
}

// HTTPFetcher is the Fetcher that reaches the network under an egress
// policy (see FetchOptions). It checks every request again, so a request
// from a sandbox worker gets the same checks as one from a local VM.
type HTTPFetcher struct{ f *fetcher }

var _ Fetcher = (*HTTPFetcher)(nil)

// NewFetcher returns an HTTPFetcher with the policy o (zero fields take
// their defaults). Close it when done.
func NewFetcher(o FetchOptions) *HTTPFetcher {
	o.defaults()
	return &HTTPFetcher{f: newFetcher(o)}
}

// Close drops idle connections.
func (h *HTTPFetcher) Close() { h.f.close() }

// Fetch implements Fetcher. Its errors are *FetchError.
func (h *HTTPFetcher) Fetch(ctx context.Context, fr FetchRequest) (FetchResponse, error) {
	req, err := h.f.request(ctx, fr)
	if err != nil {
		return FetchResponse{}, err
	}
	resp, err := h.f.do(req)
	if err != nil {
		return FetchResponse{}, &FetchError{Message: fetchFailure(fr.URL, err, h.f.maxResponse)}
	}
	return resp, nil
}

// FetchError is a fetch that failed; Message is what the handler sees.
type FetchError struct{ Message string }

func (e *FetchError) Error() string { return e.Message }

// request checks fr as hostFetch does and builds its *http.Request.
func (f *fetcher) request(ctx context.Context, fr FetchRequest) (*http.Request, error) {
	fail := func(format string, args ...any) error { return &FetchError{Message: fmt.Sprintf(format, args...)} }
	u, problem := checkFetch(fr)
	if problem != "" {
		return nil, fail("%s", problem)
	}
	if err := f.policy.CheckLiteral(u.Hostname()); err != nil {
		return nil, fail("%s", fetchFailure(fr.URL, err, 0))
	}
	header := http.Header{}
	for _, kv := range fr.Header {
		header.Add(kv[0], kv[1])
	}
	req, err := http.NewRequestWithContext(ctx, fr.Method, u.String(), nil)
	if err != nil {
		return nil, fail("fetch: %s", err.Error())
	}
	header.Del("Host") // the URL names the host
	req.Header = header
	if body := fr.Body; body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return req, nil
}

// checkFetch says what is wrong with a fetch request ("" when nothing):
// the one set of rules the VM's side throws by and the sending side checks
// again.
func checkFetch(fr FetchRequest) (*url.URL, string) {
	u, err := url.Parse(fr.URL)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("fetch: invalid URL %q", fr.URL)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Sprintf("fetch: only http and https URLs are supported, not %q", u.Scheme+":")
	case u.Host == "":
		return nil, fmt.Sprintf("fetch: the URL %q has no host", fr.URL)
	case !httpguts.ValidHostHeader(u.Host):
		return nil, fmt.Sprintf("fetch: invalid host in %q", fr.URL)
	case fr.Method == "" || strings.IndexFunc(fr.Method, func(r rune) bool { return !httpguts.IsTokenRune(r) }) >= 0:
		return nil, fmt.Sprintf("fetch: invalid method %q", fr.Method)
	}
	for _, kv := range fr.Header {
		if !httpguts.ValidHeaderFieldName(kv[0]) || !httpguts.ValidHeaderFieldValue(kv[1]) {
			return nil, fmt.Sprintf("fetch: invalid header %q", kv[0])
		}
	}
	return u, ""
}

// hostFetch is the Go half of fetch(url, method, [[name, value]…], body);
// the prelude's fetch normalises the arguments and wraps the result in a
// Response. Bad arguments throw here; the Fetcher sends the request.
func (w *worker) hostFetch(call goja.FunctionCall) goja.Value {
	c := w.active("fetch")
	rawURL := call.Argument(0).String()
	fr := FetchRequest{URL: rawURL, Method: call.Argument(1).String()}
	if pairs, ok := call.Argument(2).(*goja.Object); ok {
		var list [][]string
		if err := w.vm.ExportTo(pairs, &list); err != nil {
			w.throwType("fetch: invalid headers")
		}
		for _, kv := range list {
			if len(kv) != 2 {
				w.throwType("fetch: invalid headers")
			}
			fr.Header = append(fr.Header, [2]string{kv[0], kv[1]})
		}
	}
	if _, problem := checkFetch(fr); problem != "" {
		w.throwType("%s", problem)
	}
	switch b := call.Argument(3); {
	case goja.IsUndefined(b):
	case isString(b):
		fr.Body = []byte(b.String())
	default:
		var raw []byte
		if err := w.vm.ExportTo(b, &raw); err != nil {
			w.throwType("fetch: unsupported body")
		}
		fr.Body = bytes.Clone(raw) // the typed array's memory belongs to the VM
	}
	f := w.rt.fetcher
	return w.async(c, func(ctx context.Context) settle {
		resp, err := f.Fetch(ctx, fr)
		return func() (goja.Value, goja.Value, error) {
			if err != nil {
				msg := err.Error()
				var fe *FetchError
				if !errors.As(err, &fe) {
					msg = fetchFailure(rawURL, err, 0)
				}
				return nil, w.jsError("TypeError", msg), nil
			}
			vm := w.vm
			hdrs := make([]any, len(resp.Header))
			for i, kv := range resp.Header {
				hdrs[i] = []any{kv[0], kv[1]}
			}
			raw := vm.NewArray(resp.Status, resp.StatusText, resp.URL, resp.Redirected, hdrs, vm.NewArrayBuffer(resp.Body))
			return raw, nil, nil
		}
	})
}

func isString(v goja.Value) bool {
	_, ok := v.(goja.String)
	return ok
}

// do sends req and reads the whole response within the size cap.
func (f *fetcher) do(req *http.Request) (FetchResponse, error) {
	resp, err := f.client.Do(req)
	if err != nil {
		return FetchResponse{}, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > f.maxResponse {
		return FetchResponse{}, errTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxResponse+1))
	if err != nil {
		return FetchResponse{}, err
	}
	if int64(len(body)) > f.maxResponse {
		return FetchResponse{}, errTooLarge
	}
	out := FetchResponse{
		Status:     resp.StatusCode,
		StatusText: strings.TrimSpace(strings.TrimPrefix(resp.Status, fmt.Sprint(resp.StatusCode))),
		URL:        resp.Request.URL.String(),
		Redirected: resp.Request != req,
		Body:       body,
	}
	for name, values := range resp.Header {
		for _, v := range values {
			out.Header = append(out.Header, [2]string{name, v})
		}
	}
	return out, nil
}

// fetchFailure says why a fetch failed, in the words of the policy or limit
// that stopped it.
func fetchFailure(rawURL string, err error, maxResponse int64) string {
	var refused *egress.RefusedError
	switch {
	case errors.As(err, &refused):
		return fmt.Sprintf("fetch %s failed: %s (handlers may only reach public addresses)", rawURL, refused.Error())
	case errors.Is(err, errTooLarge):
		return fmt.Sprintf("fetch %s failed: the response body is over the %s limit", rawURL, bundle.FormatSize(maxResponse))
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Sprintf("fetch %s failed: the invocation's deadline passed", rawURL)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Sprintf("fetch %s failed: %s", rawURL, err.Error())
}
