package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"stead/approvals"
	"stead/store"
)

// webhookTests: endpoints, deliveries and the outbox. The outbox is the
// point: a run enters it in the same write that appends a notifying event,
// so a write that lost appends nothing and marks nothing.
var webhookTests = []test{
	{"Webhook/Endpoints", testEndpoints},
	{"Webhook/Deliveries", testDeliveries},
	{"Webhook/DeliveryLog", testDeliveryLog},
	{"Webhook/OutboxCommit", testOutboxCommit},
	{"Webhook/OutboxDecide", testOutboxDecide},
	{"Webhook/OutboxLostWrite", testOutboxLostWrite},
	{"Webhook/OutboxCreate", testOutboxCreate},
	{"Webhook/ConcurrentUpdates", testWebhookConcurrentUpdates},
}

func newEndpoint(p, id string) store.Endpoint {
	return store.Endpoint{
		ID: id, ProjectID: p, URL: "https://hooks.example.com/" + id, Events: []string{"approval.requested"},
		Secrets:   []store.EndpointSecret{{Secret: "whsec_c2VjcmV0LW9mLWVuZHBvaW50", CreatedAt: t0}},
		CreatedAt: t0, UpdatedAt: t0,
	}
}

func testEndpoints(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := newEndpoint("p1", "whe_a"), newEndpoint("p1", "whe_b")
	b.CreatedAt = at(time.Second)
	noErr(t, s.CreateEndpoint(ctx, a), "create a")
	noErr(t, s.CreateEndpoint(ctx, b), "create b")
	noErr(t, s.CreateEndpoint(ctx, newEndpoint("p2", "whe_other")), "create in p2")
	wantErr(t, s.CreateEndpoint(ctx, a), store.ErrExists, "create a twice")
	bad := newEndpoint("p1", "whe_bad")
	bad.URL = "ftp://x"
	if err := s.CreateEndpoint(ctx, bad); err == nil {
		t.Fatal("an endpoint with an ftp URL was stored")
	}

	got, err := s.GetEndpoint(ctx, "p1", "whe_a")
	noErr(t, err, "get a")
	a.Version = 1
	same(t, got, a, "stored endpoint")
	_, err = s.GetEndpoint(ctx, "p2", "whe_a")
	wantErr(t, err, store.ErrNotFound, "get a from another project")

	list, err := s.ListEndpoints(ctx, "p1")
	noErr(t, err, "list")
	sameIDs(t, []string{list[0].ID, list[1].ID}, []string{"whe_a", "whe_b"}, "endpoints, oldest first")
	eq(t, len(list), 2, "endpoints of p1")

	got.DisabledAt, got.DisabledReason = at(time.Minute), "it answered 410 Gone"
	created := got.CreatedAt
	got.CreatedAt = at(time.Hour) // an update never moves when it was made
	upd, err := s.UpdateEndpoint(ctx, got)
	noErr(t, err, "update")
	eq(t, upd.Version, int64(2), "version after update")
	same(t, upd.CreatedAt, created, "createdAt after an update that said otherwise")
	_, err = s.UpdateEndpoint(ctx, got)
	wantErr(t, err, store.ErrConflict, "update on a stale version")
	again, err := s.GetEndpoint(ctx, "p1", "whe_a")
	noErr(t, err, "get after update")
	same(t, again, upd, "endpoint after update")

	noErr(t, s.DeleteEndpoint(ctx, "p1", "whe_a"), "delete")
	wantErr(t, s.DeleteEndpoint(ctx, "p1", "whe_a"), store.ErrNotFound, "delete twice")
	_, err = s.GetEndpoint(ctx, "p1", "whe_a")
	wantErr(t, err, store.ErrNotFound, "get after delete")
}

func newDelivery(p, ep, id string, created time.Time) store.Delivery {
	return store.Delivery{
		ID: id, ProjectID: p, EndpointID: ep, RunID: "r1", Seq: 3, Type: "approval.requested",
		Body: json.RawMessage(`{"type":"approval.requested"}`), Status: store.DeliveryPending,
		NextAt: created, Version: 1, CreatedAt: created, UpdatedAt: created,
	}
}

