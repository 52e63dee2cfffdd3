package dynamostore_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/approvals"
	"stead/store"
	"stead/store/dynamostore"
)

const day = 24 * time.Hour

// rawTable reads a store's table around the store.
type rawTable struct {
	t  *testing.T
	db *dynamodb.Client
	s  *dynamostore.Store
}

func newRawTable(t *testing.T, s *dynamostore.Store) rawTable {
	return rawTable{t: t, db: aws.Get(t).DynamoDB(), s: s}
}

func avStr(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// get is the item at pk, sk; it fails the test if there is none.
func (r rawTable) get(pk, sk string) map[string]types.AttributeValue {
	r.t.Helper()
	out, err := r.db.GetItem(r.t.Context(), &dynamodb.GetItemInput{TableName: awssdk.String(r.s.Table()), ConsistentRead: awssdk.Bool(true),
		Key: map[string]types.AttributeValue{dynamostore.AttrPK: avStr(pk), dynamostore.AttrSK: avStr(sk)}})
	if err != nil {
		r.t.Fatal(err)
	}
	if len(out.Item) == 0 {
		r.t.Fatalf("no item %s %s", pk, sk)
	}
	return out.Item
}

// scan is every item of the table.
func (r rawTable) scan() []map[string]types.AttributeValue {
	r.t.Helper()
	var (
		out   []map[string]types.AttributeValue
		start map[string]types.AttributeValue
	)
	for {
		res, err := r.db.Scan(r.t.Context(), &dynamodb.ScanInput{TableName: awssdk.String(r.s.Table()), ExclusiveStartKey: start, ConsistentRead: awssdk.Bool(true)})
		if err != nil {
			r.t.Fatal(err)
		}
		out = append(out, res.Items...)
		if res.LastEvaluatedKey == nil {
			return out
		}
		start = res.LastEvaluatedKey
	}
}

// partition is the items of one partition whose sort key starts with prefix.
func (r rawTable) partition(pk, prefix string) []map[string]types.AttributeValue {
	r.t.Helper()
	var out []map[string]types.AttributeValue
	for _, it := range r.scan() {
		if str(it, dynamostore.AttrPK) == pk && strings.HasPrefix(str(it, dynamostore.AttrSK), prefix) {
			out = append(out, it)
		}
	}
	return out
}

func str(it map[string]types.AttributeValue, attr string) string {
	if v, ok := it[attr].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// num is a number attribute, and whether there is one.
func num(it map[string]types.AttributeValue, attr string) (int64, bool) {
	v, ok := it[attr].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}

// ttl is an item's ttl; 0 for none.
func ttl(it map[string]types.AttributeValue) int64 {
	n, _ := num(it, dynamostore.AttrTTL)
	return n
}

func name(it map[string]types.AttributeValue) string {
	return str(it, dynamostore.AttrPK) + " " + str(it, dynamostore.AttrSK)
}

func pendingApproval(id, runID string, requested, expires time.Time) approvals.Approval {
	return approvals.Approval{ID: id, ProjectID: "p1", RunID: runID, Status: approvals.Pending, Input: json.RawMessage(`{"amount":42}`),
		RequestedAt: requested, ExpiresAt: expires}
}

// TestRetentionTTL follows a gated run from creation to success and checks
// each item's ttl as it goes: the run item gets one only from the write
// that finishes the run (finishedAt + Retention); its idempotency record,
// commit items and approvals carry the run's keep ttl from the start, which
// lies at least a keep window past anything the run waits for, so a pending
// approval's item outlives its deadline by weeks.
func TestRetentionTTL(t *testing.T) {
	t.Parallel()
	const retention = 48 * time.Hour
	s := fresh(t, dynamostore.Options{Retention: retention})
	raw := newRawTable(t, s)
	ctx := t.Context()
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	run := func() map[string]types.AttributeValue { t.Helper(); return raw.get("R#r1", "R") }
	noRunTTL := func(when string) {
		t.Helper()
		if n := ttl(run()); n != 0 {
			t.Fatalf("run item %s: ttl %d, want none (the run is not finished)", when, n)
		}
	}

	r := newRun("r1")
	r.IdempotencyKey = "idem-1"
	r = mustCreate(t, s, r, ev("run.created"))
	noRunTTL("after create")
	keep, ok := num(run(), "kx")
	// The horizon of a new run is its lease (t0+1m); two keep windows past it.
	if want := at(time.Minute).Add(retention + 2*dynamostore.KeepWindow).Unix(); !ok || keep != want {
		t.Fatalf("run's keep ttl %d (%v), want %d: the lease + Retention + 2 keep windows", keep, ok, want)
	}
	if got := ttl(raw.get("P#p1", "I#idem-1")); got != keep {
		t.Errorf("idempotency record ttl %d, want the run's keep ttl %d", got, keep)
	}

	// A step: a commit item; the run goes on.
	r, err := s.ClaimRun(ctx, store.ClaimParams{RunID: "r1", Owner: "w", Now: at(time.Minute), Until: at(6 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	noRunTTL("after a claim")
	r.Cursor, r.UpdatedAt = 1, at(2*time.Minute)
	st := store.Step{Index: 0, ID: "lookup", Output: json.RawMessage(`{"order":"o-1"}`), CompletedAt: at(2 * time.Minute)}
	if r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{ev("step.completed")}, Steps: []store.Step{st}}); err != nil {
		t.Fatal(err)
	}
	noRunTTL("after a step")

	// A pause: the approval item, pending until the decision.
	a := pendingApproval("apr1", "r1", at(3*time.Minute), at(3*time.Minute+7*day))
	r.Status, r.ApprovalID, r.UpdatedAt = store.RunAwaitingApproval, "apr1", at(3*time.Minute)
	if r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &a, Events: []store.Event{ev("approval.requested")}}); err != nil {
		t.Fatal(err)
	}
	noRunTTL("while awaiting approval")
	apr := ttl(raw.get("A#apr1", "A"))
	if apr != keep {
		t.Errorf("approval item ttl %d, want the run's keep ttl %d", apr, keep)
	}
	if min := a.ExpiresAt.Add(retention + dynamostore.KeepWindow).Unix(); apr < min {
		t.Errorf("pending approval's ttl %v is less than a keep window past its deadline %v", time.Unix(apr, 0).UTC(), a.ExpiresAt)
	}

	// Approved: the run goes on, still without a ttl.
	if _, r, err = s.DecideApproval(ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "p1", ApprovalID: "apr1", Status: approvals.Approved, By: "k1", At: at(10 * time.Minute)},
		RunStatus: store.RunQueued, LeaseUntil: at(11 * time.Minute),
	}); err != nil {
		t.Fatal(err)
	}
	noRunTTL("after an approval")
	if r, err = s.ClaimRun(ctx, store.ClaimParams{RunID: "r1", Owner: "w", Now: at(11 * time.Minute), Until: at(16 * time.Minute)}); err != nil {
		t.Fatal(err)
	}

	// The last step finishes the run: its item may go Retention later.
	finished := at(12 * time.Minute)
	r.Cursor, r.Status, r.UpdatedAt, r.FinishedAt = 2, store.RunSucceeded, finished, finished
	r.LeaseOwner, r.LeaseUntil, r.Output = "", time.Time{}, json.RawMessage(`{"ok":true}`)
	st = store.Step{Index: 1, ID: "apply", Output: json.RawMessage(`{"ok":true}`), CompletedAt: finished}
	if _, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{ev("step.completed"), ev("run.succeeded")}, Steps: []store.Step{st}}); err != nil {
		t.Fatal(err)
	}
	if got, want := ttl(run()), finished.Add(retention).Unix(); got != want {
		t.Fatalf("finished run's ttl %d, want finishedAt + Retention = %d", got, want)
	}
	commits := raw.partition("R#r1", "E#")
	if len(commits) < 2 {
		t.Fatalf("%d commit items, want 2", len(commits))
	}
	for _, it := range commits {
		if got := ttl(it); got != keep {
			t.Errorf("commit item %s: ttl %d, want the run's keep ttl %d", name(it), got, keep)
		}
		if ttl(it) <= ttl(run()) {
			t.Errorf("commit item %s expires before its run item", name(it))
		}
	}
	if got, err := s.GetRun(ctx, "r1"); err != nil || got.Status != store.RunSucceeded {
		t.Fatalf("finished run: %v, %v", got.Status, err)
	}
}

