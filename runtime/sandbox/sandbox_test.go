package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
	"stead/runtime/sandbox"
)

func TestMain(m *testing.M) {
	echoMain()
	inheritMain()
	orphanMain()
	sandbox.Main()                                                                                   // the test binary is the worker binary
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("stead/runtime/sandbox.startProcess.func1.1")) // the worker spawner's thread lives as long as the process
}

func newPool(t testing.TB, o sandbox.Options) *sandbox.Pool {
	t.Helper()
	p, err := sandbox.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func load(t testing.TB, src string) *bundle.Bundle {
	t.Helper()
	rt := jsvm.New(jsvm.Options{})
	defer rt.Close()
	b, err := rt.Compiler(bundle.Options{}).Load(context.Background(), "handlers.mjs", []byte(src))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return b
}

func invoke(t testing.TB, p *sandbox.Pool, b *bundle.Bundle, timeout time.Duration, inv jsvm.Invocation) (jsvm.Result, *jsvm.Error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if inv.Tenant == "" {
		inv.Tenant = "prj_test"
	}
	res, err := p.Invoke(ctx, b, inv)
	if err == nil {
		return res, nil
	}
	e, ok := jsvm.AsError(err)
	if !ok {
		t.Fatalf("Invoke(%s) returned %T %v, want *jsvm.Error", inv.Export, err, err)
	}
	return res, e
}

const handlers = `
let calls = 0;
export async function echo(input, context) {
  calls++;
  console.log("echo", JSON.stringify(input));
  context.recordCost({ tokensInput: 3, costUsd: 0.5 });
  return { input, calls, run: context.run.id, step: context.step.id, endUser: context.endUserId,
    key: context.idempotencyKey, token: context.broker.token, hasDeadline: typeof context.deadline === "number" };
}
export async function broker(input, context) {
  await context.broker.put("notes", "a", { n: 1, s: "x" });
  const got = await context.broker.get("notes", "a");
  const missing = await context.broker.get("notes", "nope");
  const list = await context.broker.list("notes");
  const existed = await context.broker.delete("notes", "a");
  let bad = "";
  try { await context.broker.get("", "a"); } catch (e) { bad = e.message; }
  return { got, missing: missing === undefined, list, existed, bad };
}
export async function deepPut(input, context) {
  let v = []; for (let i = 0; i < 100; i++) v = [v];
  try { await context.broker.put("notes", "deep", v); return "stored"; } catch (e) { return e.message; }
}
export async function untrusted(input, context) {
  context.markUntrusted("web:" + input.site);
  if (input.crash) { JSON.parse("[".repeat(3e6) + "]".repeat(3e6)); }
  return "ok";
}
export async function fetchIt(input) {
  const r = await fetch(input.url, { method: "POST", body: "hi", headers: { "x-a": "b" } });
  return { status: r.status, text: await r.text(), h: r.headers.get("x-reply") };
}
export async function env() { return typeof process === "undefined" ? "none" : "process"; }
export async function throws() { throw new TypeError("bad thing"); }
export async function secret(input, context) { console.log("key " + input.s); return { s: input.s }; }
`

func TestCallCrossesTheBoundary(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{})
	b := load(t, handlers)
	inv := jsvm.Invocation{Export: "echo", Input: json.RawMessage(`{"n":42}`), RunID: "run_1", StepID: "s1",
		EndUserID: "eu_1", IdempotencyKey: "idem", BrokerToken: "tok_abc"}
	for i := 1; i <= 3; i++ {
		res, e := invoke(t, p, b, 5*time.Second, inv)
		if e != nil {
			t.Fatalf("call %d: %s: %s", i, e.Code, e.Message)
		}
		want := fmt.Sprintf(`{"input":{"n":42},"calls":%d,"run":"run_1","step":"s1","endUser":"eu_1","key":"idem","token":"[REDACTED]","hasDeadline":true}`, i)
		if string(res.Output) != want {
			t.Errorf("call %d output %s, want %s (module state persists on a warm worker)", i, res.Output, want)
		}
		if len(res.Logs) != 1 || res.Logs[0].Message != `echo {"n":42}` || res.Logs[0].Level != "log" {
			t.Errorf("logs %+v", res.Logs)
		}
		if res.Cost.TokensInput != 3 || res.Cost.CostUSD != 0.5 {
			t.Errorf("cost %+v", res.Cost)
		}
	}
	if s := p.Stats(); s.Live != 1 || s.Idle != 1 {
		t.Errorf("stats %+v, want one warm worker", s)
	}
	// Another tenant never shares the worker (fresh module state).
	inv.Tenant = "prj_other"
	res, e := invoke(t, p, b, 5*time.Second, inv)
	if e != nil || !strings.Contains(string(res.Output), `"calls":1`) {
		t.Errorf("other tenant: %s %v", res.Output, e)
	}
	if s := p.Stats(); s.Live != 2 {
		t.Errorf("stats %+v, want a worker per tenant", s)
	}
}

