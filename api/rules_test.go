package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"stead/api"
	"stead/api/wire"
	"stead/approvals"
	"stead/runtime/engine"
)

// newRule stores a remembered decision of project A on refunds'
// refundOrder for endUser, made now for a day, and returns it.
func (w *world) newRule(endUser string) approvals.Rule {
	w.t.Helper()
	now := w.clock.Now()
	u := ulid.MustNew(ulid.Timestamp(now), ulid.DefaultEntropy()).String()
	r := approvals.Rule{
		ID: approvals.NewRuleID(u, "refunds", "refundOrder", endUser), ProjectID: w.project.ID,
		Agent: "refunds", Tool: "refundOrder", EndUserID: endUser,
		ApprovalID: "apr_x_" + u[:8], RunID: "run_x", Deployment: 1, PostureDigest: "posture",
		CreatedBy: "key_ana", CreatedByName: "Ana Diaz", CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour),
	}
	if err := w.store.CreateRule(w.t.Context(), r); err != nil {
		w.t.Fatal(err)
	}
	return r
}

// TestRules: a decision remembered after an approval is listed and read
// with who made it and from which approval, filtered, and revoked; the
// next call asks again after the revoke.
func TestRules(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cfg := strings.Replace(testConfig, `"approvals": { "timeout": "10m" }`, `"approvals": { "timeout": "10m", "remember": { "max": "24h" } }`, 1)
	if cfg == testConfig {
		t.Fatal("fixture: the config did not change")
	}
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201)
	run := w.awaiting("alice")
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", w.owner, map[string]any{"note": "ok"}), 200)
	a, err := w.store.GetApproval(t.Context(), run.Approval.ID)
	if err != nil {
		t.Fatal(err)
	}
	actor := approvals.Actor{ProjectID: w.project.ID, Role: approvals.RoleOwner, ID: a.DecidedBy, Name: a.DecidedByName}
	made, err := w.eng.Remember(t.Context(), actor, a, engine.RememberParams{For: 2 * time.Hour, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	w.wait(run.ID, "terminal")

	var list wire.RuleList
	w.must(w.do("GET", "/v1/rules", w.owner, nil), 200).decode(&list)
	if len(list.Rules) != 1 {
		t.Fatalf("rules %+v", list.Rules)
	}
	got := list.Rules[0]
	if got.ID != made.ID || got.ApprovalID != a.ID || got.RunID != run.ID || got.CreatedBy != a.DecidedBy || got.Scope != api.RuleScopeExact ||
		got.InputDigest != a.InputDigest || got.State != "active" || got.EndUserID != "alice" || !got.ExpiresAt.Equal(w.clock.Now().Add(2*time.Hour)) {
		t.Errorf("rule %+v", got)
	}
	// An active rule has no revocation: no revokedAt (not a zero time),
	// revokedBy or revokedByName.
	w.must(w.do("GET", "/v1/rules", w.owner, nil), 200).lacks([]string{"rules", "0"}, "revokedAt", "revokedBy", "revokedByName")

	// The same call of alice's runs is let through now.
	next := w.wait(w.start("refunds", "alice", map[string]any{"orderId": "o-1", "amount": 12}).ID, "terminal")
	if next.Status != "succeeded" {
		t.Fatalf("the next run is %s, want succeeded by the remembered decision", next.Status)
	}

	for _, c := range []struct {
		query string
		want  int
	}{
		{"?agent=refunds&tool=refundOrder&endUserId=alice", 1},
		{"?agent=plain", 0},
		{"?endUserId=bob", 0},
		{"?status=all", 1},
	} {
		var l wire.RuleList
		w.must(w.do("GET", "/v1/rules"+c.query, w.developer, nil), 200).decode(&l)
		if len(l.Rules) != c.want {
			t.Errorf("GET /v1/rules%s: %d rules, want %d", c.query, len(l.Rules), c.want)
		}
	}
	resp := w.must(w.do("GET", "/v1/rules?status=expired", w.owner, nil), 400)
	if e := resp.apiErr(); !strings.Contains(e.Message, "status") || !strings.Contains(e.Message, "active or all") {
		t.Errorf("bad status: %+v", e)
	}

	var one wire.Rule
	w.must(w.do("GET", "/v1/rules/"+made.ID, w.owner, nil), 200).decode(&one)
	if one.ID != made.ID || one.CreatedBy != a.DecidedBy {
		t.Errorf("rule %+v", one)
	}
	resp = w.must(w.do("GET", "/v1/rules/rul_nope", w.owner, nil), 404)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "rule rul_nope not found") {
		t.Errorf("message %q", msg)
	}
	w.must(w.do("GET", "/v1/rules/"+made.ID, w.other, nil), 404)

	w.viewer = w.newKey("viewer").Key
	w.must(w.do("DELETE", "/v1/rules/"+made.ID, w.viewer, nil), 403)
	var revoked wire.Rule
	w.must(w.do("DELETE", "/v1/rules/"+made.ID, w.developer, nil), 200).decode(&revoked)
	if revoked.State != "revoked" || revoked.RevokedAt.IsZero() || revoked.RevokedBy == "" {
		t.Fatalf("revoked %+v", revoked)
	}
	w.clock.Advance(time.Minute)
	var again wire.Rule
	w.must(w.do("DELETE", "/v1/rules/"+made.ID, w.owner, nil), 200).decode(&again)
	if !again.RevokedAt.Equal(revoked.RevokedAt) || again.RevokedBy != revoked.RevokedBy {
		t.Errorf("revoked twice: %+v, want the first revocation %+v", again, revoked)
	}
	w.must(w.do("GET", "/v1/rules", w.owner, nil), 200).decode(&list)
	if len(list.Rules) != 0 {
		t.Errorf("active rules after the revoke: %+v", list.Rules)
	}
	after := w.wait(w.start("refunds", "alice", map[string]any{"orderId": "o-1", "amount": 12}).ID, "settled")
	if after.Status != "awaiting-approval" {
		t.Errorf("after the revoke the run is %s, want awaiting-approval", after.Status)
	}
}
