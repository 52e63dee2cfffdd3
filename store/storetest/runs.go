package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"stead/store"
)

var runTests = []test{
	{"Run/Create", testRunCreate},
	{"Run/Idempotency", testRunIdempotency},
	{"Run/List", testRunList},
	{"Run/Events", testRunEvents},
	{"Run/Steps", testRunSteps},
}

func testRunCreate(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRun("r1", "p1", t0)
	r.IdempotencyKey, r.RequestDigest = "idem-1", "sha256-body"
	r.Tool, r.Via = "refundOrder", "mcp:mcpk_1"
	got, err := s.CreateRun(ctx, r, []store.Event{event("run.created"), event("run.queued"), event("run.dispatched")})
	noErr(t, err, "create run")
	want := r
	want.Version, want.LastSeq = 1, 3
	same(t, got, want, "returned run")
	same(t, getRun(t, s, "r1"), want, "stored run")

	es := events(t, s, "r1")
	sameIDs(t, eventTypes(es), []string{"run.created", "run.queued", "run.dispatched"}, "events")
	checkSeqs(t, es, "r1", 1)
	same(t, es[1].Data, json.RawMessage(`{"type":"run.queued"}`), "event data")
	eq(t, es[1].At.Equal(t0), true, "event time")

	dup := newRun("r1", "p1", at(time.Minute))
	_, err = s.CreateRun(ctx, dup, []store.Event{event("run.created")})
	wantErr(t, err, store.ErrExists, "create run with a taken id")
	same(t, getRun(t, s, "r1"), want, "run after a refused duplicate")
	eq(t, len(events(t, s, "r1")), 3, "events after a refused duplicate")

	_, err = s.GetRun(ctx, "r404")
	wantErr(t, err, store.ErrNotFound, "get unknown run")

	// A status that is no run status is refused and stores nothing.
	bad := newRun("r3", "p1", t0)
	bad.Status = "paused"
	_, err = s.CreateRun(ctx, bad, []store.Event{event("run.created")})
	if err == nil || errors.Is(err, store.ErrExists) {
		t.Fatalf("create run with status %q: got %v, want a validation error", bad.Status, err)
	}
	_, err = s.GetRun(ctx, "r3")
	wantErr(t, err, store.ErrNotFound, "run refused for its status")
	eq(t, len(events(t, s, "r3")), 0, "events of the run refused for its status")

	empty := createRun(t, s, newRun("r2", "p1", t0))
	eq(t, empty.Version, int64(1), "version of a run without events")
	eq(t, empty.LastSeq, int64(0), "lastSeq of a run without events")
}

func testRunIdempotency(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newRun("r1", "p1", t0)
	a.IdempotencyKey = "idem-1"
	first := createRun(t, s, a, event("run.created"))

	b := newRun("r2", "p1", at(time.Minute))
	b.IdempotencyKey = "idem-1"
	got, err := s.CreateRun(ctx, b, []store.Event{event("run.created"), event("run.queued")})
	wantErr(t, err, store.ErrExists, "create run with a used idempotency key")
	same(t, got, first, "run returned for a used idempotency key")
	_, err = s.GetRun(ctx, "r2")
	wantErr(t, err, store.ErrNotFound, "run refused for its idempotency key")
	eq(t, len(events(t, s, "r2")), 0, "events of the refused run")
	eq(t, len(events(t, s, "r1")), 1, "events of the first run")
	page, err := s.ListRuns(ctx, store.RunFilter{ProjectID: "p1"})
	noErr(t, err, "list runs")
	sameIDs(t, runIDs(page.Items), []string{"r1"}, "runs of p1")

	// The same key in another project is another request.
	c := newRun("r3", "p2", t0)
	c.IdempotencyKey = "idem-1"
	got, err = s.CreateRun(ctx, c, nil)
	noErr(t, err, "create run with the key used in another project")
	eq(t, got.ID, "r3", "run created in p2")

	// A retry of the first request with the same id is the same answer.
	got, err = s.CreateRun(ctx, a, nil)
	wantErr(t, err, store.ErrExists, "retry of the first request")
	eq(t, got.ID, "r1", "run returned to the retry")
}

