package bundle_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stead/runtime/bundle"
)

// writeLibrary writes a source tree of plain JavaScript modules of about
// size bytes (classes, closures, regular expressions, tables of data — the
// shapes real dependencies have) and returns its entry point.
func writeLibrary(tb testing.TB, dir string, size int) string {
	tb.Helper()
	var entry strings.Builder
	total := 0
	for m := 0; total < size; m++ {
		var b strings.Builder
		fmt.Fprintf(&b, "// module %d\n", m)
		fmt.Fprintf(&b, "const PATTERN_%d = /^(?:[a-z]{2,8})-(\\d{1,6})(?:\\.(\\w+))?$/i;\n", m)
		fmt.Fprintf(&b, "const TABLE_%d = [\n", m)
		for r := 0; r < 40; r++ {
			fmt.Fprintf(&b, "  { id: %d, code: \"c%d-%d\", weight: %d.%d, tags: [\"t%d\", \"u%d\"] },\n", r, m, r, r*7%13, r%10, r%5, r%3)
		}
		b.WriteString("];\n")
		fmt.Fprintf(&b, `export class Ledger%[1]d {
  #entries = [];
  constructor(name) { this.name = name; }
  add(code, amount) {
    const m = PATTERN_%[1]d.exec(code);
    if (!m) throw new TypeError("bad code " + code);
    this.#entries.push({ code, amount, n: Number(m[2]) });
    return this;
  }
  total() { return this.#entries.reduce((s, e) => s + e.amount * e.n, 0); }
  heaviest() { return TABLE_%[1]d.toSorted((a, b) => b.weight - a.weight).slice(0, 3).map(r => r.code); }
}
export function summarize%[1]d(items, opts = {}) {
  const { prefix = "s", limit = 10 } = opts;
  const grouped = new Map();
  for (const it of items ?? []) {
    const k = `+"`${prefix}:${it.kind ?? \"none\"}`"+`;
    grouped.set(k, (grouped.get(k) ?? 0) + (it.value | 0));
  }
  return [...grouped.entries()].slice(0, limit).map(([k, v]) => ({ k, v }));
}
export const lookup%[1]d = (id) => TABLE_%[1]d.find((r) => r.id === id)?.code ?? null;
`, m)
		name := fmt.Sprintf("mod%03d.js", m)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&entry, "export * from \"./%s\";\n", name)
		total += b.Len()
	}
	entry.WriteString("export async function refundOrder(input) { return { refunded: input.amount }; }\n")
	p := filepath.Join(dir, "index.js")
	if err := os.WriteFile(p, []byte(entry.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkBundleAndCompile packs a ~250 KB source tree with esbuild and
// compiles it (ESM→CJS, parse, compile, top-level evaluation for exports).
func BenchmarkBundleAndCompile(b *testing.B) {
	entry := writeLibrary(b, b.TempDir(), 250<<10)
	ctx := context.Background()
	var size int
	for b.Loop() {
		esm, err := bundle.Pack(ctx, entry, bundle.PackOptions{})
		if err != nil {
			b.Fatal(err)
		}
		size = len(esm)
		if _, err := bundle.NewCompiler(bundle.Options{}).Load(ctx, "handlers.mjs", esm); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size)/1024, "KiB/bundle")
}

// BenchmarkCompileCached is a compile-cache hit: what every invocation of a
// deployed bundle pays to find its program.
func BenchmarkCompileCached(b *testing.B) {
	entry := writeLibrary(b, b.TempDir(), 250<<10)
	ctx := context.Background()
	esm, err := bundle.Pack(ctx, entry, bundle.PackOptions{})
	if err != nil {
		b.Fatal(err)
	}
	c := bundle.NewCompiler(bundle.Options{})
	loaded, err := c.Load(ctx, "handlers.mjs", esm)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if got, ok := c.Get(loaded.Digest); !ok || got != loaded {
			b.Fatal("cache miss")
		}
	}
}
