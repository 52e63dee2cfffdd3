package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
	"stead/runtime/sandbox"
)

const edgeHandlers = `
export async function floating(input, context) {
  context.broker.put("notes", "k", input.v); // not awaited: left floating
  return "returned";
}
export async function parallelGets(input, context) {
  const all = await Promise.all(Array.from({ length: input.n }, (_, i) => context.broker.get("notes", "k" + i)));
  return all.length;
}
export async function manyGets(input, context) {
  try { for (let i = 0; i < input.n; i++) await context.broker.get("notes", "k"); return "all done"; }
  catch (e) { return e.message; }
}
export async function logSecret(input) { console.log("x".repeat(input.pad) + input.s); throw new Error("y".repeat(20000) + input.s); }
export async function slow() { await new Promise(r => setTimeout(r, 2000)); return 1; }
export async function ok() { return "ok"; }
`

// A host request a handler left floating is never carried out under the
// next call — another end user's broker.
func TestFloatingHostRequestsStayWithTheirCall(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{})
	b := load(t, edgeHandlers)
	for round := range 30 {
		a, other := &jsvm.MemoryBroker{}, &jsvm.MemoryBroker{}
		if _, e := invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "floating", Input: json.RawMessage(`{"v":"from A"}`), EndUserID: "a", Broker: a}); e != nil {
			t.Fatal(e)
		}
		if _, e := invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "ok", EndUserID: "b", Broker: other}); e != nil {
			t.Fatalf("round %d: the next call: %s: %s", round, e.Code, e.Message)
		}
		if _, found, _ := other.Get(context.Background(), "notes", "k"); found {
			t.Fatalf("round %d: A's floating put landed in B's broker", round)
		}
	}
}

// The protocol's host limits are met as a handler would meet them: more
// than 64 requests at once wait their turn, past 10,000 in a call they
// fail — the worker is never killed for them.
func TestHostLimitsAreNotCrashes(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{})
	b := load(t, edgeHandlers)
	br := &jsvm.MemoryBroker{}
	res, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "parallelGets", Input: json.RawMessage(`{"n":200}`), Broker: br})
	if e != nil || string(res.Output) != "200" {
		t.Errorf("200 gets at once: %s %+v", res.Output, e)
	}
	res, e = invoke(t, p, b, 60*time.Second, jsvm.Invocation{Export: "manyGets", Input: json.RawMessage(`{"n":10001}`), Broker: br})
	if e != nil || !strings.Contains(string(res.Output), "more than 10000 broker and fetch calls") {
		t.Errorf("10,001 gets: %s %+v", res.Output, e)
	}
}

// A secret cut by the log or message limits is redacted before the cut.
func TestSecretsAreRedactedBeforeTheyAreCut(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{})
	b := load(t, edgeHandlers)
	const secret = "sk-live-0123456789abcdef"
	input := fmt.Sprintf(`{"pad":%d,"s":%q}`, jsvm.DefaultMaxLogBytes-10, secret)
	res, e := invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "logSecret", Input: json.RawMessage(input), Secrets: []string{secret}})
	if e == nil {
		t.Fatal("succeeded")
	}
	for _, l := range res.Logs {
		if strings.Contains(l.Message, "sk-live") {
			t.Errorf("a log line keeps part of the secret: …%s", l.Message[len(l.Message)-40:])
		}
	}
	if strings.Contains(e.Message, "sk-live") || strings.Contains(e.Stack, "sk-live") {
		t.Errorf("the error keeps part of the secret: …%s", e.Message[max(0, len(e.Message)-60):])
	}
}

// A worker slow to start (a large bundle) is not thrown away when its
// first call's deadline passes first: it becomes warm for the next call.
func TestASlowStartStaysWarm(t *testing.T) {
	t.Parallel()
	var src strings.Builder
	for i := 0; src.Len() < 2<<20; i++ {
		fmt.Fprintf(&src, "export function f%d() { return %q; }\n", i, strings.Repeat("z", 200))
	}
	b := load(t, src.String())
	// The start takes about 4 s here under -race and longer on a loaded
	// machine: the start timeout must not be what this test measures.
	p := newPool(t, sandbox.Options{StartTimeout: 2 * time.Minute})
	_, e := invoke(t, p, b, 10*time.Millisecond, jsvm.Invocation{Export: "f0"})
	if e == nil || e.Code != jsvm.CodeTimeout || !strings.Contains(e.Message, "starting a sandbox worker") {
		t.Fatalf("the first call: %+v, want a timeout while starting", e)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for p.Stats().Idle == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the worker never became warm: %+v", p.Stats())
		}
		time.Sleep(20 * time.Millisecond) // poll, bounded by the deadline
	}
	pids := p.Stats().PIDs
	if res, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "f0"}); e != nil || !strings.HasPrefix(string(res.Output), `"zzz`) {
		t.Errorf("the next call on the warm worker: %s %+v", res.Output, e)
	}
	if after := p.Stats().PIDs; fmt.Sprint(after) != fmt.Sprint(pids) {
		t.Errorf("workers %v before the call, %v after: the warm one was not used", pids, after)
	}
}

// Closing the pool cancels the calls running on it.
func TestCloseCancelsRunningCalls(t *testing.T) {
	t.Parallel()
	p, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := load(t, edgeHandlers)
	done := make(chan *jsvm.Error, 1)
	go func() {
		_, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "slow"})
		done <- e
	}()
	for p.Stats().Busy == 0 || p.Stats().Live == 0 {
		time.Sleep(10 * time.Millisecond) // until the call runs; bounded by the call's own deadline
	}
	time.Sleep(100 * time.Millisecond)
	p.Close()
	if e := <-done; e == nil || e.Code != jsvm.CodeCancelled || e.Retryable {
		t.Errorf("a call running at Close: %+v, want canceled", e)
	}
	if s := p.Stats(); s.Live != 0 {
		t.Errorf("workers outlive Close: %+v", s)
	}
}

// A bundle nested deeper than esbuild's parser can recurse is refused at
// deploy without reaching this process's parsers.
func TestDeeplyNestedBundleIsRefusedInAWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Options{})
	c := p.Compiler(bundle.Options{})
	src := "export const x = " + strings.Repeat("[", 300000) + strings.Repeat("]", 300000) + ";"
	_, err := c.Load(context.Background(), "handlers.mjs", []byte(src))
	if be, ok := bundle.AsError(err); !ok || be.Code != bundle.CodeEvaluation {
		t.Fatalf("%v, want a bundle evaluation error", err)
	}
	t.Logf("refused: %v", err)
}
