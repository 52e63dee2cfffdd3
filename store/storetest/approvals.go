package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"stead/approvals"
	"stead/store"
)

var approvalTests = []test{
	{"Approval/Get", testApprovalGet},
	{"Approval/List", testApprovalList},
	{"Approval/Due", testApprovalDue},
	{"Approval/DueWithinASecond", testApprovalDueWithinASecond},
	{"Approval/Superseded", testApprovalSuperseded},
}

func testApprovalGet(t *testing.T, s store.Store) {
	_, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	same(t, getApproval(t, s, "apr1"), a, "stored approval")
	_, err := s.GetApproval(t.Context(), "apr404")
	wantErr(t, err, store.ErrNotFound, "get unknown approval")
}

func testApprovalList(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Requested a1..a5 a minute apart; their deadlines are in another order:
	// a2 (12m), a4 (24m), a1 (31m), a5 (45m), a3 (53m).
	timeouts := []time.Duration{30, 10, 50, 20, 40}
	for i, to := range timeouts {
		req := at(time.Duration(i+1) * time.Minute)
		gatedRun(t, s, "p1", fmt.Sprintf("r%d", i+1), fmt.Sprintf("a%d", i+1), req, req.Add(to*time.Minute))
	}
	gatedRun(t, s, "p2", "q1", "b1", at(3*time.Minute), at(20*time.Minute))
	_, _, err := s.DecideApproval(ctx, decide("p1", "a4", approvals.Approved, at(6*time.Minute)))
	noErr(t, err, "approve a4")
	_, _, err = s.DecideApproval(ctx, decide("p1", "a1", approvals.Denied, at(6*time.Minute)))
	noErr(t, err, "deny a1")

	cases := []struct {
		status approvals.Status
		order  store.ApprovalOrder
		want   []string
	}{
		{approvals.Pending, store.NewestFirst, []string{"a5", "a3", "a2"}},
		{approvals.Pending, "", []string{"a5", "a3", "a2"}},
		{approvals.Pending, store.ExpiringFirst, []string{"a2", "a5", "a3"}},
		{"", store.NewestFirst, []string{"a5", "a4", "a3", "a2", "a1"}},
		{"", store.ExpiringFirst, []string{"a2", "a4", "a1", "a5", "a3"}},
		{approvals.Approved, store.NewestFirst, []string{"a4"}},
		{approvals.Denied, store.ExpiringFirst, []string{"a1"}},
		{approvals.Expired, store.NewestFirst, nil},
	}
	for _, tc := range cases {
		for _, limit := range []int{1, 2, 50} {
			got := collect(t, limit, approvalIDOf, func(c string) (store.Page[approvals.Approval], error) {
				return s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", Status: tc.status, Order: tc.order, Cursor: c, Limit: limit})
			})
			sameIDs(t, got, tc.want, fmt.Sprintf("approvals of p1 with status %q, order %q, by pages of %d", tc.status, tc.order, limit))
		}
	}

	page, err := s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", RunID: "r3"})
	noErr(t, err, "list approvals of a run")
	sameIDs(t, approvalIDs(page.Items), []string{"a3"}, "approvals of r3")
	same(t, page.Items[0], getApproval(t, s, "a3"), "listed approval")

	// Projects never see each other's approvals.
	for _, st := range []approvals.Status{"", approvals.Pending} {
		page, err = s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p2", Status: st})
		noErr(t, err, "list approvals of p2")
		sameIDs(t, approvalIDs(page.Items), []string{"b1"}, "approvals of p2")
		page, err = s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p3", Status: st})
		noErr(t, err, "list approvals of p3")
		eq(t, len(page.Items), 0, "approvals of p3")
	}
	page, err = s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p2", RunID: "r3"})
	noErr(t, err, "list approvals of p2 for a run of p1")
	eq(t, len(page.Items), 0, "approvals of p2 for r3")

	_, err = s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", Cursor: "not a cursor %%"})
	wantErr(t, err, store.ErrInvalidCursor, "list approvals with a bad cursor")
}

