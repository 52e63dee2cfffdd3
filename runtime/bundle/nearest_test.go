package bundle_test

import (
	"context"
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
	for _, tc := range []struct{ name, imp, want, not string }{
		{"typo", `"./helpres"`, `handlers.ts:2:19: no such file: "./helpres" (imported from handlers.ts); did you mean "./helpers"?`, "Node builtins"},
		{"typo in a folder", `"./lib/ordrs"`, `no such file: "./lib/ordrs" (imported from handlers.ts); did you mean "./lib/orders"?`, "Node builtins"},
		{"with its extension", `"./helpres.ts"`, `did you mean "./helpers.ts"?`, "Node builtins"},
		{"nothing near", `"./zzzzzzzz"`, `no such file: "./zzzzzzzz" (imported from handlers.ts)`, "did you mean"},
		{"a package", `"left-pad"`, `Could not resolve "left-pad"; Node builtins are not available, and packages must be installed (npm install)`, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := writeSources(t, map[string]string{
				"handlers.ts":   "// Calls a helper.\nimport { x } from " + tc.imp + ";\nexport function f() { return x }\n",
				"helpers.ts":    "export const x = 1;\n",
				"lib/orders.ts": "export const x = 2;\n",
			})
			_, err := bundle.Pack(context.Background(), filepath.Join(dir, "handlers.ts"), bundle.PackOptions{})
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
