package typo_test

import (
	"testing"

	"stead/runtime/typo"
)

func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		s      string
		cands  []string
		want   string
		wantOK bool
	}{
		{"helpres", []string{"helpers", "money"}, "helpers", true},
		{"efect", []string{"effect", "source"}, "effect", true},
		{"Effect", []string{"effect"}, "effect", true},
		{"ab", []string{"xy"}, "", false},
		{"steps", []string{"tools", "models"}, "", false},
		{"x", nil, "", false},
		// Letter case aside: an all-capitals typo is one edit from its word.
		{"EFECT", []string{"effect"}, "effect", true},
		// Ties go to the first candidate.
		{"modle", []string{"model", "mode"}, "model", true},
		// Long words allow at most 3 edits: this is 4.
		{"retentionDays", []string{"retentionHours"}, "", false},
	} {
		got, ok := typo.DidYouMean(tc.s, tc.cands)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("DidYouMean(%q, %q) = %q, %v; want %q, %v", tc.s, tc.cands, got, ok, tc.want, tc.wantOK)
		}
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"ab", "ba", 1}, // a swap of two neighbours
		{"ab", "bc", 2}, // not a swap: "b" moved, "a" became "c"
	} {
		if d := typo.Distance(tc.a, tc.b); d != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.want)
		}
	}
}