// testApprovalSuperseded: an approval whose run moved on to another
// approval without a decision on it is still one of the run's approvals,
// pending as it was requested; the run's list pages through both.
func testApprovalSuperseded(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a1 := gatedRun(t, s, "p1", "r1", "apr1", t0, at(30*time.Minute))
	a2 := newApproval("apr2", r, at(time.Minute), at(20*time.Minute))
	r.ApprovalID = "apr2"
	r.UpdatedAt = at(time.Minute)
	_, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{event("approval.requested")}, Approval: &a2})
	noErr(t, err, "commit a second approval while the first is pending")

	same(t, getApproval(t, s, "apr1"), a1, "the first approval once the run awaits another")
	same(t, getApproval(t, s, "apr2"), a2, "the second approval")
	cases := []struct {
		order store.ApprovalOrder
		want  []string
	}{
		{store.NewestFirst, []string{"apr2", "apr1"}},
		{store.ExpiringFirst, []string{"apr2", "apr1"}},
	}
	for _, tc := range cases {
		for _, limit := range []int{1, 2} {
			got := collect(t, limit, approvalIDOf, func(c string) (store.Page[approvals.Approval], error) {
				return s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", RunID: "r1", Order: tc.order, Cursor: c, Limit: limit})
			})
			sameIDs(t, got, tc.want, fmt.Sprintf("approvals of r1, order %q, by pages of %d", tc.order, limit))
		}
	}
}

func testApprovalDue(t *testing.T, s store.Store) {
	ctx := t.Context()
	gatedRun(t, s, "p1", "r1", "a-3m", t0, at(3*time.Minute))
	gatedRun(t, s, "p2", "r2", "b-1m", t0, at(time.Minute))
	gatedRun(t, s, "p1", "r3", "a-2m", t0, at(2*time.Minute))
	gatedRun(t, s, "p2", "r4", "b-10m", t0, at(10*time.Minute))
	gatedRun(t, s, "p1", "r5", "a-1m30", t0, at(90*time.Second))

	sameIDs(t, dueIDs(t, s, at(59*time.Second)), nil, "due before any deadline")
	sameIDs(t, dueIDs(t, s, at(3*time.Minute)), []string{"b-1m", "a-1m30", "a-2m", "a-3m"}, "due at 3m, soonest first")
	as, err := s.ListDueApprovals(ctx, at(3*time.Minute), 2)
	noErr(t, err, "list due approvals")
	sameIDs(t, approvalIDs(as), []string{"b-1m", "a-1m30"}, "due at 3m, limit 2")
	same(t, as[0], getApproval(t, s, "b-1m"), "listed due approval")

	// Settled approvals are never due; cancel ignores the deadline.
	_, _, err = s.DecideApproval(ctx, decide("p2", "b-1m", approvals.Expired, at(3*time.Minute)))
	noErr(t, err, "expire b-1m")
	_, _, err = s.DecideApproval(ctx, decide("p1", "a-2m", approvals.Cancelled, at(3*time.Minute)))
	noErr(t, err, "cancel a-2m")
	sameIDs(t, dueIDs(t, s, at(time.Hour)), []string{"a-1m30", "a-3m", "b-10m"}, "due after an expiry and a cancel")
}

var decideTests = []test{
	{"Decide/Approve", testDecideApprove},
	{"Decide/Deny", testDecideDeny},
	{"Decide/Expire", testDecideExpire},
	{"Decide/Cancel", testDecideCancel},
	{"Decide/PastDeadline", testDecidePastDeadline},
	{"Decide/Twice", testDecideTwice},
	{"Decide/Foreign", testDecideForeign},
	{"Decide/LyingDeadline", testDecideLyingDeadline},
	{"Decide/EditedInput", testDecideEditedInput},
	{"Decide/RunMoved", testDecideRunMoved},
	{"Decide/LeavesQueues", testDecideLeavesQueues},
	{"Decide/Concurrent", testDecideConcurrent},
	{"Decide/RaceExpiry", testDecideRaceExpiry},
	{"Decide/Separated", testDecideSeparated},
	{"Decide/LyingDeadlineAtTheDeadline", testDecideLyingDeadlineAtTheDeadline},
	{"Decide/StaleReadOfASettledApproval", testDecideStaleReadOfASettledApproval},
	{"Decide/LeavesDueQueue", testDecideLeavesDueQueue},
	{"Decide/ClearsLease", testDecideClearsLease},
	{"Decide/RunStatusRefused", testDecideRunStatusRefused},
	{"Decide/ReadOfAnother", testDecideReadOfAnother},
}

