package jsvm

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/goleak"

	"stead/runtime/bundle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newRuntime returns a Runtime closed when the test ends.
func newRuntime(t testing.TB, o Options) *Runtime {
	t.Helper()
	r := New(o)
	t.Cleanup(r.Close)
	return r
}

// load compiles an ESM source as handlers.mjs with r's globals.
func load(t testing.TB, r *Runtime, src string) *bundle.Bundle {
	t.Helper()
	return loadNamed(t, r, "handlers.mjs", src)
}

func loadNamed(t testing.TB, r *Runtime, name, src string) *bundle.Bundle {
	t.Helper()
	b, err := r.Compiler(bundle.Options{}).Load(context.Background(), name, []byte(src))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return b
}

// ctxTimeout returns a context with a deadline, cancelled when the test ends.
func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// do invokes export with input (JSON text, "" for none) under a 10s deadline.
func do(t testing.TB, r *Runtime, b *bundle.Bundle, export, input string) (Result, *Error) {
	t.Helper()
	return doInv(t, r, b, Invocation{Export: export, Input: json.RawMessage(input)})
}

func doInv(t testing.TB, r *Runtime, b *bundle.Bundle, inv Invocation) (Result, *Error) {
	t.Helper()
	return doCtx(t, ctxTimeout(t, 10*time.Second), r, b, inv)
}

func doCtx(t testing.TB, ctx context.Context, r *Runtime, b *bundle.Bundle, inv Invocation) (Result, *Error) {
	t.Helper()
	res, err := r.Invoke(ctx, b, inv)
	if err == nil {
		return res, nil
	}
	e, ok := AsError(err)
	if !ok {
		t.Fatalf("Invoke(%s) returned %T %v, want *jsvm.Error", inv.Export, err, err)
	}
	return res, e
}

// mustDo invokes and fails the test on error, returning the output.
func mustDo(t testing.TB, r *Runtime, b *bundle.Bundle, export, input string) string {
	t.Helper()
	res, e := do(t, r, b, export, input)
	if e != nil {
		t.Fatalf("%s: unexpected error %s: %s\n%s", export, e.Code, e.Message, e.Stack)
	}
	return string(res.Output)
}

// wantCode fails unless e has code.
func wantCode(t testing.TB, e *Error, code string) {
	t.Helper()
	if e == nil {
		t.Fatalf("got no error, want code %s", code)
	}
	if e.Code != code {
		t.Fatalf("got code %s (%s), want %s", e.Code, e.Message, code)
	}
}

// idleVMs counts the warm VMs pooled for b.
func idleVMs(r *Runtime, b *bundle.Bundle) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.pools.Get(poolKey("", b.Digest)); ok {
		return len(p.idle)
	}
	return 0
}
