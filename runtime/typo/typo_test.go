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
	} {
		got, ok := typo.DidYouMean(tc.s, tc.cands)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("DidYouMean(%q, %q) = %q, %v; want %q, %v", tc.s, tc.cands, got, ok, tc.want, tc.wantOK)
		}
	}
	if d := typo.Distance("ab", "ba"); d != 1 {
		t.Errorf("a swap costs %d, want 1", d)
	}
}