func testRunList(t *testing.T, s store.Store) {
	ctx := t.Context()
	statuses := []store.RunStatus{store.RunQueued, store.RunRunning, store.RunSucceeded, store.RunFailed}
	var all []store.Run
	for i := range 11 {
		r := newRun(fmt.Sprintf("r%02d", i), "p1", at(time.Duration(i)*time.Minute))
		r.Status = statuses[i%len(statuses)]
		r.Agent = []string{"support", "billing"}[i%2]
		r.EndUserID = []string{"u1", "u2", "u3"}[i%3]
		all = append(all, createRun(t, s, r))
	}
	// Another project, created at the same times.
	for i := range 3 {
		createRun(t, s, newRun(fmt.Sprintf("q%02d", i), "p2", at(time.Duration(i)*time.Minute)))
	}
	slices.Reverse(all) // newest first

	cases := []struct {
		name  string
		f     store.RunFilter
		match func(store.Run) bool
	}{
		{"all", store.RunFilter{}, func(store.Run) bool { return true }},
		{"status", store.RunFilter{Status: store.RunRunning}, func(r store.Run) bool { return r.Status == store.RunRunning }},
		{"agent", store.RunFilter{Agent: "billing"}, func(r store.Run) bool { return r.Agent == "billing" }},
		{"end user", store.RunFilter{EndUserID: "u2"}, func(r store.Run) bool { return r.EndUserID == "u2" }},
		{"combined", store.RunFilter{Agent: "support", EndUserID: "u1"}, func(r store.Run) bool { return r.Agent == "support" && r.EndUserID == "u1" }},
		{"no match", store.RunFilter{Status: store.RunCancelled}, func(store.Run) bool { return false }},
	}
	for _, tc := range cases {
		var want []string
		for _, r := range all {
			if tc.match(r) {
				want = append(want, r.ID)
			}
		}
		for _, limit := range []int{2, 3, 50} {
			got := collect(t, limit, runIDOf, func(c string) (store.Page[store.Run], error) {
				f := tc.f
				f.ProjectID, f.Cursor, f.Limit = "p1", c, limit
				return s.ListRuns(ctx, f)
			})
			sameIDs(t, got, want, fmt.Sprintf("%s runs of p1 by pages of %d", tc.name, limit))
		}
	}

	page, err := s.ListRuns(ctx, store.RunFilter{ProjectID: "p1", Limit: 1})
	noErr(t, err, "first page")
	same(t, page.Items, all[:1], "first page of one run")

	got := collect(t, 2, runIDOf, func(c string) (store.Page[store.Run], error) {
		return s.ListRuns(ctx, store.RunFilter{ProjectID: "p2", Cursor: c, Limit: 2})
	})
	sameIDs(t, got, []string{"q02", "q01", "q00"}, "runs of p2")
	none, err := s.ListRuns(ctx, store.RunFilter{ProjectID: "p3"})
	noErr(t, err, "list runs of a project without runs")
	eq(t, len(none.Items), 0, "runs of p3")

	_, err = s.ListRuns(ctx, store.RunFilter{ProjectID: "p1", Cursor: "not a cursor %%"})
	wantErr(t, err, store.ErrInvalidCursor, "list runs with a bad cursor")
}

func testRunEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	var evs []store.Event
	for i := range 10 {
		evs = append(evs, event(fmt.Sprintf("e%d", i+1)))
	}
	createRun(t, s, newRun("r1", "p1", t0), evs...)
	createRun(t, s, newRun("r2", "p1", t0), event("other"))

	pages := []struct {
		after int64
		limit int
		want  []string
	}{
		{0, 4, []string{"e1", "e2", "e3", "e4"}},
		{4, 4, []string{"e5", "e6", "e7", "e8"}},
		{8, 4, []string{"e9", "e10"}},
		{10, 4, nil},
		{3, 0, []string{"e4", "e5", "e6", "e7", "e8", "e9", "e10"}},
		{99, 4, nil},
	}
	for _, p := range pages {
		got, err := s.ListEvents(ctx, "r1", p.after, p.limit)
		noErr(t, err, "list events")
		sameIDs(t, eventTypes(got), p.want, fmt.Sprintf("events after %d, limit %d", p.after, p.limit))
		checkSeqs(t, got, "r1", p.after+1)
	}
	// Every seq is after a negative one.
	got, err := s.ListEvents(ctx, "r1", -1, 4)
	noErr(t, err, "list events after -1")
	sameIDs(t, eventTypes(got), []string{"e1", "e2", "e3", "e4"}, "events after -1, limit 4")
	checkSeqs(t, got, "r1", 1)
	other := events(t, s, "r2")
	sameIDs(t, eventTypes(other), []string{"other"}, "events of r2")
	checkSeqs(t, other, "r2", 1)
}