// testDecideLyingDeadlineAtTheDeadline: at the stored deadline itself an
// approve or deny is late (approvals.ErrExpired), whatever the Read says
// the deadline is, and changes nothing.
func testDecideLyingDeadlineAtTheDeadline(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	later := a
	later.ExpiresAt = at(time.Hour)
	for _, st := range []approvals.Status{approvals.Approved, approvals.Denied} {
		p := decide("p1", "apr1", st, at(15*time.Minute))
		p.Read = &later
		gotA, _, err := s.DecideApproval(ctx, p)
		wantErr(t, err, approvals.ErrExpired, "decide at the deadline with a Read that says it is an hour: "+string(st))
		same(t, gotA, a, "approval returned with ErrExpired")
	}
	same(t, getApproval(t, s, "apr1"), a, "approval after decisions at the deadline")
	same(t, getRun(t, s, "r1"), r, "run after decisions at the deadline")
	sameIDs(t, dueIDs(t, s, at(time.Hour)), []string{"apr1"}, "still due for the sweeper")
}

// testDecideStaleReadOfASettledApproval: a Read that still says pending
// wins nothing once the approval is settled, even when a later commit puts
// its run back to awaiting it: the stored decision says
// (approvals.ErrNotPending, with the approval as it stands).
func testDecideStaleReadOfASettledApproval(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	wonA, r, err := s.DecideApproval(ctx, decide("p1", "apr1", approvals.Approved, at(time.Minute)))
	noErr(t, err, "approve")
	r.Status, r.LeaseOwner, r.LeaseUntil = store.RunAwaitingApproval, "", time.Time{}
	r, err = s.CommitRun(ctx, store.RunCommit{Run: r})
	noErr(t, err, "put the run back to awaiting apr1")
	eq(t, r.ApprovalID, "apr1", "approval the run awaits")
	stale := a
	for _, st := range []approvals.Status{approvals.Approved, approvals.Denied, approvals.Cancelled} {
		p := decide("p1", "apr1", st, at(2*time.Minute))
		p.Read = &stale
		gotA, _, err := s.DecideApproval(ctx, p)
		wantErr(t, err, approvals.ErrNotPending, "decide a settled approval on a Read that says pending: "+string(st))
		same(t, gotA, wonA, "approval returned with ErrNotPending")
	}
	same(t, getApproval(t, s, "apr1"), wonA, "approval after decisions on a stale Read")
	same(t, getRun(t, s, "r1"), r, "run after decisions on a stale Read")
}

// testDecideLeavesDueQueue: an approval settled before its deadline leaves
// the due queue, so that a page of due approvals (the sweeper's, of a few)
// holds the pending ones due and not settled ones that were due first.
func testDecideLeavesDueQueue(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, st := range []approvals.Status{approvals.Approved, approvals.Denied, approvals.Cancelled} {
		id := fmt.Sprintf("apr%d", i)
		gatedRun(t, s, "p1", fmt.Sprintf("r%d", i), id, t0, at(time.Duration(i+1)*time.Minute))
		_, _, err := s.DecideApproval(ctx, decide("p1", id, st, at(30*time.Second)))
		noErr(t, err, string(st)+" "+id)
	}
	gatedRun(t, s, "p1", "r-due", "apr-due", t0, at(10*time.Minute))
	for limit := 1; limit <= 3; limit++ {
		as, err := s.ListDueApprovals(ctx, at(time.Hour), limit)
		noErr(t, err, "list due approvals")
		sameIDs(t, approvalIDs(as), []string{"apr-due"}, fmt.Sprintf("due approvals, %d at most", limit))
	}
}

// testDecideSeparated: an approval separated from a member refuses that
// member's approve and deny (approvals.ErrSeparated), changing nothing, and
// takes another member's.
func testDecideSeparated(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0), event("run.created"))
	a := newApproval("apr1", r, t0, at(15*time.Minute))
	a.SeparateFrom, a.SeparatedBy = "mem_ana", `separateFrom "requester" on tool refundOrder`
	r.Status, r.ApprovalID, r.LeaseOwner, r.LeaseUntil = store.RunAwaitingApproval, "apr1", "", time.Time{}
	r, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{event("approval.requested")}, Approval: &a})
	noErr(t, err, "pause with a separated approval")
	same(t, getApproval(t, s, "apr1"), a, "stored separated approval")
	before := snap(t, s, r)
	for _, st := range []approvals.Status{approvals.Approved, approvals.Denied} {
		p := decide("p1", "apr1", st, at(time.Minute))
		p.Decision.ByMember = "mem_ana"
		_, _, err := s.DecideApproval(ctx, p)
		wantErr(t, err, approvals.ErrSeparated, "decide by the member it is separated from: "+string(st))
	}
	same(t, snap(t, s, r), before, "state after refused decisions")
	p := decide("p1", "apr1", approvals.Approved, at(time.Minute))
	p.Decision.ByMember = "mem_bo"
	_, _, err = s.DecideApproval(ctx, p)
	noErr(t, err, "approve by another member")
}

