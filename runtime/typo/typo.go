// Package typo is the one "did you mean" rule of Stead's messages: a
// config key, an agent or tool name, an import path. A candidate is
// offered when it is within an edit distance that grows with the word
// (1 for short words, at most 3), letter case aside.
package typo

import "strings"

// DidYouMean returns the candidate closest to s, if it is close enough to
// be a likely typo of it.
func DidYouMean(s string, candidates []string) (string, bool) {
	best, bestD := "", -1
	for _, c := range candidates {
		d := Distance(strings.ToLower(s), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(1, min(3, len(s)/3)) {
		return "", false
	}
	return best, true
}

// Distance is the optimal string alignment distance: insertions,
// deletions, substitutions and swaps of two neighbours each cost 1.
func Distance(a, b string) int {
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