func testRunSteps(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0))
	other := createRun(t, s, newRun("r2", "p1", t0))
	// Recorded out of index order: the list is by index, not by write.
	for _, i := range []int{2, 0, 1} {
		st := store.Step{Index: i, ID: fmt.Sprintf("s%d", i), Output: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			Costs: store.Costs{TokensInput: int64(i)}, IdempotencyKey: fmt.Sprintf("idem-%d", i), CompletedAt: at(time.Duration(i) * time.Minute)}
		var err error
		r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Steps: []store.Step{st}})
		noErr(t, err, "commit step")
	}
	_, err := s.CommitRun(ctx, store.RunCommit{Run: other, Steps: []store.Step{{Index: 7, ID: "s7", Output: json.RawMessage(`{}`)}}})
	noErr(t, err, "commit step of r2")

	got, err := s.GetStep(ctx, "r1", 1)
	noErr(t, err, "get step")
	same(t, got, store.Step{RunID: "r1", Index: 1, ID: "s1", Output: json.RawMessage(`{"i":1}`),
		Costs: store.Costs{TokensInput: 1}, IdempotencyKey: "idem-1", CompletedAt: at(time.Minute)}, "step 1")
	_, err = s.GetStep(ctx, "r1", 3)
	wantErr(t, err, store.ErrNotFound, "get unrecorded step")
	_, err = s.GetStep(ctx, "r2", 1)
	wantErr(t, err, store.ErrNotFound, "get step of another run")

	steps, err := s.ListSteps(ctx, "r1")
	noErr(t, err, "list steps")
	var ids []string
	for _, st := range steps {
		ids = append(ids, st.ID)
		eq(t, st.RunID, "r1", "run of a listed step")
	}
	sameIDs(t, ids, []string{"s0", "s1", "s2"}, "steps in index order")
	steps, err = s.ListSteps(ctx, "r404")
	noErr(t, err, "list steps of an unknown run")
	eq(t, len(steps), 0, "steps of an unknown run")
}

var commitTests = []test{
	{"Commit/Appends", testCommitAppends},
	{"Commit/StaleVersion", testCommitStaleVersion},
	{"Commit/StepOnce", testCommitStepOnce},
	{"Commit/SeveralSteps", testCommitSeveralSteps},
	{"Commit/Approval", testCommitApproval},
	{"Commit/KeepsIdentity", testCommitKeepsIdentity},
	{"Commit/Race", testCommitRace},
	{"Commit/RaceApprovals", testCommitRaceApprovals},
	{"Commit/RaceSteps", testCommitRaceSteps},
}

func testCommitAppends(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0), event("run.created"), event("run.queued"), event("run.claimed"))

	next := r
	next.Status = store.RunRunning
	next.Cursor = 1
	next.Output = json.RawMessage(`{"ok":true}`)
	next.Costs = store.Costs{TokensInput: 10, TokensOutput: 5, CostUSD: 0.25}
	next.Trust, next.TrustOrigin = store.Untrusted, "fetch:example.com"
	next.StepState = json.RawMessage(`{"turn":2}`)
	next.UpdatedAt = at(time.Minute)
	next.LastSeq = 99 // ignored: the store counts
	st := store.Step{Index: 0, ID: "lookup", Output: json.RawMessage(`{"order":"o-1"}`), IdempotencyKey: "idem-0", CompletedAt: at(time.Minute)}
	got, err := s.CommitRun(ctx, store.RunCommit{Run: next, Events: []store.Event{event("step.started"), event("step.completed")}, Steps: []store.Step{st}})
	noErr(t, err, "commit run")

	want := next
	want.Version, want.LastSeq = 2, 5
	same(t, got, want, "returned run")
	same(t, getRun(t, s, "r1"), want, "stored run")
	es := events(t, s, "r1")
	sameIDs(t, eventTypes(es), []string{"run.created", "run.queued", "run.claimed", "step.started", "step.completed"}, "events")
	checkSeqs(t, es, "r1", 1)
	step, err := s.GetStep(ctx, "r1", 0)
	noErr(t, err, "get step")
	st.RunID = "r1"
	same(t, step, st, "stored step")

	// A commit without events keeps LastSeq; the version still moves.
	got, err = s.CommitRun(ctx, store.RunCommit{Run: got})
	noErr(t, err, "commit without events")
	eq(t, got.Version, int64(3), "version after an empty commit")
	eq(t, got.LastSeq, int64(5), "lastSeq after an empty commit")

	_, err = s.CommitRun(ctx, store.RunCommit{Run: newRun("r404", "p1", t0)})
	wantErr(t, err, store.ErrNotFound, "commit an unknown run")
}