func TestBrokerAndErrorsCrossTheBoundary(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{})
	b := load(t, handlers)
	res, e := invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "broker", Broker: &jsvm.MemoryBroker{}})
	if e != nil {
		t.Fatalf("%s: %s", e.Code, e.Message)
	}
	want := `{"got":{"n":1,"s":"x"},"missing":true,"list":[{"key":"a","value":{"n":1,"s":"x"}}],"existed":true,"bad":"context.broker.get: collection must be a non-empty string, got a string"}`
	if string(res.Output) != want {
		t.Errorf("output %s\nwant   %s", res.Output, want)
	}
	br := &jsvm.MemoryBroker{}
	res, e = invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "deepPut", Broker: br})
	if e != nil || !strings.Contains(string(res.Output), "context.broker.put failed: the value is refused") || !strings.Contains(string(res.Output), "deep") {
		t.Errorf("a value nested 100 deep: %s %v, want the put refused", res.Output, e)
	}
	if _, found, _ := br.Get(context.Background(), "notes", "deep"); found {
		t.Error("the refused value was stored")
	}
	_, e = invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "throws"})
	if e == nil || e.Code != jsvm.CodeHandlerError || e.Name != "TypeError" || e.Message != "bad thing" || !strings.Contains(e.Stack, "handlers.mjs:") {
		t.Errorf("throws: %+v", e)
	}
	_, e = invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "nope"})
	if e == nil || e.Code != jsvm.CodeExportNotFound {
		t.Errorf("missing export: %+v", e)
	}
	res, e = invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "env"})
	if e != nil || string(res.Output) != `"none"` {
		t.Errorf("env: %s %v", res.Output, e)
	}
}

func TestSecretsNeverReachTheWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{})
	b := load(t, handlers)
	res, e := invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "secret", Input: json.RawMessage(`{"s":"sk-live-123"}`), Secrets: []string{"sk-live-123"}})
	if e != nil {
		t.Fatal(e)
	}
	if string(res.Output) != `{"s":"[REDACTED]"}` || res.Logs[0].Message != "key [REDACTED]" {
		t.Errorf("not redacted: %s %+v", res.Output, res.Logs)
	}
}

// An error a handler throws is redacted in the parent too, with the
// secrets the worker never saw: its message, name and stack.
func TestSecretsNeverReachTheWorkerErrors(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{})
	b := load(t, `export async function throwIt(input) {
	const e = new Error("key " + input.s);
	e.name = "Leak " + input.s;
	throw e;
}`)
	_, e := invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "throwIt", Input: json.RawMessage(`{"s":"sk-live-123"}`), Secrets: []string{"sk-live-123"}})
	if e == nil || e.Code != jsvm.CodeHandlerError {
		t.Fatalf("want handler-error, got %+v", e)
	}
	for field, v := range map[string]string{"message": e.Message, "name": e.Name, "stack": e.Stack} {
		if strings.Contains(v, "sk-live-123") {
			t.Errorf("the error's %s is not redacted: %q", field, v)
		}
	}
	if !strings.Contains(e.Message, "key [REDACTED]") {
		t.Errorf("message %q, want the secret replaced", e.Message)
	}
}

