package jsvm

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"stead/runtime/bundle"
)

const basics = `
let calls = 0;
export async function echo(input, context) {
  await null;
  return { input, calls: ++calls };
}
export function syncEcho(input) { return { sync: true, input }; }
export function mutate(input) {
  input.items.push(4);
  delete input.meta;
  return input;
}
export function noInput(input) { return { type: typeof input }; }
export function count() { return ++calls; }
export const notAFunction = 42;
`

func TestInvokeAsyncAndSyncExports(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, basics)

	if got, want := mustDo(t, r, b, "echo", `{"a":[1,"x",null]}`), `{"input":{"a":[1,"x",null]},"calls":1}`; got != want {
		t.Errorf("echo = %s, want %s", got, want)
	}
	if got, want := mustDo(t, r, b, "syncEcho", `"hi"`), `{"sync":true,"input":"hi"}`; got != want {
		t.Errorf("syncEcho = %s, want %s", got, want)
	}
	if got, want := mustDo(t, r, b, "noInput", ``), `{"type":"undefined"}`; got != want {
		t.Errorf("noInput with empty input = %s, want %s", got, want)
	}
}

// The input reaches the handler as a fresh JS value built by JSON.parse in
// the VM: mutating it changes neither the caller's bytes nor a later call.
func TestInputIsACopy(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, basics)
	in := json.RawMessage(`{"items":[1,2,3],"meta":{"k":"v"}}`)
	orig := string(in)
	for range 2 {
		res, e := doInv(t, r, b, Invocation{Export: "mutate", Input: in})
		if e != nil {
			t.Fatal(e)
		}
		if got, want := string(res.Output), `{"items":[1,2,3,4]}`; got != want {
			t.Fatalf("mutate = %s, want %s", got, want)
		}
	}
	if string(in) != orig {
		t.Fatalf("caller's input changed to %s", in)
	}
}

func TestModuleStatePersistsOnWarmVM(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, basics)
	for i := 1; i <= 3; i++ {
		if got := mustDo(t, r, b, "count", ""); got != fmt.Sprint(i) {
			t.Fatalf("call %d: count = %s, want %d (one warm VM keeps module state)", i, got, i)
		}
	}
	if n := idleVMs(r, b); n != 1 {
		t.Fatalf("%d idle VMs, want 1", n)
	}
}

// Two bundles with the same export name and module-level state never share
// a VM.
func TestBundlesDoNotShareState(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	src := `let n = 0; export function tick() { return %q + (++n); }`
	a := load(t, r, fmt.Sprintf(src, "a"))
	b := load(t, r, fmt.Sprintf(src, "b"))
	for i := 1; i <= 3; i++ {
		if got, want := mustDo(t, r, a, "tick", ""), fmt.Sprintf(`"a%d"`, i); got != want {
			t.Fatalf("bundle a: %s, want %s", got, want)
		}
		if got, want := mustDo(t, r, b, "tick", ""), fmt.Sprintf(`"b%d"`, i); got != want {
			t.Fatalf("bundle b: %s, want %s", got, want)
		}
	}
}

// Two projects that deploy byte-identical bundles never share a warm VM, so
// module state (a cache, a token kept by mistake) never crosses projects.
func TestTenantsDoNotShareVMs(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `let seen = []; export function remember(input, context) { seen.push(context.endUserId); return seen }`)
	call := func(tenant, user string) string {
		t.Helper()
		res, err := r.Invoke(context.Background(), b, Invocation{Tenant: tenant, Export: "remember", EndUserID: user})
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Output)
	}
	if got := call("prj_a", "alice"); got != `["alice"]` {
		t.Fatalf("tenant a: %s", got)
	}
	if got := call("prj_b", "bob"); got != `["bob"]` {
		t.Fatalf("tenant b saw tenant a's module state: %s", got)
	}
	if got := call("prj_a", "carol"); got != `["alice","carol"]` {
		t.Fatalf("tenant a's warm VM was not reused: %s", got)
	}
}

func TestPoolBounds(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{MaxIdlePerBundle: 2, MaxBundles: 2})
	b := load(t, r, `export async function wait() { await new Promise(r => setTimeout(r, 20)); return 1 }`)
	done := make(chan *Error)
	for range 4 {
		go func() {
			_, e := r.Invoke(context.Background(), b, Invocation{Export: "wait"})
			ee, _ := AsError(e)
			done <- ee
		}()
	}
	for range 4 {
		if e := <-done; e != nil {
			t.Fatal(e)
		}
	}
	if n := idleVMs(r, b); n > 2 {
		t.Fatalf("%d idle VMs, want at most MaxIdlePerBundle=2", n)
	}
	for i := range 3 {
		mustDo(t, r, load(t, r, fmt.Sprintf("export function f() { return %d }", i)), "f", "")
	}
	if n := r.pools.Len(); n != 2 {
		t.Fatalf("%d bundles pooled, want MaxBundles=2", n)
	}
	if idleVMs(r, b) != 0 {
		t.Fatal("the least recently used bundle kept its pool")
	}
}

func TestExportErrors(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, basics)
	_, e := do(t, r, b, "nope", "")
	wantCode(t, e, CodeExportNotFound)
	for _, name := range []string{"echo", "syncEcho", "count"} {
		if !strings.Contains(e.Message, name) {
			t.Errorf("export-not-found message %q does not list %s", e.Message, name)
		}
	}
	_, e = do(t, r, b, "notAFunction", "")
	wantCode(t, e, CodeNotFunction)
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{MaxInputSize: 64})
	b := load(t, r, basics)
	_, e := do(t, r, b, "echo", `{"a":`)
	wantCode(t, e, CodeInvalidInput)
	_, e = do(t, r, b, "echo", `"`+strings.Repeat("x", 100)+`"`)
	wantCode(t, e, CodeInvalidInput)
	if !strings.Contains(e.Message, "limit") {
		t.Errorf("message %q does not mention the limit", e.Message)
	}
	mustDo(t, r, b, "echo", `{}`)
	// The limit is inclusive: 64 bytes pass, 65 do not.
	mustDo(t, r, b, "echo", `"`+strings.Repeat("x", 62)+`"`)
	_, e = do(t, r, b, "echo", `"`+strings.Repeat("x", 63)+`"`)
	wantCode(t, e, CodeInvalidInput)
}

