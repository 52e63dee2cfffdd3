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

// voteTests: an approval with requirements collects votes, each one
// conditional write; the vote that completes the quorum settles it, once.
var voteTests = []test{
	{"Vote/Quorum", testVoteQuorum},
	{"Vote/Concurrent", testVoteConcurrent},
	{"Vote/ConcurrentRetried", testVoteConcurrentRetried},
	{"Vote/Expiry", testVoteExpiry},
	{"Vote/Cancel", testVoteCancel},
	{"Vote/AfterEdit", testVoteAfterEdit},
	{"Vote/Twice", testVoteTwice},
	{"Vote/Ineligible", testVoteIneligible},
	{"Vote/Deny", testVoteDeny},
	{"Vote/DenyAfterEdit", testVoteDenyAfterEdit},
	{"Vote/EachCountsOnce", testVoteEachCountsOnce},
}

func voters(ids ...string) []approvals.Voter {
	out := make([]approvals.Voter, len(ids))
	for i, id := range ids {
		out[i] = approvals.Voter{Member: id, Name: "Name of " + id}
	}
	return out
}

// quorumRun is gatedRun with an approval that has requirements.
func quorumRun(t testing.TB, s store.Store, runID, aprID string, reqs ...approvals.Requirement) (store.Run, approvals.Approval) {
	t.Helper()
	r := createRun(t, s, newRun(runID, "p1", t0.Add(-time.Second)), event("run.created"))
	a := newApproval(aprID, r, t0, at(15*time.Minute))
	a.Requirements = reqs
	r.Status, r.ApprovalID, r.LeaseOwner, r.LeaseUntil, r.UpdatedAt = store.RunAwaitingApproval, aprID, "", time.Time{}, t0
	got, err := s.CommitRun(t.Context(), store.RunCommit{Run: r, Events: []store.Event{event("approval.requested")}, Approval: &a})
	noErr(t, err, "commit run "+runID+" into awaiting-approval")
	same(t, getApproval(t, s, aprID), a, "stored approval with requirements")
	return got, a
}

// vote builds what the engine sends for member's approve of read, the
// approval as the member read it: the events and run status of a vote that
// settles it, or of one that does not.
func vote(read approvals.Approval, member string, when time.Time) store.DecideParams {
	p := store.DecideParams{
		Decision: approvals.Decision{
			ProjectID: read.ProjectID, ApprovalID: read.ID, Status: approvals.Approved,
			By: "key_" + member, ByName: "Name of " + member, ByMember: member, VoteVersion: read.VoteVersion, At: when,
		},
		Read: &read,
	}
	if p.Decision.Apply(read).Status == approvals.Approved {
		p.RunStatus, p.LeaseUntil = store.RunQueued, when.Add(time.Minute)
		p.Events = []store.Event{event("approval.approved"), event("run.resumed")}
	} else {
		p.RunStatus = store.RunQueued // ignored: the run waits on
		p.Events = []store.Event{event("approval.vote")}
	}
	return p
}

func votersOf(a approvals.Approval) []string {
	out := make([]string, len(a.Votes))
	for i, v := range a.Votes {
		out[i] = v.Member
	}
	return out
}

// testVoteQuorum: 2 of 3; the first vote is recorded with its event and
// leaves the run waiting, the second settles and queues the run, a third
// finds it settled.
func testVoteQuorum(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := quorumRun(t, s, "r1", "apr1", approvals.Requirement{Group: "finance", Min: 2, Eligible: voters("m1", "m2", "m3")})

	got, run, err := s.DecideApproval(ctx, vote(a, "m1", at(time.Minute)))
	noErr(t, err, "first vote")
	eq(t, got.Status, approvals.Pending, "approval after the first vote")
	sameIDs(t, votersOf(got), []string{"m1"}, "votes after the first vote")
	eq(t, got.VoteVersion, int64(1), "vote version after the first vote")
	stored := getApproval(t, s, "apr1")
	same(t, stored, got, "stored approval after the first vote")
	eq(t, run.Status, store.RunAwaitingApproval, "run after the first vote")
	eq(t, getRun(t, s, "r1").Status, store.RunAwaitingApproval, "stored run after the first vote")
	eq(t, getRun(t, s, "r1").Version, r.Version+1, "run version after the first vote")
	sameIDs(t, eventTypes(events(t, s, "r1")), []string{"run.created", "approval.requested", "approval.vote"}, "events after the first vote")
	sameIDs(t, pendingIDs(t, s, "p1", store.NewestFirst), []string{"apr1"}, "still pending")

	got, run, err = s.DecideApproval(ctx, vote(stored, "m2", at(2*time.Minute)))
	noErr(t, err, "second vote")
	eq(t, got.Status, approvals.Approved, "approval after the second vote")
	sameIDs(t, votersOf(got), []string{"m1", "m2"}, "votes after the second vote")
	eq(t, got.DecidedBy, "key_m2", "the settling voter decided")
	same(t, getApproval(t, s, "apr1"), got, "stored approval after the second vote")
	eq(t, run.Status, store.RunQueued, "run after the settling vote")
	sameIDs(t, eventTypes(events(t, s, "r1")), []string{"run.created", "approval.requested", "approval.vote", "approval.approved", "run.resumed"}, "events after the settling vote")
	sameIDs(t, pendingIDs(t, s, "p1", store.NewestFirst), nil, "pending after the settling vote")

	_, _, err = s.DecideApproval(ctx, vote(got, "m3", at(3*time.Minute)))
	wantErr(t, err, approvals.ErrNotPending, "a vote after the quorum")
}

