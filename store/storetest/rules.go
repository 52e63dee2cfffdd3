package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"stead/approvals"
	"stead/store"
)

var ruleTests = []test{
	{"Rule/CreateGet", testRuleCreateGet},
	{"Rule/List", testRuleList},
	{"Rule/ListPages", testRuleListPages},
	{"Rule/Revoke", testRuleRevoke},
	{"Rule/ConcurrentRevokes", testRuleConcurrentRevokes},
	{"Rule/Expiry", testRuleExpiry},
	{"Rule/Matching", testRuleMatching},
}

// newRule is a rule of project p for (agent, tool, endUser), made at
// created by Ana Diaz and lasting d.
func newRule(p, agent, tool, endUser string, created time.Time, d time.Duration) approvals.Rule {
	u := ulid.MustNew(ulid.Timestamp(created), ulid.DefaultEntropy()).String()
	return approvals.Rule{
		ID: approvals.NewRuleID(u, agent, tool, endUser), ProjectID: p, Agent: agent, Tool: tool, EndUserID: endUser,
		ApprovalID: "apr_" + u, RunID: "run_" + u, Deployment: 2, PostureDigest: "posture-1",
		CreatedBy: "key_ana", CreatedByMember: "mem_ana", CreatedByName: "Ana Diaz",
		CreatedAt: created, ExpiresAt: created.Add(d),
	}
}

func createRule(t testing.TB, s store.Store, r approvals.Rule) approvals.Rule {
	t.Helper()
	noErr(t, s.CreateRule(t.Context(), r), "create rule "+r.ID)
	return r
}

func ruleIDs(rs []approvals.Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func ruleIDOf(r approvals.Rule) string { return r.ID }

// listRuleIDs lists the rules f selects, every page.
func listRuleIDs(t testing.TB, s store.Store, f store.RuleFilter) []string {
	t.Helper()
	return collect(t, store.MaxLimit, ruleIDOf, func(c string) (store.Page[approvals.Rule], error) {
		f.Cursor, f.Limit = c, store.MaxLimit
		return s.ListRules(t.Context(), f)
	})
}

func matchingIDs(t testing.TB, s store.Store, p, agent, tool, endUser string, now time.Time) []string {
	t.Helper()
	rs, err := s.MatchingRules(t.Context(), p, agent, tool, endUser, now)
	noErr(t, err, "matching rules")
	return ruleIDs(rs)
}

// testRuleCreateGet: a rule is stored as given, once per id, and only its
// own project reads it; a rule Validate refuses is not stored.
func testRuleCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRule("p1", "refunds", "refundOrder", "alice", at(time.Minute), 24*time.Hour)
	r.When = json.RawMessage(`{"properties":{"amount":{"maximum":50}}}`)
	createRule(t, s, r)
	got, err := s.GetRule(ctx, "p1", r.ID)
	noErr(t, err, "get rule")
	same(t, got, r, "rule as stored")
	wantErr(t, s.CreateRule(ctx, r), store.ErrExists, "create the same id again")
	_, err = s.GetRule(ctx, "p2", r.ID)
	wantErr(t, err, store.ErrNotFound, "get from another project")
	_, err = s.GetRule(ctx, "p1", "rul_nope")
	wantErr(t, err, store.ErrNotFound, "get an id that names no scope")
	_, err = s.GetRule(ctx, "p1", newRule("p1", "refunds", "refundOrder", "alice", at(time.Minute), time.Hour).ID)
	wantErr(t, err, store.ErrNotFound, "get an id never stored")

	bad := newRule("p1", "refunds", "refundOrder", "bob", at(time.Minute), 8*24*time.Hour)
	if err := s.CreateRule(ctx, bad); err == nil {
		t.Fatal("a rule of 8 days was stored")
	}
	revoked := newRule("p1", "refunds", "refundOrder", "bob", at(time.Minute), time.Hour).Revoke(approvals.Actor{ID: "key_bo"}, at(2*time.Minute))
	if err := s.CreateRule(ctx, revoked); err == nil {
		t.Fatal("a revoked rule was stored as new")
	}
	sameIDs(t, listRuleIDs(t, s, store.RuleFilter{ProjectID: "p1", All: true}), []string{r.ID}, "rules after the refused creates")
}

