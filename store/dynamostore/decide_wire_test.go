package dynamostore_test

import (
	"context"
	"encoding/json"
	"maps"
	"testing"

	"stead/runtime/engine"
	"stead/store"
)

// A person's decision, through the engine, is one read and one write on the
// wire: the approval and its run in one BatchGetItem, then the run item's
// conditional update.
func TestDecisionIsOneReadAndOneWrite(t *testing.T) {
	g := newGatedBench(t)
	ctx := context.Background()
	for _, approve := range []bool{true, false} {
		r, _, err := g.eng.StartRun(ctx, g.actor, engine.StartParams{Agent: "gated3", Input: json.RawMessage(`{"id":"o-1","kind":"json"}`), EndUserID: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.eng.Execute(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		paused, err := g.plain.GetRun(ctx, r.ID)
		if err != nil || paused.Status != store.RunAwaitingApproval {
			t.Fatalf("run %s is %s, want awaiting-approval (%v)", r.ID, paused.Status, err)
		}
		g.m.Reset()
		if _, err := g.eng.Decide(ctx, g.actor, engine.DecideParams{ApprovalID: paused.ApprovalID, Approve: approve}); err != nil {
			t.Fatal(err)
		}
		g.m.mu.Lock()
		got := maps.Clone(g.m.requests)
		g.m.mu.Unlock()
		want := map[string]int{"BatchGetItem": 1, "UpdateItem": 1}
		if !maps.Equal(got, want) {
			t.Errorf("approve=%v: requests %v, want %v", approve, got, want)
		}
	}
}