func TestHandlerErrors(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `class PaymentError extends Error {
  constructor(msg) { super(msg); this.name = "PaymentError"; }
}
export function throwsType() {
  null.x;
}
export async function rejects() {
  await null;
  throw new PaymentError("card declined");
}
export function throwsString() { throw "plain string"; }
export function throwsObject() { throw { code: 7 }; }
let n = 0;
export function count() { return ++n; }
`)
	mustDo(t, r, b, "count", "")

	_, e := do(t, r, b, "throwsType", "")
	wantCode(t, e, CodeHandlerError)
	if e.Name != "TypeError" {
		t.Errorf("name %q, want TypeError", e.Name)
	}
	if !strings.Contains(e.Stack, "handlers.mjs:5:") {
		t.Errorf("stack does not point at handlers.mjs:5:\n%s", e.Stack)
	}

	_, e = do(t, r, b, "rejects", "")
	wantCode(t, e, CodeHandlerError)
	if e.Name != "PaymentError" || e.Message != "card declined" {
		t.Errorf("got %s: %s, want PaymentError: card declined", e.Name, e.Message)
	}
	if !strings.Contains(e.Stack, "handlers.mjs:9:") || !strings.Contains(e.Stack, "rejects") {
		t.Errorf("stack does not point at rejects in handlers.mjs:9:\n%s", e.Stack)
	}
	if got := e.Error(); got != "PaymentError: card declined" {
		t.Errorf("Error() = %q", got)
	}

	_, e = do(t, r, b, "throwsString", "")
	wantCode(t, e, CodeHandlerError)
	if e.Message != "plain string" {
		t.Errorf("message %q", e.Message)
	}
	_, e = do(t, r, b, "throwsObject", "")
	wantCode(t, e, CodeHandlerError)
	if e.Message != `{"code":7}` {
		t.Errorf("message %q", e.Message)
	}

	// A JS throw keeps the VM.
	if got := mustDo(t, r, b, "count", ""); got != "2" {
		t.Fatalf("count after throws = %s, want 2 (the VM was kept)", got)
	}
}

func TestResultNotSerializable(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export async function undef() { }
export function fn() { return () => 1; }
export function cycle() { const a = {}; a.self = a; return a; }
export function bigint() { return { n: 10n }; }
export function symbol() { return Symbol("s"); }
export function ok() { return null; }
export function date() { return [new Date(0), { toJSON() { return "custom"; } }, "s", 1.5, true]; }
export function primitive() { return "just a string"; }
`)
	for export, want := range map[string]string{
		"undef":  "undefined",
		"fn":     "function",
		"cycle":  "cycle",
		"bigint": "BigInt",
		"symbol": "symbol",
	} {
		_, e := do(t, r, b, export, "")
		wantCode(t, e, CodeNotSerializable)
		if !strings.Contains(e.Message, want) {
			t.Errorf("%s: message %q does not say %q", export, e.Message, want)
		}
	}
	for export, want := range map[string]string{
		"ok":        "null",
		"date":      `["1970-01-01T00:00:00.000Z","custom","s",1.5,true]`,
		"primitive": `"just a string"`,
	} {
		if got := mustDo(t, r, b, export, ""); got != want {
			t.Errorf("%s = %s, want %s", export, got, want)
		}
	}
}

func TestResultTooLarge(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `export function big(n) { return "x".repeat(n); }`)
	if got := mustDo(t, r, b, "big", "1000"); len(got) != 1002 {
		t.Fatalf("len %d", len(got))
	}
	// The limit is inclusive: a result of exactly MaxResultSize bytes passes.
	if got := mustDo(t, r, b, "big", fmt.Sprint(DefaultMaxResultSize-2)); len(got) != DefaultMaxResultSize {
		t.Fatalf("result at the limit: len %d, want %d", len(got), DefaultMaxResultSize)
	}
	_, e := do(t, r, b, "big", fmt.Sprint(DefaultMaxResultSize-1))
	wantCode(t, e, CodeResultTooLarge)
	if !strings.Contains(e.Message, "256.0 KiB") {
		t.Errorf("message %q does not name the limit", e.Message)
	}
}

// An error a microtask throws fails the call even when the handler's
// promise settled in the same turn of the event loop, and of two such
// errors the first is reported.
func TestUncaughtErrorsAfterSettling(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export async function throwsAsItSettles() {
  await new Promise(r => setTimeout(r, 0));
  queueMicrotask(() => { throw new Error("late"); });
  return "finished";
}
export function throwsTwice() {
  queueMicrotask(() => { throw new Error("first"); });
  queueMicrotask(() => { throw new Error("second"); });
  return "finished";
}`)
	res, e := do(t, r, b, "throwsAsItSettles", "")
	wantCode(t, e, CodeHandlerError)
	if !strings.Contains(e.Message, "late") || res.Output != nil {
		t.Errorf("got %q with output %s, want the microtask's error and no output", e.Message, res.Output)
	}
	_, e = do(t, r, b, "throwsTwice", "")
	wantCode(t, e, CodeHandlerError)
	if !strings.Contains(e.Message, "first") || strings.Contains(e.Message, "second") {
		t.Errorf("message %q, want the first uncaught error", e.Message)
	}
}

func TestNeverSettles(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `let n = 0;
export async function stuck() { await new Promise(() => {}); return 1; }
export function count() { return ++n; }`)
	mustDo(t, r, b, "count", "")
	start := time.Now()
	_, e := doCtx(t, context.Background(), r, b, Invocation{Export: "stuck"}) // no deadline: must not hang
	wantCode(t, e, CodeNeverSettles)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("never-settles took %s; it should be reported at once", d)
	}
	if got := mustDo(t, r, b, "count", ""); got != "2" {
		t.Fatalf("count = %s, want 2", got)
	}
}

