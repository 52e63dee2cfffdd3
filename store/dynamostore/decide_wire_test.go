package dynamostore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"stead/runtime/engine"
	"stead/store"
	"stead/store/dynamostore"
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

// Runs awaiting an approval are not in the stall index: listing stalled
// runs, even past every lease, reads none of them, however many wait (the
// queries of the index's shards find no entry).
func TestStalledRunsSkipWaitingRuns(t *testing.T) {
	g := newGatedBench(t)
	ctx := context.Background()
	for i := range 20 {
		r, _, err := g.eng.StartRun(ctx, g.actor, engine.StartParams{Agent: "gated3", Input: json.RawMessage(`{"id":"o-1","kind":"json"}`), EndUserID: fmt.Sprintf("u%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.eng.Execute(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
	}
	m := newMeter(aws.Get(t).DynamoDB(), g.plain.Table())
	metered, err := dynamostore.New(aws.Get(t).DynamoDB(m.Option), dynamostore.Options{Table: g.plain.Table()})
	if err != nil {
		t.Fatal(err)
	}
	stalled, err := metered.ListStalledRuns(ctx, time.Now().Add(24*time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(stalled) != 0 {
		t.Fatalf("%d waiting runs listed as stalled", len(stalled))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.requests["BatchGetItem"] + m.requests["GetItem"]; n != 0 {
		t.Errorf("listing stalled runs made %d item reads (%.1f RU in all) with only waiting runs: %v", n, m.ru, m.requests)
	}
}