// checkDecided checks what a winning decision returned and stored.
func checkDecided(t testing.TB, s store.Store, p store.DecideParams, before store.Run, beforeA approvals.Approval, gotA approvals.Approval, gotR store.Run) {
	t.Helper()
	d := p.Decision
	wantA := beforeA
	wantA.Status, wantA.DecidedBy, wantA.DecidedByName, wantA.DecidedAt, wantA.Note = d.Status, d.By, d.ByName, d.At, d.Note
	if d.Input != nil {
		wantA.OriginalInput, wantA.Input, wantA.InputDigest = beforeA.Input, d.Input, d.InputDigest
	}
	same(t, gotA, wantA, "returned approval")
	same(t, getApproval(t, s, d.ApprovalID), wantA, "stored approval")

	wantR := before
	wantR.Status, wantR.Error, wantR.LeaseOwner, wantR.LeaseUntil = p.RunStatus, p.RunError, "", p.LeaseUntil
	wantR.UpdatedAt = d.At
	if p.RunStatus.Terminal() {
		wantR.FinishedAt = d.At
	}
	wantR.Version = before.Version + 1
	wantR.LastSeq = before.LastSeq + int64(len(p.Events))
	same(t, gotR, wantR, "returned run")
	same(t, getRun(t, s, before.ID), wantR, "stored run")

	es := events(t, s, before.ID)
	eq(t, int64(len(es)), wantR.LastSeq, "number of events")
	var types []string
	for _, e := range p.Events {
		types = append(types, e.Type)
	}
	sameIDs(t, eventTypes(es[before.LastSeq:]), types, "events appended by the decision")
	checkSeqs(t, es, before.ID, 1)
}

func testDecideApprove(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	p := decide("p1", "apr1", approvals.Approved, at(5*time.Minute))
	gotA, gotR, err := s.DecideApproval(ctx, p)
	noErr(t, err, "approve")
	checkDecided(t, s, p, r, a, gotA, gotR)
	eq(t, gotR.ApprovalID, "apr1", "run keeps its approval until the step completes")

	// The approved run is queued with a dispatch deadline the sweeper
	// watches, and can be claimed.
	sameIDs(t, runIDs(mustStalled(t, s, at(6*time.Minute))), nil, "stalled before the dispatch deadline")
	sameIDs(t, runIDs(mustStalled(t, s, at(7*time.Minute))), []string{"r1"}, "stalled after the dispatch deadline")
	claimed, err := s.ClaimRun(ctx, claim("r1", "w1", at(5*time.Minute)))
	noErr(t, err, "claim the approved run")
	eq(t, claimed.Status, store.RunRunning, "claimed run")
}

func testDecideDeny(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	p := decide("p1", "apr1", approvals.Denied, at(5*time.Minute))
	gotA, gotR, err := s.DecideApproval(ctx, p)
	noErr(t, err, "deny")
	checkDecided(t, s, p, r, a, gotA, gotR)
	eq(t, gotR.Error.Code, "approval-denied", "run error")
	sameIDs(t, runIDs(mustStalled(t, s, at(time.Hour))), nil, "stalled runs after a denial")
	_, err = s.ClaimRun(ctx, claim("r1", "w1", at(time.Hour)))
	wantErr(t, err, store.ErrConflict, "claim a denied run")
}

