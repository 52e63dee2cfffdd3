package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"stead/runtime/bundle"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/runtime/sandbox"
	"stead/store"
)

const crashingHandlers = `
export async function crash() { return JSON.parse("[".repeat(3e6) + "]".repeat(3e6)); }
export async function ok() { return { ok: true }; }
`

const crashingConfig = `{
  "agents": {
    "crashy": {
      "tools": { "crash": { "effect": "read" } },
      "steps": [ { "id": "boom", "tool": "crash", "input": {} } ]
    },
    "fine": {
      "tools": { "ok": { "effect": "read" } },
      "steps": [ { "id": "one", "tool": "ok", "input": {} } ]
    }
  }
}`

// countingInvoker counts calls.
type countingInvoker struct {
	engine.Invoker
	mu sync.Mutex
	n  int
}

func (c *countingInvoker) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Invoker.Invoke(ctx, b, inv)
}

// A step whose handler crashes its sandbox worker every time is tried
// 1 + SandboxRetries times in all, each attempt counted in the store before
// it runs: here the whole process dies right after the first crash (the
// write that counts the second attempt is lost), and after a restart the
// count goes on from the first. Then the run fails sandbox-crashed naming
// the step, and the next run succeeds. (How long failing takes with the
// defaults is BenchmarkSandboxCrashFailsTheRun's: a target, not a test.)
func TestSandboxCrashIsRetriedThenFails(t *testing.T) {
	pool, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	counter := &countingInvoker{Invoker: pool}
	cs := &crashingStore{crashes: 1, match: func(c store.RunCommit) bool { return hasEvent(c, "step.retrying", "sandbox-crashed") }}
	h := setup(t, func(o *options) {
		o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs }
		o.invoker = func(engine.Invoker) engine.Invoker { return counter }
	})
	h.cfg.SandboxBackoff = time.Millisecond
	h.restart()
	h.deploy(h.owner, crashingHandlers, crashingConfig)
	start := time.Now()
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "crashy", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range h.queue.take() {
		if err := h.eng.Execute(h.ctx, id); !errors.Is(err, errCrash) {
			t.Fatalf("execute: %v, want the process to die after the first crash", err)
		}
	}
	if got := h.run(r.ID); got.Status != store.RunRunning || got.Attempts != 1 {
		t.Fatalf("after the first crash: status %s, attempts %d", got.Status, got.Attempts)
	}
	h.restart()
	h.clock.Advance(time.Hour) // past the dead process's lease
	if _, err := h.eng.Sweep(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.drain()
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodeSandboxCrashed)
	if r.Error.Step != "boom" || !strings.Contains(r.Error.Message, "crashed its sandbox 3 times") {
		t.Errorf("error = %+v", r.Error)
	}
	if counter.n != 3 {
		t.Errorf("the handler ran %d times, want 3 (the attempt before the restart counts)", counter.n)
	}
	if n := strings.Count(strings.Join(h.eventTypes(r.ID), ","), "step.retrying"); n != 1 {
		t.Errorf("%d retries in the trace after the restart, want 1: %v", n, h.eventTypes(r.ID))
	}
	t.Logf("sandbox-crashed after 3 attempts and a restart in %s", time.Since(start).Round(time.Millisecond))
	ok := h.start("fine", `{}`)
	wantStatus(t, ok, store.RunSucceeded, "")
}

// Without a restart, the retries happen inside one execution: no dispatch
// is needed (the runner Lambda dispatches nothing). Retry n waits n ×
// SandboxBackoff first.
func TestSandboxCrashRetriesNeedNoDispatch(t *testing.T) {
	pool, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := setup(t, func(o *options) { o.invoker = func(engine.Invoker) engine.Invoker { return pool } })
	h.cfg.SandboxBackoff = 250 * time.Millisecond
	h.restart()
	h.deploy(h.owner, crashingHandlers, crashingConfig)
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "crashy", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	ids := h.queue.take()
	if len(ids) != 1 {
		t.Fatalf("dispatched %v", ids)
	}
	if err := h.eng.Execute(h.ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if left := h.queue.take(); len(left) != 0 {
		t.Errorf("the retries dispatched %v", left)
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodeSandboxCrashed)
	if r.Attempts != 3 {
		t.Errorf("attempts %d, want 3", r.Attempts)
	}
	if want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}; !slices.Equal(h.sleeps.all(), want) {
		t.Errorf("waits before the retries: %v, want %v", h.sleeps.all(), want)
	}
}

const nappingHandlers = `export async function nap() { await new Promise(r => setTimeout(r, 300)); return { ok: true }; }`

const nappingConfig = `{
  "agents": {
    "napper": {
      "tools": { "nap": { "effect": "read", "timeoutMs": 800 } },
      "steps": [ { "id": "one", "tool": "nap", "input": {} } ]
    }
  }
}`

// Runs whose handler calls queue behind the project's only sandbox worker
// for longer than their timeoutMs do not time out: a call's timeout starts
// once a worker is free for it. While a call waits, its execution renews
// the run's lease (a write with no step in it), so that the wait never
// outlasts the claim and the run is never taken for lost: each renewal
// moves the lease past the stored one and past the call's timeout (the
// engine's clock keeps up with the real one).
func TestCallsWaitingForAWorkerDoNotTimeOut(t *testing.T) {
	t.Parallel()
	pool, err := sandbox.New(sandbox.Options{MaxWorkers: 1, MaxPerTenant: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	clk := &realTime{}
	rc := &renewalCheck{timeout: 800 * time.Millisecond} // nappingConfig's timeoutMs
	h := setup(t, func(o *options) {
		o.wrap = func(s store.Store) store.Store { rc.Store = s; return rc }
		o.invoker = func(engine.Invoker) engine.Invoker { return &clockedInvoker{Invoker: pool, clock: clk} }
	})
	h.cfg.LeaseMargin = 200 * time.Millisecond // a call may wait 100 ms, then the lease is renewed
	h.restart()
	h.deploy(h.owner, nappingHandlers, nappingConfig)
	const runs = 5 // the last waits 4 × 300 ms for the worker, past its 800 ms timeout
	for range runs {
		if _, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "napper", EndUserID: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	ids := h.queue.take()
	if len(ids) != runs {
		t.Fatalf("%d runs dispatched, want %d", len(ids), runs)
	}
	clk.mu.Lock()
	clk.h, clk.start, clk.base = h, time.Now(), h.clock.Now()
	clk.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if err := h.eng.Execute(h.ctx, id); err != nil {
				t.Errorf("execute %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if r := h.run(id); r.Status != store.RunSucceeded {
			t.Errorf("run %s: %s (%+v), want succeeded", id, r.Status, r.Error)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.n == 0 {
		t.Fatal("no lease renewal while calls waited for the worker")
	}
	if len(rc.bad) > 0 {
		t.Errorf("%d of %d renewals did not move the lease past the stored one and the call's timeout; first: %s", len(rc.bad), rc.n, rc.bad[0])
	}
}