func TestContextArgument(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export function shape(input, context) {
  return {
    keys: Object.keys(context),
    run: Object.keys(context.run), step: Object.keys(context.step), broker: Object.keys(context.broker),
    runId: context.run.id, stepId: context.step.id, stepIndex: context.step.index,
    endUserId: context.endUserId, idempotencyKey: context.idempotencyKey,
    deadline: context.deadline,
    types: Object.keys(context).map(k => typeof context[k]),
  };
}
export function names(input, context) {
  const fns = [];
  const seen = new Set();
  function walk(o, path, depth) {
    if (o === null || (typeof o !== "object" && typeof o !== "function") || seen.has(o) || depth > 3) return;
    seen.add(o);
    for (const k of Object.getOwnPropertyNames(o)) {
      let d;
      try { d = Object.getOwnPropertyDescriptor(o, k); } catch (e) { continue; }
      for (const f of [d.value, d.get, d.set]) {
        if (typeof f === "function") {
          const src = Function.prototype.toString.call(f);
          fns.push(path + "." + k + " " + f.name + (src.includes("[native code]") ? " " + src : ""));
        }
      }
      if (d.value && typeof d.value === "object") walk(d.value, path + "." + k, depth + 1);
      if (typeof d.value === "function" && d.value.prototype) walk(d.value.prototype, path + "." + k + ".prototype", depth + 1);
    }
  }
  walk(context, "context", 0);
  for (const g of ["console", "crypto", "URL", "URLSearchParams", "TextEncoder", "TextDecoder", "Headers",
                   "fetch", "setTimeout", "clearTimeout", "queueMicrotask", "atob", "btoa"]) {
    walk({ [g]: globalThis[g] }, "globalThis", 0);
  }
  const u = new URL("https://example.com/a?b=1");
  const sp = new URLSearchParams("a=1");
  return { fns, url: Object.getOwnPropertyNames(u), sp: Object.getOwnPropertyNames(sp),
           iter: Object.getOwnPropertyNames(sp.keys()), urlString: typeof u.string, spProps: Object.keys(u.searchParams) };
}`)
	deadline := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	inv := Invocation{Export: "shape", RunID: "run_1", StepID: "lookup", StepIndex: 3, EndUserID: "user_9",
		IdempotencyKey: "idem_1", Broker: &MemoryBroker{}, BrokerToken: "brk_tok_abc123"}
	res, e := doCtx(t, ctx, r, b, inv)
	if e != nil {
		t.Fatal(e)
	}
	var got struct {
		Keys, Run, Step, Broker, Types []string
		RunID, StepID                  string
		StepIndex                      int
		EndUserID, IdempotencyKey      string
		Deadline                       *int64
	}
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatal(err)
	}
	if want := ContextKeys(); !reflect.DeepEqual(got.Keys, want) {
		t.Errorf("Object.keys(context) = %v, want %v", got.Keys, want)
	}
	if want := []string{"object", "object", "string", "string", "object", "function", "function", "number"}; !reflect.DeepEqual(got.Types, want) {
		t.Errorf("types %v, want %v", got.Types, want)
	}
	if !reflect.DeepEqual(got.Run, []string{"id"}) || !reflect.DeepEqual(got.Step, []string{"id", "index"}) ||
		!reflect.DeepEqual(got.Broker, []string{"token", "get", "put", "delete", "list"}) {
		t.Errorf("nested keys run=%v step=%v broker=%v", got.Run, got.Step, got.Broker)
	}
	if got.RunID != "run_1" || got.StepID != "lookup" || got.StepIndex != 3 || got.EndUserID != "user_9" || got.IdempotencyKey != "idem_1" {
		t.Errorf("identity %+v", got)
	}
	if got.Deadline == nil || *got.Deadline != deadline.UnixMilli() {
		t.Errorf("deadline %v, want %d", got.Deadline, deadline.UnixMilli())
	}

	res, e = doCtx(t, context.Background(), r, b, Invocation{Export: "shape"})
	if e != nil {
		t.Fatal(e)
	}
	if !strings.Contains(string(res.Output), `"deadline":null`) {
		t.Errorf("without a deadline: %s", res.Output)
	}

	// No Go symbol, type or method is reachable.
	res, e = doInv(t, r, b, Invocation{Export: "names", Broker: &MemoryBroker{}})
	if e != nil {
		t.Fatal(e)
	}
	var n struct {
		Fns                    []string
		URL, SP, Iter, SPProps []string
		URLString              string
	}
	if err := json.Unmarshal(res.Output, &n); err != nil {
		t.Fatal(err)
	}
	goName := regexp.MustCompile(`\w\.\w|\(\*|/|func[0-9]|-fm|goja|stead`)
	if len(n.Fns) < 30 {
		t.Fatalf("walked only %d functions: %v", len(n.Fns), n.Fns)
	}
	for _, f := range n.Fns {
		path, rest, _ := strings.Cut(f, " ")
		if goName.MatchString(rest) {
			t.Errorf("%s exposes a Go name: %s", path, rest)
		}
	}
	if len(n.URL) != 0 || len(n.SP) != 0 || len(n.Iter) != 0 || len(n.SPProps) != 0 || n.URLString != "undefined" {
		t.Errorf("URL objects expose own properties: url=%v searchParams=%v iterator=%v %v string=%s", n.URL, n.SP, n.Iter, n.SPProps, n.URLString)
	}
}

// A handler may delete the context's own properties and set them again,
// as on any object.
func TestContextPropertiesDeleteAndSet(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `export function edit(input, context) {
  delete context.run;
  delete context.endUserId;
  context.endUserId = "replaced";
  return { hasRun: "run" in context, run: context.run === undefined, keysHaveRun: Object.keys(context).includes("run"),
           endUserId: context.endUserId };
}`)
	res, e := doInv(t, r, b, Invocation{Export: "edit", RunID: "run_1", EndUserID: "user_9"})
	if e != nil {
		t.Fatal(e)
	}
	if got, want := string(res.Output), `{"hasRun":false,"run":true,"keysHaveRun":false,"endUserId":"replaced"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// A context kept past its invocation cannot act for a later one.
func TestStaleContextRefused(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `let saved;
export function keep(input, context) { saved = context; return 1; }
export async function useOld(input, context) {
  const out = [];
  try { saved.recordCost({ tokensInput: 1 }); } catch (e) { out.push(e.message); }
  try { await saved.broker.get("c", "k"); } catch (e) { out.push(e.message); }
  return out;
}`)
	mustDo(t, r, b, "keep", "")
	res, e := doInv(t, r, b, Invocation{Export: "useOld", Broker: &MemoryBroker{}})
	if e != nil {
		t.Fatal(e)
	}
	if got := strings.Count(string(res.Output), "invocation that has ended"); got != 2 {
		t.Fatalf("stale context calls: %s", res.Output)
	}
	if res.Cost != (Cost{}) {
		t.Fatalf("a stale recordCost counted: %+v", res.Cost)
	}
}

func TestRecordCost(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export function cost(input, context) {
  context.recordCost({ tokensInput: 10, tokensOutput: 5, costUsd: 0.25 });
  context.recordCost({ tokensInput: 1 });
  const errs = [];
  for (const bad of [undefined, 5, [], { tokensInput: -1 }, { tokensInput: 1.5 }, { costUsd: NaN },
                     { costUsd: Infinity }, { tokensOutput: "3" }, { costUSD: 1 }, { costUsd: -0.5 },
                     { tokensOutput: 2 ** 60 }]) {
    try { context.recordCost(bad); errs.push("accepted " + JSON.stringify(bad)); }
    catch (e) { errs.push(e.name + ": " + e.message); }
  }
  return errs;
}`)
	res, e := do(t, r, b, "cost", "")
	if e != nil {
		t.Fatal(e)
	}
	if want := (Cost{TokensInput: 11, TokensOutput: 5, CostUSD: 0.25}); res.Cost != want {
		t.Errorf("cost %+v, want %+v", res.Cost, want)
	}
	var errs []string
	if err := json.Unmarshal(res.Output, &errs); err != nil {
		t.Fatal(err)
	}
	if len(errs) != 11 {
		t.Fatalf("%d results for 11 bad inputs: %q", len(errs), errs)
	}
	wants := []string{"expects an object", "expects an object", "expects an object", "must not be negative",
		"whole number", "finite", "finite", "must be a number, got a string", `unknown field "costUSD"`,
		"must not be negative", "whole number"}
	for i, want := range wants {
		if !strings.HasPrefix(errs[i], "TypeError: ") || !strings.Contains(errs[i], want) {
			t.Errorf("bad input %d: %q, want a TypeError saying %q", i, errs[i], want)
		}
	}
}

// Summed costs saturate instead of wrapping round or becoming infinite.
func TestRecordCostSaturates(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `export function huge(input, context) {
  for (let i = 0; i < 1100; i++) context.recordCost({ tokensInput: 2 ** 53, tokensOutput: 2 ** 53, costUsd: 1e308 });
  return 1;
}`)
	res, e := do(t, r, b, "huge", "")
	if e != nil {
		t.Fatal(e)
	}
	if want := (Cost{TokensInput: math.MaxInt64, TokensOutput: math.MaxInt64, CostUSD: math.MaxFloat64}); res.Cost != want {
		t.Errorf("cost %+v, want %+v", res.Cost, want)
	}
}

func TestMarkUntrusted(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export function mark(input, context) {
  context.markUntrusted("https://a.example/page");
  context.markUntrusted("email:inbox");
  context.markUntrusted("https://a.example/page");
  const errs = [];
  for (const bad of [undefined, "", "  ", 42, {}]) {
    try { context.markUntrusted(bad); errs.push("accepted"); } catch (e) { errs.push(e.name); }
  }
  return errs;
}
export function markThenThrow(input, context) {
  context.markUntrusted("web");
  throw new Error("after mark");
}`)
	res, e := do(t, r, b, "mark", "")
	if e != nil {
		t.Fatal(e)
	}
	if want := []string{"https://a.example/page", "email:inbox"}; !reflect.DeepEqual(res.Untrusted, want) {
		t.Errorf("untrusted %v, want %v", res.Untrusted, want)
	}
	if got := string(res.Output); got != `["TypeError","TypeError","TypeError","TypeError","TypeError"]` {
		t.Errorf("bad origins: %s", got)
	}
	// The marks made before a failure are still reported.
	res, e = do(t, r, b, "markThenThrow", "")
	wantCode(t, e, CodeHandlerError)
	if !reflect.DeepEqual(res.Untrusted, []string{"web"}) {
		t.Errorf("untrusted after a throw: %v", res.Untrusted)
	}
}

// At most 100 origins are kept, and an origin of up to 2048 bytes is accepted.
func TestMarkUntrustedBounds(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export function many(input, context) {
  for (let i = 0; i < 150; i++) context.markUntrusted("origin " + i);
  return 1;
}
export function long(input, context) {
  context.markUntrusted("o".repeat(2048));
  try { context.markUntrusted("p".repeat(2049)); return "accepted"; } catch (e) { return e.name + ": " + e.message; }
}`)
	res, e := do(t, r, b, "many", "")
	if e != nil {
		t.Fatal(e)
	}
	if n := len(res.Untrusted); n != 100 || res.Untrusted[0] != "origin 0" || res.Untrusted[99] != "origin 99" {
		t.Errorf("%d origins kept (%q … %q), want origin 0 … origin 99", n, res.Untrusted[0], res.Untrusted[n-1])
	}
	res, e = do(t, r, b, "long", "")
	if e != nil {
		t.Fatal(e)
	}
	if want := []string{strings.Repeat("o", 2048)}; !reflect.DeepEqual(res.Untrusted, want) {
		t.Errorf("untrusted %d origins, want the 2048-byte one alone", len(res.Untrusted))
	}
	if got := string(res.Output); !strings.Contains(got, "TypeError") || !strings.Contains(got, "2049 bytes") {
		t.Errorf("a 2049-byte origin: %s, want a TypeError", got)
	}
}

func TestConsoleCapture(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := newRuntime(t, Options{MaxLogLines: 5, MaxLogBytes: 200, Now: func() time.Time { return at }})
	b := load(t, r, `
export function logs(input) {
  console.log("plain", 1, true, null, undefined, { a: [1] });
  console.info("info");
  console.warn("warn", new Error("boom"));
  console.error("error", () => 1, 5n);
  const cyc = {}; cyc.self = cyc;
  console.debug(cyc);
  console.log("dropped: over the line limit");
  return 1;
}
export function long() {
  console.log("a".repeat(150));
  console.log("b".repeat(150));
  console.log("c");
  return 1;
}`)
	res, e := do(t, r, b, "logs", "")
	if e != nil {
		t.Fatal(e)
	}
	if len(res.Logs) != 5 || !res.LogsTruncated {
		t.Fatalf("%d lines, truncated=%v; want 5 and truncated", len(res.Logs), res.LogsTruncated)
	}
	wants := []struct{ level, prefix string }{
		{"log", `plain 1 true null undefined {"a":[1]}`},
		{"info", "info"},
		{"warn", "warn Error: boom\n\tat logs (handlers.mjs:5:"},
		{"error", "error [Function: anonymous] 5n"},
		{"debug", "[object Object] (not serializable: "},
	}
	for i, w := range wants {
		l := res.Logs[i]
		if l.Level != w.level || !strings.HasPrefix(l.Message, w.prefix) || !l.At.Equal(at) {
			t.Errorf("line %d = %s %q %s, want %s %q…", i, l.Level, l.Message, l.At, w.level, w.prefix)
		}
	}

	res, e = do(t, r, b, "long", "")
	if e != nil {
		t.Fatal(e)
	}
	if len(res.Logs) != 2 || !res.LogsTruncated {
		t.Fatalf("long lines: %d lines, truncated=%v", len(res.Logs), res.LogsTruncated)
	}
	if got := res.Logs[1].Message; got != strings.Repeat("b", 50)+truncationMarker {
		t.Errorf("second line %q, want it cut at the byte budget and marked", got)
	}
}

// A line that fits what is left of the byte budget exactly is kept whole;
// one that does not is cut on a character boundary.
func TestLogByteBudget(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{MaxLogBytes: 10})
	b := load(t, r, `export function log(lines) { for (const l of lines) console.log(l); return 1; }`)
	for _, c := range []struct {
		name, input string
		want        []string
		truncated   bool
	}{
		{"exact fit", `["01234","56789"]`, []string{"01234", "56789"}, false},
		{"then dropped", `["0123456789","x"]`, []string{"0123456789"}, true},
		{"cut before a multi-byte character", `["aaaaaaaaa€"]`, []string{"aaaaaaaaa" + truncationMarker}, true},
	} {
		res, e := do(t, r, b, "log", c.input)
		if e != nil {
			t.Fatal(e)
		}
		var got []string
		for _, l := range res.Logs {
			got = append(got, l.Message)
		}
		if !reflect.DeepEqual(got, c.want) || res.LogsTruncated != c.truncated {
			t.Errorf("%s: got %q truncated=%v, want %q truncated=%v", c.name, got, res.LogsTruncated, c.want, c.truncated)
		}
	}
}

// Past the line limit a console call returns before formatting its
// arguments (no toJSON or getter of theirs runs).
func TestLogsPastTheLimitAreNotFormatted(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{MaxLogLines: 2})
	b := load(t, r, `export function log() {
  let formatted = 0;
  const arg = { toJSON() { formatted++; return "x"; } };
  for (let i = 0; i < 5; i++) console.log(arg);
  return formatted;
}`)
	res, e := do(t, r, b, "log", "")
	if e != nil {
		t.Fatal(e)
	}
	if got := string(res.Output); got != "2" || len(res.Logs) != 2 || !res.LogsTruncated {
		t.Errorf("formatted %s times, %d lines, truncated=%v; want 2, 2 and truncated", got, len(res.Logs), res.LogsTruncated)
	}
}

// Options left zero keep the log limits docs/handlers.md promises: 100
// lines, 64 KiB.
func TestDefaultLogLimits(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export function lines() { for (let i = 0; i < 150; i++) console.log("line " + i); return 1; }
export function bytes() { console.log("x".repeat(40000)); console.log("y".repeat(40000)); return 1; }`)
	res, e := do(t, r, b, "lines", "")
	if e != nil {
		t.Fatal(e)
	}
	if len(res.Logs) != 100 || !res.LogsTruncated || res.Logs[99].Message != "line 99" {
		t.Errorf("%d lines, truncated=%v; want 100 and truncated", len(res.Logs), res.LogsTruncated)
	}
	res, e = do(t, r, b, "bytes", "")
	if e != nil {
		t.Fatal(e)
	}
	if len(res.Logs) != 2 || res.Logs[1].Message != strings.Repeat("y", 64<<10-40000)+truncationMarker {
		t.Errorf("%d lines, the last of %d bytes; want 2, the second cut at 64 KiB in all", len(res.Logs), len(res.Logs[len(res.Logs)-1].Message))
	}
}

