package jsvm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stead/runtime/bundle"
)

func TestStackPosition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stack, file string
		line, col         int
	}{
		{"named frame", "Error: x\n\tat refundOrder (handlers.ts:12:5)\n", "handlers.ts", 12, 5},
		{"anonymous frame", "Error: x\n\tat src/lib/a.ts:3:9\n\tat b (b.ts:1:1)", "src/lib/a.ts", 3, 9},
		{"goja's program counter", "Error: x\n\tat f (handlers.mjs:2:8(3))", "handlers.mjs", 2, 8},
		{"built-ins and the prelude skipped", "SyntaxError: bad\n\tat parse (native)\n\tat x (stead:prelude:40:2)\n\tat refundOrder (handlers.ts:4:10)", "handlers.ts", 4, 10},
		{"a path with a colon and parentheses", "Error\n\tat f (C:/p (1)/h.ts:7:2)", "C:/p (1)/h.ts", 7, 2},
		{"no frame", "Error: x", "", 0, 0},
		{"only native", "Error: x\n\tat JSON.parse (native)", "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, l, c, ok := StackPosition(tc.stack)
			if f != tc.file || l != tc.line || c != tc.col || ok != (tc.line > 0) {
				t.Errorf("StackPosition = %q %d %d %v, want %q %d %d", f, l, c, ok, tc.file, tc.line, tc.col)
			}
		})
	}
}

// TestThrownErrorNamesTheSource: a handler of a bundle made from TypeScript
// fails with the stack and position of its throw in the .ts file, without
// goja's program counters.
func TestThrownErrorNamesTheSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "type In = { orderId?: string };\n\n" +
		"export async function refundOrder(input: In) {\n" +
		"  await null;\n" +
		"  throw new Error(\"order \" + input.orderId + \" not found\");\n" +
		"}\n" +
		"export function parses() {\n  return JSON.parse(\"{\");\n}\n"
	entry := filepath.Join(dir, "handlers.ts")
	if err := os.WriteFile(entry, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	esm, err := bundle.Pack(context.Background(), entry, bundle.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, Options{})
	b := loadNamed(t, r, "handlers.mjs", string(esm))

	_, e := do(t, r, b, "refundOrder", `{"orderId":"o-1"}`)
	wantCode(t, e, CodeHandlerError)
	if e.File != "handlers.ts" || e.Line != 5 || e.Column != 9 {
		t.Errorf("position = %s:%d:%d, want handlers.ts:5:9\n%s", e.File, e.Line, e.Column, e.Stack)
	}
	if !strings.Contains(e.Stack, "at refundOrder (handlers.ts:5:9)") {
		t.Errorf("stack does not read at refundOrder (handlers.ts:5:9):\n%s", e.Stack)
	}

	_, e = do(t, r, b, "parses", "")
	wantCode(t, e, CodeHandlerError)
	if e.File != "handlers.ts" || e.Line != 8 {
		t.Errorf("a built-in's throw: position = %s:%d:%d, want handlers.ts:8 (the caller)\n%s", e.File, e.Line, e.Column, e.Stack)
	}
}