func testDecideExpire(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))

	_, _, err := s.DecideApproval(ctx, decide("p1", "apr1", approvals.Expired, at(15*time.Minute-time.Millisecond)))
	wantErr(t, err, approvals.ErrNotDue, "expire before the deadline")
	same(t, getApproval(t, s, "apr1"), a, "approval after an early expiry")
	same(t, getRun(t, s, "r1"), r, "run after an early expiry")

	p := decide("p1", "apr1", approvals.Expired, at(15*time.Minute))
	gotA, gotR, err := s.DecideApproval(ctx, p)
	noErr(t, err, "expire at the deadline")
	checkDecided(t, s, p, r, a, gotA, gotR)
	eq(t, gotA.Status, approvals.Expired, "expired is not denied")
	eq(t, gotR.Error.Code, "approval-expired", "run error")
}

func testDecideCancel(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	p := decide("p1", "apr1", approvals.Cancelled, at(20*time.Minute)) // past the deadline: cancel still wins
	gotA, gotR, err := s.DecideApproval(ctx, p)
	noErr(t, err, "cancel")
	checkDecided(t, s, p, r, a, gotA, gotR)
	eq(t, gotR.Status, store.RunCancelled, "run status")
}

func testDecidePastDeadline(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	// No sweep has run: the decision checks the deadline itself.
	for _, p := range []store.DecideParams{
		decide("p1", "apr1", approvals.Approved, at(15*time.Minute)),
		decide("p1", "apr1", approvals.Approved, at(time.Hour)),
		decide("p1", "apr1", approvals.Denied, at(15*time.Minute)),
	} {
		_, _, err := s.DecideApproval(ctx, p)
		wantErr(t, err, approvals.ErrExpired, fmt.Sprintf("%s at %s", p.Decision.Status, p.Decision.At.Format(time.TimeOnly)))
	}
	same(t, getApproval(t, s, "apr1"), a, "approval after late decisions")
	same(t, getRun(t, s, "r1"), r, "run after late decisions")
	sameIDs(t, dueIDs(t, s, at(time.Hour)), []string{"apr1"}, "still due for the sweeper")
}

func testDecideTwice(t *testing.T, s store.Store) {
	ctx := t.Context()
	gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	first := decide("p1", "apr1", approvals.Approved, at(time.Minute))
	first.Decision.By = "key_first"
	wonA, wonR, err := s.DecideApproval(ctx, first)
	noErr(t, err, "first decision")

	for _, p := range []store.DecideParams{
		decide("p1", "apr1", approvals.Approved, at(2*time.Minute)),
		decide("p1", "apr1", approvals.Denied, at(2*time.Minute)),
		decide("p1", "apr1", approvals.Expired, at(time.Hour)),
		decide("p1", "apr1", approvals.Cancelled, at(2*time.Minute)),
	} {
		gotA, _, err := s.DecideApproval(ctx, p)
		wantErr(t, err, approvals.ErrNotPending, "second decision: "+string(p.Decision.Status))
		same(t, gotA, wonA, "approval returned with ErrNotPending")
	}
	same(t, getApproval(t, s, "apr1"), wonA, "approval after second decisions")
	same(t, getRun(t, s, "r1"), wonR, "run after second decisions")
}

func testDecideForeign(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	for _, st := range []approvals.Status{approvals.Approved, approvals.Denied, approvals.Cancelled} {
		got, _, err := s.DecideApproval(ctx, decide("p2", "apr1", st, at(time.Minute)))
		wantErr(t, err, store.ErrNotFound, "decide another project's approval: "+string(st))
		// Nothing of it reaches the other project, with the error or else.
		same(t, got, approvals.Approval{}, "approval returned to another project: "+string(st))
	}
	_, _, err := s.DecideApproval(ctx, decide("p2", "apr1", approvals.Expired, at(time.Hour)))
	wantErr(t, err, store.ErrNotFound, "expire another project's approval")
	_, _, err = s.DecideApproval(ctx, decide("p1", "apr404", approvals.Approved, at(time.Minute)))
	wantErr(t, err, store.ErrNotFound, "decide an unknown approval")
	// A Read that lies about the project wins nothing: the stored run says.
	lie := a
	lie.ProjectID = "p2"
	p := decide("p2", "apr1", approvals.Approved, at(time.Minute))
	p.Read = &lie
	_, _, err = s.DecideApproval(ctx, p)
	wantErr(t, err, store.ErrNotFound, "decide another project's approval with a Read that names this project")
	same(t, getApproval(t, s, "apr1"), a, "approval after foreign decisions")
	same(t, getRun(t, s, "r1"), r, "run after foreign decisions")

	// Settled, it still reads as missing to another project.
	_, _, err = s.DecideApproval(ctx, decide("p1", "apr1", approvals.Approved, at(time.Minute)))
	noErr(t, err, "approve")
	_, _, err = s.DecideApproval(ctx, decide("p2", "apr1", approvals.Denied, at(time.Minute)))
	wantErr(t, err, store.ErrNotFound, "decide another project's settled approval")
}

