package cli

import (
	"runtime/debug"
	"testing"
)

// TestDevTunesTheCollectorUnlessGOGCIsSet pins devGCPercent's rule: `stead
// dev` sets its own GOGC only when the environment sets none, and puts back
// what it found when it returns.
func TestDevTunesTheCollectorUnlessGOGCIsSet(t *testing.T) {
	const mine = 73 // neither Go's default nor devGCPercent
	defer debug.SetGCPercent(debug.SetGCPercent(mine))
	current := func() int { p := debug.SetGCPercent(mine); debug.SetGCPercent(p); return p }

	restore := tuneGC(func(string) string { return "" })
	if got := current(); got != devGCPercent {
		t.Errorf("with GOGC unset, the server collects at %d, want %d", got, devGCPercent)
	}
	restore()
	if got := current(); got != mine {
		t.Errorf("after the server, GOGC is %d, want %d back", got, mine)
	}

	restore = tuneGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := current(); got != mine {
		t.Errorf("with GOGC set, the server changed the collector to %d", got)
	}
	restore()
}