func TestFetchGoesThroughTheParentsPolicy(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-reply", r.Header.Get("x-a"))
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
	}))
	defer srv.Close()
	b := load(t, handlers)
	refused := newPool(t, sandbox.Options{})
	_, e := invoke(t, refused, b, 5*time.Second, jsvm.Invocation{Export: "fetchIt", Input: json.RawMessage(`{"url":"` + srv.URL + `/x"}`)})
	if e == nil || !strings.Contains(e.Message, "loopback") {
		t.Errorf("loopback fetch without an allowlist: %+v", e)
	}
	allowed := newPool(t, sandbox.Options{Fetch: jsvm.FetchOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	res, e := invoke(t, allowed, b, 5*time.Second, jsvm.Invocation{Export: "fetchIt", Input: json.RawMessage(`{"url":"` + srv.URL + `/x"}`)})
	if e != nil || string(res.Output) != `{"status":200,"text":"POST /x","h":"b"}` {
		t.Errorf("allowed fetch: %s %+v", res.Output, e)
	}
}

func TestUntrustedMarkSurvivesACrash(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{})
	b := load(t, handlers)
	start := time.Now()
	res, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "untrusted", Input: json.RawMessage(`{"site":"evil.example","crash":true}`)})
	if e == nil || e.Code != jsvm.CodeSandboxCrashed || !e.Retryable {
		t.Fatalf("want sandbox-crashed, got %+v", e)
	}
	if !strings.Contains(e.Message, "stack") {
		t.Errorf("the message should say the stack overflowed: %s", e.Message)
	}
	if len(res.Untrusted) != 1 || res.Untrusted[0] != "web:evil.example" {
		t.Errorf("untrusted %v: the mark made before the crash is lost", res.Untrusted)
	}
	t.Logf("deep JSON.parse crashed its worker in %s: %s", time.Since(start), e.Message)
	// The pool goes on with a fresh worker.
	res, e = invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "untrusted", Input: json.RawMessage(`{"site":"ok"}`)})
	if e != nil || string(res.Output) != `"ok"` {
		t.Errorf("after the crash: %s %+v", res.Output, e)
	}
}

func TestWorkerHasEmptyEnvironment(t *testing.T) {
	// Not parallel: sets an environment variable of this process.
	t.Setenv("STEAD_TEST_SECRET", "s3cr3t")
	b := load(t, `export async function h() { return "x"; }`)
	p := newPool(t, sandbox.Options{})
	if _, e := invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "h"}); e != nil {
		t.Fatal(e)
	}
	for _, pid := range p.Stats().PIDs {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Skipf("no /proc here: %v", err)
		}
		if len(env) != 0 {
			t.Errorf("worker %d has an environment: %q", pid, env)
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		// stdin, stdout, stderr and the channel (two pipes, fds 3 and 4);
		// besides them only what Go's runtime opens itself (its poller, the
		// cgroup CPU limit files).
		for _, fd := range fds {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			switch {
			case fd.Name() <= "2" && len(fd.Name()) == 1, (fd.Name() == "3" || fd.Name() == "4") && strings.HasPrefix(l, "pipe:"),
				strings.HasPrefix(l, "anon_inode:"), strings.HasPrefix(l, "/sys/fs/cgroup/"):
			default:
				t.Errorf("worker %d has descriptor %s → %s", pid, fd.Name(), l)
			}
		}
	}
}

func TestConcurrentCallsUseSeparateWorkers(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{MaxWorkers: 4})
	b := load(t, `export async function wait() { await new Promise(r => setTimeout(r, 200)); return 1; }`)
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, e := invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "wait"}); e != nil {
				t.Error(e)
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("4 concurrent 200 ms calls took %s", d)
	}
}

// A call's Timeout starts when a worker is free for it: a call that waits
// behind the tenant's only worker longer than its own Timeout still runs
// in full, and one that cannot start by its StartBy fails sandbox-busy at
// once, without having run. With no Timeout, ctx's deadline bounds the
// wait as well (timeout); a call past its Timeout times out.
func TestTimeoutStartsWithTheWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{MaxWorkers: 1, MaxPerTenant: 1})
	b := load(t, `let runs = 0;
export async function nap(input) { runs++; await new Promise(r => setTimeout(r, input.ms)); return runs; }`)
	nap := func(ms int) jsvm.Invocation {
		return jsvm.Invocation{Export: "nap", Input: json.RawMessage(fmt.Sprintf(`{"ms":%d}`, ms)), Timeout: 1500 * time.Millisecond}
	}
	holding := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		close(holding)
		if _, e := invoke(t, p, b, 10*time.Second, nap(1000)); e != nil {
			t.Errorf("the first call: %v", e)
		}
	})
	<-holding
	time.Sleep(100 * time.Millisecond) // the first call holds the worker

	start := time.Now()
	busy := nap(0)
	busy.StartBy = time.Now().Add(50 * time.Millisecond)
	if _, e := invoke(t, p, b, 10*time.Second, busy); e == nil || e.Code != jsvm.CodeBusy {
		t.Errorf("a call that cannot start by its StartBy: %v, want %s", e, jsvm.CodeBusy)
	} else if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("sandbox-busy came after %s, want about 50 ms", d)
	}
	bounded := jsvm.Invocation{Export: "nap", Input: json.RawMessage(`{"ms":0}`)}
	if _, e := invoke(t, p, b, 50*time.Millisecond, bounded); e == nil || e.Code != jsvm.CodeTimeout {
		t.Errorf("a call without Timeout whose ctx ends while it waits: %v, want %s", e, jsvm.CodeTimeout)
	}

	start = time.Now()
	res, e := invoke(t, p, b, 10*time.Second, nap(1100))
	if e != nil {
		t.Fatalf("a call that waited for the worker, then ran within its Timeout: %v", e)
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Errorf("the second call took %s: it should have waited for the first (some 850 ms) and then napped 1100 ms, more than its 1500 ms Timeout in all", d)
	}
	if string(res.Output) != "2" {
		t.Errorf("runs = %s, want 2: the busy and the bounded calls must not have run", res.Output)
	}
	wg.Wait()
	if _, e := invoke(t, p, b, 10*time.Second, nap(5000)); e == nil || e.Code != jsvm.CodeTimeout {
		t.Errorf("a call longer than its Timeout: %v, want %s", e, jsvm.CodeTimeout)
	}
}