func testCommitStaleVersion(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0), event("run.created"))
	stale := r
	r.Status = store.RunRunning
	r, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{event("run.claimed")}})
	noErr(t, err, "first commit")
	before := snap(t, s, r)

	stale.Status = store.RunAwaitingApproval
	stale.ApprovalID = "apr1"
	a := newApproval("apr1", stale, t0, at(time.Hour))
	st := store.Step{Index: 0, ID: "s0", Output: json.RawMessage(`{}`)}
	_, err = s.CommitRun(ctx, store.RunCommit{Run: stale, Events: []store.Event{event("stale")}, Steps: []store.Step{st}, Approval: &a})
	wantErr(t, err, store.ErrConflict, "commit from a stale version")

	same(t, snap(t, s, r), before, "run, events, steps and approvals after a stale commit")
	_, err = s.GetStep(ctx, "r1", 0)
	wantErr(t, err, store.ErrNotFound, "step of a stale commit")
	_, err = s.GetApproval(ctx, "apr1")
	wantErr(t, err, store.ErrNotFound, "approval of a stale commit")
	eq(t, len(pendingIDs(t, s, "p1", store.NewestFirst)), 0, "pending approvals after a stale commit")

	future := r
	future.Version = r.Version + 1
	_, err = s.CommitRun(ctx, store.RunCommit{Run: future})
	wantErr(t, err, store.ErrConflict, "commit from a version ahead of the store")
}

func testCommitStepOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0))
	first := store.Step{Index: 0, ID: "s0", Output: json.RawMessage(`{"first":true}`), CompletedAt: t0}
	r.Cursor = 1
	r, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{event("step.completed")}, Steps: []store.Step{first}})
	noErr(t, err, "record step 0")
	before := snap(t, s, r)

	// Same version, same step: a retry after a crash must not record it twice.
	again := store.Step{Index: 0, ID: "s0", Output: json.RawMessage(`{"first":false}`), CompletedAt: at(time.Minute)}
	next := r
	next.Cursor = 2
	_, err = s.CommitRun(ctx, store.RunCommit{Run: next, Events: []store.Event{event("step.completed.again")}, Steps: []store.Step{again}})
	wantErr(t, err, store.ErrConflict, "record step 0 again")
	same(t, snap(t, s, r), before, "state after recording a step twice")
	got, err := s.GetStep(ctx, "r1", 0)
	noErr(t, err, "get step 0")
	same(t, got.Output, first.Output, "output of step 0")
}

// testCommitSeveralSteps: consecutive read steps share one commit; all of
// them are recorded by it, and none if any one was recorded already.
func testCommitSeveralSteps(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0))
	step := func(i int, out string) store.Step {
		return store.Step{Index: i, ID: fmt.Sprintf("s%d", i), Output: json.RawMessage(out), IdempotencyKey: fmt.Sprintf("idem-%d", i), CompletedAt: at(time.Duration(i) * time.Second)}
	}
	next := r
	next.Cursor = 2
	r, err := s.CommitRun(ctx, store.RunCommit{Run: next, Events: []store.Event{event("step.completed"), event("step.completed")},
		Steps: []store.Step{step(0, `{"a":0}`), step(1, `{"a":1}`)}})
	noErr(t, err, "record steps 0 and 1 in one commit")
	eq(t, r.Cursor, 2, "cursor after the commit")
	steps, err := s.ListSteps(ctx, "r1")
	noErr(t, err, "list steps")
	want := []store.Step{step(0, `{"a":0}`), step(1, `{"a":1}`)}
	for i := range want {
		want[i].RunID = "r1"
	}
	same(t, steps, want, "steps recorded by one commit")
	got, err := s.GetStep(ctx, "r1", 1)
	noErr(t, err, "get step 1")
	same(t, got, want[1], "step 1")
	before := snap(t, s, r)

	// One of them recorded already: the whole commit is refused.
	again := r
	again.Cursor = 3
	_, err = s.CommitRun(ctx, store.RunCommit{Run: again, Events: []store.Event{event("again")}, Steps: []store.Step{step(1, `{"b":1}`), step(2, `{"b":2}`)}})
	wantErr(t, err, store.ErrConflict, "record steps 1 and 2 when 1 is recorded")
	same(t, snap(t, s, r), before, "state after a refused commit of several steps")

	// Out of order or repeated: refused before anything is written.
	_, err = s.CommitRun(ctx, store.RunCommit{Run: again, Steps: []store.Step{step(3, `{}`), step(2, `{}`)}})
	if err == nil || errors.Is(err, store.ErrConflict) {
		t.Fatalf("commit with steps out of order: got %v, want a validation error", err)
	}
	same(t, snap(t, s, r), before, "state after a commit with steps out of order")

	// Steps and an approval in one commit (read steps, then a gated step).
	gated := r
	gated.Cursor = 4
	gated.Status = store.RunAwaitingApproval
	gated.ApprovalID = "apr1"
	gated.LeaseOwner, gated.LeaseUntil = "", time.Time{}
	a := newApproval("apr1", gated, at(time.Minute), at(time.Hour))
	r, err = s.CommitRun(ctx, store.RunCommit{Run: gated, Events: []store.Event{event("step.completed"), event("step.completed"), event("approval.requested")},
		Steps: []store.Step{step(2, `{"c":2}`), step(3, `{"c":3}`)}, Approval: &a})
	noErr(t, err, "record steps 2 and 3 with an approval")
	steps, err = s.ListSteps(ctx, "r1")
	noErr(t, err, "list steps")
	eq(t, len(steps), 4, "steps after the second commit")
	same(t, getApproval(t, s, "apr1"), a, "approval created with the steps")
	eq(t, len(events(t, s, "r1")), 5, "events after both commits")
}