// TestRetentionTerminalWrites: whichever write finishes a run sets its ttl
// to the finishing time + Retention, and no other write sets one: a denial
// and an expiry (DecideApproval), a cancel that fits the event tail
// (the one-write commit), a failure with a step (the flush).
func TestRetentionTerminalWrites(t *testing.T) {
	t.Parallel()
	const retention = 10 * day
	s := fresh(t, dynamostore.Options{Retention: retention})
	raw := newRawTable(t, s)
	ctx := t.Context()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	wantTTL := func(id string, finished time.Time) {
		t.Helper()
		if got, want := ttl(raw.get("R#"+id, "R")), finished.Add(retention).Unix(); got != want {
			t.Errorf("run %s: ttl %d, want %d (finished at %v + Retention)", id, got, want, finished)
		}
	}
	paused := func(id string) {
		t.Helper()
		r := mustCreate(t, s, newRun(id))
		a := pendingApproval("apr-"+id, id, at(time.Minute), at(time.Hour))
		r.Status, r.ApprovalID, r.UpdatedAt = store.RunAwaitingApproval, a.ID, at(time.Minute)
		if _, err := s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &a}); err != nil {
			t.Fatal(err)
		}
		if n := ttl(raw.get("R#"+id, "R")); n != 0 {
			t.Fatalf("run %s awaiting approval has ttl %d", id, n)
		}
	}

	paused("denied")
	if _, _, err := s.DecideApproval(ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "p1", ApprovalID: "apr-denied", Status: approvals.Denied, By: "k1", At: at(5 * time.Minute)},
		RunStatus: store.RunFailed, RunError: &store.RunError{Code: "approval-denied"},
	}); err != nil {
		t.Fatal(err)
	}
	wantTTL("denied", at(5*time.Minute))

	paused("expired")
	if _, _, err := s.DecideApproval(ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "p1", ApprovalID: "apr-expired", Status: approvals.Expired, By: "sweeper", At: at(2 * time.Hour)},
		RunStatus: store.RunFailed, RunError: &store.RunError{Code: "approval-expired"},
	}); err != nil {
		t.Fatal(err)
	}
	wantTTL("expired", at(2*time.Hour))

	r := mustCreate(t, s, newRun("cancelled"))
	r.Status, r.UpdatedAt, r.FinishedAt = store.RunCancelled, at(3*time.Minute), at(3*time.Minute)
	if _, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{ev("run.cancelled")}}); err != nil {
		t.Fatal(err)
	}
	wantTTL("cancelled", at(3*time.Minute))
	if n := len(raw.partition("R#cancelled", "E#")); n != 0 {
		t.Fatalf("the cancel wrote %d commit items; this case is for the one-write commit", n)
	}

	r = mustCreate(t, s, newRun("failed"))
	r.Cursor, r.Status, r.UpdatedAt, r.FinishedAt = 1, store.RunFailed, at(4*time.Minute), at(4*time.Minute)
	r.Error = &store.RunError{Code: "handler-error", Message: "boom"}
	st := store.Step{Index: 0, ID: "s0", Output: json.RawMessage(`{"error":"boom"}`), CompletedAt: at(4 * time.Minute)}
	if _, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{ev("step.failed")}, Steps: []store.Step{st}}); err != nil {
		t.Fatal(err)
	}
	wantTTL("failed", at(4*time.Minute))
}