// testVoteConcurrent: 50 members vote at once on the same version: one
// vote is recorded, the other 49 lose with ErrChanged and change nothing.
func testVoteConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 50
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%02d", i)
	}
	_, a := quorumRun(t, s, "r1", "apr1", approvals.Requirement{Group: "finance", Min: 2, Eligible: voters(ids...)})
	errs := race(n, func(i int) error {
		_, _, err := s.DecideApproval(ctx, vote(a, ids[i], at(time.Minute)))
		return err
	})
	won := winners(t, errs, approvals.ErrChanged)
	if len(won) != 1 {
		t.Fatalf("%d of %d votes on one version were recorded, want exactly 1", len(won), n)
	}
	got := getApproval(t, s, "apr1")
	sameIDs(t, votersOf(got), []string{ids[won[0]]}, "votes recorded")
	eq(t, got.Status, approvals.Pending, "approval after one of two votes")
	sameIDs(t, eventTypes(events(t, s, "r1")), []string{"run.created", "approval.requested", "approval.vote"}, "events")
}

// testVoteConcurrentRetried: 50 members vote at once, each re-reading and
// voting again when it loses a race, as the engine does: exactly Min votes
// are recorded, exactly one write settles, every other voter is told the
// approval is settled.
func testVoteConcurrentRetried(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n, min = 50, 3
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%02d", i)
	}
	quorumRun(t, s, "r1", "apr1", approvals.Requirement{Group: "finance", Min: min, Eligible: voters(ids...)})
	settled := make([]bool, n)
	errs := race(n, func(i int) error {
		for {
			read, err := s.GetApproval(ctx, "apr1")
			if err != nil {
				return err
			}
			got, _, err := s.DecideApproval(ctx, vote(read, ids[i], at(time.Minute)))
			if errors.Is(err, approvals.ErrChanged) {
				continue
			}
			settled[i] = err == nil && got.Status == approvals.Approved
			return err
		}
	})
	won := winners(t, errs, approvals.ErrNotPending)
	eq(t, len(won), min, "votes recorded")
	settling := 0
	for _, ok := range settled {
		if ok {
			settling++
		}
	}
	eq(t, settling, 1, "writes that settled the approval")
	got := getApproval(t, s, "apr1")
	eq(t, got.Status, approvals.Approved, "approval")
	eq(t, len(got.Votes), min, "votes stored")
	eq(t, getRun(t, s, "r1").Status, store.RunQueued, "run")
	sameIDs(t, eventTypes(events(t, s, "r1")), []string{"run.created", "approval.requested", "approval.vote", "approval.vote", "approval.approved", "run.resumed"}, "events")
}

// testVoteExpiry: a vote at the deadline races the expiry; exactly one
// wins, and a vote past the deadline is refused.
func testVoteExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	for round := range 5 {
		runID, id := fmt.Sprintf("r%d", round), fmt.Sprintf("apr%d", round)
		_, a := quorumRun(t, s, runID, id, approvals.Requirement{Group: "finance", Min: 1, Eligible: voters("m1")})
		deadline := a.ExpiresAt
		errs := race(2, func(i int) error {
			var err error
			if i == 0 {
				_, _, err = s.DecideApproval(ctx, vote(a, "m1", deadline.Add(-time.Millisecond)))
			} else {
				_, _, err = s.DecideApproval(ctx, decide("p1", id, approvals.Expired, deadline))
			}
			return err
		})
		won := winners(t, errs, approvals.ErrNotPending)
		if len(won) != 1 {
			t.Fatalf("round %d: %d of vote and expiry won, want exactly 1", round, len(won))
		}
		want := map[int]approvals.Status{0: approvals.Approved, 1: approvals.Expired}[won[0]]
		eq(t, getApproval(t, s, id).Status, want, "approval after the race")
	}
	_, a := quorumRun(t, s, "late", "apr-late", approvals.Requirement{Group: "finance", Min: 2, Eligible: voters("m1", "m2")})
	_, _, err := s.DecideApproval(ctx, vote(a, "m1", a.ExpiresAt))
	wantErr(t, err, approvals.ErrExpired, "a vote at the deadline")
	eq(t, len(getApproval(t, s, "apr-late").Votes), 0, "votes after a late vote")
}