func testCommitApproval(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, a := gatedRun(t, s, "p1", "r1", "apr1", at(time.Minute), at(16*time.Minute))
	eq(t, r.Status, store.RunAwaitingApproval, "run status")
	eq(t, r.ApprovalID, "apr1", "run approval")
	eq(t, r.Version, int64(2), "run version")
	eq(t, r.LastSeq, int64(2), "run lastSeq")

	same(t, getApproval(t, s, "apr1"), a, "stored approval")
	sameIDs(t, pendingIDs(t, s, "p1", store.NewestFirst), []string{"apr1"}, "pending, newest first")
	sameIDs(t, pendingIDs(t, s, "p1", store.ExpiringFirst), []string{"apr1"}, "pending, expiring first")
	sameIDs(t, dueIDs(t, s, at(16*time.Minute)), []string{"apr1"}, "due at its deadline")
	sameIDs(t, dueIDs(t, s, at(16*time.Minute-time.Millisecond)), nil, "due just before its deadline")

	// An approval id is unique.
	other := createRun(t, s, newRun("r2", "p1", t0))
	dup := newApproval("apr1", other, at(time.Minute), at(time.Hour))
	other.Status = store.RunAwaitingApproval
	_, err := s.CommitRun(ctx, store.RunCommit{Run: other, Approval: &dup})
	wantErr(t, err, store.ErrExists, "commit with a taken approval id")
	eq(t, getRun(t, s, "r2").Status, store.RunQueued, "run of a refused approval")
	same(t, getApproval(t, s, "apr1"), a, "approval after a refused duplicate")
}

func testCommitKeepsIdentity(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRun("r1", "p1", t0)
	r.IdempotencyKey, r.RequestDigest = "idem-1", "digest-1"
	r.Tool, r.Via = "refundOrder", "mcp:mcpk_1"
	r = createRun(t, s, r)
	moved := r
	moved.ProjectID, moved.Agent, moved.EndUserID, moved.Deployment = "p2", "other", "u9", 9
	moved.IdempotencyKey, moved.RequestDigest = "idem-2", "digest-2"
	// Whom separateFrom keeps from deciding, and what a one-call run calls.
	moved.Requester, moved.Tool, moved.Via = "mem_mallory", "deleteAccount", "mcp:mcpk_2"
	moved.CreatedAt = at(time.Hour)
	moved.Status = store.RunRunning
	got, err := s.CommitRun(ctx, store.RunCommit{Run: moved})
	noErr(t, err, "commit run")
	want := r
	want.Status = store.RunRunning
	want.Version = 2
	same(t, got, want, "run after a commit that changed its identity")
	same(t, getRun(t, s, "r1"), want, "stored run")

	page, err := s.ListRuns(ctx, store.RunFilter{ProjectID: "p2"})
	noErr(t, err, "list runs of p2")
	eq(t, len(page.Items), 0, "runs of p2")
	page, err = s.ListRuns(ctx, store.RunFilter{ProjectID: "p1"})
	noErr(t, err, "list runs of p1")
	sameIDs(t, runIDs(page.Items), []string{"r1"}, "runs of p1")
}

func testCommitRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0), event("run.created"))
	const n = 10
	// No step records: the version alone must pick the winner.
	errs := race(n, func(i int) error {
		next := r
		next.Cursor = i + 1
		_, err := s.CommitRun(ctx, store.RunCommit{Run: next, Events: []store.Event{event(fmt.Sprintf("writer%d", i))}})
		return err
	})
	won := winners(t, errs, store.ErrConflict)
	if len(won) != 1 {
		t.Fatalf("%d commits from version 1 succeeded, want exactly 1 (errors %v)", len(won), errs)
	}
	w := won[0]
	got := getRun(t, s, "r1")
	eq(t, got.Version, int64(2), "version")
	eq(t, got.Cursor, w+1, "cursor written by the winner")
	eq(t, got.LastSeq, int64(2), "lastSeq")
	sameIDs(t, eventTypes(events(t, s, "r1")), []string{"run.created", fmt.Sprintf("writer%d", w)}, "events")
}

