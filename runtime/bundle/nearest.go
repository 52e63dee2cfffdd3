package bundle

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
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
	if near, ok := nearest(base, names); ok {
		msg += "; did you mean " + quote(dir+near) + "?"
	}
	return msg, true
}

func quote(s string) string { return `"` + s + `"` }

// nearest is the candidate closest to s, if one is close enough to be a typo
// of it (the rule runtime/agent's "did you mean" uses for config keys).
func nearest(s string, candidates []string) (string, bool) {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(1, min(3, len(s)/3)) {
		return "", false
	}
	return best, true
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and swaps of two neighbours each cost 1.
func editDistance(a, b string) int {
	ar, br := []rune(a), []rune(b)
	d := make([][]int, len(ar)+1)
	for i := range d {
		d[i] = make([]int, len(br)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ar); i++ {
		for j := 1; j <= len(br); j++ {
			cost := 1
			if ar[i-1] == br[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ar[i-1] == br[j-2] && ar[i-2] == br[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ar)][len(br)]
}