// testVoteCancel: a vote and a cancel at once: the cancel always settles
// the approval; the vote counts only if it came first, and then its event
// comes before the cancel's.
func testVoteCancel(t *testing.T, s store.Store) {
	ctx := t.Context()
	for round := range 5 {
		runID, id := fmt.Sprintf("r%d", round), fmt.Sprintf("apr%d", round)
		_, a := quorumRun(t, s, runID, id, approvals.Requirement{Group: "finance", Min: 2, Eligible: voters("m1", "m2")})
		errs := race(2, func(i int) error {
			var err error
			if i == 0 {
				_, _, err = s.DecideApproval(ctx, vote(a, "m1", at(time.Minute)))
			} else {
				_, _, err = s.DecideApproval(ctx, decide("p1", id, approvals.Cancelled, at(time.Minute)))
			}
			return err
		})
		noErr(t, errs[1], "cancel")
		got := getApproval(t, s, id)
		eq(t, got.Status, approvals.Cancelled, "approval after vote and cancel")
		eq(t, getRun(t, s, runID).Status, store.RunCancelled, "run after vote and cancel")
		types := eventTypes(events(t, s, runID))
		if errs[0] == nil {
			sameIDs(t, votersOf(got), []string{"m1"}, "votes kept by the cancelled approval")
			sameIDs(t, types, []string{"run.created", "approval.requested", "approval.vote", "approval.cancelled"}, "events, the vote first")
		} else {
			wantErr(t, errs[0], approvals.ErrNotPending, "vote after the cancel")
			sameIDs(t, types, []string{"run.created", "approval.requested", "approval.cancelled"}, "events, the cancel first")
		}
	}
}

// testVoteAfterEdit: an approve that edits the input resets the votes on
// the old input; the editor's vote counts for the new one; a vote made on
// the old input is refused; a vote on the new one completes the quorum.
func testVoteAfterEdit(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, a := quorumRun(t, s, "r1", "apr1", approvals.Requirement{Group: "finance", Min: 2, Eligible: voters("m1", "m2", "m3")})
	old := a.InputDigest
	v1, _, err := s.DecideApproval(ctx, vote(a, "m1", at(time.Minute)))
	noErr(t, err, "m1 votes on the input as asked")

	edit := vote(v1, "m2", at(2*time.Minute))
	edit.Decision.Input = json.RawMessage(`{"orderId":"o-1","amount":20}`)
	edit.Decision.InputDigest, err = approvals.Digest(edit.Decision.Input)
	noErr(t, err, "digest")
	edit.Events = []store.Event{event("approval.vote")}
	v2, _, err := s.DecideApproval(ctx, edit)
	noErr(t, err, "m2 approves with an edit")
	eq(t, v2.Status, approvals.Pending, "approval after the edit")
	sameIDs(t, votersOf(v2), []string{"m2"}, "votes after the edit: the editor's only")
	eq(t, v2.InputDigest, edit.Decision.InputDigest, "digest after the edit")
	same(t, v2.OriginalInput, a.Input, "original input kept")
	same(t, getApproval(t, s, "apr1"), v2, "stored approval after the edit")

	// m1 again, on what it read before the edit.
	stale := vote(v1, "m1", at(3*time.Minute))
	stale.Decision.Seen = old
	_, _, err = s.DecideApproval(ctx, stale)
	wantErr(t, err, approvals.ErrChanged, "a vote on the input before the edit")
	// m3 read the new input but says it saw the old one.
	seen := vote(v2, "m3", at(3*time.Minute))
	seen.Decision.Seen = old
	_, _, err = s.DecideApproval(ctx, seen)
	wantErr(t, err, approvals.ErrChanged, "a vote whose voter saw the old input")
	same(t, getApproval(t, s, "apr1"), v2, "approval after refused votes")

	again := vote(v2, "m1", at(4*time.Minute))
	again.Decision.Seen = v2.InputDigest
	got, run, err := s.DecideApproval(ctx, again)
	noErr(t, err, "m1 votes on the edited input")
	eq(t, got.Status, approvals.Approved, "approval")
	same(t, got.Input, edit.Decision.Input, "approved input")
	eq(t, run.Status, store.RunQueued, "run")
	same(t, getApproval(t, s, "apr1"), got, "stored approval")
}

// testVoteTwice: a member's second vote on the same input is refused and
// changes nothing.
func testVoteTwice(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := quorumRun(t, s, "r1", "apr1", approvals.Requirement{Group: "finance", Min: 2, Eligible: voters("m1", "m2")})
	v1, _, err := s.DecideApproval(ctx, vote(a, "m1", at(time.Minute)))
	noErr(t, err, "first vote")
	before := snap(t, s, r)
	_, _, err = s.DecideApproval(ctx, vote(v1, "m1", at(2*time.Minute)))
	wantErr(t, err, approvals.ErrAlreadyVoted, "second vote by the same member")
	same(t, snap(t, s, r), before, "state after the second vote")
}