// testRuleList: newest first, filtered by agent, tool and end user, in
// force or all; another project's rules never show.
func testRuleList(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := at(time.Hour)
	a1 := createRule(t, s, newRule("p1", "refunds", "refundOrder", "alice", at(1*time.Minute), 24*time.Hour))
	b := createRule(t, s, newRule("p1", "refunds", "refundOrder", "bob", at(2*time.Minute), 24*time.Hour))
	note := createRule(t, s, newRule("p1", "refunds", "addNote", "alice", at(3*time.Minute), 24*time.Hour))
	other := createRule(t, s, newRule("p1", "support", "refundOrder", "alice", at(4*time.Minute), 24*time.Hour))
	expired := createRule(t, s, newRule("p1", "refunds", "refundOrder", "alice", at(5*time.Minute), 30*time.Minute))
	a2 := createRule(t, s, newRule("p1", "refunds", "refundOrder", "alice", at(6*time.Minute), 24*time.Hour))
	createRule(t, s, newRule("p2", "refunds", "refundOrder", "alice", at(7*time.Minute), 24*time.Hour))
	revoked, err := s.RevokeRule(ctx, "p1", note.ID, approvals.Actor{ID: "key_bo", Name: "Bo Li"}, at(10*time.Minute))
	noErr(t, err, "revoke")

	for _, c := range []struct {
		name string
		f    store.RuleFilter
		want []approvals.Rule
	}{
		{"in force", store.RuleFilter{ProjectID: "p1", Now: now}, []approvals.Rule{a2, other, b, a1}},
		{"all", store.RuleFilter{ProjectID: "p1", All: true}, []approvals.Rule{a2, expired, other, revoked, b, a1}},
		{"one agent", store.RuleFilter{ProjectID: "p1", Agent: "refunds", All: true}, []approvals.Rule{a2, expired, revoked, b, a1}},
		{"one tool", store.RuleFilter{ProjectID: "p1", Tool: "refundOrder", Now: now}, []approvals.Rule{a2, other, b, a1}},
		{"one end user", store.RuleFilter{ProjectID: "p1", EndUserID: "bob", Now: now}, []approvals.Rule{b}},
		{"one scope, all", store.RuleFilter{ProjectID: "p1", Agent: "refunds", Tool: "refundOrder", EndUserID: "alice", All: true}, []approvals.Rule{a2, expired, a1}},
		{"one scope, in force", store.RuleFilter{ProjectID: "p1", Agent: "refunds", Tool: "refundOrder", EndUserID: "alice", Now: now}, []approvals.Rule{a2, a1}},
		{"another project's scope", store.RuleFilter{ProjectID: "p3", Agent: "refunds", Tool: "refundOrder", EndUserID: "alice", All: true}, nil},
	} {
		sameIDs(t, listRuleIDs(t, s, c.f), ruleIDs(c.want), c.name)
	}
	p, err := s.ListRules(ctx, store.RuleFilter{ProjectID: "p1", All: true, Limit: 10})
	noErr(t, err, "list all")
	same(t, p.Items[3], revoked, "a revoked rule as listed")
	_, err = s.ListRules(ctx, store.RuleFilter{ProjectID: "p1"})
	if err == nil {
		t.Fatal("a list of the rules in force without now was accepted")
	}
	_, err = s.ListRules(ctx, store.RuleFilter{ProjectID: "p1", All: true, Cursor: "garbage"})
	wantErr(t, err, store.ErrInvalidCursor, "list with a bad cursor")
}

