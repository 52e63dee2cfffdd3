package bundle_test

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"stead/runtime/bundle"
)

// TestPackNamesAMissingFile: a relative import of a file that is not there
// says so and suggests the nearest name, spelt as the import would spell
// it; a package import keeps the npm install hint.
func TestPackNamesAMissingFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, entry, imp, want, not string }{
		{"typo", "", `"./helpres"`, `handlers.ts:2:19: no such file: "./helpres" (imported from handlers.ts); did you mean "./helpers"?`, "Node builtins"},
		{"typo in a folder", "", `"./lib/ordrs"`, `no such file: "./lib/ordrs" (imported from handlers.ts); did you mean "./lib/orders"?`, "Node builtins"},
		{"with its extension", "", `"./helpres.ts"`, `did you mean "./helpers.ts"?`, "Node builtins"},
		{"up a folder", "src/main.ts", `"../helpres"`, `main.ts:2:19: no such file: "../helpres" (imported from main.ts); did you mean "../helpers"?`, "Node builtins"},
		{"nothing near", "", `"./zzzzzzzz"`, `no such file: "./zzzzzzzz" (imported from handlers.ts)`, "did you mean"},
		{"not a hidden file", "", `"./env"`, `no such file: "./env"`, "did you mean"},
		{"not node_modules", "", `"./node_module"`, `no such file: "./node_module"`, "did you mean"},
		{"not a data file without its extension", "", `"./daat"`, `no such file: "./daat"`, "did you mean"},
		{"not a folder without its dot", "", `"./chrt"`, `no such file: "./chrt"`, "did you mean"},
		{"a package", "", `"left-pad"`, `Could not resolve "left-pad"; Node builtins are not available, and packages must be installed (npm install)`, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			entry := cmp.Or(tc.entry, "handlers.ts")
			dir := writeSources(t, map[string]string{
				entry:                     "// Calls a helper.\nimport { x } from " + tc.imp + ";\nexport function f() { return x }\n",
				"helpers.ts":              "export const x = 1;\n",
				"lib/orders.ts":           "export const x = 2;\n",
				".env":                    "KEY=1\n",
				"node_modules/x/index.js": "export const x = 3;\n",
				"data.txt":                "1\n",
				"chart.js/index.js":       "export const x = 4;\n",
			})
			_, err := bundle.Pack(context.Background(), filepath.Join(dir, entry), bundle.PackOptions{})
			be, ok := bundle.AsError(err)
			if !ok || be.Code != bundle.CodeUnresolvedImport {
				t.Fatalf("err = %v, want %s", err, bundle.CodeUnresolvedImport)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.not) {
				t.Errorf("error %q\nwant it to say %q and not %q", err, tc.want, tc.not)
			}
		})
	}
}

// TestPackErrorsNameFilesFromTheEntrysFolder: with Root set (stead deploy
// sets stead.json's folder), Pack's errors still name files relative to the
// entry's folder, as the CLI expects when it rebases them onto Root, and a
// missing file is looked for next to its importer.
func TestPackErrorsNameFilesFromTheEntrysFolder(t *testing.T) {
	t.Parallel()
	dir := writeSources(t, map[string]string{
		"src/handlers.ts": "// Calls a helper.\nimport { x } from \"./helpres\";\nexport function f() { return x }\n",
		"src/helpers.ts":  "export const x = 1;\n",
	})
	_, err := bundle.Pack(context.Background(), filepath.Join(dir, "src", "handlers.ts"), bundle.PackOptions{Root: dir})
	want := `handlers.ts:2:19: no such file: "./helpres" (imported from handlers.ts); did you mean "./helpers"?`
	if be, ok := bundle.AsError(err); !ok || be.File != "handlers.ts" || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// TestPackStopsWhenCancelled: a cancelled deploy bundles nothing.
func TestPackStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := bundle.Pack(ctx, "testdata/src/index.ts", bundle.PackOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
