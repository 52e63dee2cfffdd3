package jsvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// Each hostile case runs a real script; after it, the next ordinary call to
// the same bundle must succeed. A counter in module state tells whether the
// VM was kept (it goes on) or retired (it starts again at 1).

const counter = `
let n = 0;
export function count() { return ++n; }
`

func TestSourceMapURLNotRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "map.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Opening a FIFO for writing blocks until someone opens it for reading:
	// if goja tried to load the source map, this open would return.
	var done atomic.Bool
	opened := make(chan bool, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			f.Close() // the reader (if it was goja) sees EOF and goes on
		}
		opened <- !done.Load()
	}()

	// goja resolves the URL against the working directory (the code of eval
	// has no absolute name), so name the FIFO relative to it, with the
	// ../ traversal an attacker would use.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, fifo)
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, Options{})
	b := load(t, r, counter+fmt.Sprintf(`
export function evil() {
  const a = eval("1\n//# sourceMappingURL=%[1]s");
  const b = new Function("return 2\n//# sourceMappingURL=%[1]s")();
  const c = eval("3\n//# sourceMappingURL=file://%[2]s");
  return a + b + c;
}`, filepath.ToSlash(rel), fifo))
	if got := mustDo(t, r, b, "evil", ""); got != "6" {
		t.Fatalf("evil = %s", got)
	}
	// Release the writer ourselves, then see who opened it first.
	done.Store(true)
	rd, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if <-opened {
		t.Fatal("the runtime opened the file named by a sourceMappingURL comment")
	}
}

func TestStackOverflow(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, counter+`
export function direct() { function f() { return f(); } return f(); }
export function viaBuiltin() { function f() { return [1].map(f); } return f(); }
export async function inAsync() { await null; function f() { return f() + 1; } return f(); }
export function inToJSON() { return { toJSON() { function f() { return f(); } return f(); } }; }
`)
	for _, export := range []string{"direct", "viaBuiltin", "inAsync", "inToJSON"} {
		mustDo(t, r, b, "count", "")
		start := time.Now()
		_, e := do(t, r, b, export, "")
		wantCode(t, e, CodeStackOverflow)
		if !strings.Contains(e.Message, "stack overflow") {
			t.Errorf("%s: message %q", export, e.Message)
		}
		if n := strings.Count(e.Stack, "\n") + 1; n > maxStackLines+1 {
			t.Errorf("%s: a stack of %d lines, want at most %d and a mark", export, n, maxStackLines)
		}
		if d := time.Since(start); d > 20*time.Second { // not a speed check: unbounded recursion would not end
			t.Errorf("%s took %s", export, d)
		}
		if got := mustDo(t, r, b, "count", ""); got != "1" {
			t.Errorf("after %s: count = %s, want 1 (the VM is retired)", export, got)
		}
	}
}

// blockingBroker never answers until its context ends.
type blockingBroker struct{ MemoryBroker }

func (*blockingBroker) Get(ctx context.Context, _, _ string) (json.RawMessage, bool, error) {
	<-ctx.Done()
	return nil, false, ctx.Err()
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, counter+`
export function spin() { for (;;) {} }
export async function spinAfterAwait() { await null; for (;;) {} }
export async function spinInCatch() { for (;;) { try { for (;;) {} } catch (e) {} } }
export async function awaitHost(input, context) { await context.broker.get("c", "k"); return 1; }
export async function spinInTimer() { await new Promise(r => setTimeout(() => { for (;;) {} }, 0)); }
export async function spinInToJSON() { return { toJSON() { for (;;) {} } }; }
`)
	for _, export := range []string{"spin", "spinAfterAwait", "spinInCatch", "awaitHost", "spinInTimer", "spinInToJSON"} {
		mustDo(t, r, b, "count", "")
		start := time.Now()
		_, err := r.Invoke(ctxTimeout(t, 100*time.Millisecond), b, Invocation{Export: export, Broker: &blockingBroker{}})
		e, _ := AsError(err)
		wantCode(t, e, CodeTimeout)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v does not wrap context.DeadlineExceeded", export, err)
		}
		if d := time.Since(start); d < 100*time.Millisecond || d > 3*time.Second {
			t.Errorf("%s: timed out after %s, want about 100ms", export, d)
		}
		if got := mustDo(t, r, b, "count", ""); got != "1" {
			t.Errorf("after %s: count = %s, want 1 (the interrupted VM is retired)", export, got)
		}
	}

	// Invocation.Timeout bounds the call as a deadline would.
	start := time.Now()
	_, err := r.Invoke(context.Background(), b, Invocation{Export: "spin", Timeout: 100 * time.Millisecond})
	e, _ := AsError(err)
	wantCode(t, e, CodeTimeout)
	if d := time.Since(start); d < 100*time.Millisecond || d > 3*time.Second {
		t.Errorf("Timeout 100ms: timed out after %s", d)
	}

	// A deadline that passes before the watchdog's first look (2 ms).
	start = time.Now()
	_, e = doCtx(t, ctxTimeout(t, time.Millisecond), r, b, Invocation{Export: "spin"})
	wantCode(t, e, CodeTimeout)
	if d := time.Since(start); d > time.Second {
		t.Errorf("1ms deadline: timed out after %s", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = r.Invoke(ctx, b, Invocation{Export: "spin"})
	e, _ = AsError(err)
	wantCode(t, e, CodeCancelled)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%v does not wrap context.Canceled", err)
	}
	if got := mustDo(t, r, b, "count", ""); got != "1" {
		t.Errorf("after cancel: count = %s, want 1", got)
	}
}