// testCommitRaceApprovals: commits that each create an approval (a write
// of other items before the run's own: the approval, then the conditional
// update of the run) race from one version; exactly one wins, and only its
// approval is stored.
func testCommitRaceApprovals(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0), event("run.created"))
	const n = 10
	errs := race(n, func(i int) error {
		next := r
		next.Status, next.ApprovalID = store.RunAwaitingApproval, fmt.Sprintf("apr%d", i)
		next.LeaseOwner, next.LeaseUntil = "", time.Time{}
		a := newApproval(next.ApprovalID, next, at(time.Minute), at(time.Hour))
		_, err := s.CommitRun(ctx, store.RunCommit{Run: next, Events: []store.Event{event(fmt.Sprintf("writer%d", i))}, Approval: &a})
		return err
	})
	won := winners(t, errs, store.ErrConflict)
	if len(won) != 1 {
		t.Fatalf("%d of %d commits creating an approval from version %d succeeded, want exactly 1 (errors %v)", len(won), n, r.Version, errs)
	}
	w := fmt.Sprintf("apr%d", won[0])
	got := getRun(t, s, "r1")
	eq(t, got.Version, r.Version+1, "version")
	eq(t, got.ApprovalID, w, "approval of the run")
	sameIDs(t, eventTypes(events(t, s, "r1")), []string{"run.created", fmt.Sprintf("writer%d", won[0])}, "events")
	page, err := s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", RunID: "r1", Limit: store.MaxLimit})
	noErr(t, err, "list approvals of the run")
	sameIDs(t, approvalIDs(page.Items), []string{w}, "approvals of the run")
	sameIDs(t, pendingIDs(t, s, "p1", store.NewestFirst), []string{w}, "pending approvals")
}

// testCommitRaceSteps: commits that each record a different step (a write
// of a step item before the run's own) race from one version; exactly one
// wins, and only its step is recorded.
func testCommitRaceSteps(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0))
	const n = 10
	errs := race(n, func(i int) error {
		next := r
		next.Cursor = i + 1
		st := store.Step{Index: i, ID: fmt.Sprintf("s%d", i), Output: json.RawMessage(fmt.Sprintf(`{"writer":%d}`, i)), CompletedAt: t0}
		_, err := s.CommitRun(ctx, store.RunCommit{Run: next, Steps: []store.Step{st}})
		return err
	})
	won := winners(t, errs, store.ErrConflict)
	if len(won) != 1 {
		t.Fatalf("%d of %d commits recording a step from version %d succeeded, want exactly 1 (errors %v)", len(won), n, r.Version, errs)
	}
	got := getRun(t, s, "r1")
	eq(t, got.Version, r.Version+1, "version")
	eq(t, got.Cursor, won[0]+1, "cursor written by the winner")
	steps, err := s.ListSteps(ctx, "r1")
	noErr(t, err, "list steps")
	var ids []string
	for _, st := range steps {
		ids = append(ids, st.ID)
	}
	sameIDs(t, ids, []string{fmt.Sprintf("s%d", won[0])}, "steps recorded")
}

var claimTests = []test{
	{"Claim/Lease", testClaimLease},
	{"Claim/Refused", testClaimRefused},
	{"Claim/Concurrent", testClaimConcurrent},
	{"Claim/Stalled", testClaimStalled},
	{"Claim/RequeuedBelowTheLease", testRequeuedBelowTheLease},
	{"Claim/StalledWithoutDeadline", testStalledWithoutDeadline},
	{"Claim/WithinASecond", testClaimWithinASecond},
}

func claim(runID, owner string, now time.Time) store.ClaimParams {
	return store.ClaimParams{RunID: runID, Owner: owner, Now: now, Until: now.Add(5 * time.Minute)}
}

