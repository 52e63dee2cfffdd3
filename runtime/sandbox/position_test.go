package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
	"stead/runtime/sandbox"
)

// TestPositionsCrossTheBoundary: a TypeScript handler's error reaches the
// parent with its stack and position in the .ts file (goja maps them in the
// worker, from the map the bundle carries), redacted; a deploy-time error
// found in a worker keeps its source file too.
func TestPositionsCrossTheBoundary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	entry := write("handlers.ts", "type In = { token: string };\n\n"+
		"export function refundOrder(input: In): never {\n"+
		"  throw new Error(\"declined for \" + input.token);\n"+
		"}\n")
	esm, err := bundle.Pack(context.Background(), entry, bundle.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(t, sandbox.Options{})
	b, err := p.Compiler(bundle.Options{}).Load(context.Background(), "handlers.mjs", esm)
	if err != nil {
		t.Fatal(err)
	}
	_, e := invoke(t, p, b, 5*time.Second, jsvm.Invocation{Export: "refundOrder", Input: []byte(`{"token":"sk-9"}`), Secrets: []string{"sk-9"}})
	if e == nil || e.Code != jsvm.CodeHandlerError {
		t.Fatalf("got %+v, want a handler error", e)
	}
	if e.File != "handlers.ts" || e.Line != 4 || e.Column != 9 {
		t.Errorf("position = %s:%d:%d, want handlers.ts:4:9\n%s", e.File, e.Line, e.Column, e.Stack)
	}
	if !strings.Contains(e.Stack, "at refundOrder (handlers.ts:4:9)") || strings.Contains(e.Stack+e.Message, "sk-9") {
		t.Errorf("stack %q, message %q: want handlers.ts:4:9 and the secret redacted", e.Stack, e.Message)
	}

	tla, err := bundle.Pack(context.Background(), write("tla.ts", "const n: number = 1;\nexport const x = await Promise.resolve(n);\n"), bundle.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Compiler(bundle.Options{}).Load(context.Background(), "handlers.mjs", tla)
	if be, ok := bundle.AsError(err); !ok || be.Code != bundle.CodeTopLevelAwait || be.File != "tla.ts" || be.Line != 2 {
		t.Errorf("top-level await: %v, want tla.ts:2", err)
	}
}
