package engine_test

import (
	"strings"
	"testing"
	"time"

	"stead/runtime/engine"
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

// A step whose handler crashes its sandbox worker every time is tried
// 1 + SandboxRetries times, with the attempts counted durably: a restart
// after the first crash does not reset them. Then the run fails
// sandbox-crashed naming the step, and the next run succeeds.
func TestSandboxCrashIsRetriedThenFails(t *testing.T) {
	pool, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := setup(t, func(o *options) { o.invoker = func(engine.Invoker) engine.Invoker { return pool } })
	h.cfg.SandboxBackoff = time.Millisecond
	h.restart()
	h.deploy(h.owner, crashingHandlers, crashingConfig)
	start := time.Now()
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "crashy", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	// The first attempt crashes; then "the server restarts".
	for _, id := range h.queue.take() {
		if err := h.eng.Execute(h.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.run(r.ID); got.Status != store.RunQueued || got.Attempts != 1 {
		t.Fatalf("after the first crash: status %s, attempts %d", got.Status, got.Attempts)
	}
	h.restart()
	h.clock.Advance(time.Hour)
	if _, err := h.eng.Sweep(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.drain()
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodeSandboxCrashed)
	if r.Error.Step != "boom" || !strings.Contains(r.Error.Message, "crashed its sandbox 3 times") {
		t.Errorf("error = %+v", r.Error)
	}
	if n := strings.Count(strings.Join(h.eventTypes(r.ID), ","), "step.retrying"); n != 2 {
		t.Errorf("%d retries in the trace, want 2: %v", n, h.eventTypes(r.ID))
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("failing took %s, over 20s", took)
	}
	t.Logf("sandbox-crashed after 3 attempts in %s", time.Since(start).Round(time.Millisecond))
	ok := h.start("fine", `{}`)
	wantStatus(t, ok, store.RunSucceeded, "")
}