// testDeliveries: a delivery put twice is stored once; the due list has
// the pending ones whose time has come, soonest first; an update is
// conditional and moves a delivery out of the due list once it is settled.
func testDeliveries(t *testing.T, s store.Store) {
	ctx := t.Context()
	d1 := newDelivery("p1", "whe_a", "msg_1", at(time.Second))
	d2 := newDelivery("p1", "whe_a", "msg_2", t0)
	d3 := newDelivery("p2", "whe_x", "msg_3", at(time.Hour))
	noErr(t, s.PutDeliveries(ctx, []store.Delivery{d1, d2, d3}), "put")
	changed := d1
	changed.Type = "approval.changed"
	noErr(t, s.PutDeliveries(ctx, []store.Delivery{changed}), "put msg_1 again")
	got, err := s.GetDelivery(ctx, "p1", "msg_1")
	noErr(t, err, "get msg_1")
	same(t, got, d1, "a delivery put twice keeps the first")
	_, err = s.GetDelivery(ctx, "p2", "msg_1")
	wantErr(t, err, store.ErrNotFound, "get from another project")

	due := func(now time.Time) []string {
		t.Helper()
		ds, err := s.ListDueDeliveries(ctx, now, 10)
		noErr(t, err, "list due")
		var ids []string
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		return ids
	}
	sameIDs(t, due(at(time.Minute)), []string{"msg_2", "msg_1"}, "due, soonest first")
	sameIDs(t, due(at(time.Second)), []string{"msg_2", "msg_1"}, "due at msg_1's NextAt")
	sameIDs(t, due(at(time.Second-time.Nanosecond)), []string{"msg_2"}, "due just before msg_1's NextAt")
	sameIDs(t, due(at(2*time.Hour)), []string{"msg_2", "msg_1", "msg_3"}, "due later, every project")

	taken := got
	taken.NextAt = at(time.Minute + 30*time.Second)
	taken, err = s.UpdateDelivery(ctx, taken)
	noErr(t, err, "take msg_1")
	eq(t, taken.Version, int64(2), "version after taking")
	_, err = s.UpdateDelivery(ctx, got)
	wantErr(t, err, store.ErrConflict, "take msg_1 on a stale version")
	foreign := taken
	foreign.ProjectID = "p2"
	foreign.NextAt = at(5 * time.Minute)
	_, err = s.UpdateDelivery(ctx, foreign)
	wantErr(t, err, store.ErrNotFound, "update msg_1 as another project's")
	got, err = s.GetDelivery(ctx, "p1", "msg_1")
	noErr(t, err, "get msg_1")
	same(t, got, taken, "msg_1 after an update as another project's")
	sameIDs(t, due(at(time.Minute)), []string{"msg_2"}, "due while msg_1 is taken")

	done := taken.Record(store.Attempt{At: at(time.Minute), Status: 200, LatencyMs: 12, Response: "ok"})
	done.Status = store.DeliveryDelivered
	done, err = s.UpdateDelivery(ctx, done)
	noErr(t, err, "record msg_1 delivered")
	eq(t, done.NextAt.IsZero(), true, "a delivered delivery is due no more")
	sameIDs(t, due(at(3*time.Hour)), []string{"msg_2", "msg_3"}, "due after msg_1 was delivered")
	stored, err := s.GetDelivery(ctx, "p1", "msg_1")
	noErr(t, err, "get msg_1")
	same(t, stored, done, "stored delivered delivery")
	eq(t, stored.Tries, 1, "tries")
}

// testDeliveryLog: an endpoint's deliveries, newest first, paged; deleting
// the endpoint deletes them.
func testDeliveryLog(t *testing.T, s store.Store) {
	ctx := t.Context()
	noErr(t, s.CreateEndpoint(ctx, newEndpoint("p1", "whe_a")), "create endpoint")
	var ds []store.Delivery
	for i := range 7 {
		ds = append(ds, newDelivery("p1", "whe_a", fmt.Sprintf("msg_%d", i), at(time.Duration(i)*time.Second)))
	}
	ds = append(ds, newDelivery("p1", "whe_b", "msg_b", t0))
	noErr(t, s.PutDeliveries(ctx, ds), "put")
	ids := collect(t, 3, func(d store.Delivery) string { return d.ID }, func(cursor string) (store.Page[store.Delivery], error) {
		return s.ListDeliveries(ctx, "p1", "whe_a", cursor, 3)
	})
	sameIDs(t, ids, []string{"msg_6", "msg_5", "msg_4", "msg_3", "msg_2", "msg_1", "msg_0"}, "log of whe_a, newest first")
	noErr(t, s.DeleteEndpoint(ctx, "p1", "whe_a"), "delete endpoint")
	page, err := s.ListDeliveries(ctx, "p1", "whe_a", "", 10)
	noErr(t, err, "log after delete")
	eq(t, len(page.Items), 0, "deliveries left of a deleted endpoint")
	due, err := s.ListDueDeliveries(ctx, at(time.Hour), 10)
	noErr(t, err, "due after delete")
	sameIDs(t, []string{due[0].ID}, []string{"msg_b"}, "due after delete: another endpoint's")
	eq(t, len(due), 1, "due after delete")
}

