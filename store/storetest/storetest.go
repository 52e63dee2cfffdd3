// Package storetest is the conformance suite of store.Store. Every backend
// runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openFresh(t) })
//	}
//
// The suite uses only the interface, fixed times and explicit clocks: no
// sleeps, no wall-clock reads. Each subtest gets a fresh, empty store from
// newStore and runs in parallel with the others, so newStore must be safe to
// call concurrently and must close the store in t.Cleanup.
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"stead/approvals"
	"stead/store"
)

// Run runs the conformance suite against stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	for _, group := range [][]test{projectTests, memberTests, groupTests, deploymentTests, runTests, commitTests, claimTests, approvalTests, decideTests, voteTests, ruleTests, webhookTests, mcpKeyTests, brokerTests, revocationTests, filterTests} {
		for _, tc := range group {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, newStore(t))
			})
		}
	}
}

// test is one conformance test; it gets a fresh store.
type test struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// t0 is the suite's "now": every time is t0 plus something.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// at is t0 + d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// noErr fails the test now if err is not nil.
func noErr(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", what, err)
	}
}

// wantErr fails the test now unless errors.Is(err, target).
func wantErr(t testing.TB, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// same fails the test now unless got and want encode to the same JSON, which
// compares times as instants written in UTC and ignores how raw JSON was
// spaced.
func same[T any](t testing.TB, got, want T, what string) {
	t.Helper()
	g, err := json.Marshal(got)
	noErr(t, err, "encode got")
	w, err := json.Marshal(want)
	noErr(t, err, "encode want")
	if string(g) != string(w) {
		t.Fatalf("%s:\n got  %s\n want %s", what, g, w)
	}
}

// eq fails the test now unless got == want.
func eq[T comparable](t testing.TB, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// sameIDs fails the test now unless got lists exactly want, in order.
func sameIDs(t testing.TB, got, want []string, what string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// race calls fn(0..n-1) from n goroutines released at once and returns what
// each returned.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// winners returns the indexes of nil errors and fails the test now if any
// other error is not one of allowed.
func winners(t testing.TB, errs []error, allowed ...error) []int {
	t.Helper()
	var won []int
	for i, err := range errs {
		if err == nil {
			won = append(won, i)
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || errors.Is(err, a)
		}
		if !ok {
			t.Fatalf("caller %d: got error %v, want nil or one of %v", i, err, allowed)
		}
	}
	return won
}

// collect pages through a list with limit per page and returns every item,
// failing on a page over the limit, a repeated item or a list that does
// not end.
func collect[T any](t testing.TB, limit int, id func(T) string, list func(cursor string) (store.Page[T], error)) []string {
	t.Helper()
	var ids []string
	seen := map[string]bool{}
	cursor := ""
	for range 100 {
		p, err := list(cursor)
		noErr(t, err, "list page")
		if len(p.Items) > limit {
			t.Fatalf("page has %d items, limit %d", len(p.Items), limit)
		}
		for _, it := range p.Items {
			k := id(it)
			if seen[k] {
				t.Fatalf("item %s listed twice (pages so far %v)", k, ids)
			}
			seen[k] = true
			ids = append(ids, k)
		}
		if cursor != "" && len(p.Items) == 0 {
			// A cursor says there is more: an empty page after one means
			// it was handed out when the list was done.
			t.Fatalf("empty page after cursor %q (pages so far %v)", cursor, ids)
		}
		if p.NextCursor == "" {
			return ids
		}
		if p.NextCursor == cursor {
			t.Fatalf("cursor %q did not move", cursor)
		}
		cursor = p.NextCursor
	}
	t.Fatalf("list did not end after 100 pages: %v", ids)
	return nil
}

// --- fixtures ---

func createProject(t testing.TB, s store.Store, id string) store.Project {
	t.Helper()
	p := store.Project{ID: id, Name: "Project " + id, SigningKey: []byte("secret-" + id), CreatedAt: t0}
	noErr(t, s.CreateProject(t.Context(), p), "create project "+id)
	return p
}

// newRun is a queued run of project p created at created, with a dispatch
// deadline a minute later.
func newRun(id, p string, created time.Time) store.Run {
	return store.Run{
		ID:         id,
		ProjectID:  p,
		Agent:      "support",
		EndUserID:  "u1",
		Requester:  "mem_ana",
		Deployment: 1,
		Status:     store.RunQueued,
		Input:      json.RawMessage(`{"orderId": "o-1"}`),
		Trust:      store.Trusted,
		LeaseUntil: created.Add(time.Minute),
		CreatedAt:  created,
		UpdatedAt:  created,
	}
}

func createRun(t testing.TB, s store.Store, r store.Run, events ...store.Event) store.Run {
	t.Helper()
	got, err := s.CreateRun(t.Context(), r, events)
	noErr(t, err, "create run "+r.ID)
	return got
}

func getRun(t testing.TB, s store.Store, id string) store.Run {
	t.Helper()
	r, err := s.GetRun(t.Context(), id)
	noErr(t, err, "get run "+id)
	return r
}

func getApproval(t testing.TB, s store.Store, id string) approvals.Approval {
	t.Helper()
	a, err := s.GetApproval(t.Context(), id)
	noErr(t, err, "get approval "+id)
	return a
}

func event(typ string) store.Event {
	return store.Event{Type: typ, At: t0, Step: "refund", Data: json.RawMessage(`{"type": "` + typ + `"}`)}
}

func events(t testing.TB, s store.Store, runID string) []store.Event {
	t.Helper()
	es, err := s.ListEvents(t.Context(), runID, 0, store.MaxLimit)
	noErr(t, err, "list events of "+runID)
	return es
}

func eventTypes(es []store.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Type
	}
	return out
}

// checkSeqs fails unless es are numbered from..from+len-1 and belong to run.
func checkSeqs(t testing.TB, es []store.Event, runID string, from int64) {
	t.Helper()
	for i, e := range es {
		if e.Seq != from+int64(i) || e.RunID != runID {
			t.Fatalf("event %d is %s#%d, want %s#%d", i, e.RunID, e.Seq, runID, from+int64(i))
		}
	}
}

func newApproval(id string, r store.Run, requested, expires time.Time) approvals.Approval {
	input := json.RawMessage(`{"orderId":"o-1","amount":40}`)
	digest, err := approvals.Digest(input)
	if err != nil {
		panic(err)
	}
	return approvals.Approval{
		ID: id, ProjectID: r.ProjectID, RunID: r.ID, Agent: r.Agent, EndUserID: r.EndUserID,
		Deployment: r.Deployment, StepIndex: r.Cursor, StepID: "refund", CallID: "refund", Tool: "refundOrder",
		Input: input, InputDigest: digest, Reason: "refundOrder requires approval",
		Status: approvals.Pending, RequestedAt: requested, ExpiresAt: expires,
	}
}

// gatedRun creates a run in project p and commits it into awaiting-approval
// with a new pending approval aprID, requested at requested and expiring at
// expires. The run ends at Version 2 with 2 events.
func gatedRun(t testing.TB, s store.Store, p, runID, aprID string, requested, expires time.Time) (store.Run, approvals.Approval) {
	t.Helper()
	r := createRun(t, s, newRun(runID, p, requested.Add(-time.Second)), event("run.created"))
	a := newApproval(aprID, r, requested, expires)
	r.Status = store.RunAwaitingApproval
	r.ApprovalID = aprID
	r.LeaseOwner, r.LeaseUntil = "", time.Time{}
	r.UpdatedAt = requested
	got, err := s.CommitRun(t.Context(), store.RunCommit{Run: r, Events: []store.Event{event("approval.requested")}, Approval: &a})
	noErr(t, err, "commit run "+runID+" into awaiting-approval")
	return got, a
}

// decide builds the parameters the engine sends for a decision of kind st.
func decide(p, aprID string, st approvals.Status, when time.Time) store.DecideParams {
	d := store.DecideParams{
		Decision: approvals.Decision{ProjectID: p, ApprovalID: aprID, Status: st, By: "key_owner", ByName: "Ana Diaz", Note: "note " + string(st), At: when},
		Events:   []store.Event{event("approval." + string(st))},
	}
	switch st {
	case approvals.Approved:
		d.RunStatus = store.RunQueued
		d.LeaseUntil = when.Add(time.Minute)
		d.Events = append(d.Events, event("run.resumed"))
	case approvals.Denied:
		d.RunStatus = store.RunFailed
		d.RunError = &store.RunError{Code: "approval-denied", Message: "denied", Step: "refund"}
	case approvals.Expired:
		d.Decision.By = "system"
		d.RunStatus = store.RunFailed
		d.RunError = &store.RunError{Code: "approval-expired", Message: "expired", Step: "refund"}
	case approvals.Cancelled:
		d.RunStatus = store.RunCancelled
		d.RunError = &store.RunError{Code: "cancelled", Message: "cancelled"}
	}
	return d
}

// runStatusAfter is the run status that goes with an approval status.
func runStatusAfter(st approvals.Status) store.RunStatus {
	switch st {
	case approvals.Approved:
		return store.RunQueued
	case approvals.Cancelled:
		return store.RunCancelled
	}
	return store.RunFailed
}

// snapshot is everything a conditional write could touch for one run.
type snapshot struct {
	Run       store.Run
	Events    []store.Event
	Steps     []store.Step
	Approvals []approvals.Approval
}

func snap(t testing.TB, s store.Store, r store.Run) snapshot {
	t.Helper()
	steps, err := s.ListSteps(t.Context(), r.ID)
	noErr(t, err, "list steps")
	as, err := s.ListApprovals(t.Context(), store.ApprovalFilter{ProjectID: r.ProjectID, RunID: r.ID, Limit: store.MaxLimit})
	noErr(t, err, "list approvals")
	return snapshot{getRun(t, s, r.ID), events(t, s, r.ID), steps, as.Items}
}

func runIDs(rs []store.Run) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func approvalIDs(as []approvals.Approval) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func runIDOf(r store.Run) string               { return r.ID }
func approvalIDOf(a approvals.Approval) string { return a.ID }

// pendingIDs lists the pending approvals of project p in the given order.
func pendingIDs(t testing.TB, s store.Store, p string, o store.ApprovalOrder) []string {
	t.Helper()
	pg, err := s.ListApprovals(t.Context(), store.ApprovalFilter{ProjectID: p, Status: approvals.Pending, Order: o, Limit: store.MaxLimit})
	noErr(t, err, "list pending approvals")
	return approvalIDs(pg.Items)
}

// dueIDs lists the due approvals at now.
func dueIDs(t testing.TB, s store.Store, now time.Time) []string {
	t.Helper()
	as, err := s.ListDueApprovals(t.Context(), now, store.MaxLimit)
	noErr(t, err, "list due approvals")
	return approvalIDs(as)
}