// testRuleListPages: pages of the project's list and of one scope's list
// hold every rule once, newest first, in force or all.
func testRuleListPages(t *testing.T, s store.Store) {
	var all, scope, inForce []string
	for i := range 7 {
		endUser := "alice"
		if i%3 == 1 {
			endUser = "bob"
		}
		d := 24 * time.Hour
		if i%2 == 1 {
			d = 10 * time.Minute // ended before now
		}
		r := createRule(t, s, newRule("p1", "refunds", "refundOrder", endUser, at(time.Duration(i)*time.Minute), d))
		all = append([]string{r.ID}, all...)
		if endUser == "alice" {
			scope = append([]string{r.ID}, scope...)
		}
		if d > time.Hour {
			inForce = append([]string{r.ID}, inForce...)
		}
	}
	createRule(t, s, newRule("p2", "refunds", "refundOrder", "alice", at(time.Minute), time.Hour))
	now := at(time.Hour)
	for _, c := range []struct {
		name string
		f    store.RuleFilter
		want []string
	}{
		{"project, all", store.RuleFilter{ProjectID: "p1", All: true}, all},
		{"project, in force", store.RuleFilter{ProjectID: "p1", Now: now}, inForce},
		{"scope, all", store.RuleFilter{ProjectID: "p1", Agent: "refunds", Tool: "refundOrder", EndUserID: "alice", All: true}, scope},
	} {
		for _, limit := range []int{1, 2, 3} {
			got := collect(t, limit, ruleIDOf, func(cursor string) (store.Page[approvals.Rule], error) {
				f := c.f
				f.Cursor, f.Limit = cursor, limit
				return s.ListRules(t.Context(), f)
			})
			sameIDs(t, got, c.want, c.name+" by pages")
		}
	}
}

// testRuleRevoke: a revoked rule names who revoked it, no longer matches
// and stays listable; revoking again keeps the first revocation; a missing
// or foreign rule is not found.
func testRuleRevoke(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRule(t, s, newRule("p1", "refunds", "refundOrder", "alice", at(time.Minute), 24*time.Hour))
	_, err := s.RevokeRule(ctx, "p2", r.ID, approvals.Actor{ID: "key_other"}, at(time.Hour))
	wantErr(t, err, store.ErrNotFound, "revoke from another project")
	sameIDs(t, matchingIDs(t, s, "p1", "refunds", "refundOrder", "alice", at(time.Hour)), []string{r.ID}, "matching after a foreign revoke")

	bo := approvals.Actor{ProjectID: "p1", ID: "key_bo", Name: "Bo Li", MemberID: "mem_bo"}
	got, err := s.RevokeRule(ctx, "p1", r.ID, bo, at(time.Hour))
	noErr(t, err, "revoke")
	want := r
	want.RevokedAt, want.RevokedBy, want.RevokedByName = at(time.Hour), "key_bo", "Bo Li"
	same(t, got, want, "revoked rule")
	again, err := s.RevokeRule(ctx, "p1", r.ID, approvals.Actor{ID: "key_cy", Name: "Cy Ng"}, at(2*time.Hour))
	noErr(t, err, "revoke again")
	same(t, again, want, "revoked twice")
	stored, err := s.GetRule(ctx, "p1", r.ID)
	noErr(t, err, "get revoked rule")
	same(t, stored, want, "revoked rule as stored")

	sameIDs(t, matchingIDs(t, s, "p1", "refunds", "refundOrder", "alice", at(3*time.Hour)), nil, "matching after the revoke")
	sameIDs(t, listRuleIDs(t, s, store.RuleFilter{ProjectID: "p1", Now: at(3 * time.Hour)}), nil, "in force after the revoke")
	sameIDs(t, listRuleIDs(t, s, store.RuleFilter{ProjectID: "p1", All: true}), []string{r.ID}, "all after the revoke")

	_, err = s.RevokeRule(ctx, "p1", "rul_nope", bo, at(time.Hour))
	wantErr(t, err, store.ErrNotFound, "revoke an id that names no scope")
	_, err = s.RevokeRule(ctx, "p1", newRule("p1", "refunds", "refundOrder", "alice", at(time.Minute), time.Hour).ID, bo, at(time.Hour))
	wantErr(t, err, store.ErrNotFound, "revoke an id never stored")
}

// testRuleConcurrentRevokes: of revokes at once, one revocation is kept,
// and every caller gets it.
func testRuleConcurrentRevokes(t *testing.T, s store.Store) {
	r := createRule(t, s, newRule("p1", "refunds", "refundOrder", "alice", at(time.Minute), 24*time.Hour))
	const n = 10
	got := make([]approvals.Rule, n)
	errs := race(n, func(i int) (err error) {
		by := approvals.Actor{ID: "key_" + string(rune('a'+i)), Name: "Member " + string(rune('a'+i))}
		got[i], err = s.RevokeRule(t.Context(), "p1", r.ID, by, at(time.Hour+time.Duration(i)*time.Second))
		return err
	})
	if won := winners(t, errs); len(won) != n {
		t.Fatalf("%d of %d revokes succeeded", len(won), n)
	}
	stored, err := s.GetRule(t.Context(), "p1", r.ID)
	noErr(t, err, "get")
	if !stored.Revoked() {
		t.Fatal("the rule is not revoked")
	}
	for i, g := range got {
		same(t, g, stored, "revocation caller "+string(rune('a'+i))+" got")
	}
}