func testClaimLease(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRun(t, s, newRun("r1", "p1", t0), event("run.created"))

	got, err := s.ClaimRun(ctx, claim("r1", "w1", at(time.Minute)))
	noErr(t, err, "claim a queued run")
	want := r
	want.Status = store.RunRunning
	want.LeaseOwner, want.LeaseUntil = "w1", at(6*time.Minute)
	want.Attempts, want.Version = 1, 2
	want.UpdatedAt = at(time.Minute)
	same(t, got, want, "claimed run")
	same(t, getRun(t, s, "r1"), want, "stored claimed run")

	_, err = s.ClaimRun(ctx, claim("r1", "w2", at(2*time.Minute)))
	wantErr(t, err, store.ErrConflict, "claim a run with a live lease")
	_, err = s.ClaimRun(ctx, claim("r1", "w2", at(6*time.Minute)))
	wantErr(t, err, store.ErrConflict, "claim a run at the instant its lease ends")
	same(t, getRun(t, s, "r1"), want, "run after refused claims")

	got, err = s.ClaimRun(ctx, claim("r1", "w2", at(6*time.Minute+time.Second)))
	noErr(t, err, "claim a run whose lease ran out")
	eq(t, got.LeaseOwner, "w2", "new lease owner")
	eq(t, got.LeaseUntil.Equal(at(11*time.Minute+time.Second)), true, "new lease")
	eq(t, got.Attempts, 2, "attempts after a reclaim")
	eq(t, got.Version, int64(3), "version after a reclaim")
	eq(t, got.LastSeq, int64(1), "claims append no events")
}

func testClaimRefused(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, st := range []store.RunStatus{store.RunAwaitingApproval, store.RunSucceeded, store.RunFailed, store.RunCancelled} {
		r := newRun("r-"+string(st), "p1", t0)
		r.Status = st
		r.LeaseUntil = t0 // long past at the claim
		r = createRun(t, s, r)
		_, err := s.ClaimRun(ctx, claim(r.ID, "w1", at(time.Hour)))
		wantErr(t, err, store.ErrConflict, "claim a run that is "+string(st))
		same(t, getRun(t, s, r.ID), r, "run after a refused claim")
	}
	_, err := s.ClaimRun(ctx, claim("r404", "w1", t0))
	wantErr(t, err, store.ErrNotFound, "claim an unknown run")
}

func testClaimConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	createRun(t, s, newRun("r1", "p1", t0))
	const n = 20
	errs := race(n, func(i int) error {
		_, err := s.ClaimRun(ctx, claim("r1", fmt.Sprintf("w%d", i), at(time.Minute)))
		return err
	})
	won := winners(t, errs, store.ErrConflict)
	if len(won) != 1 {
		t.Fatalf("%d of %d claims won, want exactly 1", len(won), n)
	}
	got := getRun(t, s, "r1")
	eq(t, got.LeaseOwner, fmt.Sprintf("w%d", won[0]), "lease owner")
	eq(t, got.Attempts, 1, "attempts")
	eq(t, got.Version, int64(2), "version")
}

func testClaimStalled(t *testing.T, s store.Store) {
	ctx := t.Context()
	mk := func(id, p string, st store.RunStatus, lease time.Duration) {
		r := newRun(id, p, t0)
		r.Status, r.LeaseUntil = st, at(lease)
		if st == store.RunRunning {
			r.LeaseOwner = "w0"
		}
		createRun(t, s, r)
	}
	mk("running-2m", "p1", store.RunRunning, 2*time.Minute)
	mk("queued-1m", "p1", store.RunQueued, time.Minute)
	mk("queued-3m", "p2", store.RunQueued, 3*time.Minute)
	mk("running-live", "p1", store.RunRunning, 9*time.Minute)
	mk("queued-now", "p1", store.RunQueued, 5*time.Minute) // not before now
	mk("awaiting", "p1", store.RunAwaitingApproval, 0)
	mk("succeeded", "p1", store.RunSucceeded, 0)
	mk("failed", "p2", store.RunFailed, 0)
	mk("cancelled", "p2", store.RunCancelled, 0)
	now := at(5 * time.Minute)

	list := func(limit int) []string {
		t.Helper()
		rs, err := s.ListStalledRuns(ctx, now, limit)
		noErr(t, err, "list stalled runs")
		return runIDs(rs)
	}
	sameIDs(t, list(10), []string{"queued-1m", "running-2m", "queued-3m"}, "stalled runs, oldest lease first")
	sameIDs(t, list(2), []string{"queued-1m", "running-2m"}, "stalled runs, limit 2")

	// A claim gives a new lease; a finished run leaves the list.
	_, err := s.ClaimRun(ctx, claim("queued-1m", "w1", now))
	noErr(t, err, "claim a stalled run")
	r := getRun(t, s, "running-2m")
	r.Status = store.RunSucceeded
	r.LeaseOwner, r.LeaseUntil = "", time.Time{}
	_, err = s.CommitRun(ctx, store.RunCommit{Run: r})
	noErr(t, err, "finish a stalled run")
	sameIDs(t, list(10), []string{"queued-3m"}, "stalled runs after a claim and a finish")
	sameIDs(t, runIDs(mustStalled(t, s, at(time.Hour))), []string{"queued-3m", "queued-now", "running-live", "queued-1m"},
		"stalled runs an hour later")
}

