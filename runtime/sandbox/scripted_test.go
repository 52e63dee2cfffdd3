package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
)

// scriptedWorker writes a shell script that plays a worker: it writes out
// to its channel (fd 3), drops whatever the parent sends it (fd 4), and
// waits to be killed. out goes through a file, so it may be large.
func scriptedWorker(t *testing.T, out string) string {
	t.Helper()
	if _, err := os.Stat("/bin/sleep"); err != nil {
		t.Skip("needs /bin/sh, /bin/cat and /bin/sleep")
	}
	dir := t.TempDir()
	frames := filepath.Join(dir, "frames")
	if err := os.WriteFile(frames, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\n/bin/cat <&4 >/dev/null 3>&- 2>/dev/null &\n/bin/cat '" + frames + "' >&3\nexec /bin/sleep 30\n"
	path := filepath.Join(dir, "worker.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// scriptedBundle is the bundle the scripted workers pretend to run.
func scriptedBundle(t *testing.T) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Compile("handlers.mjs", []byte(`export async function h() { return 1; }`), []bundle.Export{{Name: "h", Function: true}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// handshake is what a worker says before its first call.
var handshake = frame(`{"t":"ready","v":2}`) + frame(`{"t":"loaded"}`)

// blockingBroker answers nothing until its call ends.
type blockingBroker struct{ jsvm.MemoryBroker }

func (*blockingBroker) Get(ctx context.Context, _, _ string) (json.RawMessage, bool, error) {
	<-ctx.Done()
	return nil, false, ctx.Err()
}

// The parent bounds and cleans what a worker's frames carry, and takes a
// frame at a limit while it kills the worker for one past it. A worker
// that keeps to the protocol is kept.
func TestScriptedWorkerFramesAtTheLimits(t *testing.T) {
	t.Parallel()
	// A server that answers no fetch until its call ends: the fetches stay
	// in flight.
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer stuck.Close()
	fetches := func(n int) string {
		var s strings.Builder
		for i := 1; i <= n; i++ {
			s.WriteString(frame(fmt.Sprintf(`{"t":"host","seq":1,"id":%d,"host":{"op":"fetch","fetch":{"url":%q,"method":"GET"}}}`, i, stuck.URL)))
		}
		return s.String()
	}
	gets := func(n int) string {
		var s strings.Builder
		for i := 1; i <= n; i++ {
			s.WriteString(frame(fmt.Sprintf(`{"t":"host","seq":1,"id":%d,"host":{"op":"broker.get","collection":"c","key":"k"}}`, i)))
		}
		return s.String()
	}
	marks := func(origins ...string) string {
		var s strings.Builder
		for _, o := range origins {
			s.WriteString(frame(fmt.Sprintf(`{"t":"untrusted","seq":1,"origin":%q}`, o)))
		}
		return s.String()
	}
	done := func(body string) string { return frame(`{"t":"done","seq":1,"done":` + body + `}`) }
	now := time.Date(2100, 1, 2, 3, 4, 5, 0, time.UTC)
	hundred := make([]string, 100)
	for i := range hundred {
		hundred[i] = fmt.Sprintf("m%d", i)
	}
	loopback := jsvm.FetchOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	for _, tc := range []struct {
		name      string
		opts      Options
		out       string
		violation string // the call fails sandbox-crashed naming it; "" for a result
		check     func(t *testing.T, res jsvm.Result, e *jsvm.Error)
		retired   bool // the worker says its VM is spent: it is not kept
	}{
		{name: "an empty untrusted mark", out: marks("") + done(`{"output":1}`), violation: "an untrusted mark of 0 bytes"},
		{name: "an untrusted mark at the limit", out: marks(strings.Repeat("a", maxOrigin)) + done(`{"output":1}`),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {
				if len(res.Untrusted) != 1 || res.Untrusted[0] != strings.Repeat("a", maxOrigin) {
					t.Errorf("untrusted %d marks, want the one of %d bytes", len(res.Untrusted), maxOrigin)
				}
			}},
		{name: "an untrusted mark over the limit", out: marks(strings.Repeat("a", maxOrigin+1)) + done(`{"output":1}`),
			violation: fmt.Sprintf("an untrusted mark of %d bytes", maxOrigin+1)},
		{name: "marks past the limit and again", out: marks(append(append([]string{"m0", "m0"}, hundred...), "m100")...) + done(`{"output":1}`),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {
				if !reflect.DeepEqual(res.Untrusted, hundred) {
					t.Errorf("untrusted %v, want m0 … m99 once each", res.Untrusted)
				}
			}},
		{name: "the done frame's marks", out: marks("m") + done(`{"output":1,"untrusted":["m","","`+strings.Repeat("a", maxOrigin+1)+`","n","n"]}`),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {
				if want := []string{"m", "n"}; !reflect.DeepEqual(res.Untrusted, want) {
					t.Errorf("untrusted %q, want %q: empty, oversized and repeated marks dropped", res.Untrusted, want)
				}
			}},
		{name: "a negative cost", out: done(`{"output":1,"cost":{"tokensInput":-5,"tokensOutput":-7,"costUsd":-0.5}}`),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {
				if res.Cost != (jsvm.Cost{}) {
					t.Errorf("cost %+v, want none", res.Cost)
				}
			}},
		{name: "log levels and times", opts: Options{Now: func() time.Time { return now }},
			out: done(fmt.Sprintf(`{"output":1,"logs":[{"level":"evil","message":"a","at":1},{"level":"warn","message":"b","at":%d}]}`, now.Add(-time.Hour).UnixMicro())),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {
				want := []jsvm.Log{{Level: "log", Message: "a", At: now}, {Level: "warn", Message: "b", At: now.Add(-time.Hour)}}
				if len(res.Logs) != 2 || res.Logs[0] != want[0] || !res.Logs[1].At.Equal(want[1].At) || res.Logs[1].Level != "warn" || res.LogsTruncated {
					t.Errorf("logs %+v (truncated %v), want %+v: an unknown level is log, a time before the call is now", res.Logs, res.LogsTruncated, want)
				}
			}},
		{name: "logs the worker truncated", out: done(`{"output":1,"logs":[{"level":"log","message":"a","at":1}],"logsTruncated":true}`),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {
				if len(res.Logs) != 1 || !res.LogsTruncated {
					t.Errorf("logs %+v (truncated %v), want the line and truncated", res.Logs, res.LogsTruncated)
				}
			}},
		{name: "more log lines than the limit", opts: Options{MaxLogLines: 2},
			out: done(`{"output":1,"logs":[{"level":"log","message":"a","at":1},{"level":"log","message":"b","at":1},{"level":"log","message":"c","at":1}]}`),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {
				if len(res.Logs) != 2 || res.Logs[1].Message != "b" || !res.LogsTruncated {
					t.Errorf("logs %+v (truncated %v), want a and b, truncated", res.Logs, res.LogsTruncated)
				}
			}},
		{name: "a long error", out: done(fmt.Sprintf(`{"error":{"code":"handler-error","message":%q,"name":%q}}`, strings.Repeat("m", 20000), strings.Repeat("n", 300))),
			check: func(t *testing.T, _ jsvm.Result, e *jsvm.Error) {
				if e == nil || e.Code != jsvm.CodeHandlerError || e.Message != strings.Repeat("m", maxMessage)+"…[truncated]" || e.Name != strings.Repeat("n", 200)+"…[truncated]" {
					t.Errorf("error %.80v…, want its message cut at %d bytes and its name at 200", e, maxMessage)
				}
			}},
		{name: "a result at the size limit", opts: Options{MaxResultSize: 10}, out: done(`{"output":1234567890}`),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {
				if string(res.Output) != "1234567890" {
					t.Errorf("output %s", res.Output)
				}
			}},
		{name: "a result over the size limit", opts: Options{MaxResultSize: 10}, out: done(`{"output":12345678901}`),
			violation: "a result of 11 bytes, over the 10-byte limit"},
		{name: "a result at the depth limit", out: done(`{"output":` + strings.Repeat("[", maxOutputDepth) + strings.Repeat("]", maxOutputDepth) + `}`),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {
				if len(res.Output) != 2*maxOutputDepth {
					t.Errorf("output of %d bytes", len(res.Output))
				}
			}},
		{name: "fetches at the limit", opts: Options{Fetch: loopback}, out: fetches(maxFetchInFlight) + done(`{"output":1}`),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {}},
		{name: "fetches over the limit", opts: Options{Fetch: loopback}, out: fetches(maxFetchInFlight + 1), violation: "more than 8 fetches at once"},
		{name: "host requests at the limit", out: gets(maxHostInFlight) + done(`{"output":1}`),
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {}},
		{name: "a retired worker's result", out: done(`{"output":1,"retired":true}`), retired: true,
			check: func(t *testing.T, res jsvm.Result, _ *jsvm.Error) {
				if string(res.Output) != "1" || !res.Retired {
					t.Errorf("output %s (retired %v)", res.Output, res.Retired)
				}
			}},
		{name: "a retired worker's error", out: done(`{"error":{"code":"stack-overflow","message":"too deep"},"retired":true}`), retired: true,
			check: func(t *testing.T, _ jsvm.Result, e *jsvm.Error) {
				if e == nil || e.Code != jsvm.CodeStackOverflow {
					t.Errorf("error %v, want stack-overflow", e)
				}
			}},
		{name: "host requests over the limit", out: gets(maxHostInFlight + 1), violation: "more than 64 host requests at once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.Path = scriptedWorker(t, handshake+tc.out)
			p, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			// Only a guard against a hang: no case waits for it, and under a
			// heavy load starting the scripted worker alone took seconds.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := p.Invoke(ctx, scriptedBundle(t), jsvm.Invocation{Tenant: "prj", Export: "h", Broker: &blockingBroker{}})
			e, _ := jsvm.AsError(err)
			if tc.violation != "" {
				if e == nil || e.Code != jsvm.CodeSandboxCrashed || !strings.Contains(e.Message, tc.violation) {
					t.Fatalf("%v, want sandbox-crashed naming %q", err, tc.violation)
				}
				return
			}
			if err != nil && e == nil {
				t.Fatal(err)
			}
			if e != nil && e.Code == jsvm.CodeSandboxCrashed {
				t.Fatalf("the worker was killed: %v", e)
			}
			tc.check(t, res, e)
			if s := p.Stats(); tc.retired && s.Idle != 0 {
				t.Errorf("stats %+v: a retired worker was kept", s)
			} else if !tc.retired && s.Idle != 1 {
				t.Errorf("stats %+v: the worker should be kept", s)
			}
		})
	}
}

// A frame a worker sends for an earlier call, after that call's done, is a
// violation of the next call — never served under it.
func TestScriptedWorkerFrameOfTheCallBefore(t *testing.T) {
	t.Parallel()
	out := handshake + frame(`{"t":"done","seq":1,"done":{"output":1}}`) +
		frame(`{"t":"host","seq":1,"id":1,"host":{"op":"broker.get","collection":"c","key":"k"}}`)
	p, err := New(Options{Path: scriptedWorker(t, out)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b := scriptedBundle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := p.Invoke(ctx, b, jsvm.Invocation{Tenant: "prj", Export: "h"}); err != nil || string(res.Output) != "1" {
		t.Fatalf("the first call: %s %v", res.Output, err)
	}
	br := &jsvm.MemoryBroker{}
	_, err = p.Invoke(ctx, b, jsvm.Invocation{Tenant: "prj", Export: "h", Broker: br})
	if e, ok := jsvm.AsError(err); !ok || e.Code != jsvm.CodeSandboxCrashed || !strings.Contains(e.Message, `a "host" frame of call 1 during call 2`) {
		t.Fatalf("the second call: %v, want sandbox-crashed naming the first call's frame", err)
	}
}

// What a worker answers to its bundle is checked too: a load answered with
// another frame fails the start, a listing is bounded, and a bundle error's
// position is never negative.
func TestScriptedWorkerLoads(t *testing.T) {
	t.Parallel()
	exports := func(n int) string {
		var s strings.Builder
		for i := range n {
			if i > 0 {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, `{"name":"e%d","function":true}`, i)
		}
		return frame(`{"t":"ready","v":2}`) + frame(`{"t":"loaded","exports":[`+s.String()+`]}`)
	}
	b := scriptedBundle(t)
	for _, tc := range []struct {
		name, out string
		check     func(t *testing.T, exports []bundle.Export, err error)
	}{
		{"exports at the limit", exports(maxExports), func(t *testing.T, exports []bundle.Export, err error) {
			if err != nil || len(exports) != maxExports {
				t.Errorf("%d exports, %v; want %d", len(exports), err, maxExports)
			}
		}},
		{"exports over the limit", exports(maxExports + 1), func(t *testing.T, _ []bundle.Export, err error) {
			if err == nil || !strings.Contains(err.Error(), "10001 exports, over the limit of 10000") {
				t.Errorf("%v, want the listing refused", err)
			}
		}},
		{"a negative position", frame(`{"t":"ready","v":2}`) + frame(`{"t":"loaded","error":{"code":"bundle-syntax","message":"bad","line":-3,"column":-9}}`),
			func(t *testing.T, _ []bundle.Export, err error) {
				be, ok := bundle.AsError(err)
				if !ok || be.Code != "bundle-syntax" || be.File != "handlers.mjs" || be.Line != 0 || be.Column != 0 || be.Message != "bad" {
					t.Errorf("%#v, want bundle-syntax at handlers.mjs:0:0", err)
				}
			}},
		{"a load answered with another frame", frame(`{"t":"ready","v":2}`) + frame(`{"t":"ready","v":2}`), func(t *testing.T, _ []bundle.Export, err error) {
			if err == nil || !strings.Contains(err.Error(), `load the bundle: got "ready" frame`) {
				t.Errorf("%v, want the start refused", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(Options{Path: scriptedWorker(t, tc.out)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			exports, err := p.ListExports(context.Background(), b)
			tc.check(t, exports, err)
		})
	}
}

// A worker's fatal line is quoted in its call's error, cut to 300 bytes.
func TestScriptedWorkerFatalLineIsClipped(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "worker.sh")
	line := "fatal error: " + strings.Repeat("x", 400)
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho '"+line+"' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Invoke(context.Background(), scriptedBundle(t), jsvm.Invocation{Tenant: "prj", Export: "h"})
	e, ok := jsvm.AsError(err)
	if !ok || e.Code != jsvm.CodeSandboxCrashed || !e.Retryable || !strings.HasSuffix(e.Message, ": "+line[:300]+"…[truncated]") {
		t.Fatalf("%v, want sandbox-crashed quoting the fatal line cut at 300 bytes", err)
	}
}

// Host requests made one at a time count towards the call's limit too:
// the one past maxHostCalls kills the worker.
func TestHostRequestsPastTheCallsLimit(t *testing.T) {
	t.Parallel()
	p, err := New(Options{Path: scriptedWorker(t, "")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pr, err := p.spawn("k")
	if err != nil {
		t.Fatal(err)
	}
	c := &pcall{inv: &jsvm.Invocation{}, ctx: context.Background(), seq: 1, hostCalls: maxHostCalls - 1}
	h := &hostMsg{Op: opGet, Collection: "c", Key: "k"} // no broker: answered at once
	if !pr.startHost(c, 1, h) {
		t.Fatalf("request %d refused: %s", maxHostCalls, pr.violation)
	}
	c.host.Wait()
	if pr.startHost(c, 2, h) {
		t.Fatalf("request %d taken", maxHostCalls+1)
	}
	<-pr.exited
	if want := "more than 10000 host requests in one call"; pr.violation != want || pr.reason() != killProtocol {
		t.Errorf("violation %q (reason %d), want %q", pr.violation, pr.reason(), want)
	}
}

// recordingBroker records the operations it was asked for.
type recordingBroker struct {
	jsvm.MemoryBroker
	ops []string
}

func (b *recordingBroker) Get(ctx context.Context, c, k string) (json.RawMessage, bool, error) {
	b.ops = append(b.ops, "get "+c+"/"+k)
	return b.MemoryBroker.Get(ctx, c, k)
}

func (b *recordingBroker) Put(ctx context.Context, c, k string, v json.RawMessage) error {
	b.ops = append(b.ops, "put "+c+"/"+k)
	return b.MemoryBroker.Put(ctx, c, k, v)
}

func (b *recordingBroker) List(ctx context.Context, c string) ([]jsvm.BrokerItem, error) {
	b.ops = append(b.ops, "list "+c)
	return b.MemoryBroker.List(ctx, c)
}

// The parent checks a worker's host requests again, as the VM's side
// would have: the worker may be lying.
func TestServeHostChecksTheWorkersRequests(t *testing.T) {
	t.Parallel()
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	str := func(n int) []byte { return []byte(`"` + strings.Repeat("v", n-2) + `"`) }
	full := &recordingBroker{}
	for i := range 17 {
		if err := full.MemoryBroker.Put(ctx, "big", fmt.Sprint(i), str(1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		broker *recordingBroker
		h      hostMsg
		want   string // the reply's error; "" for none
		ops    []string
	}{
		{"no broker", nil, hostMsg{Op: opGet, Collection: "c", Key: "k"}, "the broker is not available", nil},
		{"an empty collection", &recordingBroker{}, hostMsg{Op: opGet, Key: "k"}, "collection must be 1 to 128 characters", nil},
		{"an empty key", &recordingBroker{}, hostMsg{Op: opGet, Collection: "c"}, "key must be 1 to 512 bytes", nil},
		{"a list needs no key", &recordingBroker{}, hostMsg{Op: opList, Collection: "c"}, "", []string{"list c"}},
		{"a value at the limit", &recordingBroker{}, hostMsg{Op: opPut, Collection: "c", Key: "k", Value: str(maxBrokerValue)}, "", []string{"put c/k"}},
		{"a value over the limit", &recordingBroker{}, hostMsg{Op: opPut, Collection: "c", Key: "k", Value: str(maxBrokerValue + 1)}, "over the 1.0 MiB limit", nil},
		{"a value with duplicate names", &recordingBroker{}, hostMsg{Op: opPut, Collection: "c", Key: "k", Value: []byte(`{"a":1,"a":2}`)}, "the value is refused", nil},
		{"a list over the limit", full, hostMsg{Op: opList, Collection: "big"}, "the collection holds over 16.0 MiB", []string{"list big"}},
		{"an unknown operation", &recordingBroker{}, hostMsg{Op: "broker.drop", Collection: "c", Key: "k"}, `unknown host operation "broker.drop"`, nil},
		{"a fetch without a request", nil, hostMsg{Op: opFetch}, "fetch: no request", nil},
		// Over the limit, a fetch is refused before the policy is asked
		// (which refuses the loopback address).
		{"a fetch body over the limit", nil, hostMsg{Op: opFetch, Fetch: &jsvm.FetchRequest{URL: "http://127.0.0.1:9/", Method: "POST", Body: make([]byte, maxFetchBody+1)}}, "the request body is over the 2.0 MiB limit", nil},
		{"a fetch body at the limit", nil, hostMsg{Op: opFetch, Fetch: &jsvm.FetchRequest{URL: "http://127.0.0.1:9/", Method: "POST", Body: make([]byte, maxFetchBody)}}, "loopback", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := &jsvm.Invocation{}
			if tc.broker != nil {
				inv.Broker = tc.broker
			}
			r := p.serveHost(ctx, inv, &tc.h)
			if tc.want == "" && r.Error != "" || !strings.Contains(r.Error, tc.want) {
				t.Errorf("reply error %q, want %q", r.Error, tc.want)
			}
			if tc.broker != nil && !reflect.DeepEqual(tc.broker.ops, tc.ops) {
				t.Errorf("the broker was asked %q, want %q", tc.broker.ops, tc.ops)
			}
		})
	}
}

func TestDepth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`1`, 0},
		{`[]`, 1},
		{`[[],{"a":[1]}]`, 3},
		{`["[[[", "\"[[[", "\\", [{}]]`, 3},
		{`{"a\"]":[["x\\\"]]"]]}`, 3},
	} {
		if got := depth([]byte(tc.in)); got != tc.want {
			t.Errorf("depth(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// readFrame takes a frame of exactly its limit; a stream that ends between
// frames is io.EOF (a parent that closed the channel), one that ends in a
// frame is io.ErrUnexpectedEOF.
func TestReadFrameEdges(t *testing.T) {
	t.Parallel()
	body := `{"t":"ready","v":2}`
	for _, tc := range []struct {
		name, in string
		limit    int
		want     error
	}{
		{"at the limit", frame(body), len(body), nil},
		{"over the limit", frame(body), len(body) - 1, errFrameTooLarge},
		{"nothing", "", 100, io.EOF},
		{"a cut length", frame(body)[:2], 100, io.ErrUnexpectedEOF},
		{"a cut body", frame(body)[:10], 100, io.ErrUnexpectedEOF},
		{"no body", frame(body)[:4], 100, io.ErrUnexpectedEOF},
	} {
		var buf []byte
		var m message
		err := readFrame(bytes.NewReader([]byte(tc.in)), &buf, tc.limit, &m)
		if !errors.Is(err, tc.want) || err == nil && (m.T != msgReady || m.V != 2) {
			t.Errorf("%s: %v %+v, want %v", tc.name, err, m, tc.want)
		}
	}
}

func TestParseWorkerArgs(t *testing.T) {
	t.Parallel()
	a, err := parseWorkerArgs([]string{"2", "67108864", "1000", "0"})
	if want := (workerArgs{version: 2, maxStack: 64 << 20, dataLimit: 1000}); err != nil || a != want {
		t.Errorf("%+v %v, want %+v", a, err, want)
	}
	for _, args := range [][]string{
		{"2", "1", "1"},
		{"2", "1", "1", "1", "1"},
		{"2", "-1", "1", "1"},
		{"2", "1", "-1", "1"},
		{"2", "1", "1", "x"},
	} {
		if _, err := parseWorkerArgs(args); err == nil {
			t.Errorf("parseWorkerArgs(%q) accepted", args)
		}
	}
}

// A worker the Go runtime killed for want of memory (its data-segment
// limit, before the parent's watch saw it) fails its call with
// jsvm.CodeMemory, not as a crash.
func TestWorkerOutOfMemoryIsTheMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"/bin/cat", "/bin/dd", "/usr/bin/od"} {
		if _, err := os.Stat(tool); err != nil {
			t.Skipf("needs /bin/sh and %s", tool)
		}
	}
	dir := t.TempDir()
	frames := filepath.Join(dir, "frames")
	if err := os.WriteFile(frames, []byte(handshake), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "worker.sh")
	// It dies once the call has come: it reads the load frame whole (its
	// 4-byte length, then that many bytes) and the call frame's length.
	// Dying sooner, it would fail the parent's start instead of the call.
	script := "#!/bin/sh\n/bin/cat '" + frames + "' >&3\n" +
		"take() { /bin/dd bs=1 count=\"$1\" <&4 2>/dev/null; }\n" +
		"n=$(take 4 | /usr/bin/od -An -tu1 | { read a b c d; echo $(( (a << 24) + (b << 16) + (c << 8) + d )); })\n" +
		"take \"$n\" >/dev/null\ntake 4 >/dev/null\n" +
		"echo 'fatal error: out of memory' >&2\nexit 2\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Invoke(context.Background(), scriptedBundle(t), jsvm.Invocation{Tenant: "prj", Export: "h"})
	e, ok := jsvm.AsError(err)
	if !ok || e.Code != jsvm.CodeMemory || e.Retryable || !strings.HasPrefix(e.Message, "memory limit exceeded: ") {
		t.Fatalf("%v, want %s", err, jsvm.CodeMemory)
	}
}
