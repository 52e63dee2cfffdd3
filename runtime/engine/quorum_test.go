package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/runtime/engine"
	"stead/store"
)

const quorumConfig = `{"agents": {"refunds": {
  "tools": {
    "refundOrder": {"effect": "write", "requiresApproval": true,
      "approvals": {"approvers": {"group": "finance", "min": 2}}}
  },
  "steps": [{"id": "refund", "tool": "refundOrder", "input": {"amount": "$input.amount"}}]
}}}`

// member stores a member of project prj_a and returns the actor of a key
// of theirs.
func (h *harness) member(id, name string, role approvals.Role) approvals.Actor {
	h.t.Helper()
	now := h.clock.Now()
	if err := h.store.CreateMember(h.ctx, store.Member{ID: id, ProjectID: h.project, Name: name, Role: role, CreatedAt: now, UpdatedAt: now}); err != nil {
		h.t.Fatal(err)
	}
	return approvals.Actor{ProjectID: h.project, Role: role, ID: "key_" + id, Name: name, MemberID: id}
}

// TestQuorum: "refunds need two of finance". The approval records who may
// vote when it is asked for — finance's members whose role may decide,
// not removed, less the requester — and later group edits change nothing;
// the first vote is recorded and shown, a second vote by the same member
// and votes by others are refused, and the second member's vote settles
// it and resumes the run.
func TestQuorum(t *testing.T) {
	h := setup(t)
	requester := h.member("mem_dev", "Dev Ray", approvals.RoleDeveloper)
	ana := h.member("mem_ana", "Ana Diaz", approvals.RoleApprover)
	bo := h.member("mem_bo", "Bo Li", approvals.RoleOwner)
	h.member("mem_cy", "Cy Ng", approvals.RoleViewer)
	h.member("mem_dee", "Dee Fox", approvals.RoleApprover)
	eve := h.member("mem_eve", "Eve Ott", approvals.RoleApprover)

	// A deploy naming a group the project does not have is refused.
	_, err := h.eng.Deploy(h.ctx, h.owner, engine.DeployParams{Bundle: []byte(handlers), Config: []byte(quorumConfig)})
	var ce *agent.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Pointer != "/agents/refunds/tools/refundOrder/approvals/approvers/group" ||
		!strings.Contains(ce.Problems[0].Message, `group "finance" does not exist in this project`) {
		t.Fatalf("deploy naming a missing group: %v", err)
	}
	now := h.clock.Now()
	if err := h.store.CreateGroup(h.ctx, store.Group{ProjectID: h.project, Name: "finance",
		Members: []string{"mem_dev", "mem_ana", "mem_bo", "mem_cy", "mem_dee"}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.RemoveMember(h.ctx, h.project, "mem_dee", now); err != nil {
		t.Fatal(err)
	}
	h.deploy(h.owner, handlers, quorumConfig)

	r, _, err := h.eng.StartRun(h.ctx, requester, engine.StartParams{Agent: "refunds", Input: json.RawMessage(`{"amount": 900}`), EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	h.drain()
	a := h.pending(r.ID)
	if got, want := a.ProgressText(), "0 of 2 from finance — waiting on Ana Diaz, Bo Li"; got != want {
		t.Errorf("asked: %q, want %q (the viewer, the removed member and the requester cannot vote)", got, want)
	}
	if a.SeparateFrom != "mem_dev" || !strings.Contains(a.SeparatedBy, "the default with approvers") {
		t.Errorf("separation: %q by %q", a.SeparateFrom, a.SeparatedBy)
	}
	if d := h.eventData(r.ID, "approval.requested"); d["approversOn"] != "tool refundOrder" || d["progress"] != "0 of 2 from finance — waiting on Ana Diaz, Bo Li" {
		t.Errorf("approval.requested data: %v", d)
	}

	// The group changes after the ask: Eve joins, Bo stays. Eve still
	// cannot vote on this approval.
	g, err := h.store.GetGroup(h.ctx, h.project, "finance")
	if err != nil {
		t.Fatal(err)
	}
	g.Members = append(g.Members, "mem_eve")
	if _, err := h.store.UpdateGroup(h.ctx, g); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who     approvals.Actor
		approve bool
		want    error
	}{
		{eve, true, approvals.ErrNotEligible},
		{h.owner, false, approvals.ErrNotEligible},
		{requester, true, approvals.ErrSeparated},
	} {
		_, err := h.decide(tc.who, a.ID, tc.approve, "", "")
		wantErr(t, err, tc.want)
	}

	got, err := h.decide(ana, a.ID, true, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != approvals.Pending || got.ProgressText() != "1 of 2 from finance — waiting on Bo Li" {
		t.Fatalf("after Ana: %s, %q", got.Status, got.ProgressText())
	}
	wantStatus(t, h.run(r.ID), store.RunAwaitingApproval, "")
	if d := h.eventData(r.ID, "approval.vote"); d["byName"] != "Ana Diaz" || d["votes"] != 1.0 {
		t.Errorf("approval.vote data: %v", d)
	}
	_, err = h.decide(ana, a.ID, true, "", "")
	wantErr(t, err, approvals.ErrAlreadyVoted)

	got, err = h.decide(bo, a.ID, true, "ok", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != approvals.Approved || got.DecidedByName != "Bo Li" || len(got.Votes) != 2 {
		t.Fatalf("after Bo: %+v", got)
	}
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
	types := strings.Join(h.eventTypes(r.ID), " ")
	if !strings.Contains(types, "approval.requested approval.vote approval.approved") {
		t.Errorf("trace: %s", types)
	}
}

// TestQuorumEditResetsVotes: an approve with an edited input starts the
// count again, the editor's vote first; a voter who saw the old input is
// refused; the run runs with the input the quorum approved.
func TestQuorumEditResetsVotes(t *testing.T) {
	h := setup(t)
	ana := h.member("mem_ana", "Ana Diaz", approvals.RoleApprover)
	bo := h.member("mem_bo", "Bo Li", approvals.RoleApprover)
	now := h.clock.Now()
	if err := h.store.CreateGroup(h.ctx, store.Group{ProjectID: h.project, Name: "finance", Members: []string{"mem_ana", "mem_bo"}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	h.deploy(h.owner, handlers, quorumConfig)
	r := h.start("refunds", `{"amount": 900}`)
	a := h.pending(r.ID)
	if _, err := h.decide(ana, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	edited, err := h.decide(bo, a.ID, true, "", `{"amount": 500}`)
	if err != nil {
		t.Fatal(err)
	}
	if edited.Status != approvals.Pending || len(edited.Votes) != 1 || edited.Votes[0].Member != "mem_bo" {
		t.Fatalf("after Bo's edit: %s, votes %+v", edited.Status, edited.Votes)
	}
	_, err = h.eng.Decide(h.ctx, ana, engine.DecideParams{ApprovalID: a.ID, Approve: true, Seen: a.InputDigest})
	wantErr(t, err, approvals.ErrChanged)
	h.clock.Advance(time.Second)
	if _, err := h.eng.Decide(h.ctx, ana, engine.DecideParams{ApprovalID: a.ID, Approve: true, Seen: edited.InputDigest}); err != nil {
		t.Fatal(err)
	}
	h.drain()
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
	if calls := h.calls(r.ID, "refund"); len(calls) != 1 || calls[0].Input["amount"] != 500.0 {
		t.Errorf("refund calls: %+v", calls)
	}
}

// cutIn casts another member's vote just before the first vote it sees
// reaches the store, as a voter a moment faster would.
type cutIn struct {
	store.Store
	by approvals.Actor
	// edit, when set, is the input the faster voter approves instead.
	edit json.RawMessage
	done bool
}

func (c *cutIn) DecideApproval(ctx context.Context, p store.DecideParams) (approvals.Approval, store.Run, error) {
	if d := p.Decision; !c.done && d.Status == approvals.Approved {
		c.done = true
		a, err := c.GetApproval(ctx, d.ApprovalID)
		if err != nil {
			return a, store.Run{}, err
		}
		other := store.DecideParams{Decision: approvals.Decision{ProjectID: d.ProjectID, ApprovalID: a.ID, Status: approvals.Approved,
			By: c.by.ID, ByName: c.by.Name, ByMember: c.by.MemberID, VoteVersion: a.VoteVersion, At: d.At},
			RunStatus: store.RunQueued, Events: []store.Event{{Type: "approval.vote", At: d.At}}}
		if c.edit != nil {
			other.Decision.Input = c.edit
			if other.Decision.InputDigest, err = approvals.Digest(c.edit); err != nil {
				return a, store.Run{}, err
			}
		}
		if _, _, err := c.Store.DecideApproval(ctx, other); err != nil { // the store's, not this one
			return a, store.Run{}, err
		}
	}
	return c.Store.DecideApproval(ctx, p)
}

// A vote that loses the race to another vote on the same input is cast
// again on the approval as it then is: both count, and the later one
// settles it.
func TestVoteRetriedAfterARace(t *testing.T) {
	cut := &cutIn{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cut.Store = s; return cut } })
	ana := h.member("mem_ana", "Ana Diaz", approvals.RoleApprover)
	cut.by = h.member("mem_bo", "Bo Li", approvals.RoleApprover)
	now := h.clock.Now()
	if err := h.store.CreateGroup(h.ctx, store.Group{ProjectID: h.project, Name: "finance", Members: []string{"mem_ana", "mem_bo"}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	h.deploy(h.owner, handlers, quorumConfig)
	r := h.start("refunds", `{"amount": 900}`)
	got, err := h.decide(ana, h.pending(r.ID).ID, true, "", "")
	if err != nil {
		t.Fatalf("a vote that lost a race to another vote: %v", err)
	}
	if got.Status != approvals.Approved || len(got.Votes) != 2 || got.Votes[0].Member != "mem_bo" || got.DecidedByName != "Ana Diaz" {
		t.Fatalf("after the race: %s, votes %+v, decided by %s", got.Status, got.Votes, got.DecidedByName)
	}
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
}

// A vote that loses its race to an edit is not cast again on the edited
// input: its voter never saw it (and the decider gave no inputDigest, as
// the CLI's stead approve does not).
func TestVoteNeverRecastOnAnEdit(t *testing.T) {
	cut := &cutIn{edit: json.RawMessage(`{"amount":9000}`)}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cut.Store = s; return cut } })
	ana := h.member("mem_ana", "Ana Diaz", approvals.RoleApprover)
	cut.by = h.member("mem_bo", "Bo Li", approvals.RoleApprover)
	now := h.clock.Now()
	if err := h.store.CreateGroup(h.ctx, store.Group{ProjectID: h.project, Name: "finance", Members: []string{"mem_ana", "mem_bo"}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	h.deploy(h.owner, handlers, quorumConfig)
	r := h.start("refunds", `{"amount": 900}`)
	_, err := h.decide(ana, h.pending(r.ID).ID, true, "", "")
	wantErr(t, err, approvals.ErrChanged)
	a := h.pending(r.ID)
	if a.Status != approvals.Pending || len(a.Votes) != 1 || a.Votes[0].Member != "mem_bo" {
		t.Fatalf("after Bo's edit and Ana's refused vote: %s, votes %+v", a.Status, a.Votes)
	}
}

// A group deleted after the deploy that names it still gets the call an
// approval: one nobody may vote on, not a run that cannot proceed.
func TestApproverGroupDeletedAfterTheDeployHasNoVoters(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.member("mem_ana", "Ana Diaz", approvals.RoleApprover)
	now := h.clock.Now()
	if err := h.store.CreateGroup(h.ctx, store.Group{ProjectID: h.project, Name: "finance",
		Members: []string{"mem_ana"}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	h.deploy(h.owner, handlers, quorumConfig)
	if err := h.store.DeleteGroup(h.ctx, h.project, "finance"); err != nil {
		t.Fatal(err)
	}
	r := h.start("refunds", `{"amount": 900}`)
	a := h.pending(r.ID)
	if len(a.Requirements) != 1 || a.Requirements[0].Group != "finance" || len(a.Requirements[0].Eligible) != 0 {
		t.Errorf("requirements %+v, want finance with no one eligible", a.Requirements)
	}
}