func TestRedaction(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export function leak(input, context) {
  const t = context.broker.token;
  console.log("token is", t, "and", input.other);
  context.markUntrusted("origin-" + t);
  return { token: t, nested: ["prefix " + t + " suffix"], [t]: "as key", other: input.other, n: 1 };
}
export function leakThrow(input, context) {
  throw new Error("bad token " + context.broker.token);
}
export function leakQuoted(input, context) {
  return { q: input.quoted };
}`)
	token := "brk_s3cret_TOKEN"
	inv := Invocation{Export: "leak", Input: json.RawMessage(`{"other":"pw-123456","quoted":"a\"b\\c"}`),
		BrokerToken: token, Secrets: []string{"pw-123456", `a"b\c`}}
	res, e := doInv(t, r, b, inv)
	if e != nil {
		t.Fatal(e)
	}
	out := string(res.Output)
	if strings.Contains(out, token) || strings.Contains(out, "pw-123456") {
		t.Fatalf("output leaks a secret: %s", out)
	}
	var v map[string]any
	if err := json.Unmarshal(res.Output, &v); err != nil {
		t.Fatalf("redacted output is not JSON: %v\n%s", err, out)
	}
	if v["token"] != "[REDACTED]" || v["[REDACTED]"] != "as key" || v["other"] != "[REDACTED]" || v["n"] != float64(1) {
		t.Errorf("redacted output %s", out)
	}
	if got := res.Logs[0].Message; got != "token is [REDACTED] and [REDACTED]" {
		t.Errorf("log %q", got)
	}
	if got := res.Untrusted[0]; got != "origin-[REDACTED]" {
		t.Errorf("untrusted %q", got)
	}

	inv.Export = "leakThrow"
	_, e = doInv(t, r, b, inv)
	wantCode(t, e, CodeHandlerError)
	if strings.Contains(e.Message+e.Stack+e.Error(), token) || !strings.Contains(e.Message, "[REDACTED]") {
		t.Errorf("error leaks the token: %q\n%s", e.Message, e.Stack)
	}

	// A secret JSON has to escape is found in its escaped form too.
	inv.Export = "leakQuoted"
	res, e = doInv(t, r, b, inv)
	if e != nil {
		t.Fatal(e)
	}
	if got := string(res.Output); got != `{"q":"[REDACTED]"}` {
		t.Errorf("escaped secret: %s", got)
	}
}