// testRuleExpiry: a rule is in force until its expiry, exclusive; then it
// no longer matches nor lists as in force, but reads and lists as ended.
func testRuleExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := createRule(t, s, newRule("p1", "refunds", "refundOrder", "alice", at(time.Minute), time.Hour))
	end := r.ExpiresAt
	sameIDs(t, matchingIDs(t, s, "p1", "refunds", "refundOrder", "alice", end.Add(-time.Nanosecond)), []string{r.ID}, "matching just before expiry")
	sameIDs(t, matchingIDs(t, s, "p1", "refunds", "refundOrder", "alice", end), nil, "matching at expiry")
	sameIDs(t, listRuleIDs(t, s, store.RuleFilter{ProjectID: "p1", Now: end.Add(-time.Nanosecond)}), []string{r.ID}, "in force just before expiry")
	sameIDs(t, listRuleIDs(t, s, store.RuleFilter{ProjectID: "p1", Now: end}), nil, "in force at expiry")
	sameIDs(t, listRuleIDs(t, s, store.RuleFilter{ProjectID: "p1", All: true}), []string{r.ID}, "all at expiry")
	_, err := s.GetRule(ctx, "p1", r.ID)
	noErr(t, err, "get an expired rule")

	// The longest rule lasts MaxRemember: it still matches at its last
	// moment, after a month of older rules that ended.
	long := createRule(t, s, newRule("p1", "refunds", "refundOrder", "bob", at(2*time.Minute), approvals.MaxRemember))
	for day := range 30 {
		createRule(t, s, newRule("p1", "refunds", "refundOrder", "bob", at(-time.Duration(day+1)*24*time.Hour), time.Hour))
	}
	last := long.ExpiresAt.Add(-time.Nanosecond)
	got := matchingIDs(t, s, "p1", "refunds", "refundOrder", "bob", last)
	if len(got) != 1 || got[0] != long.ID {
		t.Fatalf("matching at the last moment of a 7-day rule: %v, want [%s]", got, long.ID)
	}
}

// testRuleMatching: the rules of one call's scope in force, newest first;
// rules of other end users, tools, agents and projects never match.
func testRuleMatching(t *testing.T, s store.Store) {
	now := at(2 * time.Hour)
	old := createRule(t, s, newRule("p1", "refunds", "refundOrder", "alice", at(time.Minute), 24*time.Hour))
	exact := newRule("p1", "refunds", "refundOrder", "alice", at(2*time.Minute), 24*time.Hour)
	exact.InputDigest = "d1"
	createRule(t, s, exact)
	createRule(t, s, newRule("p1", "refunds", "refundOrder", "bob", at(3*time.Minute), 24*time.Hour))
	createRule(t, s, newRule("p1", "refunds", "addNote", "alice", at(4*time.Minute), 24*time.Hour))
	createRule(t, s, newRule("p1", "support", "refundOrder", "alice", at(5*time.Minute), 24*time.Hour))
	createRule(t, s, newRule("p2", "refunds", "refundOrder", "alice", at(6*time.Minute), 24*time.Hour))
	createRule(t, s, newRule("p1", "refunds", "refundOrder", "alice", at(7*time.Minute), 30*time.Minute)) // ended
	// Parts that run into each other are other scopes.
	createRule(t, s, newRule("p1", "refunds", "refundOrde", "ralice", at(8*time.Minute), 24*time.Hour))

	rs, err := s.MatchingRules(t.Context(), "p1", "refunds", "refundOrder", "alice", now)
	noErr(t, err, "matching rules")
	sameIDs(t, ruleIDs(rs), []string{exact.ID, old.ID}, "matching rules")
	same(t, rs[0], exact, "matching exact rule")
	sameIDs(t, matchingIDs(t, s, "p1", "refunds", "refundOrder", "carol", now), nil, "an end user without rules")
	sameIDs(t, matchingIDs(t, s, "p3", "refunds", "refundOrder", "alice", now), nil, "a project without rules")
}