// testRequeuedBelowTheLease: a commit that puts a running run back in the
// queue with a dispatch deadline before the lease its claim gave and the
// deadline it was created with (what the engine does to retry a step soon
// after a run starts) succeeds, and the run is stalled once that
// deadline passes — not only once the old lease would have ended. Both
// commit shapes: events alone, and events with a step's record.
func testRequeuedBelowTheLease(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, withStep := range []bool{false, true} {
		id := fmt.Sprintf("r%d", i)
		queued := newRun(id, "p1", t0)
		queued.LeaseUntil = at(10 * time.Minute) // a dispatch deadline as late as the lease
		createRun(t, s, queued)
		r, err := s.ClaimRun(ctx, store.ClaimParams{RunID: id, Owner: "w1", Now: t0, Until: at(10 * time.Minute)})
		noErr(t, err, "claim")
		r.Status, r.LeaseOwner, r.LeaseUntil = store.RunQueued, "", at(time.Minute)
		c := store.RunCommit{Run: r, Events: []store.Event{event("step.retrying")}}
		if withStep {
			r.Cursor = 1
			c.Run = r
			c.Steps = []store.Step{{Index: 0, ID: "read", Output: json.RawMessage(`{}`), IdempotencyKey: "idem-0", CompletedAt: t0}}
		}
		_, err = s.CommitRun(ctx, c)
		noErr(t, err, fmt.Sprintf("requeue %s (with a step's record: %v) with a deadline before its lease", id, withStep))
		eq(t, getRun(t, s, id).LeaseUntil.Equal(at(time.Minute)), true, "dispatch deadline of "+id)
	}
	sameIDs(t, runIDs(mustStalled(t, s, at(2*time.Minute))), []string{"r0", "r1"}, "stalled once the deadline passed, before the claim's lease ends")
}

func mustStalled(t testing.TB, s store.Store, now time.Time) []store.Run {
	t.Helper()
	rs, err := s.ListStalledRuns(t.Context(), now, store.MaxLimit)
	noErr(t, err, "list stalled runs")
	return rs
}

// testStalledWithoutDeadline: a queued run stored without a dispatch
// deadline (a zero LeaseUntil) is stalled from the start, before every run
// with a deadline: the sweeper dispatches it, and it is never stuck.
func testStalledWithoutDeadline(t *testing.T, s store.Store) {
	with := newRun("with-deadline", "p1", t0)
	with.LeaseUntil = t0
	createRun(t, s, with)
	without := newRun("without-deadline", "p1", t0)
	without.LeaseUntil = time.Time{}
	createRun(t, s, without)
	sameIDs(t, runIDs(mustStalled(t, s, t0)), []string{"without-deadline"}, "stalled at t0")
	sameIDs(t, runIDs(mustStalled(t, s, at(time.Second))), []string{"without-deadline", "with-deadline"}, "stalled a second later, oldest lease first")
}

// testClaimWithinASecond: leases, dispatch deadlines and creation times are
// kept to the nanosecond: a lease that ends half a second into a minute has
// not run out at the minute, and runs created within one second list newest
// first.
func testClaimWithinASecond(t *testing.T, s store.Store) {
	ctx := t.Context()
	half := at(time.Minute + 500*time.Millisecond)
	r := newRun("r1", "p1", t0)
	r.LeaseUntil = half
	createRun(t, s, r)
	sameIDs(t, runIDs(mustStalled(t, s, at(time.Minute+499*time.Millisecond))), nil, "stalled half a second before the deadline")
	sameIDs(t, runIDs(mustStalled(t, s, half)), nil, "stalled at the deadline")
	sameIDs(t, runIDs(mustStalled(t, s, half.Add(time.Millisecond))), []string{"r1"}, "stalled just after the deadline")

	// Ids in the opposite order of the times: the time decides.
	createRun(t, s, newRun("q-a", "p2", t0.Add(200*time.Millisecond)))
	createRun(t, s, newRun("q-b", "p2", t0.Add(100*time.Millisecond)))
	createRun(t, s, newRun("q-c", "p2", t0.Add(300*time.Millisecond)))
	page, err := s.ListRuns(ctx, store.RunFilter{ProjectID: "p2"})
	noErr(t, err, "list runs of p2")
	sameIDs(t, runIDs(page.Items), []string{"q-c", "q-a", "q-b"}, "runs created within one second, newest first")
}