// testDecideLyingDeadline: a Read that lies about the deadline wins
// nothing: the stored ExpiresAt says. A decision after the real deadline on
// a Read with a later one is refused with approvals.ErrExpired, and an
// expiry before the real deadline on a Read with an earlier one with
// approvals.ErrNotDue, changing nothing.
func testDecideLyingDeadline(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	later := a
	later.ExpiresAt = at(time.Hour)
	for _, st := range []approvals.Status{approvals.Approved, approvals.Denied} {
		p := decide("p1", "apr1", st, at(20*time.Minute))
		p.Read = &later
		gotA, _, err := s.DecideApproval(ctx, p)
		wantErr(t, err, approvals.ErrExpired, "decide after the deadline with a Read that says it is an hour: "+string(st))
		same(t, gotA, a, "approval returned with ErrExpired")
	}
	earlier := a
	earlier.ExpiresAt = at(time.Minute)
	p := decide("p1", "apr1", approvals.Expired, at(5*time.Minute))
	p.Read = &earlier
	_, _, err := s.DecideApproval(ctx, p)
	wantErr(t, err, approvals.ErrNotDue, "expire before the deadline with a Read that says it was a minute")
	same(t, getApproval(t, s, "apr1"), a, "approval after decisions on lying Reads")
	same(t, getRun(t, s, "r1"), r, "run after decisions on lying Reads")
	sameIDs(t, dueIDs(t, s, at(time.Hour)), []string{"apr1"}, "still due for the sweeper")
}

func testDecideEditedInput(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	p := decide("p1", "apr1", approvals.Approved, at(time.Minute))
	p.Decision.Input = json.RawMessage(`{"orderId":"o-1","amount":25}`)
	digest, err := approvals.Digest(p.Decision.Input)
	noErr(t, err, "digest")
	p.Decision.InputDigest = digest
	gotA, gotR, err := s.DecideApproval(ctx, p)
	noErr(t, err, "approve with an edited input")
	checkDecided(t, s, p, r, a, gotA, gotR)
	same(t, gotA.Input, p.Decision.Input, "approved input")
	eq(t, gotA.InputDigest, digest, "approved digest")
	same(t, gotA.OriginalInput, a.Input, "original input")
	if gotA.InputDigest == a.InputDigest {
		t.Fatal("the digest did not change with the input")
	}
}

func testDecideRunMoved(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	// The run left awaiting-approval behind the approval's back.
	r.Status = store.RunRunning
	r, err := s.CommitRun(ctx, store.RunCommit{Run: r})
	noErr(t, err, "move the run")
	_, _, err = s.DecideApproval(ctx, decide("p1", "apr1", approvals.Approved, at(time.Minute)))
	wantErr(t, err, store.ErrConflict, "approve for a run no longer awaiting it")
	same(t, getApproval(t, s, "apr1"), a, "approval after a conflict")
	same(t, getRun(t, s, "r1"), r, "run after a conflict")

	// Awaiting another approval is no better.
	r2, _ := gatedRun(t, s, "p1", "r2", "apr2", t0, at(15*time.Minute))
	a3 := newApproval("apr3", r2, at(time.Minute), at(15*time.Minute))
	r2.ApprovalID = "apr3"
	r2, err = s.CommitRun(ctx, store.RunCommit{Run: r2, Approval: &a3})
	noErr(t, err, "move r2 to another approval")
	_, _, err = s.DecideApproval(ctx, decide("p1", "apr2", approvals.Denied, at(2*time.Minute)))
	wantErr(t, err, store.ErrConflict, "deny an approval the run no longer awaits")
	same(t, getRun(t, s, "r2"), r2, "r2 after a conflict")

	// So is awaiting under another id while this approval is still the
	// run's last request.
	r3, a4 := gatedRun(t, s, "p1", "r3", "apr4", t0, at(15*time.Minute))
	r3.ApprovalID = "apr5"
	r3, err = s.CommitRun(ctx, store.RunCommit{Run: r3})
	noErr(t, err, "point r3 at another approval id")
	_, _, err = s.DecideApproval(ctx, decide("p1", "apr4", approvals.Approved, at(2*time.Minute)))
	wantErr(t, err, store.ErrConflict, "approve an approval the run does not await")
	same(t, getApproval(t, s, "apr4"), a4, "apr4 after a conflict")
	same(t, getRun(t, s, "r3"), r3, "r3 after a conflict")
}