// TestRetentionRenewsLongRuns: a run that outlives a keep window past the
// horizon its items were written for renews them all (commit items, the
// approvals it took, its idempotency record) before its next flush, so no
// item of a run that is not finished expires however long it lives; and an
// approval whose deadline lies further out than that renews them at once.
func TestRetentionRenewsLongRuns(t *testing.T) {
	t.Parallel()
	const retention = day
	s := fresh(t, dynamostore.Options{Retention: retention})
	raw := newRawTable(t, s)
	ctx := t.Context()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	keepOf := func() int64 {
		t.Helper()
		n, ok := num(raw.get("R#r1", "R"), "kx")
		if !ok {
			t.Fatal("run item has no keep ttl")
		}
		return n
	}
	// Every item of r1 but its run item: idempotency record, commit items,
	// approvals.
	others := func() []map[string]types.AttributeValue {
		t.Helper()
		var out []map[string]types.AttributeValue
		for _, it := range raw.scan() {
			pk, sk := str(it, dynamostore.AttrPK), str(it, dynamostore.AttrSK)
			if (pk == "R#r1" && sk != "R") || strings.HasPrefix(pk, "A#") || sk == "I#idem-1" {
				out = append(out, it)
			}
		}
		return out
	}
	allAt := func(want int64, what string) {
		t.Helper()
		its := others()
		if len(its) < 3 {
			t.Fatalf("%s: %d items besides the run item", what, len(its))
		}
		for _, it := range its {
			if got := ttl(it); got != want {
				t.Errorf("%s: %s has ttl %v, want %v", what, name(it), time.Unix(got, 0).UTC(), time.Unix(want, 0).UTC())
			}
		}
	}

	r := newRun("r1")
	r.IdempotencyKey = "idem-1"
	r = mustCreate(t, s, r, ev("run.created"))
	first := keepOf()
	r.Status, r.Cursor, r.UpdatedAt = store.RunRunning, 1, at(time.Minute)
	st := store.Step{Index: 0, ID: "s0", Output: json.RawMessage(`{}`)}
	r, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{ev("step.completed")}, Steps: []store.Step{st}})
	if err != nil {
		t.Fatal(err)
	}
	a := pendingApproval("apr1", "r1", at(2*time.Minute), at(2*time.Minute+7*day))
	r.Status, r.ApprovalID, r.UpdatedAt = store.RunAwaitingApproval, "apr1", at(2*time.Minute)
	if r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &a, Events: []store.Event{ev("approval.requested")}}); err != nil {
		t.Fatal(err)
	}
	allAt(first, "before any renewal")

	// Approved after a week; the next step comes 40 days after the start,
	// less than a keep window before the items' ttl runs short.
	if _, r, err = s.DecideApproval(ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "p1", ApprovalID: "apr1", Status: approvals.Approved, By: "k1", At: at(7 * day)},
		RunStatus: store.RunRunning, LeaseUntil: at(40 * day),
	}); err != nil {
		t.Fatal(err)
	}
	r.Cursor, r.UpdatedAt, r.LeaseUntil = 2, at(40*day), at(40*day+5*time.Minute)
	st = store.Step{Index: 1, ID: "s1", Output: json.RawMessage(`{}`)}
	if r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{ev("step.completed")}, Steps: []store.Step{st}}); err != nil {
		t.Fatal(err)
	}
	second := keepOf()
	if want := r.LeaseUntil.Add(retention + 2*dynamostore.KeepWindow).Unix(); second != want {
		t.Fatalf("keep ttl after 40 days %v, want %v (the horizon + Retention + 2 keep windows)", time.Unix(second, 0).UTC(), time.Unix(want, 0).UTC())
	}
	allAt(second, "after the renewal")

	// The run pauses for an approval due in 80 days: beyond what the items
	// are kept for less a window, so they are renewed past it at once.
	b := pendingApproval("apr2", "r1", at(40*day), at(120*day))
	r.Status, r.ApprovalID, r.UpdatedAt = store.RunAwaitingApproval, "apr2", at(40*day+time.Minute)
	if _, err = s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &b}); err != nil {
		t.Fatal(err)
	}
	third := keepOf()
	if want := b.ExpiresAt.Add(retention + 2*dynamostore.KeepWindow).Unix(); third != want {
		t.Fatalf("keep ttl after a long approval %v, want %v (its deadline + Retention + 2 keep windows)", time.Unix(third, 0).UTC(), time.Unix(want, 0).UTC())
	}
	allAt(third, "after an approval due in 80 days")
	if n := ttl(raw.get("R#r1", "R")); n != 0 {
		t.Fatalf("the run item got ttl %d from a renewal", n)
	}
}

