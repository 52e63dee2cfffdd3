package dynamostore_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"stead/store"
	"stead/store/dynamostore"
)

// TestWebhookRequests: what each webhook operation sends and what it costs,
// by cause — the figures webhooks.go gives. A run that notifies nothing
// carries no outbox attribute and costs what it did; a notifying write
// costs the outbox index 1 unit when the run enters it and nothing while it
// stays; an ack that empties the entry costs the run item's unit and 1 for
// the index; a new delivery 3 (item, log, due), one put again 1, a try that
// moves NextAt 1 + 2, the one that settles it 1 + 1.
func TestWebhookRequests(t *testing.T) {
	t.Parallel()
	plain := fresh(t, dynamostore.Options{})
	m := newMeter(aws.Get(t).DynamoDB(), plain.Table())
	s, err := dynamostore.New(aws.Get(t).DynamoDB(m.Option), dynamostore.Options{Table: plain.Table()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	check := func(name string, wantReq map[string]int, wantWU map[string]float64) {
		t.Helper()
		m.mu.Lock()
		req, wu := maps.Clone(m.requests), maps.Clone(m.wu)
		m.mu.Unlock()
		maps.DeleteFunc(wu, func(_ string, u float64) bool { return u == 0 })
		if !maps.Equal(req, wantReq) {
			t.Errorf("%s: requests %v, want %v", name, req, wantReq)
		}
		if !maps.Equal(wu, wantWU) {
			t.Errorf("%s: write units %v, want %v", name, wu, wantWU)
		}
		m.Reset()
	}
	raw := newRawTable(t, plain)
	outboxAttrs := func(what string, want bool) {
		t.Helper()
		it := raw.get("R#r1", "R")
		for _, a := range []string{dynamostore.AttrOutboxPK, dynamostore.AttrOutboxSK, "oxa", "oxk", "oxt"} {
			if _, ok := it[a]; ok != want {
				t.Errorf("%s: run item has attribute %s: %v, want %v", what, a, ok, want)
			}
		}
	}
	notifying := func(typ string) store.Event {
		e := ev(typ)
		e.Notify = true
		return e
	}

	m.Reset()
	r := mustCreate(t, s, newRun("r1"), ev("run.created"))
	check("CreateRun, nothing notifies", map[string]int{"PutItem": 1}, map[string]float64{"PutItem run": 1, "index byProject": 1, "index stall": 1})
	r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{ev("run.started")}})
	if err != nil {
		t.Fatal(err)
	}
	check("CommitRun, nothing notifies", map[string]int{"UpdateItem": 1}, map[string]float64{"UpdateItem run": 1})
	outboxAttrs("a run that notified nothing", false)

	r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{notifying("approval.requested")}})
	if err != nil {
		t.Fatal(err)
	}
	check("CommitRun, entering the outbox", map[string]int{"UpdateItem": 1}, map[string]float64{"UpdateItem run": 1, "index outbox": 1})
	outboxAttrs("a run in the outbox", true)
	later := notifying("run.succeeded")
	later.At = t0.Add(time.Minute)
	_, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{later}})
	if err != nil {
		t.Fatal(err)
	}
	check("CommitRun, in the outbox already", map[string]int{"UpdateItem": 1}, map[string]float64{"UpdateItem run": 1})

	es, err := s.ListOutbox(ctx, 10)
	if err != nil || fmt.Sprint(es) != "[{r1 3}]" {
		t.Fatalf("outbox %v, %v; want [{r1 3}]", es, err)
	}
	check("ListOutbox", map[string]int{"Query": dynamostore.DefaultShards}, map[string]float64{})
	if err := s.AckOutbox(ctx, "r1", 3); err != nil {
		t.Fatal(err)
	}
	check("AckOutbox, short of the last", map[string]int{"UpdateItem": 2}, map[string]float64{"UpdateItem failed": 1, "UpdateItem run": 1, "index outbox": 1})
	if err := s.AckOutbox(ctx, "r1", 4); err != nil {
		t.Fatal(err)
	}
	check("AckOutbox", map[string]int{"UpdateItem": 1}, map[string]float64{"UpdateItem run": 1, "index outbox": 1})
	outboxAttrs("a run acked", false)

	ep := store.Endpoint{
		ID: "whe_a", ProjectID: "p1", URL: "https://hooks.example.com/a",
		Secrets:   []store.EndpointSecret{{Secret: "whsec_c2VjcmV0LW9mLWVuZHBvaW50", CreatedAt: t0}},
		CreatedAt: t0, UpdatedAt: t0,
	}
	if err := s.CreateEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	check("CreateEndpoint", map[string]int{"PutItem": 1}, map[string]float64{"PutItem P/WH": 1})

	d := store.Delivery{
		ID: "msg_1", ProjectID: "p1", EndpointID: "whe_a", RunID: "r1", Seq: 3, Type: "approval.requested",
		Body: json.RawMessage(`{"type":"approval.requested","timestamp":"2026-11-29T12:00:00Z","data":{"runId":"r1"}}`), Status: store.DeliveryPending,
		NextAt: t0, CreatedAt: t0, UpdatedAt: t0,
	}
	if err := s.PutDeliveries(ctx, []store.Delivery{d}); err != nil {
		t.Fatal(err)
	}
	check("PutDeliveries, new", map[string]int{"PutItem": 1}, map[string]float64{"PutItem WD/WD": 1, "index byProject": 1, "index due": 1})
	if err := s.PutDeliveries(ctx, []store.Delivery{d}); err != nil {
		t.Fatal(err)
	}
	check("PutDeliveries, again", map[string]int{"PutItem": 1}, map[string]float64{"PutItem failed": 1})
	if got, _ := num(raw.get("WD#msg_1", "WD"), dynamostore.AttrTTL); got != t0.Add(dynamostore.DefaultRetention).Unix() {
		t.Errorf("delivery ttl %d, want %d (its last time + Retention)", got, t0.Add(dynamostore.DefaultRetention).Unix())
	}

	due, err := s.ListDueDeliveries(ctx, t0, 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due deliveries %v, %v; want msg_1", due, err)
	}
	check("ListDueDeliveries", map[string]int{"Query": dynamostore.DefaultShards, "BatchGetItem": 1}, map[string]float64{})
	d = due[0]
	d.NextAt = t0.Add(time.Minute)
	if d, err = s.UpdateDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	check("UpdateDelivery, taken", map[string]int{"UpdateItem": 1}, map[string]float64{"UpdateItem WD/WD": 1, "index due": 2})
	d = d.Record(store.Attempt{At: t0, Status: 200, LatencyMs: 12})
	d.Status = store.DeliveryDelivered
	if _, err = s.UpdateDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	check("UpdateDelivery, delivered", map[string]int{"UpdateItem": 1}, map[string]float64{"UpdateItem WD/WD": 1, "index due": 1})
	if it := raw.get("WD#msg_1", "WD"); it[dynamostore.AttrDuePK] != nil || it[dynamostore.AttrDueSK] != nil {
		t.Errorf("a delivered delivery keeps its due keys: %v %v", it[dynamostore.AttrDuePK], it[dynamostore.AttrDueSK])
	}

	if err := s.DeleteEndpoint(ctx, "p1", "whe_a"); err != nil {
		t.Fatal(err)
	}
	check("DeleteEndpoint", map[string]int{"Query": 1, "*dynamodb.BatchWriteItemInput": 1, "DeleteItem": 1}, map[string]float64{"DeleteItem P/WH": 1})
}
