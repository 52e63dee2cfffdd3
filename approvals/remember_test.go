package approvals_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"stead/approvals"
)

// ruleAt is a valid rule of (refunds, refundOrder, alice) made at created,
// lasting a day.
func ruleAt(created time.Time) approvals.Rule {
	u := ulid.MustNew(ulid.Timestamp(created), ulid.DefaultEntropy()).String()
	return approvals.Rule{
		ID: approvals.NewRuleID(u, "refunds", "refundOrder", "alice"), ProjectID: "prj_a",
		Agent: "refunds", Tool: "refundOrder", EndUserID: "alice",
		ApprovalID: "apr_1", RunID: "run_1", Deployment: 3, PostureDigest: "pd1",
		CreatedBy: "key_ana", CreatedByMember: "mem_ana", CreatedByName: "Ana Diaz",
		CreatedAt: created, ExpiresAt: created.Add(24 * time.Hour),
	}
}

func TestRuleValidate(t *testing.T) {
	t.Parallel()
	if err := ruleAt(t0).Validate(); err != nil {
		t.Fatalf("a valid rule: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*approvals.Rule)
		want string
	}{
		{"no end user", func(r *approvals.Rule) { r.EndUserID = "" }, "endUserId"},
		{"no posture", func(r *approvals.Rule) { r.PostureDigest = "" }, "postureDigest"},
		{"no deployment", func(r *approvals.Rule) { r.Deployment = 0 }, "deployment"},
		{"no maker", func(r *approvals.Rule) { r.CreatedBy = "" }, "createdBy"},
		{"lasts nothing", func(r *approvals.Rule) { r.ExpiresAt = r.CreatedAt }, "must expire after"},
		{"lasts 8 days", func(r *approvals.Rule) { r.ExpiresAt = r.CreatedAt.Add(8 * 24 * time.Hour) }, "at most 168h"},
		{"digest and when", func(r *approvals.Rule) { r.InputDigest, r.When = "d", json.RawMessage(`{}`) }, "not both"},
		{"when not an object", func(r *approvals.Rule) { r.When = json.RawMessage(`[1]`) }, "JSON Schema object"},
		{"when too large", func(r *approvals.Rule) {
			r.When = json.RawMessage(`{"description":"` + strings.Repeat("x", approvals.MaxRuleWhen) + `"}`)
		}, "bytes, at most"},
		{"id of another scope", func(r *approvals.Rule) { r.EndUserID = "bob" }, "its scope is"},
		{"id made long before", func(r *approvals.Rule) { r.CreatedAt = r.CreatedAt.Add(2 * time.Second) }, "from its createdAt"},
		{"id made long after", func(r *approvals.Rule) { r.CreatedAt = r.CreatedAt.Add(-2 * time.Second) }, "from its createdAt"},
		{"id not a rule id", func(r *approvals.Rule) { r.ID = "apr_1" }, "want rul_"},
	} {
		r := ruleAt(t0)
		c.edit(&r)
		err := r.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

func TestRuleMatches(t *testing.T) {
	t.Parallel()
	r := ruleAt(t0)
	call := approvals.RuleCall{ProjectID: "prj_a", Agent: "refunds", Tool: "refundOrder", EndUserID: "alice", InputDigest: "d1", PostureDigest: "pd1"}
	exact := r
	exact.InputDigest = "d1"
	noPosture := r
	noPosture.PostureDigest = ""
	revoked := r.Revoke(approvals.Actor{ID: "key_bo", Name: "Bo Li"}, t0.Add(time.Hour))
	for _, c := range []struct {
		name string
		r    approvals.Rule
		edit func(*approvals.RuleCall)
		at   time.Time
		want bool
	}{
		{"same scope, any input", r, nil, t0.Add(time.Minute), true},
		{"another end user", r, func(c *approvals.RuleCall) { c.EndUserID = "bob" }, t0.Add(time.Minute), false},
		{"another tool", r, func(c *approvals.RuleCall) { c.Tool = "addNote" }, t0.Add(time.Minute), false},
		{"another project", r, func(c *approvals.RuleCall) { c.ProjectID = "prj_b" }, t0.Add(time.Minute), false},
		{"another posture", r, func(c *approvals.RuleCall) { c.PostureDigest = "pd2" }, t0.Add(time.Minute), false},
		{"no posture on either side", noPosture, func(c *approvals.RuleCall) { c.PostureDigest = "" }, t0.Add(time.Minute), false},
		{"at its expiry", r, nil, r.ExpiresAt, false},
		{"exact, same input", exact, nil, t0.Add(time.Minute), true},
		{"exact, another input", exact, func(c *approvals.RuleCall) { c.InputDigest = "d2" }, t0.Add(time.Minute), false},
		{"revoked", revoked, nil, t0.Add(2 * time.Hour), false},
	} {
		call := call
		if c.edit != nil {
			c.edit(&call)
		}
		if got := c.r.Matches(call, c.at); got != c.want {
			t.Errorf("%s: Matches = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRuleRevokeKeepsTheFirst(t *testing.T) {
	t.Parallel()
	r := ruleAt(t0).Revoke(approvals.Actor{ID: "key_bo", Name: "Bo Li"}, t0.Add(time.Hour))
	again := r.Revoke(approvals.Actor{ID: "key_cy", Name: "Cy Ng"}, t0.Add(2*time.Hour))
	if !again.RevokedAt.Equal(t0.Add(time.Hour)) || again.RevokedBy != "key_bo" || again.RevokedByName != "Bo Li" {
		t.Errorf("revoked twice: %+v, want the first revocation kept", again)
	}
	if r.Active(t0.Add(time.Hour)) {
		t.Error("a revoked rule is active")
	}
}

// TestRuleIDFloor: every rule in force at now has an id above the floor,
// and a rule made before now-MaxRemember-RuleIDSkew sorts below it.
func TestRuleIDFloor(t *testing.T) {
	t.Parallel()
	now := t0.Add(30 * 24 * time.Hour)
	floor := approvals.RuleIDFloor(now)
	// The oldest rule in force: made just after now-MaxRemember, for
	// MaxRemember, its id's time as early as the skew allows.
	created := now.Add(-approvals.MaxRemember + time.Millisecond)
	oldest := ruleAt(created.Add(-approvals.RuleIDSkew))
	oldest.CreatedAt, oldest.ExpiresAt = created, created.Add(approvals.MaxRemember)
	if err := oldest.Validate(); err != nil || !oldest.Active(now) {
		t.Fatalf("fixture: the oldest rule should be valid (%v) and in force", err)
	}
	if oldest.ID <= floor {
		t.Errorf("a rule in force (%s) sorts at or below the floor %s", oldest.ID, floor)
	}
	stale := ruleAt(now.Add(-approvals.MaxRemember - 2*approvals.RuleIDSkew))
	if stale.ID >= floor {
		t.Errorf("a rule made before the floor's time (%s) sorts at or above it %s", stale.ID, floor)
	}
	if got := approvals.RuleIDFloor(time.Unix(0, 0)); !strings.HasPrefix(got, "rul_0000000000") {
		t.Errorf("floor of the epoch %q", got)
	}
}

func TestRuleIDScope(t *testing.T) {
	t.Parallel()
	r := ruleAt(t0)
	scope, ok := approvals.RuleIDScope(r.ID)
	if !ok || scope != approvals.RuleScope("refunds", "refundOrder", "alice") {
		t.Errorf("scope of %s: %q %v", r.ID, scope, ok)
	}
	// Parts are length-prefixed: moving a character between them changes
	// the scope.
	if approvals.RuleScope("ab", "c", "d") == approvals.RuleScope("a", "bc", "d") {
		t.Error("scopes of different parts collide")
	}
	for _, id := range []string{"", "rul_", "apr_x_0123456789abcdef", "rul_x_0123", "rul_x_zz23456789abcdef"} {
		if _, ok := approvals.RuleIDScope(id); ok {
			t.Errorf("RuleIDScope(%q) ok", id)
		}
	}
}