// TestRetentionNone: with a negative Retention nothing gets a ttl (nor a
// keep ttl), and CreateTable leaves the table's time to live off.
func TestRetentionNone(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{Retention: -1})
	raw := newRawTable(t, s)
	ctx := t.Context()
	r := newRun("r1")
	r.IdempotencyKey = "idem-1"
	r = mustCreate(t, s, r, ev("run.created"))
	a := pendingApproval("apr1", "r1", t0, t0.Add(time.Hour))
	r.Status, r.ApprovalID = store.RunAwaitingApproval, "apr1"
	st := store.Step{Index: 0, ID: "s0", Output: json.RawMessage(`{}`)}
	if _, err := s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &a, Steps: []store.Step{st}, Events: []store.Event{ev("approval.requested")}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.DecideApproval(ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "p1", ApprovalID: "apr1", Status: approvals.Denied, By: "k1", At: t0.Add(time.Minute)},
		RunStatus: store.RunFailed, RunError: &store.RunError{Code: "approval-denied"},
	}); err != nil {
		t.Fatal(err)
	}
	its := raw.scan()
	if len(its) < 4 {
		t.Fatalf("%d items, want the run, its commit item, approval and idempotency record", len(its))
	}
	for _, it := range its {
		for _, attr := range []string{dynamostore.AttrTTL, "kx"} {
			if _, ok := it[attr]; ok {
				t.Errorf("%s has %s with Retention < 0", name(it), attr)
			}
		}
	}
	out, err := raw.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: awssdk.String(s.Table())})
	if err != nil {
		t.Fatal(err)
	}
	if d := out.TimeToLiveDescription; d != nil && d.TimeToLiveStatus == types.TimeToLiveStatusEnabled {
		t.Errorf("time to live is on (%s) with Retention < 0", awssdk.ToString(d.AttributeName))
	}
}