// A call whose context ended while Go code ran, after the watchdog armed
// its deadline interrupt, may leave that interrupt pending on the VM: the
// VM is retired, so that no later call inherits it.
func TestRetiredWhenADeadlineInterruptMayBePending(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, counter)
	mustDo(t, r, b, "count", "")
	r.mu.Lock()
	p, _ := r.pools.Get(poolKey("", b.Digest))
	w := p.idle[0]
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The export, replaced by Go code (which no interrupt stops): it waits
	// until the watchdog has armed the call's deadline interrupt, ends the
	// call's context, and returns normally.
	w.fns["count"] = func(goja.Value, ...goja.Value) (goja.Value, error) {
		for deadline := time.Now().Add(5 * time.Second); !deadlineArmed(r, w); {
			if time.Now().After(deadline) {
				return nil, errors.New("the watchdog never armed the deadline")
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		return w.vm.ToValue(1), nil
	}
	res, err := r.Invoke(ctx, b, Invocation{Export: "count"})
	if err != nil && strings.Contains(err.Error(), "never armed") {
		t.Fatal(err)
	}
	if !res.Retired {
		t.Errorf("the VM was kept (error %v): its deadline interrupt may still land on a later call", err)
	}
}

// deadlineArmed reports whether the watchdog has set up w's deadline interrupt.
func deadlineArmed(r *Runtime, w *worker) bool {
	r.wd.mu.Lock()
	defer r.wd.mu.Unlock()
	return w.watch.stop != nil || w.watch.timedOut
}

// panickyBroker panics in a host goroutine.
type panickyBroker struct{ MemoryBroker }

func (*panickyBroker) Get(context.Context, string, string) (json.RawMessage, bool, error) {
	panic("broker bug: index out of range")
}

func TestHostPanic(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	b := load(t, r, counter+`
export async function viaBroker(input, context) { await context.broker.get("c", "k"); return 1; }
export function viaGlobal() { return globalThis.hostBomb(); }
`)
	mustDo(t, r, b, "count", "")
	_, e := doInv(t, r, b, Invocation{Export: "viaBroker", Broker: &panickyBroker{}})
	wantCode(t, e, CodeInternal)
	if !strings.Contains(e.Message, "broker bug") {
		t.Errorf("message %q", e.Message)
	}
	if got := mustDo(t, r, b, "count", ""); got != "1" {
		t.Errorf("after a broker panic: count = %s, want 1 (VM retired)", got)
	}

	// A panic in a synchronous host function: plant one on the pooled VM.
	r.mu.Lock()
	p, _ := r.pools.Get(poolKey("", b.Digest))
	w := p.idle[0]
	r.mu.Unlock()
	if err := w.vm.Set("hostBomb", func(goja.FunctionCall) goja.Value { panic("host function bug") }); err != nil {
		t.Fatal(err)
	}
	_, e = do(t, r, b, "viaGlobal", "")
	wantCode(t, e, CodeInternal)
	if !strings.Contains(e.Message, "host function bug") {
		t.Errorf("message %q", e.Message)
	}
	if got := mustDo(t, r, b, "count", ""); got != "1" {
		t.Errorf("after a host panic: count = %s, want 1 (VM retired)", got)
	}
	if _, e = do(t, r, b, "viaGlobal", ""); e == nil || e.Code != CodeHandlerError {
		t.Errorf("the planted function survived on a fresh VM: %v", e)
	}
}

// Memory cases run one at a time (not in parallel with anything) with a
// small limit, and collect garbage after each.
func TestMemoryLimit(t *testing.T) {
	const limit = 64 << 20
	r := newRuntime(t, Options{MemoryLimit: limit})
	b := load(t, r, counter+`
export function pushLoop() { const a = []; for (let i = 0; ; i++) a.push({ i, s: "item " + i }); }
export function arrayFill() { return new Array(5e7).fill(0).length; }
export function arrayCall() { return Array(5e7).fill(0).length; }
export function arrayFrom() { return Array.from({ length: 5e7 }).length; }
export function lengthThenFill() { const a = []; a.length = 5e7; return a.fill(0).length; }
export function repeat() { return "x".repeat(2 ** 29).length; }
export function padStart() { return "x".padStart(2 ** 29).length; }
export function padEnd() { return "x".padEnd(2 ** 29, "ab").length; }
export function doubling() { let s = "xy"; for (;;) s += s; }
export function arrayBuffer() { return new ArrayBuffer(2 ** 31).byteLength; }
export function typedArray() { return new Float64Array(2 ** 28).length; }
export function typedFromArrayLike() { return new Uint32Array({ length: 2 ** 28 }).length; }
export async function asyncPush() { await null; const a = []; for (;;) a.push([1, 2, 3, 4]); }
export function caught() {
  try { "x".repeat(2 ** 29); } catch (e) { return "survived: " + e.message; }
}
export function normalWork() { return new Array(1000).fill(7).length + "x".repeat(1000).length + new Uint8Array(4096).length; }
`)
	for _, export := range []string{"pushLoop", "arrayFill", "arrayCall", "arrayFrom", "lengthThenFill", "repeat",
		"padStart", "padEnd", "doubling", "arrayBuffer", "typedArray", "typedFromArrayLike", "asyncPush", "caught"} {
		t.Run(export, func(t *testing.T) {
			mustDo(t, r, b, "count", "")
			start := time.Now()
			_, e := do(t, r, b, export, "")
			elapsed := time.Since(start)
			runtime.GC()
			wantCode(t, e, CodeMemory)
			if !strings.Contains(e.Message, "memory limit exceeded") {
				t.Errorf("message %q", e.Message)
			}
			if e.Retryable {
				t.Error("a breach with no other handler running is marked retryable")
			}
			// Not a speed check: a watchdog that acts late, or only when
			// the machine runs out, takes far longer. 5 s was once missed
			// by a doubling string on a loaded machine (6.0 s).
			if elapsed > 20*time.Second {
				t.Errorf("took %s", elapsed)
			}
			if got := mustDo(t, r, b, "count", ""); got != "1" {
				t.Errorf("count = %s, want 1 (the VM is retired)", got)
			}
			if got := mustDo(t, r, b, "normalWork", ""); got != "6096" {
				t.Errorf("normalWork = %s", got)
			}
		})
	}
}

// gateBroker's Get tells the test it was called, then waits until the
// test lets it answer.
type gateBroker struct {
	MemoryBroker
	entered, release chan struct{}
}

func (b *gateBroker) Get(ctx context.Context, _, _ string) (json.RawMessage, bool, error) {
	close(b.entered)
	<-b.release
	return nil, false, nil
}

// A handler that breaches the memory limit while another runs cannot be
// singled out by a process-wide heap: both errors say so (Retryable), so the
// engine retries instead of failing the neighbour's run. Runs serially.
func TestSharedMemoryBreachIsRetryable(t *testing.T) {
	const limit = 32 << 20
	r := newRuntime(t, Options{MemoryLimit: limit})
	b := load(t, r, `
export async function waitOnHost(input, context) { await context.broker.get("c", "k"); return "done"; }
export function pushLoop() { const a = []; for (let i = 0; ; i++) a.push({ i, s: "item " + i }); }
`)
	br := &gateBroker{entered: make(chan struct{}), release: make(chan struct{})}
	neighbour := make(chan *Error, 1)
	go func() {
		_, e := doInv(t, r, b, Invocation{Export: "waitOnHost", Broker: br})
		neighbour <- e
	}()
	<-br.entered
	// The watchdog takes the neighbour's baseline at its first sample.
	for deadline := time.Now().Add(5 * time.Second); !baselineTaken(r); {
		if time.Now().After(deadline) {
			t.Fatal("the watchdog never sampled the running invocation")
		}
		runtime.Gosched()
	}
	_, hog := do(t, r, b, "pushLoop", "")
	close(br.release)
	e := <-neighbour
	runtime.GC()
	wantCode(t, hog, CodeMemory)
	if !hog.Retryable {
		t.Errorf("the hog's error, with a neighbour running, is not marked retryable: %+v", hog)
	}
	wantCode(t, e, CodeMemory)
	if !e.Retryable || !strings.Contains(e.Message, "may not be the cause") {
		t.Errorf("the neighbour's error = %+v, want a retryable memory error", e)
	}
	// Alone, the hog's breach is its own.
	_, hog = do(t, r, b, "pushLoop", "")
	runtime.GC()
	wantCode(t, hog, CodeMemory)
	if hog.Retryable {
		t.Error("a breach with no other handler running is marked retryable")
	}
}

// baselineTaken reports whether every running invocation has its baseline.
func baselineTaken(r *Runtime) bool {
	r.wd.mu.Lock()
	defer r.wd.mu.Unlock()
	for w := range r.wd.active {
		if w.baseline < 0 {
			return false
		}
	}
	return len(r.wd.active) > 0
}