func TestRedactJSON(t *testing.T) {
	t.Parallel()
	c := newCall(context.Background(), nil, &Invocation{Secrets: []string{"12345", "tok"}}, time.Now())
	for in, want := range map[string]string{
		`{"a":"tok"}`:            `{"a":"[REDACTED]"}`,
		`{"tok":1,"b":"x\"tok"}`: `{"[REDACTED]":1,"b":"x\"[REDACTED]"}`,
		`{"n":123456}`:           `"[REDACTED]"`, // a secret outside any string: nothing is kept
		`{"a":"clean"}`:          `{"a":"clean"}`,
	} {
		if got := string(c.red.JSON([]byte(in))); got != want {
			t.Errorf("redactJSON(%s) = %s, want %s", in, got, want)
		}
	}
}

// Redactor.Result, which a sandbox parent applies with the secrets its
// worker never saw, redacts the output, log lines and untrusted origins.
func TestRedactorResult(t *testing.T) {
	t.Parallel()
	res := Result{
		Output:    json.RawMessage(`{"k":"sk-1"}`),
		Logs:      []Log{{Level: "log", Message: "key sk-1"}},
		Untrusted: []string{"https://example.com/?t=sk-1"},
	}
	NewRedactor("sk-1").Result(&res)
	if got, want := string(res.Output), `{"k":"[REDACTED]"}`; got != want {
		t.Errorf("output %s, want %s", got, want)
	}
	if got, want := res.Logs[0].Message, "key [REDACTED]"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
	if got, want := res.Untrusted[0], "https://example.com/?t=[REDACTED]"; got != want {
		t.Errorf("untrusted %q, want %q", got, want)
	}
}

