package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// thrownHandlers is a TypeScript handler whose throw is on line 7, called
// through a helper in another file (line 3).
var thrownHandlers = map[string]string{
	"handlers.ts": `import { money } from "./money";

type Input = { orderId: string };

export async function lookupOrder(input: Input) {
  const amount: string = money(1250);
  throw new Error("order " + input.orderId + " not found (" + amount + ")");
}
`,
	"money.ts": "// Formats cents.\nexport function money(cents: number): string {\n  return \"$\" + (cents / 100).toFixed(2);\n}\n",
	"stead.json": `{
  "handlers": "handlers.ts",
  "agents": {
    "orders": {
      "input": { "type": "object", "properties": { "orderId": { "type": "string" } }, "required": ["orderId"] },
      "tools": { "lookupOrder": { "effect": "read" } },
      "steps": [ { "id": "lookup", "tool": "lookupOrder", "input": { "orderId": "$input.orderId" } } ]
    }
  }
}
`,
}

func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTraceShowsWhereTheHandlerThrew: a TypeScript handler's error shows in
// `stead trace` at handlers.ts:7 — the source deployed, not the bundle — in
// the failure's rows, as "thrown at" and in the stack's frames
// (testdata/trace_thrown.golden).
func TestTraceShowsWhereTheHandlerThrew(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	s.mustCLI("deploy", writeFiles(t, thrownHandlers), "--yes")
	r := s.cli("run", "orders", "--input", `{"orderId":"o-9"}`, "--end-user", "demo-user", "--json")
	id := jsonField(t, r.stdout, "id")
	s.waitRun(id, terminal)
	tr := s.mustCLI("trace", id)
	for _, want := range []string{
		"step.failed  ", "handler-error at handlers.ts:7:9: lookupOrder failed: Error: order o-9 not found ($12.50)",
		"  thrown at handlers.ts:7:9\n", "    at lookupOrder (handlers.ts:7:9)\n",
	} {
		if !strings.Contains(tr.stdout, want) {
			t.Errorf("trace does not show %q:\n%s", want, tr.stdout)
		}
	}
	if strings.Contains(tr.stdout, "handlers.mjs") {
		t.Errorf("trace points into the bundle:\n%s", tr.stdout)
	}
	golden(t, "trace_thrown", newNormalizer().replace(tr.stdout))
	// The API's run carries the place too (the console shows it); a
	// customer token's view does not.
	run := s.mustCLI("trace", id, "--json").stdout
	if jsonField(t, run, "run.error.file") != "handlers.ts" || jsonField(t, run, "run.error.line") != "7" || !strings.Contains(jsonField(t, run, "run.error.stack"), "handlers.ts:7:9") {
		t.Errorf("the run's error lacks where it threw: %s", run)
	}
	tok := strings.TrimSpace(s.mustCLI("token", "demo-user").stdout)
	cust := s.run(cliEnv{EnvKey: tok}, "trace", id, "--json")
	if cust.code != 0 || jsonField(t, cust.stdout, "run.status") != "failed" || strings.Contains(cust.stdout, "handlers.ts") {
		t.Errorf("a customer sees where the handler threw: %s", cust.stdout)
	}
}