// testVoteIneligible: a member outside the eligible lists may neither
// approve nor deny, and changes nothing.
func testVoteIneligible(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := quorumRun(t, s, "r1", "apr1", approvals.Requirement{Group: "finance", Min: 1, Eligible: voters("m1")})
	before := snap(t, s, r)
	_, _, err := s.DecideApproval(ctx, vote(a, "outsider", at(time.Minute)))
	wantErr(t, err, approvals.ErrNotEligible, "approve by an ineligible member")
	deny := decide("p1", "apr1", approvals.Denied, at(time.Minute))
	deny.Decision.ByMember = "outsider"
	_, _, err = s.DecideApproval(ctx, deny)
	wantErr(t, err, approvals.ErrNotEligible, "deny by an ineligible member")
	noMember := vote(a, "", at(time.Minute))
	_, _, err = s.DecideApproval(ctx, noMember)
	wantErr(t, err, approvals.ErrNotEligible, "approve by a key without a member")
	same(t, snap(t, s, r), before, "state after refused votes")
}

// testVoteDeny: one eligible member's deny settles the approval as denied,
// whatever votes it had.
func testVoteDeny(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, a := quorumRun(t, s, "r1", "apr1", approvals.Requirement{Group: "finance", Min: 2, Eligible: voters("m1", "m2")})
	v1, _, err := s.DecideApproval(ctx, vote(a, "m1", at(time.Minute)))
	noErr(t, err, "vote")
	deny := decide("p1", "apr1", approvals.Denied, at(2*time.Minute))
	deny.Decision.ByMember = "m2"
	deny.Read = &v1
	got, run, err := s.DecideApproval(ctx, deny)
	noErr(t, err, "deny")
	eq(t, got.Status, approvals.Denied, "approval")
	sameIDs(t, votersOf(got), []string{"m1"}, "votes kept")
	eq(t, run.Status, store.RunFailed, "run")
	same(t, getApproval(t, s, "apr1"), got, "stored approval")
}

// testVoteEachCountsOnce: with one of finance and one of legal required, a
// member of both counts once; the quorum is met when a second member's vote
// lets each requirement have its own.
func testVoteEachCountsOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, a := quorumRun(t, s, "r1", "apr1",
		approvals.Requirement{Group: "finance", Min: 1, Eligible: voters("both", "fin")},
		approvals.Requirement{Group: "legal", Min: 1, Eligible: voters("both")})
	v1, _, err := s.DecideApproval(ctx, vote(a, "both", at(time.Minute)))
	noErr(t, err, "the member of both groups votes")
	eq(t, v1.Status, approvals.Pending, "one member cannot meet two requirements")
	got, _, err := s.DecideApproval(ctx, vote(v1, "fin", at(2*time.Minute)))
	noErr(t, err, "a member of finance votes")
	eq(t, got.Status, approvals.Approved, "each requirement has its own vote")
	ts := got.Progress()
	eq(t, ts[0].Counted[0].Member+","+ts[1].Counted[0].Member, "fin,both", "who counts where")
}

// testVoteDenyAfterEdit: a deny made on the input before an edit (Seen) is
// refused and changes nothing; made on the edited input, it denies.
func testVoteDenyAfterEdit(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := quorumRun(t, s, "r1", "apr1", approvals.Requirement{Group: "finance", Min: 2, Eligible: voters("m1", "m2", "m3")})
	edit := vote(a, "m2", at(time.Minute))
	edit.Decision.Input = json.RawMessage(`{"orderId":"o-1","amount":20}`)
	var err error
	edit.Decision.InputDigest, err = approvals.Digest(edit.Decision.Input)
	noErr(t, err, "digest")
	edit.Events = []store.Event{event("approval.vote")}
	edited, _, err := s.DecideApproval(ctx, edit)
	noErr(t, err, "m2 approves with an edit")
	before := snap(t, s, r)
	deny := decide("p1", "apr1", approvals.Denied, at(2*time.Minute))
	deny.Decision.ByMember, deny.Decision.Seen = "m1", a.InputDigest
	deny.Read = &a // what m1 read, before the edit
	_, _, err = s.DecideApproval(ctx, deny)
	wantErr(t, err, approvals.ErrChanged, "a deny on the input before the edit")
	same(t, snap(t, s, r), before, "state after the refused deny")
	deny.Decision.Seen, deny.Read = edited.InputDigest, &edited
	got, _, err := s.DecideApproval(ctx, deny)
	noErr(t, err, "a deny on the edited input")
	eq(t, got.Status, approvals.Denied, "approval")
}
