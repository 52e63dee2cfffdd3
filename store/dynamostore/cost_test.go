package dynamostore_test

import (
	"encoding/json"
	"maps"
	"testing"

	"stead/runtime/engine"
	"stead/store"
)

// The cost tests pin what a run costs on DynamoDB, as the meter of
// BenchmarkGatedRunCost counts it: the requests by operation and the write
// units by cause, exactly. A change that makes a run dearer (a lease
// renewal that moves the stall-index bound, an item grown past a kilobyte,
// one read more) fails here rather than waiting for someone to run the
// benchmark; one that makes it cheaper updates these figures and
// docs/performance.md.

var costInput = json.RawMessage(`{"id":"o-1","kind":"json"}`)

// checkCost runs run twice, the first to warm the engine's caches, and
// checks what the second cost.
func checkCost(t *testing.T, g gatedBench, run func(), wantRequests map[string]int, wantWU map[string]float64, maxRU float64) {
	t.Helper()
	run()
	g.m.Reset()
	run()
	g.m.mu.Lock()
	requests, wu := maps.Clone(g.m.requests), maps.Clone(g.m.wu)
	g.m.mu.Unlock()
	maps.DeleteFunc(wu, func(_ string, u float64) bool { return u == 0 })
	_, total, ru := g.m.Totals()
	if !maps.Equal(requests, wantRequests) || !maps.Equal(wu, wantWU) || ru > maxRU {
		t.Errorf("the run cost %.0f write units and %.1f read units: %s\nwant requests %v, write units %v, at most %.0f read units",
			total, ru, g.m.Breakdown(1), wantRequests, wantWU, maxRU)
	}
}

// TestGatedRunCost: BenchmarkGatedRunCost's run (read, read, gated write;
// approved) costs 20 write units.
func TestGatedRunCost(t *testing.T) {
	t.Parallel()
	g := newGatedBench(t)
	checkCost(t, g, func() { g.run(t, "gated3", costInput, func() {}) },
		map[string]int{"BatchGetItem": 3, "GetItem": 5, "PutItem": 4, "Query": 1, "UpdateItem": 5},
		map[string]float64{
			"PutItem approval": 1, "PutItem commit": 3, "PutItem run": 1, "UpdateItem run": 5,
			"index byProject": 2, "index due": 2, "index pending": 2, "index stall": 4,
		}, 11)
}

// TestUngatedRunCost: the same run without its gate costs 10. Its reads'
// commit renews the lease of a running run, and the stall index's bound
// stays where the claim put it: moving it would cost two index writes a
// commit.
func TestUngatedRunCost(t *testing.T) {
	t.Parallel()
	g := newGatedBench(t)
	ctx := t.Context()
	checkCost(t, g, func() {
		r, _, err := g.eng.StartRun(ctx, g.actor, engine.StartParams{Agent: "ungated3", Input: costInput, EndUserID: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.eng.Execute(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if done, err := g.plain.GetRun(ctx, r.ID); err != nil || done.Status != store.RunSucceeded {
			t.Fatalf("run %s is %s, want succeeded (%v, %v)", r.ID, done.Status, done.Error, err)
		}
	},
		map[string]int{"GetItem": 3, "PutItem": 3, "Query": 1, "UpdateItem": 3},
		map[string]float64{"PutItem commit": 3, "PutItem run": 1, "UpdateItem run": 3, "index byProject": 1, "index stall": 2},
		11)
}