// Starting a fresh worker does not count against the call's Timeout: with
// a worker binary that takes 400 ms to start, a call with a 200 ms Timeout
// on a cold pool runs, and succeeds.
func TestTimeoutExcludesTheWorkersStart(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/bin/sleep"); err != nil {
		t.Skip("needs /bin/sh and /bin/sleep")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(t.TempDir(), "slow-worker.sh")
	script := "#!/bin/sh\n/bin/sleep 0.4\nexec '" + self + "' \"$@\"\n"
	if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := newPool(t, sandbox.Options{Path: slow, MaxWorkers: 1, MaxPerTenant: 1})
	b := load(t, `export async function quick() { return "ok"; }`)
	start := time.Now()
	res, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "quick", Timeout: 200 * time.Millisecond})
	if e != nil {
		t.Fatalf("a quick call on a worker whose start outlasted its Timeout: %v", e)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("the call took %s: the worker's start, 400 ms, should have come first", d)
	}
	if string(res.Output) != `"ok"` {
		t.Errorf("output %s, want \"ok\"", res.Output)
	}
}

// A compiler whose exports are listed by the sandbox never runs a bundle's
// top level in this process: a top level that would kill a Go process
// fails the load as a bundle error, and a good bundle lists the same
// exports as the in-process listing.
func TestListExportsInAWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{})
	c := p.Compiler(bundle.Options{})
	ctx := context.Background()
	_, err := c.Load(ctx, "handlers.mjs", []byte(`JSON.parse("[".repeat(3e6) + "]".repeat(3e6)); export async function h() {}`))
	be, ok := bundle.AsError(err)
	if !ok || be.Code != bundle.CodeEvaluation || !strings.Contains(be.Message, "loading the bundle killed its sandbox worker") {
		t.Fatalf("hostile top level: %v, want a bundle evaluation error", err)
	}
	_, err = c.Load(ctx, "handlers.mjs", []byte(`throw new Error("nope"); export const x = 1;`))
	if be, ok := bundle.AsError(err); !ok || be.Code != bundle.CodeEvaluation || !strings.Contains(be.Message, "nope") {
		t.Errorf("throwing top level: %v", err)
	}
	_, err = c.Load(ctx, "handlers.mjs", []byte(`const x = 1;`))
	if be, ok := bundle.AsError(err); !ok || be.Code != bundle.CodeNoExports {
		t.Errorf("no exports: %v", err)
	}
	got, err := c.Load(ctx, "handlers.mjs", []byte(handlers))
	if err != nil {
		t.Fatal(err)
	}
	want := load(t, handlers)
	if fmt.Sprint(got.Exports) != fmt.Sprint(want.Exports) {
		t.Errorf("exports %v, want %v", got.Exports, want.Exports)
	}
	if res, e := invoke(t, p, got, 5*time.Second, jsvm.Invocation{Export: "env"}); e != nil || string(res.Output) != `"none"` {
		t.Errorf("calling the listed bundle: %s %v", res.Output, e)
	}
	if s := p.Stats(); s.Live != 1 {
		t.Errorf("listing left workers behind: %+v", s)
	}
}
