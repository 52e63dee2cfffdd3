package bundle

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"stead/runtime/typo"
)

// sourceExts are the extensions esbuild tries for an import that names
// none, in its order.
var sourceExts = []string{".tsx", ".ts", ".jsx", ".js", ".css", ".json", ".mjs", ".mts", ".cjs", ".cts"}

// missingFile explains a relative import esbuild could not resolve: no such
// file, and the nearest name in the folder it points into, as the import
// would spell it. ok is false for an import that is not relative.
func missingFile(spec, importer string) (msg string, ok bool) {
	if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
		return "", false
	}
	msg = "no such file: " + quote(spec)
	if importer != "" {
		msg += " (imported from " + filepath.ToSlash(filepath.Base(importer)) + ")"
	}
	dir, base := path.Split(spec)
	entries, err := os.ReadDir(filepath.Join(filepath.Dir(importer), filepath.FromSlash(dir)))
	if err != nil || importer == "" {
		return msg, true
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || n == "node_modules" {
			continue
		}
		if ext := filepath.Ext(n); !e.IsDir() && slices.Contains(sourceExts, ext) && !strings.Contains(base, ".") {
			n = strings.TrimSuffix(n, ext) // imported without its extension
		}
		names = append(names, n)
	}
	if near, ok := typo.DidYouMean(base, names); ok {
		msg += "; did you mean " + quote(dir+near) + "?"
	}
	return msg, true
}

func quote(s string) string { return `"` + s + `"` }
