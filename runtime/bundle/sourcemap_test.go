package bundle_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stead/runtime/bundle"
)

// writeSources writes files (slash paths) under a fresh folder and returns it.
func writeSources(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func pack(t *testing.T, entry string, o bundle.PackOptions) []byte {
	t.Helper()
	esm, err := bundle.Pack(context.Background(), entry, o)
	if err != nil {
		t.Fatalf("pack %s: %v", entry, err)
	}
	return esm
}

var tsSources = map[string]string{
	"src/handlers.ts": `import { decline } from "./lib/cards";

type Input = { orderId: string };

export async function refundOrder(input: Input): Promise<never> {
  await null;
  return decline(input?.orderId ?? "o-1");
}
`,
	"src/lib/cards.ts": `// Declines every card.
export function decline(id: string): never {
  const why: string = "card declined for " + id;
  throw new Error(why);
}
`,
}

// TestStacksNameTheSources: a bundle Pack made carries its sources' map, so
// a thrown error's stack names the TypeScript files and lines, relative to
// Root, with or without a Root.
func TestStacksNameTheSources(t *testing.T) {
	t.Parallel()
	dir := writeSources(t, tsSources)
	for _, tc := range []struct{ root, cards, handlers string }{
		{dir, "src/lib/cards.ts:4:", "src/handlers.ts:7:"},
		{"", "lib/cards.ts:4:", "handlers.ts:7:"},
	} {
		esm := pack(t, filepath.Join(dir, "src", "handlers.ts"), bundle.PackOptions{Root: tc.root})
		b := mustLoad(t, bundle.NewCompiler(bundle.Options{}), string(esm))
		_, _, err := run(t, b, "refundOrder")
		if err == nil || !strings.Contains(err.Error(), "card declined") {
			t.Fatalf("err = %v", err)
		}
		for _, at := range []string{"at decline (" + tc.cards, "at refundOrder (" + tc.handlers} {
			if !strings.Contains(err.Error(), at) {
				t.Errorf("root %q: stack does not say %q:\n%s", tc.root, at, err)
			}
		}
		if strings.Contains(err.Error(), "handlers.mjs") {
			t.Errorf("stack points into the bundle:\n%s", err)
		}
	}
}

// TestDeployErrorsNameTheSources: what the server finds in a packed bundle
// (top-level await, a throwing top level) is placed in the sources.
func TestDeployErrorsNameTheSources(t *testing.T) {
	t.Parallel()
	dir := writeSources(t, map[string]string{
		"await.ts": "const a: number = 1;\n\nexport const b = await Promise.resolve(a);\n",
		"boot.ts":  "import { boot } from \"./lib/boot\";\nexport const a = boot();\n",
		"lib/boot.ts": "export function boot(): number {\n" +
			"  const env: string = \"prod\";\n" +
			"  throw new TypeError(\"boot failed in \" + env);\n}\n",
	})
	c := bundle.NewCompiler(bundle.Options{})
	_, err := load(t, c, string(pack(t, filepath.Join(dir, "await.ts"), bundle.PackOptions{Root: dir})))
	wantError(t, err, bundle.CodeTopLevelAwait, "await.ts:3:18: ", "top-level await is not supported")

	_, err = load(t, c, string(pack(t, filepath.Join(dir, "boot.ts"), bundle.PackOptions{Root: dir})))
	wantError(t, err, bundle.CodeEvaluation, "lib/boot.ts:3:9: ", "boot failed in prod")
	if be, _ := bundle.AsError(err); be.File != "lib/boot.ts" || be.Line != 3 || be.Column != 9 {
		t.Errorf("position = %s:%d:%d, want lib/boot.ts:3:9", be.File, be.Line, be.Column)
	}
}

// TestDeployErrorsReadTheMapAtTheirColumn: an error's one-based column is
// looked up in the bundle's map as the zero-based column it is, so an
// error at a token where the map changes source names the right one.
func TestDeployErrorsReadTheMapAtTheirColumn(t *testing.T) {
	t.Parallel()
	// Bundle line 1, zero-based column 15 ("fs" after from) maps to a.ts:1:1,
	// column 16 to b.ts:5:1.
	sm := `{"version":3,"sources":["a.ts","b.ts"],"names":[],"mappings":"eAAA,CCIA"}`
	esm := "import fs from \"fs\";\nexport function f() { return fs }\n" +
		"//# sourceMappingURL=data:application/json;base64," + base64.StdEncoding.EncodeToString([]byte(sm)) + "\n"
	_, err := load(t, bundle.NewCompiler(bundle.Options{}), esm)
	wantError(t, err, bundle.CodeUnresolvedImport, "a.ts:1:1: ", `"fs"`)
}

// TestDamagedMapIsNotUsed: a bundle whose map is not valid base64 keeps
// its errors' positions in the bundle rather than half-reading the map.
func TestDamagedMapIsNotUsed(t *testing.T) {
	t.Parallel()
	dir := writeSources(t, map[string]string{"await.ts": "const a: number = 1;\n\nexport const b = await Promise.resolve(a);\n"})
	esm := strings.TrimSuffix(string(pack(t, filepath.Join(dir, "await.ts"), bundle.PackOptions{Root: dir})), "\n") + "!\n"
	_, err := load(t, bundle.NewCompiler(bundle.Options{}), esm)
	wantError(t, err, bundle.CodeTopLevelAwait, "handlers.mjs:", "top-level await is not supported")
	if strings.Contains(err.Error(), "await.ts") {
		t.Errorf("error %q names the sources through a damaged map", err)
	}
}

// TestSourceMapCommentReadsNoFile: a bundle that names a source map file on
// the server's disk gets none of it; its positions stay in the bundle.
func TestSourceMapCommentReadsNoFile(t *testing.T) {
	t.Parallel()
	dir := writeSources(t, map[string]string{
		"evil.map": `{"version":3,"sources":["SECRET.ts"],"mappings":"AAAA;AACA;AACA","names":[]}`,
	})
	src := "export function boom() {\n  throw new Error('x');\n}\n"
	for _, comment := range []string{
		"//# sourceMappingURL=file://" + filepath.ToSlash(filepath.Join(dir, "evil.map")),
		"/*# sourceMappingURL=file://" + filepath.ToSlash(filepath.Join(dir, "evil.map")) + " */",
		"//# sourceMappingURL=evil.map",
	} {
		b := mustLoad(t, bundle.NewCompiler(bundle.Options{}), src+comment+"\n")
		_, _, err := run(t, b, "boom")
		if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "handlers.mjs:2:") {
			t.Errorf("%s: stack = %v, want handlers.mjs:2 and nothing of the file", comment, err)
		}
	}
}

// TestPackDropsTheMapNearTheLimit: a bundle that fits only without its map
// goes without it, and its stacks name the bundle.
func TestPackDropsTheMapNearTheLimit(t *testing.T) {
	t.Parallel()
	dir := writeSources(t, tsSources)
	entry := filepath.Join(dir, "src", "handlers.ts")
	full := pack(t, entry, bundle.PackOptions{})
	i := strings.LastIndex(string(full), "//# sourceMappingURL=data:")
	if i < 0 {
		t.Fatalf("packed bundle carries no map:\n%s", full)
	}
	bare := pack(t, entry, bundle.PackOptions{MaxSize: i + 1})
	if strings.Contains(string(bare), "sourceMappingURL") {
		t.Fatalf("bundle at the limit still carries its map (%d bytes, limit %d)", len(bare), i+1)
	}
	b := mustLoad(t, bundle.NewCompiler(bundle.Options{}), string(bare))
	if _, _, err := run(t, b, "refundOrder"); err == nil || !strings.Contains(err.Error(), "handlers.mjs:") {
		t.Errorf("stack = %v, want positions in handlers.mjs", err)
	}
}