func TestBroker(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export async function roundTrip(input, context) {
  const br = context.broker;
  const missing = await br.get("orders", "o1");
  await br.put("orders", "o2", { amount: 20 });
  await br.put("orders", "o1", { amount: 10, tags: ["a"] });
  const got = await br.get("orders", "o1");
  const list = await br.list("orders");
  const deleted = await br.delete("orders", "o2");
  const deletedAgain = await br.delete("orders", "o2");
  const after = await br.list("orders");
  const errs = [];
  for (const f of [() => br.get("", "k"), () => br.get("c"), () => br.put("c", "k", undefined),
                   () => br.put("c", "k", () => 1), () => br.list(42), () => br.get("a/b", "k"),
                   () => br.get("c", "line\nbreak")]) {
    try { await f(); errs.push("accepted"); } catch (e) { errs.push(e.name + ": " + e.message); }
  }
  return { missing: missing === undefined, got, list, deleted, deletedAgain, after, errs };
}
export async function noBroker(input, context) {
  try { await context.broker.get("c", "k"); return "resolved"; } catch (e) { return e.message; }
}`)
	br := &MemoryBroker{}
	res, e := doInv(t, r, b, Invocation{Export: "roundTrip", Broker: br})
	if e != nil {
		t.Fatal(e)
	}
	var got struct {
		Missing, Deleted, DeletedAgain bool
		Got                            map[string]any
		List, After                    []struct {
			Key   string
			Value map[string]any
		}
		Errs []string
	}
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Missing || got.Got["amount"] != float64(10) || len(got.List) != 2 || got.List[0].Key != "o1" ||
		got.List[1].Value["amount"] != float64(20) || !got.Deleted || got.DeletedAgain || len(got.After) != 1 {
		t.Errorf("round trip: %s", res.Output)
	}
	for i, want := range []string{"collection must be a non-empty string", "key must be a non-empty string",
		"not JSON-serializable", "not JSON-serializable", "collection must be a non-empty string",
		`collection may hold only letters, digits`, "key must not contain control characters"} {
		if !strings.HasPrefix(got.Errs[i], "TypeError") || !strings.Contains(got.Errs[i], want) {
			t.Errorf("bad call %d: %q, want TypeError %q", i, got.Errs[i], want)
		}
	}
	if v, ok, _ := br.Get(context.Background(), "orders", "o1"); !ok || string(v) != `{"amount":10,"tags":["a"]}` {
		t.Errorf("stored %s %v", v, ok)
	}

	res, e = do(t, r, b, "noBroker", "")
	if e != nil {
		t.Fatal(e)
	}
	if !strings.Contains(string(res.Output), "no broker is configured") {
		t.Errorf("without a broker: %s", res.Output)
	}
}

type failingBroker struct{ MemoryBroker }

func (*failingBroker) Get(context.Context, string, string) (json.RawMessage, bool, error) {
	return nil, false, fmt.Errorf("store unavailable")
}

func TestBrokerErrorRejects(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `export async function get(input, context) {
  try { await context.broker.get("c", "k"); return "resolved"; } catch (e) { return e.message; }
}`)
	res, e := doInv(t, r, b, Invocation{Export: "get", Broker: &failingBroker{}})
	if e != nil {
		t.Fatal(e)
	}
	if got := string(res.Output); got != `"context.broker.get failed: store unavailable"` {
		t.Errorf("got %s", got)
	}
}

func TestTimersAndMicrotasks(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export async function order() {
  const seen = [];
  setTimeout((a, b) => seen.push("t20 " + a + b), 20, "x", "y");
  const cancelled = setTimeout(() => seen.push("cancelled"), 5);
  clearTimeout(cancelled);
  setTimeout(() => seen.push("t0"), 0);
  queueMicrotask(() => seen.push("micro"));
  Promise.resolve().then(() => seen.push("then"));
  seen.push("sync");
  await new Promise(r => setTimeout(r, 30));
  return seen;
}
export async function throwsInTimer() {
  setTimeout(() => { throw new RangeError("in timer"); }, 0);
  await new Promise(r => setTimeout(r, 10));
  return "finished";
}
export async function throwsInMicrotask() {
  queueMicrotask(() => { throw new Error("in microtask"); });
  await new Promise(r => setTimeout(r, 10));
  return "finished";
}`)
	start := time.Now()
	if got, want := mustDo(t, r, b, "order", ""), `["sync","micro","then","t0","t20 xy"]`; got != want {
		t.Errorf("order = %s, want %s", got, want)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("returned after %s, before the 30ms timer", d)
	}
	_, e := do(t, r, b, "throwsInTimer", "")
	wantCode(t, e, CodeHandlerError)
	if e.Name != "RangeError" || !strings.Contains(e.Message, "setTimeout") || !strings.Contains(e.Message, "in timer") {
		t.Errorf("timer throw: %s: %s", e.Name, e.Message)
	}
	_, e = do(t, r, b, "throwsInMicrotask", "")
	wantCode(t, e, CodeHandlerError)
	if !strings.Contains(e.Message, "queueMicrotask") || !strings.Contains(e.Message, "in microtask") {
		t.Errorf("microtask throw: %s", e.Message)
	}
}