func notifying(typ string) store.Event {
	e := event(typ)
	e.Notify = true
	return e
}

func outbox(t testing.TB, s store.Store) map[string]int64 {
	t.Helper()
	es, err := s.ListOutbox(t.Context(), 100)
	noErr(t, err, "list outbox")
	out := map[string]int64{}
	for _, e := range es {
		out[e.RunID] = e.FromSeq
	}
	return out
}

// testOutboxCommit: a commit with notifying events puts its run in the
// outbox from the first of them; one without leaves it out; an ack takes
// what it covers out, and a later notifying event brings the run back
// from there.
func testOutboxCommit(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0), event("run.created"))
	r, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{event("run.started")}})
	noErr(t, err, "commit without notifying events")
	same(t, outbox(t, s), map[string]int64{}, "outbox after a commit that notifies nothing")

	a := newApproval("apr1", r, t0, at(15*time.Minute))
	r.Status, r.ApprovalID = store.RunAwaitingApproval, "apr1"
	r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{event("step.completed"), notifying("approval.requested")}, Approval: &a})
	noErr(t, err, "pause")
	same(t, outbox(t, s), map[string]int64{"r1": 4}, "outbox after the pause (events 3 and 4, 4 notifies)")

	noErr(t, s.AckOutbox(ctx, "r1", 3), "ack up to 3")
	same(t, outbox(t, s), map[string]int64{"r1": 4}, "an ack short of the notifying event keeps the run")
	noErr(t, s.AckOutbox(ctx, "r1", 4), "ack up to 4")
	same(t, outbox(t, s), map[string]int64{}, "outbox after the ack")
	noErr(t, s.AckOutbox(ctx, "r1", 4), "ack again")

	r.Status, r.ApprovalID = store.RunRunning, ""
	r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{notifying("approval.approved"), event("run.resumed")}})
	noErr(t, err, "commit")
	_, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{notifying("run.succeeded")}})
	noErr(t, err, "commit")
	same(t, outbox(t, s), map[string]int64{"r1": 5}, "outbox after two more notifying commits")
	noErr(t, s.AckOutbox(ctx, "r1", 5), "ack the first")
	same(t, outbox(t, s), map[string]int64{"r1": 6}, "an ack of the first leaves the later one")
}

// testOutboxDecide: a decision's notifying events put the run in the
// outbox in the decision's write; so does a vote's.
func testOutboxDecide(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, _ = gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	p := decide("p1", "apr1", approvals.Approved, at(time.Minute))
	p.Events[0].Notify = true
	_, _, err := s.DecideApproval(ctx, p)
	noErr(t, err, "approve")
	same(t, outbox(t, s), map[string]int64{"r1": 3}, "outbox after the decision")

	_, a := quorumRun(t, s, "r2", "apr2", approvals.Requirement{Group: "finance", Min: 2, Eligible: voters("m1", "m2")})
	v := vote(a, "m1", at(time.Minute))
	v.Events[0].Notify = true
	_, _, err = s.DecideApproval(ctx, v)
	noErr(t, err, "vote")
	same(t, outbox(t, s), map[string]int64{"r1": 3, "r2": 3}, "outbox after a vote")
}

// testOutboxLostWrite: a commit or decision that loses leaves no mark.
func testOutboxLostWrite(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0), event("run.created"))
	stale := r
	_, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{event("run.started")}})
	noErr(t, err, "commit")
	_, err = s.CommitRun(ctx, store.RunCommit{Run: stale, Events: []store.Event{notifying("run.succeeded")}})
	wantErr(t, err, store.ErrConflict, "stale commit")
	same(t, outbox(t, s), map[string]int64{}, "outbox after a stale commit")

	_, _ = gatedRun(t, s, "p1", "r2", "apr2", t0, at(15*time.Minute))
	late := decide("p1", "apr2", approvals.Approved, at(time.Hour))
	late.Events[0].Notify = true
	_, _, err = s.DecideApproval(ctx, late)
	wantErr(t, err, approvals.ErrExpired, "approve past the deadline")
	same(t, outbox(t, s), map[string]int64{}, "outbox after a refused decision")
}

