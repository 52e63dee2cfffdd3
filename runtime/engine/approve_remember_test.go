package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"stead/approvals"
	"stead/runtime/engine"
	"stead/store"
)

// An approve with a decision to remember that cannot be remembered (too
// long, a tool that does not opt in) decides nothing: the approval stays
// pending and no rule is made.
func TestApproveAndRememberRefusedDecidesNothing(t *testing.T) {
	h := setupRemember(t)
	for _, tc := range []struct {
		agent string
		p     engine.RememberParams
		field string
	}{
		{"refunds", engine.RememberParams{For: 48 * time.Hour}, "for"},
		{"refunds", engine.RememberParams{For: time.Hour, Exact: true, When: []byte(`{"type": "object"}`)}, "when"},
		{"plain", engine.RememberParams{For: time.Hour}, ""},
		{"refunds", engine.RememberParams{For: time.Hour, When: []byte(`{"description": "` + strings.Repeat("x", approvals.MaxRuleWhen) + `"}`)}, "when"},
	} {
		r := h.startAs(bo, tc.agent, "alice", `{"orderId": "o-1", "amount": 5, "untrusted": false}`)
		a := h.pending(r.ID)
		_, _, err := h.eng.ApproveAndRemember(h.ctx, ana, engine.DecideParams{ApprovalID: a.ID}, tc.p)
		var re *engine.RememberError
		if !errors.As(err, &re) || re.Field != tc.field {
			t.Fatalf("%s %+v: err %v, want a RememberError on %q", tc.agent, tc.p, err, tc.field)
		}
		if got := h.pending(r.ID); got.Status != approvals.Pending {
			t.Errorf("%s: the approval is %s after a refused remember", tc.agent, got.Status)
		}
		wantStatus(t, h.run(r.ID), store.RunAwaitingApproval, "")
	}
	rules, err := h.eng.ListRules(h.ctx, h.owner, store.RuleFilter{All: true})
	if err != nil || len(rules.Items) != 0 {
		t.Errorf("rules after refusals: %+v, %v", rules.Items, err)
	}
}

// A remembered decision ends with its maker's authority: once Ana may no
// longer decide (demoted to viewer) or is no member (removed), her rule
// lets nothing through.
func TestRememberedDecisionEndsWithItsMaker(t *testing.T) {
	for _, change := range []string{"demoted", "removed"} {
		t.Run(change, func(t *testing.T) {
			h := setupRemember(t)
			_, rule := h.approveAndRemember("refunds", "alice", `{"orderId":"o-1","amount":12,"untrusted":false}`, engine.RememberParams{For: 24 * time.Hour})
			next := h.startAs(bo, "refunds", "alice", `{"orderId":"o-2","amount":30,"untrusted":false}`)
			wantRemembered(t, h, next, rule)
			m, err := h.store.GetMember(h.ctx, h.project, ana.MemberID)
			if err != nil {
				t.Fatal(err)
			}
			if change == "demoted" {
				m.Role = approvals.RoleViewer
				_, err = h.store.UpdateMember(h.ctx, m)
			} else {
				_, err = h.store.RemoveMember(h.ctx, h.project, m.ID, h.clock.Now())
			}
			if err != nil {
				t.Fatal(err)
			}
			after := h.startAs(bo, "refunds", "alice", `{"orderId":"o-3","amount":30,"untrusted":false}`)
			wantStatus(t, after, store.RunAwaitingApproval, "")
		})
	}
}

// A remembered decision whose maker's key names no member of the project
// lets nothing through: there is no authority for it to stand for.
func TestRememberedDecisionOfNoMemberLetsNothingThrough(t *testing.T) {
	h := setupRemember(t)
	ghost := ana
	ghost.ID, ghost.MemberID = "key_ghost", "mem_ghost"
	r := h.startAs(bo, "refunds", "alice", `{"orderId":"o-1","amount":12,"untrusted":false}`)
	_, rule, err := h.eng.ApproveAndRemember(h.ctx, ghost, engine.DecideParams{ApprovalID: h.pending(r.ID).ID}, engine.RememberParams{For: time.Hour})
	if err != nil || rule.CreatedByMember != "mem_ghost" {
		t.Fatalf("approve and remember: %+v (%v)", rule, err)
	}
	after := h.startAs(bo, "refunds", "alice", `{"orderId":"o-2","amount":30,"untrusted":false}`)
	wantStatus(t, after, store.RunAwaitingApproval, "")
}