// A pending timer keeps the invocation waiting until the deadline.
func TestTimerPastDeadline(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `let n = 0;
export async function late() { await new Promise(r => setTimeout(r, 60000)); return 1; }
export function count() { return ++n; }`)
	mustDo(t, r, b, "count", "")
	start := time.Now()
	_, e := doCtx(t, ctxTimeout(t, 50*time.Millisecond), r, b, Invocation{Export: "late"})
	wantCode(t, e, CodeTimeout)
	if d := time.Since(start); d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("timed out after %s, want about 50ms", d)
	}
	// The VM waited out its deadline: it is retired, and the next call gets a fresh one.
	if got := mustDo(t, r, b, "count", ""); got != "1" {
		t.Errorf("count = %s, want 1 on a fresh VM", got)
	}
}

// A timer a handler leaves pending is cleared when its call ends: it never
// fires in a later call on the same VM.
func TestTimersDoNotOutliveTheirCall(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export function leave() { setTimeout(() => console.log("stale timer"), 0); return 1; }
export async function wait() { await new Promise(r => setTimeout(r, 20)); return 2; }`)
	mustDo(t, r, b, "leave", "")
	res, e := do(t, r, b, "wait", "")
	if e != nil {
		t.Fatal(e)
	}
	if len(res.Logs) != 0 {
		t.Errorf("an earlier call's timer fired in this one: %+v", res.Logs)
	}
}

// At most 10 000 timers may be pending.
func TestTimerLimit(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `export function many() {
  for (let i = 0; i < 10000; i++) setTimeout(() => {}, 60000);
  try { setTimeout(() => {}, 60000); return "accepted"; } catch (e) { return e.name + ": " + e.message; }
}`)
	if got, want := mustDo(t, r, b, "many", ""), `"TypeError: setTimeout: more than 10000 timers pending"`; got != want {
		t.Errorf("the 10 001st timer: %s, want %s", got, want)
	}
}

// An invocation whose context has already ended runs nothing.
func TestEndedContextRunsNothing(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `export function log() { console.log("ran"); return 1; }`)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelExpired()
	for _, c := range []struct {
		name string
		ctx  context.Context
		code string
	}{
		{"cancelled", cancelled, CodeCancelled},
		{"deadline passed", expired, CodeTimeout},
	} {
		res, e := doCtx(t, c.ctx, r, b, Invocation{Export: "log"})
		if e == nil || e.Code != c.code || len(res.Logs) != 0 {
			t.Errorf("%s: got %+v with logs %+v, want %s and no logs", c.name, e, res.Logs, c.code)
		}
	}
}

// cancelBroker's Get waits until its context ends (and says so) or the
// test releases it.
type cancelBroker struct {
	MemoryBroker
	cancelled, release chan struct{}
}

func (b *cancelBroker) Get(ctx context.Context, _, _ string) (json.RawMessage, bool, error) {
	select {
	case <-ctx.Done():
		close(b.cancelled)
	case <-b.release:
	}
	return nil, false, ctx.Err()
}

// Host work a handler left in flight is cancelled when its call ends.
func TestHostWorkCancelledWhenCallEnds(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	br := &cancelBroker{cancelled: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(br.release) }) // before r.Close, which waits for the broker call
	b := load(t, r, `export function leave(input, context) { context.broker.get("c", "k"); return 1; }`)
	if _, e := doCtx(t, context.Background(), r, b, Invocation{Export: "leave", Broker: br}); e != nil {
		t.Fatal(e)
	}
	select {
	case <-br.cancelled:
	case <-time.After(10 * time.Second): // a bound on hanging, not on speed
		t.Fatal("the broker call left in flight was not cancelled when its call ended")
	}
}

// A host result that arrives after its call ended is dropped, never
// delivered into the next call on the VM (which would then wait for it).
func TestStaleHostResultsDropped(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export function leave(input, context) { context.broker.get("c", "k"); return 1; }
export async function stuck() { await new Promise(() => {}); return 2; }`)
	if _, e := doInv(t, r, b, Invocation{Export: "leave", Broker: &blockingBroker{}}); e != nil {
		t.Fatal(e)
	}
	r.host.Wait() // the left-over broker call has handed back its result
	_, e := doInv(t, r, b, Invocation{Export: "stuck"})
	wantCode(t, e, CodeNeverSettles)
}

