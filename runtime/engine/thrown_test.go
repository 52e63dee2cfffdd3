package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stead/runtime/bundle"
	"stead/store"
)

// TestHandlerErrorCarriesWhereItThrew: a failed handler's stack and
// position (file, line, column) reach step.failed, run.failed and the run's
// error, redacted like its message; for a bundle made from TypeScript they
// point into the .ts file.
func TestHandlerErrorCarriesWhereItThrew(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("failing", `{}`)
	wantStatus(t, r, store.RunFailed, "handler-error")
	line := 0
	for i, l := range strings.Split(handlers, "\n") {
		if strings.Contains(l, "card declined for") {
			line = i + 1
		}
	}
	e := r.Error
	if e.File != "handlers.mjs" || e.Line != line || e.Column != 9 {
		t.Errorf("run error at %s:%d:%d, want handlers.mjs:%d:9", e.File, e.Line, e.Column, line)
	}
	at := fmt.Sprintf("at boom (handlers.mjs:%d:9)", line)
	if !strings.Contains(e.Stack, at) || strings.Contains(e.Stack, "brk_") || !strings.Contains(e.Stack, "[REDACTED]") {
		t.Errorf("run error stack = %q, want %q and the broker token redacted", e.Stack, at)
	}
	for _, typ := range []string{"step.failed", "run.failed"} {
		d := h.eventData(r.ID, typ)
		if d["file"] != "handlers.mjs" || d["line"] != float64(line) || d["column"] != float64(9) || d["stack"] != e.Stack {
			t.Errorf("%s data = %v, want file, line, column and the stack", typ, d)
		}
	}

	dir := t.TempDir()
	src := "type In = { orderId: string };\n\nexport async function boom(input: In) {\n" +
		"  throw new Error(\"no order \" + input.orderId);\n}\nexport async function spend() { return {}; }\n"
	if err := os.WriteFile(filepath.Join(dir, "handlers.ts"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	esm, err := bundle.Pack(h.ctx, filepath.Join(dir, "handlers.ts"), bundle.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.deploy(h.owner, string(esm), `{ "agents": { "failing": {
  "tools": { "boom": { "effect": "read" }, "spend": { "effect": "read" } },
  "steps": [ { "id": "boom", "tool": "boom", "input": { "orderId": "o-7" } } ] } } }`)
	r = h.start("failing", `{}`)
	wantStatus(t, r, store.RunFailed, "handler-error")
	if e := r.Error; e.File != "handlers.ts" || e.Line != 4 || e.Column != 9 || !strings.Contains(e.Stack, "at boom (handlers.ts:4:9)") {
		t.Errorf("TypeScript handler's error at %s:%d:%d, stack %q; want handlers.ts:4:9", e.File, e.Line, e.Column, e.Stack)
	}
	if d := h.eventData(r.ID, "run.failed"); d["file"] != "handlers.ts" || d["line"] != float64(4) {
		t.Errorf("run.failed data = %v, want handlers.ts line 4", d)
	}
}
