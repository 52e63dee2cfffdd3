package api_test

import (
	"encoding/json"
	"fmt"
	"stead/api/wire"
	"strings"
	"testing"
)

// Approve with "remember": a refused remember is a 400 naming the field and
// decides nothing; an accepted one approves and answers with the rule,
// which lets the same end user's next refund through without asking.
func TestApproveAndRemember(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cfg := strings.Replace(testConfig, `"approvals": { "timeout": "10m" },`, `"approvals": { "timeout": "10m", "remember": { "max": "24h" } },`, 1)
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201)
	run := w.awaiting("alice")
	id := run.Approval.ID
	for _, tc := range []struct {
		remember map[string]any
		field    string
	}{
		{map[string]any{"for": "48h"}, "remember.for"},
		{map[string]any{"for": "soon"}, "remember.for"},
		{map[string]any{"for": "1h", "exact": true, "when": map[string]any{"type": "object"}}, "remember.when"},
	} {
		e := w.must(w.do("POST", "/v1/approvals/"+id+"/approve", w.owner, map[string]any{"remember": tc.remember}), 400).apiErr()
		if f := fmt.Sprint(e.Details["fields"]); !strings.Contains(f, "field:"+tc.field+" ") {
			t.Errorf("remember %v: %s %v", tc.remember, e.Message, e.Details)
		}
	}
	var a wire.Approval
	if w.must(w.do("GET", "/v1/approvals/"+id, w.owner, nil), 200).decode(&a); a.Status != "pending" {
		t.Fatalf("after refused remembers the approval is %s", a.Status)
	}
	var got struct {
		wire.Approval
		RememberedRule *wire.Rule `json:"rememberedRule"`
	}
	w.must(w.do("POST", "/v1/approvals/"+id+"/approve", w.owner, map[string]any{"remember": map[string]any{"for": "2h"}}), 200).decode(&got)
	if got.Status != "approved" || got.RememberedRule == nil || got.RememberedRule.ApprovalID != id || got.RememberedRule.Scope != "any" ||
		got.RememberedRule.State != "active" {
		t.Fatalf("approve and remember: %s, rule %+v", got.Status, got.RememberedRule)
	}
	w.wait(run.ID, "terminal")
	next := w.start("refunds", "alice", map[string]any{"orderId": "o-2", "amount": 3})
	if done := w.wait(next.ID, "terminal"); done.Status != "succeeded" {
		t.Errorf("alice's next refund with the rule in force: %s", done.Status)
	}
	other := w.start("refunds", "bob", map[string]any{"orderId": "o-3", "amount": 3})
	if waiting := w.wait(other.ID, "settled"); waiting.Status != "awaiting-approval" {
		t.Errorf("bob's refund (another end user): %s", waiting.Status)
	}
}