func TestGlobals(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
export function globals() {
  const u = new URL("/p/q?x=1&y=2#h", "https://user:pw@Example.COM:8443/base");
  u.searchParams.append("z", "a b");
  const sp = new URLSearchParams({ b: "2", a: "1" });
  sp.sort();
  const bytes = new TextEncoder().encode("héllo €");
  let fatal;
  try { new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array([0xff])); } catch (e) { fatal = e.name; }
  let badB64;
  try { atob("a"); } catch (e) { badB64 = e.name; }
  let latin;
  try { btoa("€"); } catch (e) { latin = e.name; }
  const id = crypto.randomUUID();
  const rnd = crypto.getRandomValues(new Uint8Array(16));
  const h = new Headers({ "Content-Type": "text/plain" });
  h.append("x-a", "1"); h.append("X-A", "2");
  return {
    href: u.href, host: u.host, origin: u.origin, search: u.search, json: JSON.stringify({ u }),
    canParse: [URL.canParse("nope"), URL.canParse("https://ok")],
    sp: sp.toString(),
    bytes: Array.from(bytes), text: new TextDecoder().decode(bytes), lenient: new TextDecoder().decode(new Uint8Array([0x61, 0xff])),
    fatal, b64: btoa("hi\u00ff"), unb64: atob(" aGn/ "), badB64, latin,
    uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id) && id !== crypto.randomUUID(),
    rnd: rnd.some(x => x !== 0),
    headers: [h.get("x-a"), h.get("content-type"), h.has("missing"), [...h.keys()]],
    noRequire: typeof globalThis.require, noProcess: typeof process,
  };
}`)
	want := `{"href":"https://user:pw@example.com:8443/p/q?x=1&y=2&z=a+b#h","host":"example.com:8443",` +
		`"origin":"https://example.com:8443","search":"?x=1&y=2&z=a+b","json":"{\"u\":\"https://user:pw@example.com:8443/p/q?x=1&y=2&z=a+b#h\"}",` +
		`"canParse":[false,true],"sp":"a=1&b=2",` +
		`"bytes":[104,195,169,108,108,111,32,226,130,172],"text":"héllo €","lenient":"a�",` +
		`"fatal":"TypeError","b64":"aGn/","unb64":"hi\u00ff","badB64":"InvalidCharacterError","latin":"InvalidCharacterError",` +
		`"uuid":true,"rnd":true,"headers":["1, 2","text/plain",false,["content-type","x-a"]],` +
		`"noRequire":"undefined","noProcess":"undefined"}`
	var gotV, wantV any
	got := mustDo(t, r, b, "globals", "")
	_ = json.Unmarshal([]byte(got), &gotV)
	_ = json.Unmarshal([]byte(want), &wantV)
	if !reflect.DeepEqual(gotV, wantV) {
		t.Errorf("globals:\n got %s\nwant %s", got, want)
	}
}

// crypto.getRandomValues fills up to 65536 bytes, as Web Crypto allows.
func TestGetRandomValuesQuota(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `export function fill() {
  const out = [crypto.getRandomValues(new Uint8Array(65536)).length];
  try { crypto.getRandomValues(new Uint8Array(65537)); out.push("accepted"); } catch (e) { out.push(e.name); }
  return out;
}`)
	if got, want := mustDo(t, r, b, "fill", ""), `[65536,"QuotaExceededError"]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TextDecoder drops a leading byte order mark unless ignoreBOM is set.
func TestTextDecoderBOM(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `export function decode() {
  const bytes = new Uint8Array([0xef, 0xbb, 0xbf, 0x61]);
  return [new TextDecoder().decode(bytes), new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes)];
}`)
	var got []string
	if err := json.Unmarshal([]byte(mustDo(t, r, b, "decode", "")), &got); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "\ufeffa"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// The size-checked built-ins keep the identities and behaviour code relies on.
func TestGuardedBuiltinsBehave(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, `
class Stack extends Array {}
class Bytes extends Uint8Array {}
export function builtins() {
  const s = new Stack(1, 2);
  return [
    [].constructor === Array, Array.prototype.constructor === Array, typeof Array, Array.name, Array.length,
    new Array(3).length, Array(2, 3), Array.of(7), Array.isArray(s), s instanceof Stack, s.map(x => x) instanceof Stack,
    [1, 2].map(x => x * 2), Array.from(new Set([1, 1, 2])), Array.from({ length: 2 }, (_, i) => i),
    new Array(3).fill(1), "ab".repeat(2), "a".padStart(3, "-"), "a".padEnd(3, "+"),
    new ArrayBuffer(8).byteLength, new Uint8Array([1, 2, 3]).subarray(1).length, Array.from(new Bytes(2)),
    new Float64Array(2) instanceof Float64Array, Object.getPrototypeOf(Uint8Array) === Object.getPrototypeOf(Int8Array),
    Function.prototype.toString.call(Array).includes("[native code]"), String.prototype.repeat.name, String.prototype.repeat.length,
    [] instanceof Array, ({}) instanceof Array, s instanceof Array, new ArrayBuffer(1) instanceof ArrayBuffer,
    new Bytes(1) instanceof Uint8Array, new Uint8Array(1) instanceof Bytes, new Proxy([], {}) instanceof Array,
  ];
}`)
	want := `[true,true,"function","Array",1,3,[2,3],[7],true,true,true,[2,4],[1,2],[0,1],[1,1,1],"abab","--a","a++",8,2,[0,0],true,true,true,"repeat",1,true,false,true,true,true,false,true]`
	if got := mustDo(t, r, b, "builtins", ""); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// Host calls from a bundle's top level are refused with a clear error when
// the bundle is compiled (Setup installs the same globals).
func TestTopLevelHostCallsRefused(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	_, err := r.Compiler(bundle.Options{}).Load(context.Background(), "handlers.mjs", []byte(`setTimeout(() => {}, 1); export function f() {}`))
	if err == nil || !strings.Contains(err.Error(), "only available while a handler runs") {
		t.Errorf("top-level setTimeout: got %v", err)
	}
	// fetch rejects; console works (and is dropped).
	b := load(t, r, `console.log("loading");
let failure = "none";
fetch("https://example.com").catch(e => { failure = e.message; });
export function f() { return failure; }`)
	if got := mustDo(t, r, b, "f", ""); !strings.Contains(got, "only available while a handler runs") {
		t.Fatalf("top-level fetch: %s", got)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	r := New(Options{})
	b := load(t, r, basics)
	mustDo(t, r, b, "count", "")
	r.Close()
	r.Close() // idempotent
	_, e := do(t, r, b, "count", "")
	wantCode(t, e, CodeInternal)
}

// NewError's timeout and cancellation errors unwrap to the context errors,
// as the Runtime's own do; other codes unwrap to nothing.
func TestNewErrorUnwraps(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]error{CodeTimeout: context.DeadlineExceeded, CodeCancelled: context.Canceled, CodeHandlerError: nil} {
		e := NewError(code, "m")
		if got := e.Unwrap(); got != want {
			t.Errorf("NewError(%s).Unwrap() = %v, want %v", code, got, want)
		}
		if e.Code != code || e.Message != "m" {
			t.Errorf("NewError(%s) = %+v", code, e)
		}
	}
}