// testDecideReadOfAnother: a Read of another approval is no read of the
// one decided: the decision settles the approval it names, and the other
// stays as it is.
func testDecideReadOfAnother(t *testing.T, s store.Store) {
	ctx := t.Context()
	gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	r2, a2 := gatedRun(t, s, "p1", "r2", "apr2", t0, at(15*time.Minute))
	p := decide("p1", "apr1", approvals.Approved, at(time.Minute))
	p.Read = &a2
	gotA, gotR, err := s.DecideApproval(ctx, p)
	noErr(t, err, "approve apr1 with a Read of apr2")
	eq(t, gotA.ID, "apr1", "approval decided")
	eq(t, gotR.ID, "r1", "run moved")
	eq(t, getApproval(t, s, "apr1").Status, approvals.Approved, "apr1 after its approval")
	same(t, getApproval(t, s, "apr2"), a2, "apr2 after a decision on apr1")
	same(t, getRun(t, s, "r2"), r2, "r2 after a decision on apr1")
}

func testDecideLeavesQueues(t *testing.T, s store.Store) {
	ctx := t.Context()
	decisions := []struct {
		st   approvals.Status
		when time.Time
	}{
		{approvals.Approved, at(time.Minute)},
		{approvals.Denied, at(time.Minute)},
		{approvals.Expired, at(15 * time.Minute)},
		{approvals.Cancelled, at(time.Minute)},
	}
	var ids []string
	for i := range decisions {
		id := fmt.Sprintf("apr%d", i)
		gatedRun(t, s, "p1", fmt.Sprintf("r%d", i), id, at(time.Duration(i)*time.Second), at(15*time.Minute))
		ids = append([]string{id}, ids...)
	}
	gatedRun(t, s, "p1", "r-stay", "apr-stay", at(10*time.Second), at(20*time.Minute))
	sameIDs(t, pendingIDs(t, s, "p1", store.NewestFirst), append([]string{"apr-stay"}, ids...), "pending before decisions")

	for i, d := range decisions {
		id := fmt.Sprintf("apr%d", i)
		_, r, err := s.DecideApproval(ctx, decide("p1", id, d.st, d.when))
		noErr(t, err, string(d.st))
		eq(t, r.Status, runStatusAfter(d.st), "run status after "+string(d.st))

		page, err := s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", Status: d.st})
		noErr(t, err, "list "+string(d.st))
		sameIDs(t, approvalIDs(page.Items), []string{id}, "approvals that are "+string(d.st))
	}
	sameIDs(t, pendingIDs(t, s, "p1", store.NewestFirst), []string{"apr-stay"}, "pending, newest first, after decisions")
	sameIDs(t, pendingIDs(t, s, "p1", store.ExpiringFirst), []string{"apr-stay"}, "pending, expiring first, after decisions")
	sameIDs(t, dueIDs(t, s, at(time.Hour)), []string{"apr-stay"}, "due after decisions")
}

func testDecideConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(15*time.Minute))
	const n = 50
	params := make([]store.DecideParams, n)
	for i := range params {
		st := approvals.Approved
		if i%2 == 1 {
			st = approvals.Denied
		}
		params[i] = decide("p1", "apr1", st, at(time.Minute))
		params[i].Decision.By = fmt.Sprintf("key_%d", i)
	}
	gotA := make([]approvals.Approval, n)
	gotR := make([]store.Run, n)
	errs := race(n, func(i int) (err error) {
		gotA[i], gotR[i], err = s.DecideApproval(ctx, params[i])
		return err
	})
	won := winners(t, errs, approvals.ErrNotPending)
	if len(won) != 1 {
		t.Fatalf("%d of %d concurrent decisions won, want exactly 1", len(won), n)
	}
	w := won[0]
	checkDecided(t, s, params[w], r, a, gotA[w], gotR[w])
	for i := range n {
		if i != w {
			same(t, gotA[i], gotA[w], fmt.Sprintf("approval returned to loser %d", i))
		}
	}
}

func testDecideRaceExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	const rounds, n = 5, 20
	for round := range rounds {
		id := fmt.Sprintf("apr%d", round)
		deadline := at(15 * time.Minute)
		r, a := gatedRun(t, s, "p1", fmt.Sprintf("r%d", round), id, t0, deadline)
		params := make([]store.DecideParams, n)
		for i := range params {
			if i%2 == 0 {
				params[i] = decide("p1", id, approvals.Approved, deadline.Add(-time.Millisecond))
			} else {
				params[i] = decide("p1", id, approvals.Expired, deadline.Add(time.Millisecond))
			}
		}
		gotA := make([]approvals.Approval, n)
		gotR := make([]store.Run, n)
		errs := race(n, func(i int) (err error) {
			gotA[i], gotR[i], err = s.DecideApproval(ctx, params[i])
			return err
		})
		won := winners(t, errs, approvals.ErrNotPending)
		if len(won) != 1 {
			t.Fatalf("round %d: %d of %d racing decisions won, want exactly 1", round, len(won), n)
		}
		w := won[0]
		checkDecided(t, s, params[w], r, a, gotA[w], gotR[w])
		eq(t, getRun(t, s, r.ID).Status, runStatusAfter(params[w].Decision.Status), "run status matches the winning decision")
	}
}

// testApprovalDueWithinASecond: a deadline is kept to the nanosecond: an
// approval that expires half a second into a minute is not due at the
// minute, and is due at its deadline.
func testApprovalDueWithinASecond(t *testing.T, s store.Store) {
	half := at(time.Minute + 500*time.Millisecond)
	gatedRun(t, s, "p1", "r1", "apr1", t0, half)
	sameIDs(t, dueIDs(t, s, at(time.Minute)), nil, "due at the minute, half a second before its deadline")
	sameIDs(t, dueIDs(t, s, half.Add(-time.Millisecond)), nil, "due just before its deadline")
	sameIDs(t, dueIDs(t, s, half), []string{"apr1"}, "due at its deadline")
}

// testDecideClearsLease: a decision that settles an approval clears the
// run's lease owner, also when the run kept one while it waited.
func testDecideClearsLease(t *testing.T, s store.Store) {
	ctx := t.Context()
	createRun(t, s, newRun("r1", "p1", t0), event("run.created"))
	r, err := s.ClaimRun(ctx, claim("r1", "w1", t0))
	noErr(t, err, "claim")
	a := newApproval("apr1", r, at(time.Minute), at(time.Hour))
	r.Status, r.ApprovalID = store.RunAwaitingApproval, "apr1" // the claim's lease kept
	_, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{event("approval.requested")}, Approval: &a})
	noErr(t, err, "commit into awaiting-approval with the lease kept")
	eq(t, getRun(t, s, "r1").LeaseOwner, "w1", "lease owner while awaiting approval")

	_, got, err := s.DecideApproval(ctx, decide("p1", "apr1", approvals.Approved, at(2*time.Minute)))
	noErr(t, err, "approve")
	eq(t, got.LeaseOwner, "", "lease owner of the approved run")
	eq(t, got.LeaseUntil.Equal(at(3*time.Minute)), true, "dispatch deadline of the approved run")
	same(t, getRun(t, s, "r1"), got, "stored approved run")
}

// testDecideRunStatusRefused: a decision whose RunStatus cannot follow it
// (awaiting-approval, none, or no run status) is refused and changes
// nothing.
func testDecideRunStatusRefused(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", t0, at(time.Hour))
	before := snap(t, s, r)
	for _, st := range []store.RunStatus{store.RunAwaitingApproval, "", "paused"} {
		p := decide("p1", "apr1", approvals.Approved, at(time.Minute))
		p.RunStatus = st
		_, _, err := s.DecideApproval(ctx, p)
		if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			t.Fatalf("approve with run status %q: got %v, want a validation error", st, err)
		}
		same(t, snap(t, s, r), before, fmt.Sprintf("run, events and approval after an approve with run status %q", st))
	}
	same(t, getApproval(t, s, "apr1"), a, "approval after refused decisions")
}