// testOutboxCreate: a run created with notifying events enters the outbox
// in its create, from the first of them; a create that loses marks
// nothing; the oldest mark is listed first; an ack short of an entry's
// start leaves it, and an ack of a run that is not in the outbox changes
// nothing.
func testOutboxCreate(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRun("r1", "p1", t0)
	r.IdempotencyKey = "idem-1"
	r = createRun(t, s, r, event("run.created"), notifying("run.queued"), event("run.started"), notifying("approval.requested"))
	same(t, outbox(t, s), map[string]int64{"r1": 2}, "outbox after a create with notifying events")

	again := newRun("r2", "p1", t0)
	again.IdempotencyKey = "idem-1"
	_, err := s.CreateRun(ctx, again, []store.Event{notifying("run.queued")})
	wantErr(t, err, store.ErrExists, "create with a key taken")
	same(t, outbox(t, s), map[string]int64{"r1": 2}, "outbox after a create that lost")

	early := notifying("run.queued")
	early.At = t0.Add(-time.Hour)
	r0 := createRun(t, s, newRun("r0", "p1", t0), event("run.created"), early)
	es, err := s.ListOutbox(ctx, 10)
	noErr(t, err, "list outbox")
	sameIDs(t, []string{es[0].RunID, es[1].RunID}, []string{"r0", "r1"}, "outbox, oldest mark first")
	// A later notifying write of a run in the outbox keeps its mark: it is
	// not sent to the back behind runs that waited less.
	late := notifying("run.succeeded")
	late.At = at(time.Hour)
	_, err = s.CommitRun(ctx, store.RunCommit{Run: r0, Events: []store.Event{late}})
	noErr(t, err, "commit a later notifying event of r0")
	es, err = s.ListOutbox(ctx, 1)
	noErr(t, err, "list outbox, one")
	eq(t, len(es), 1, "outbox entries within the limit")
	eq(t, es[0].RunID, "r0", "the oldest entry, after a later notifying write of it")
	noErr(t, s.AckOutbox(ctx, "r0", 3), "ack r0")

	noErr(t, s.AckOutbox(ctx, "r1", 1), "ack before the first notifying event")
	same(t, outbox(t, s), map[string]int64{"r1": 2}, "outbox after an ack short of the entry")
	_, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{event("step.completed"), event("run.paused"), notifying("approval.approved")}})
	noErr(t, err, "commit")
	same(t, outbox(t, s), map[string]int64{"r1": 2}, "a later notifying write keeps the entry's start")
	noErr(t, s.AckOutbox(ctx, "r1", 3), "ack up to 3")
	same(t, outbox(t, s), map[string]int64{"r1": 4}, "outbox after an ack of the first two")
	noErr(t, s.AckOutbox(ctx, "r1", 2), "a stale ack")
	same(t, outbox(t, s), map[string]int64{"r1": 4}, "a stale ack moves no entry back")
	noErr(t, s.AckOutbox(ctx, "r2", 9), "ack a run that does not exist")
	noErr(t, s.AckOutbox(ctx, "r0", 9), "ack a run no longer in the outbox")
	noErr(t, s.AckOutbox(ctx, "r1", 5), "ack short of the last")
	same(t, outbox(t, s), map[string]int64{"r1": 6}, "outbox after an ack short of the last")
	noErr(t, s.AckOutbox(ctx, "r1", 7), "ack all")
	same(t, outbox(t, s), map[string]int64{}, "outbox after acking all")
	_, err = s.GetRun(ctx, "r2")
	wantErr(t, err, store.ErrNotFound, "get a run only acked")
}

// testWebhookConcurrentUpdates: of 20 updates of one endpoint, and of one
// delivery, on the same version, exactly one wins — also when the losers'
// writes are tried together with the winner's (bbolt's group commit runs a
// write again when another in its batch fails).
func testWebhookConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	e := newEndpoint("p1", "whe_a")
	noErr(t, s.CreateEndpoint(ctx, e), "create endpoint")
	e.Version = 1
	d := newDelivery("p1", "whe_a", "msg_1", t0)
	noErr(t, s.PutDeliveries(ctx, []store.Delivery{d}), "put delivery")
	const n = 20
	errs := race(n, func(i int) error {
		next := e
		next.FailingSince = at(time.Duration(i) * time.Second)
		_, err := s.UpdateEndpoint(ctx, next)
		return err
	})
	eq(t, len(winners(t, errs, store.ErrConflict)), 1, "endpoint updates that won")
	errs = race(n, func(i int) error {
		next := d
		next.NextAt = at(time.Duration(i) * time.Second)
		_, err := s.UpdateDelivery(ctx, next)
		return err
	})
	eq(t, len(winners(t, errs, store.ErrConflict)), 1, "delivery updates that won")
}