// TestRetentionOnlyRuns: after a little of everything, the items with a
// ttl are exactly the items of runs — never a project, key, deployment or
// broker record — and a run item has one only once its run finished.
func TestRetentionOnlyRuns(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{})
	raw := newRawTable(t, s)
	ctx := t.Context()
	if err := s.CreateProject(ctx, store.Project{ID: "p1", SigningKey: []byte("k"), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAPIKey(ctx, store.APIKey{ID: "key1", ProjectID: "p1", Hash: "h1", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateDeployment(ctx, store.Deployment{ProjectID: "p1", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBrokerRecord(ctx, store.BrokerRecord{ProjectID: "p1", EndUserID: "u1", Collection: "orders", Key: "o-1", Value: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for i, status := range []store.RunStatus{store.RunQueued, store.RunAwaitingApproval, store.RunSucceeded} {
		r := newRun("r" + strconv.Itoa(i))
		r.IdempotencyKey = "idem-" + strconv.Itoa(i)
		r = mustCreate(t, s, r, ev("run.created"))
		r.Cursor, r.Status, r.UpdatedAt = 1, status, t0.Add(time.Minute)
		c := store.RunCommit{Run: r, Steps: []store.Step{{Index: 0, ID: "s0", Output: json.RawMessage(`{}`)}}, Events: []store.Event{ev("step.completed")}}
		if status == store.RunAwaitingApproval {
			a := pendingApproval("apr"+strconv.Itoa(i), r.ID, t0, t0.Add(time.Hour))
			c.Approval, c.Run.ApprovalID = &a, a.ID
		}
		if status.Terminal() {
			c.Run.FinishedAt = t0.Add(time.Minute)
		}
		if _, err := s.CommitRun(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	withTTL := 0
	for _, it := range raw.scan() {
		pk, sk := str(it, dynamostore.AttrPK), str(it, dynamostore.AttrSK)
		n := ttl(it)
		ofRun := strings.HasPrefix(pk, "R#") || strings.HasPrefix(pk, "A#") || strings.HasPrefix(sk, "I#")
		switch {
		case n != 0 && !ofRun:
			t.Errorf("%s is no run's item and has ttl %d", name(it), n)
		case ofRun && sk != "R" && n == 0:
			t.Errorf("%s belongs to a run and has no ttl", name(it))
		case sk == "R" && (n != 0) != store.RunStatus(str(it, "st")).Terminal():
			t.Errorf("run item %s (%s) has ttl %d", name(it), str(it, "st"), n)
		}
		if n != 0 {
			withTTL++
		}
	}
	if withTTL == 0 {
		t.Fatal("no item has a ttl")
	}
}

// TestIdempotencyKeyOutlivesItsRun: a key's record outlives its run's item
// (TTL deletes the run item first); once the run is gone, the key is free
// for a new run, which then holds it.
func TestIdempotencyKeyOutlivesItsRun(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{})
	raw := newRawTable(t, s)
	ctx := t.Context()
	r := newRun("r1")
	r.IdempotencyKey = "idem-1"
	mustCreate(t, s, r)
	// What TTL does once r1's retention is over.
	if _, err := raw.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: awssdk.String(s.Table()),
		Key: map[string]types.AttributeValue{dynamostore.AttrPK: avStr("R#r1"), dynamostore.AttrSK: avStr("R")}}); err != nil {
		t.Fatal(err)
	}
	r2 := newRun("r2")
	r2.IdempotencyKey = "idem-1"
	if _, err := s.CreateRun(ctx, r2, nil); err != nil {
		t.Fatalf("create a run with the key of a run that is gone: %v", err)
	}
	if got := str(raw.get("P#p1", "I#idem-1"), "id"); got != "r2" {
		t.Fatalf("the key names %q, want r2", got)
	}
	r3 := newRun("r3")
	r3.IdempotencyKey = "idem-1"
	prev, err := s.CreateRun(ctx, r3, nil)
	if !errors.Is(err, store.ErrExists) || prev.ID != "r2" {
		t.Fatalf("create with the key r2 holds: %v, %v; want ErrExists and r2", prev.ID, err)
	}
}

// TestCreateTableTTL: CreateTable switches time to live on, on AttrTTL,
// and refuses a table whose time to live is on another attribute.
func TestCreateTableTTL(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{})
	raw := newRawTable(t, s)
	ctx := t.Context()
	out, err := raw.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: awssdk.String(s.Table())})
	if err != nil {
		t.Fatal(err)
	}
	if d := out.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || awssdk.ToString(d.AttributeName) != dynamostore.AttrTTL {
		t.Fatalf("time to live after CreateTable: %+v, want enabled on %q", d, dynamostore.AttrTTL)
	}
	if err := s.CreateTable(ctx); err != nil {
		t.Fatalf("CreateTable again: %v", err)
	}

	other := fresh(t, dynamostore.Options{Retention: -1})
	if _, err := raw.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: awssdk.String(other.Table()),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: awssdk.String("expires"), Enabled: awssdk.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	s2, err := dynamostore.New(raw.db, dynamostore.Options{Table: other.Table()})
	if err != nil {
		t.Fatal(err)
	}
	err = s2.CreateTable(ctx)
	if err == nil || !strings.Contains(err.Error(), `"expires"`) {
		t.Fatalf("CreateTable on a table with TTL on another attribute: %v", err)
	}
}

// TestRetentionSwitchedOff: a store with a negative Retention writes no new
// ttl, but a run whose items carry one (written while Retention was on) is
// still renewed when it lives long, so switching Retention off never
// deletes an unfinished run's items.
func TestRetentionSwitchedOff(t *testing.T) {
	t.Parallel()
	on := fresh(t, dynamostore.Options{Retention: day})
	raw := newRawTable(t, on)
	ctx := t.Context()
	r := newRun("r1")
	r.IdempotencyKey = "idem-1"
	r = mustCreate(t, on, r, ev("run.created"))
	before := ttl(raw.get("P#p1", "I#idem-1"))

	off, err := dynamostore.New(raw.db, dynamostore.Options{Table: on.Table(), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	r.Status, r.Cursor, r.UpdatedAt, r.LeaseUntil = store.RunRunning, 1, t0.Add(50*day), t0.Add(50*day)
	st := store.Step{Index: 0, ID: "s0", Output: json.RawMessage(`{}`)}
	if _, err := off.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{ev("step.completed")}, Steps: []store.Step{st}}); err != nil {
		t.Fatal(err)
	}
	// Retention is 0 now: the horizon plus two keep windows.
	if got, want := ttl(raw.get("P#p1", "I#idem-1")), t0.Add(50*day+2*dynamostore.KeepWindow).Unix(); got != want || got <= before {
		t.Errorf("idempotency record ttl %v after 50 days, want it renewed to %v", time.Unix(got, 0).UTC(), time.Unix(want, 0).UTC())
	}
	for _, it := range raw.partition("R#r1", "E#") {
		if n := ttl(it); n != 0 {
			t.Errorf("%s written with Retention < 0 has ttl %d", name(it), n)
		}
	}
}

// TestRevocationTTL: an end user's revocation item carries the end of its
// last revocation as its ttl, whatever Retention says (it is worthless
// afterwards), and moves it on with a later revocation; a revocation whose
// revocations all ended is deleted by the next write.
func TestRevocationTTL(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{Retention: -1})
	raw := newRawTable(t, s)
	ctx := t.Context()
	revoke := func(id string, until, now time.Time) {
		t.Helper()
		r := store.CustomerRevocation{ProjectID: "p1", EndUserID: "u1", TokenID: id, Until: until, Now: now}
		if err := s.RevokeCustomerTokens(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	pk := "CTR#2:p12:u1"
	revoke("ct1", t0.Add(time.Hour+time.Millisecond), t0)
	if got, want := ttl(raw.get(pk, "R")), t0.Add(time.Hour).Unix()+1; got != want {
		t.Errorf("ttl after the first revocation: %d, want %d (the token's expiry, rounded up)", got, want)
	}
	revoke("ct2", t0.Add(3*time.Hour), t0)
	revoke("ct3", t0.Add(2*time.Hour), t0)
	if got, want := ttl(raw.get(pk, "R")), t0.Add(3*time.Hour).Unix(); got != want {
		t.Errorf("ttl after later revocations: %d, want %d (the latest expiry)", got, want)
	}
	// After every expiry, a revocation that ended already leaves no item.
	revoke("ct4", t0.Add(4*time.Hour), t0.Add(4*time.Hour))
	if items := raw.partition(pk, ""); len(items) != 0 {
		t.Errorf("revocation item after every revocation ended: %v", items)
	}
}
