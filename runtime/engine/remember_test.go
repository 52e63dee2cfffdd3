package engine_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/runtime/engine"
	"stead/store"
)

// rememberHandlers: check lowers the run's trust when its input says so;
// refundOrder refunds.
const rememberHandlers = `
export async function check(input, context) {
  if (input.untrusted) context.markUntrusted("email:x@example.com");
  return { checked: true };
}
export async function refundOrder(input, context) {
  return { refunded: input.amount, orderId: input.orderId };
}
`

// rememberConfig: refunds lets decisions on refundOrder be remembered for
// up to 24h and denies refunds of 1000 or more; separated does the same
// with its approvals separated from the requester; plain does not opt in.
// %DESC% is refundOrder's description in refunds, %POLICY% refunds'
// policy reason, %AGENT% more settings of refunds' approvals: redeploys
// change them.
const rememberConfig = `{"agents": {
  "refunds": {
    "approvals": {"remember": {"max": "24h"}%AGENT%},
    "tools": {
      "check": {"effect": "read", "description": "%CHECK%"},
      "refundOrder": {"effect": "write", "requiresApproval": true, "description": "%DESC%",
        "input": {"type": "object", "required": ["orderId", "amount"],
                  "properties": {"orderId": {"type": "string"}, "amount": {"type": "number"}}}}
    },
    "policy": [{"tool": "refundOrder", "decision": "deny", "reason": "%POLICY%",
                "when": {"required": ["amount"], "properties": {"amount": {"minimum": 1000}}}}],
    "steps": [
      {"id": "check", "tool": "check", "input": {"untrusted": "$input.untrusted"}},
      {"id": "refund", "tool": "refundOrder", "input": {"orderId": "$input.orderId", "amount": "$input.amount"}}
    ]
  },
  "separated": {
    "approvals": {"remember": {"max": "24h"}, "separateFrom": "requester"},
    "tools": {"check": {"effect": "read"}, "refundOrder": {"effect": "write", "requiresApproval": true}},
    "steps": [
      {"id": "check", "tool": "check", "input": {"untrusted": "$input.untrusted"}},
      {"id": "refund", "tool": "refundOrder", "input": {"orderId": "$input.orderId", "amount": "$input.amount"}}
    ]
  },
  "plain": {
    "tools": {"check": {"effect": "read"}, "refundOrder": {"effect": "write", "requiresApproval": true}},
    "steps": [
      {"id": "check", "tool": "check", "input": {"untrusted": "$input.untrusted"}},
      {"id": "refund", "tool": "refundOrder", "input": {"orderId": "$input.orderId", "amount": "$input.amount"}}
    ]
  }
}}`

// rememberVariant is rememberConfig with its placeholders filled in;
// "" keeps a placeholder's default.
func rememberVariant(desc, check, policy, agentApprovals string) string {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	return strings.NewReplacer(
		"%DESC%", or(desc, "Refund one order."), "%CHECK%", or(check, "Check the request."),
		"%POLICY%", or(policy, "large refunds go to finance"), "%AGENT%", agentApprovals,
	).Replace(rememberConfig)
}

var (
	ana = approvals.Actor{ProjectID: "prj_a", Role: approvals.RoleApprover, ID: "key_ana", Name: "Ana Diaz", MemberID: "mem_ana"}
	bo  = approvals.Actor{ProjectID: "prj_a", Role: approvals.RoleDeveloper, ID: "key_bo", Name: "Bo Li", MemberID: "mem_bo"}
)

func setupRemember(t *testing.T) *harness {
	t.Helper()
	h := setup(t)
	h.member(ana.MemberID, ana.Name, ana.Role)
	h.member(bo.MemberID, bo.Name, bo.Role)
	h.deploy(h.owner, rememberHandlers, rememberVariant("", "", "", ""))
	return h
}

// startAs starts a run of agentName for endUser as actor and drains the
// queue.
func (h *harness) startAs(actor approvals.Actor, agentName, endUser, input string) store.Run {
	h.t.Helper()
	r, _, err := h.eng.StartRun(h.ctx, actor, engine.StartParams{Agent: agentName, Input: json.RawMessage(input), EndUserID: endUser})
	if err != nil {
		h.t.Fatalf("start %s: %v", agentName, err)
	}
	h.drain()
	return h.run(r.ID)
}

// approveAndRemember starts a run (as Bo), has Ana approve its refund and
// remember the decision with p, and returns the finished run and the rule.
func (h *harness) approveAndRemember(agentName, endUser, input string, p engine.RememberParams) (store.Run, approvals.Rule) {
	h.t.Helper()
	r := h.startAs(bo, agentName, endUser, input)
	_, rule, err := h.eng.ApproveAndRemember(h.ctx, ana, engine.DecideParams{ApprovalID: h.pending(r.ID).ID, Note: "ok"}, p)
	if err != nil {
		h.t.Fatalf("approve and remember: %v", err)
	}
	h.drain()
	r = h.run(r.ID)
	wantStatus(h.t, r, store.RunSucceeded, "")
	return r, rule
}

// refundPolicy is the policy record of the run's refund call.
func (h *harness) refundPolicy(runID string) map[string]any {
	h.t.Helper()
	for _, e := range h.events(runID) {
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			h.t.Fatal(err)
		}
		if e.Type == "step.started" && e.Step == "refund" {
			p, _ := d["policy"].(map[string]any)
			return p
		}
	}
	h.t.Fatalf("run %s has no step.started of its refund; trace %v", runID, h.eventTypes(runID))
	return nil
}

// wantRemembered fails unless the run succeeded without an approval, its
// refund let through by rule.
func wantRemembered(t *testing.T, h *harness, r store.Run, rule approvals.Rule) {
	t.Helper()
	wantStatus(t, r, store.RunSucceeded, "")
	if slices.Contains(h.eventTypes(r.ID), "approval.requested") {
		t.Fatalf("run %s asked for an approval: %v", r.ID, h.eventTypes(r.ID))
	}
	p := h.refundPolicy(r.ID)
	if p["decision"] != "allow" || p["remembered"] != rule.ID {
		t.Fatalf("refund policy %v, want allow by %s", p, rule.ID)
	}
}

// wantAsked fails unless the run waits for an approval of its refund.
func wantAsked(t *testing.T, h *harness, r store.Run) approvals.Approval {
	t.Helper()
	a := h.pending(r.ID)
	if a.Tool != "refundOrder" {
		t.Fatalf("approval of %s, want refundOrder", a.Tool)
	}
	return a
}

func TestRememberedDecisionLetsTheNextCallThrough(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	first, rule := h.approveAndRemember("refunds", "alice", `{"orderId":"o-1","amount":12,"untrusted":false}`, engine.RememberParams{For: 24 * time.Hour})
	if a, err := h.store.GetApproval(h.ctx, rule.ApprovalID); err != nil || a.RunID != first.ID || a.DecidedBy != "key_ana" {
		t.Fatalf("the rule's approval %+v (%v), want Ana's approval of run %s", a, err, first.ID)
	}
	if rule.RunID != first.ID || rule.CreatedBy != "key_ana" || rule.CreatedByName != "Ana Diaz" ||
		rule.CreatedByMember != "mem_ana" || rule.Deployment != first.Deployment || rule.EndUserID != "alice" ||
		!rule.ExpiresAt.Equal(h.clock.Now().Add(24*time.Hour)) || rule.InputDigest != "" || rule.When != nil {
		t.Fatalf("rule %+v", rule)
	}
	h.clock.Advance(time.Hour)
	next := h.startAs(bo, "refunds", "alice", `{"orderId":"o-2","amount":30,"untrusted":false}`)
	wantRemembered(t, h, next, rule)
	want := "allowed by remembered decision " + rule.ID + " (Ana Diaz, from approval " + rule.ApprovalID + ", until 2026-11-30T12:00:00Z)"
	if got := h.refundPolicy(next.ID)["reason"]; got != want {
		t.Errorf("reason %q\nwant   %q", got, want)
	}
	// The rule is listed with who made it.
	p, err := h.eng.ListRules(h.ctx, h.owner, store.RuleFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].ID != rule.ID || p.Items[0].State != engine.RuleActive || p.Items[0].CreatedByName != "Ana Diaz" {
		t.Fatalf("rules %+v", p.Items)
	}
}

func TestRememberedDecisionScope(t *testing.T) {
	t.Parallel()
	input := `{"orderId":"o-1","amount":12,"untrusted":false}`
	for _, c := range []struct {
		name    string
		p       engine.RememberParams
		endUser string
		input   string
		allowed bool
	}{
		{"any input, same end user", engine.RememberParams{For: time.Hour}, "alice", `{"orderId":"o-9","amount":99,"untrusted":false}`, true},
		{"any input, another end user", engine.RememberParams{For: time.Hour}, "bob", input, false},
		{"exact, same input", engine.RememberParams{For: time.Hour, Exact: true}, "alice", `{"amount":12, "orderId":"o-1","untrusted":false}`, true},
		{"exact, another input", engine.RememberParams{For: time.Hour, Exact: true}, "alice", `{"orderId":"o-1","amount":13,"untrusted":false}`, false},
		{"schema, matching input", engine.RememberParams{For: time.Hour, When: json.RawMessage(`{"properties": {"amount": {"maximum": 50}}}`)}, "alice", `{"orderId":"o-7","amount":50,"untrusted":false}`, true},
		{"schema, other input", engine.RememberParams{For: time.Hour, When: json.RawMessage(`{"properties": {"amount": {"maximum": 50}}}`)}, "alice", `{"orderId":"o-7","amount":51,"untrusted":false}`, false},
		{"another agent", engine.RememberParams{For: time.Hour}, "alice", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setupRemember(t)
			_, rule := h.approveAndRemember("refunds", "alice", input, c.p)
			var r store.Run
			if c.input == "" {
				// The separated agent has the same tool, for the same end
				// user: another scope.
				r = h.startAs(h.dev, "separated", c.endUser, input)
			} else {
				r = h.startAs(bo, "refunds", c.endUser, c.input)
			}
			if c.allowed {
				wantRemembered(t, h, r, rule)
			} else {
				wantAsked(t, h, r)
			}
		})
	}
}

func TestRememberedDecisionNeverForUntrustedRuns(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	_, rule := h.approveAndRemember("refunds", "alice", `{"orderId":"o-1","amount":12,"untrusted":false}`, engine.RememberParams{For: time.Hour})
	r := h.startAs(bo, "refunds", "alice", `{"orderId":"o-1","amount":12,"untrusted":true}`)
	wantAsked(t, h, r)
	if r.Trust != store.Untrusted {
		t.Fatalf("fixture: the run is %s", r.Trust)
	}
	// And the same call of a trusted run is let through.
	wantRemembered(t, h, h.startAs(bo, "refunds", "alice", `{"orderId":"o-1","amount":12,"untrusted":false}`), rule)
}

func TestRememberedDecisionNeverOverADenyRule(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	h.approveAndRemember("refunds", "alice", `{"orderId":"o-1","amount":12,"untrusted":false}`, engine.RememberParams{For: time.Hour})
	r := h.startAs(bo, "refunds", "alice", `{"orderId":"o-2","amount":5000,"untrusted":false}`)
	wantStatus(t, r, store.RunFailed, engine.CodePolicyDenied)
}

// TestRememberedDecisionAcrossDeployments: a redeploy that changes
// neither the tool's posture nor the agent's policy keeps the rule; one
// that changes either ends it, and the list says which deployment did.
func TestRememberedDecisionAcrossDeployments(t *testing.T) {
	t.Parallel()
	input := `{"orderId":"o-1","amount":12,"untrusted":false}`
	for _, c := range []struct {
		name   string
		config string
		keeps  bool
	}{
		{"the same config", rememberVariant("", "", "", ""), true},
		{"another tool changed", rememberVariant("", "Check it twice.", "", ""), true},
		{"the tool's posture changed", rememberVariant("Refund one order, now.", "", "", ""), false},
		{"the agent's policy changed", rememberVariant("", "", "finance decides", ""), false},
		{"a shorter remember.max", strings.Replace(rememberVariant("", "", "", ""), `"max": "24h"`, `"max": "1h"`, 1), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setupRemember(t)
			_, rule := h.approveAndRemember("refunds", "alice", input, engine.RememberParams{For: 2 * time.Hour})
			d := h.deploy(h.owner, rememberHandlers, c.config)
			h.deploy(h.owner, rememberHandlers, c.config) // and once more: the first of the two ended it
			r := h.startAs(bo, "refunds", "alice", input)
			info, err := h.eng.GetRule(h.ctx, h.owner, rule.ID)
			if err != nil {
				t.Fatal(err)
			}
			if c.keeps {
				wantRemembered(t, h, r, rule)
				if info.State != engine.RuleActive {
					t.Errorf("rule state %s (%s), want active", info.State, info.Ended)
				}
				return
			}
			wantAsked(t, h, r)
			if info.State != engine.RuleEnded || info.EndedBy != d.Version || info.Ended == "" {
				t.Errorf("rule state %s, ended by %d (%s), want ended by deployment %d", info.State, info.EndedBy, info.Ended, d.Version)
			}
		})
	}
}

// TestRememberedDecisionNeverStandsInForApprovers: approvers set on the
// agent change neither the tool's posture nor the policy, yet the call,
// which now needs a quorum, asks.
func TestRememberedDecisionNeverStandsInForApprovers(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	input := `{"orderId":"o-1","amount":12,"untrusted":false}`
	h.approveAndRemember("refunds", "alice", input, engine.RememberParams{For: time.Hour})
	quorum := rememberVariant("", "", "", `, "approvers": {"group": "finance", "min": 2}`)
	for _, c := range []string{rememberVariant("", "", "", ""), quorum} {
		cfg, err := agent.Parse([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		ag, _ := cfg.Agent("refunds")
		if c == quorum {
			if got := ag.PostureDigest("refundOrder"); got != postureOf(t, rememberVariant("", "", "", "")) {
				t.Fatal("fixture: approvers on the agent changed the posture digest; this test would not show the quorum check")
			}
		}
	}
	now := h.clock.Now()
	if err := h.store.CreateGroup(h.ctx, store.Group{ProjectID: "prj_a", Name: "finance", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	h.deploy(h.owner, rememberHandlers, quorum)
	a := wantAsked(t, h, h.startAs(bo, "refunds", "alice", input))
	if !a.HasQuorum() {
		t.Fatalf("approval %+v has no requirements", a)
	}
}

func postureOf(t *testing.T, config string) string {
	t.Helper()
	cfg, err := agent.Parse([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	ag, _ := cfg.Agent("refunds")
	return ag.PostureDigest("refundOrder")
}

// TestRememberedDecisionNeverLetsTheRequesterThrough: where approvals are
// separated from the requester, a rule the requester made does not pass
// their own runs; others' runs it does.
func TestRememberedDecisionNeverLetsTheRequesterThrough(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	input := `{"orderId":"o-1","amount":12,"untrusted":false}`
	_, rule := h.approveAndRemember("separated", "alice", input, engine.RememberParams{For: time.Hour})
	anaDev := ana
	anaDev.Role = approvals.RoleDeveloper
	r := h.startAs(anaDev, "separated", "alice", input)
	if r.Requester != "mem_ana" {
		t.Fatalf("fixture: the run's requester is %q", r.Requester)
	}
	wantAsked(t, h, r)
	wantRemembered(t, h, h.startAs(bo, "separated", "alice", input), rule)
}

func TestRememberedDecisionEndsWhenExpiredOrRevoked(t *testing.T) {
	t.Parallel()
	input := `{"orderId":"o-1","amount":12,"untrusted":false}`
	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		h := setupRemember(t)
		_, rule := h.approveAndRemember("refunds", "alice", input, engine.RememberParams{For: time.Hour})
		h.clock.Advance(time.Hour - time.Second)
		wantRemembered(t, h, h.startAs(bo, "refunds", "alice", input), rule)
		h.clock.Advance(time.Second)
		wantAsked(t, h, h.startAs(bo, "refunds", "alice", input))
		info, err := h.eng.GetRule(h.ctx, h.owner, rule.ID)
		if err != nil || info.State != engine.RuleExpired {
			t.Fatalf("rule %+v (%v), want expired", info, err)
		}
	})
	t.Run("revoked", func(t *testing.T) {
		t.Parallel()
		h := setupRemember(t)
		_, rule := h.approveAndRemember("refunds", "alice", input, engine.RememberParams{For: time.Hour})
		info, err := h.eng.RevokeRule(h.ctx, bo, rule.ID)
		if err != nil || info.State != engine.RuleRevoked || info.RevokedBy != "key_bo" || info.RevokedByName != "Bo Li" {
			t.Fatalf("revoke: %+v (%v)", info, err)
		}
		wantAsked(t, h, h.startAs(bo, "refunds", "alice", input))
	})
}

// TestRememberRefuses: every refusal is typed, names the field or setting
// to fix, and creates no rule.
func TestRememberRefuses(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	input := `{"orderId":"o-1","amount":12,"untrusted":false}`
	approved := func(agentName string) approvals.Approval {
		r := h.startAs(bo, agentName, "alice", input)
		a, err := h.decide(ana, h.pending(r.ID).ID, true, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := approved("refunds")
	plain := approved("plain")
	pending := h.pending(h.startAs(bo, "refunds", "alice", input).ID)
	denied, err := h.decide(ana, h.pending(h.startAs(bo, "refunds", "alice", input).ID).ID, false, "", "")
	if err != nil || denied.DecidedBy != ana.ID {
		t.Fatalf("deny: %+v (%v)", denied, err)
	}
	quorum := a
	quorum.Requirements = []approvals.Requirement{{Group: "finance", Min: 2}}
	for _, c := range []struct {
		name   string
		actor  approvals.Actor
		a      approvals.Approval
		p      engine.RememberParams
		field  string
		reason string
		says   string
	}{
		{"no duration", ana, a, engine.RememberParams{}, "for", engine.RememberInvalid, "longer than 0"},
		{"over 7 days", ana, a, engine.RememberParams{For: 8 * 24 * time.Hour}, "for", engine.RememberTooLong, "168h"},
		{"over the tool's max", ana, a, engine.RememberParams{For: 25 * time.Hour}, "for", engine.RememberTooLong, "approvals.remember.max is 24h"},
		{"exact and when", ana, a, engine.RememberParams{For: time.Hour, Exact: true, When: json.RawMessage(`{}`)}, "when", engine.RememberInvalid, "not both"},
		{"a bad schema", ana, a, engine.RememberParams{For: time.Hour, When: json.RawMessage(`{"properties": {"amount": {"maximum": "x"}}}`)}, "when", engine.RememberInvalid, "/properties/amount/maximum"},
		{"not the approver", bo, a, engine.RememberParams{For: time.Hour}, "", engine.RememberNotDecider, "approved by Ana Diaz (key_ana)"},
		{"still pending", ana, pending, engine.RememberParams{For: time.Hour}, "", engine.RememberNotDecider, "is pending"},
		{"denied by the actor", ana, denied, engine.RememberParams{For: time.Hour}, "", engine.RememberNotDecider, "is denied"},
		{"a tool that does not opt in", ana, plain, engine.RememberParams{For: time.Hour}, "", engine.RememberNotAllowed, `"approvals": {"remember": {"max": "24h"}}`},
		{"an approval with approvers", ana, quorum, engine.RememberParams{For: time.Hour}, "", engine.RememberNotAllowed, "never stands in for a quorum"},
	} {
		_, err := h.eng.Remember(h.ctx, c.actor, c.a, c.p)
		var re *engine.RememberError
		if !errors.As(err, &re) || re.Field != c.field || re.Code() != c.reason || !strings.Contains(re.Error(), c.says) {
			t.Errorf("%s: error %#v, want a RememberError on %q (%s) saying %q", c.name, err, c.field, c.reason, c.says)
		}
	}
	_, err = h.eng.Remember(h.ctx, h.customer, a, engine.RememberParams{For: time.Hour})
	wantErr(t, err, engine.ErrForbidden)
	_, err = h.eng.Remember(h.ctx, h.other, a, engine.RememberParams{For: time.Hour})
	wantErr(t, err, store.ErrNotFound)
	p, err := h.eng.ListRules(h.ctx, h.owner, store.RuleFilter{All: true})
	if err != nil || len(p.Items) != 0 {
		t.Fatalf("rules after the refusals: %+v (%v)", p.Items, err)
	}
}

// TestRulesAccess: readers of approvals list and read rules, deciders
// revoke them, another project sees none.
func TestRulesAccess(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	_, rule := h.approveAndRemember("refunds", "alice", `{"orderId":"o-1","amount":12,"untrusted":false}`, engine.RememberParams{For: time.Hour})
	viewer := approvals.Actor{ProjectID: "prj_a", Role: approvals.RoleViewer, ID: "key_viewer"}
	if _, err := h.eng.GetRule(h.ctx, viewer, rule.ID); err != nil {
		t.Errorf("a viewer reads a rule: %v", err)
	}
	if p, err := h.eng.ListRules(h.ctx, viewer, store.RuleFilter{Agent: "refunds"}); err != nil || len(p.Items) != 1 {
		t.Errorf("a viewer lists rules: %+v (%v)", p.Items, err)
	}
	_, err := h.eng.RevokeRule(h.ctx, viewer, rule.ID)
	wantErr(t, err, engine.ErrForbidden)
	_, err = h.eng.ListRules(h.ctx, h.customer, store.RuleFilter{})
	wantErr(t, err, engine.ErrForbidden)
	_, err = h.eng.GetRule(h.ctx, h.customer, rule.ID)
	wantErr(t, err, engine.ErrForbidden)
	_, err = h.eng.GetRule(h.ctx, h.other, rule.ID)
	wantErr(t, err, store.ErrNotFound)
	_, err = h.eng.RevokeRule(h.ctx, h.other, rule.ID)
	wantErr(t, err, store.ErrNotFound)
	if p, err := h.eng.ListRules(h.ctx, h.other, store.RuleFilter{All: true}); err != nil || len(p.Items) != 0 {
		t.Errorf("another project lists %+v (%v)", p.Items, err)
	}
	if info, err := h.eng.GetRule(h.ctx, h.owner, rule.ID); err != nil || info.Revoked() {
		t.Errorf("the rule after refused revokes: %+v (%v)", info, err)
	}
}

// TestRememberedDecisionInAnAgentLoop: a call a model proposes is let
// through by a remembered decision like a tool step's, and the trace names
// the rule.
func TestRememberedDecisionInAnAgentLoop(t *testing.T) {
	t.Parallel()
	h, l := setupModels(t)
	tools := strings.Replace(triageTools, `"requiresApproval": true,`, `"requiresApproval": true, "approvals": {"remember": {"max": "1h"}},`, 1)
	cfg := strings.ReplaceAll(strings.ReplaceAll(modelConfig, "%URL%", l.url()), "%TOOLS%", tools)
	h.deploy(h.owner, handlers, cfg)

	r, a := startTriage(t, h, l, "triage")
	l.then(answer("Refunded order o-1.", 300, 30))
	decided, err := h.decide(h.owner, a.ID, true, "", "")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
	rule, err := h.eng.Remember(h.ctx, h.owner, decided, engine.RememberParams{For: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	l.then(
		calls(100, 10, tcall{"call_c", "refundOrder", `{"orderId":"o-2","amount":20}`}),
		answer("Refunded order o-2.", 200, 20),
	)
	next := h.start("triage", `{"request":"Refund the other one"}`)
	wantStatus(t, next, store.RunSucceeded, "")
	l.done()
	if slices.Contains(h.eventTypes(next.ID), "approval.requested") {
		t.Fatalf("the run asked: %v", h.eventTypes(next.ID))
	}
	p, _ := h.eventData(next.ID, "tool.called")["policy"].(map[string]any)
	if p["decision"] != "allow" || p["remembered"] != rule.ID || !strings.Contains(p["reason"].(string), "remembered decision "+rule.ID) {
		t.Errorf("tool.called policy %v, want allow by %s", p, rule.ID)
	}
}

// TestRuleEndedByTheFirstDeploymentThatEnds: a rule's state names the
// first of the latest run of deployments that each end it, and why the
// latest ends it; past maxEndedWalk deployments back it names none.
func TestRuleEndedByTheFirstDeploymentThatEnds(t *testing.T) {
	t.Parallel()
	input := `{"orderId":"o-1","amount":12,"untrusted":false}`
	same := rememberVariant("", "", "", "")
	changed := rememberVariant("Refund one order, now.", "", "", "")
	noRemember := strings.Replace(same, `"approvals": {"remember": {"max": "24h"}},`, "", 1)
	noAgent := `{"agents": {"plain": {"tools": {"check": {"effect": "read"}}, "steps": [{"id": "check", "tool": "check", "input": {}}]}}}`
	for _, c := range []struct {
		name    string
		deploys []string
		endedBy int // deployments after the rule's; -1: none named
		says    string
	}{
		{"changed, changed back, changed again", []string{changed, same, changed}, 3, "posture or agent refunds's policy changed"},
		{"changed as far back as the walk reads", slices.Repeat([]string{changed}, 9), 1, "posture"},
		{"changed further back than the walk reads", slices.Repeat([]string{changed}, 10), -1, "posture"},
		{"the tool no longer opts in", []string{noRemember}, 1, "refundOrder no longer allows remembered decisions"},
		{"the agent is no longer deployed", []string{noAgent}, 1, "agent refunds is not deployed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setupRemember(t)
			_, rule := h.approveAndRemember("refunds", "alice", input, engine.RememberParams{For: time.Hour})
			for _, cfg := range c.deploys {
				h.deploy(h.owner, rememberHandlers, cfg)
			}
			info, err := h.eng.GetRule(h.ctx, h.owner, rule.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := rule.Deployment + c.endedBy
			if c.endedBy < 0 {
				want = 0
			}
			if info.State != engine.RuleEnded || info.EndedBy != want || !strings.Contains(info.Ended, c.says) {
				t.Errorf("rule state %s, ended by %d (%s); want ended by %d, saying %q", info.State, info.EndedBy, info.Ended, want, c.says)
			}
		})
	}
}

// TestRememberedDecisionOfKeysWithoutMembers: where approvals are
// separated from the requester, a rule made by a key of no member passes
// a run whose requester is unknown (no one is known to decide their own
// call, as with its approval, which anyone may decide).
func TestRememberedDecisionOfKeysWithoutMembers(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	input := `{"orderId":"o-1","amount":12,"untrusted":false}`
	r := h.startAs(h.dev, "separated", "alice", input)
	_, rule, err := h.eng.ApproveAndRemember(h.ctx, h.owner, engine.DecideParams{ApprovalID: h.pending(r.ID).ID}, engine.RememberParams{For: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requester != "" || rule.CreatedByMember != "" {
		t.Fatalf("fixture: requester %q, rule made by member %q", r.Requester, rule.CreatedByMember)
	}
	wantRemembered(t, h, h.startAs(h.dev, "separated", "alice", input), rule)
}

// A rule whose stored schema does not compile (stored by an older
// version, say) lets nothing through.
func TestRememberedDecisionWithAnUnusableSchemaLetsNothingThrough(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	input := `{"orderId":"o-1","amount":12,"untrusted":false}`
	_, made := h.approveAndRemember("refunds", "alice", input, engine.RememberParams{For: time.Hour})
	if _, err := h.eng.RevokeRule(h.ctx, ana, made.ID); err != nil {
		t.Fatal(err)
	}
	bad := made
	bad.ID = approvals.NewRuleID(ulid.MustNew(ulid.Timestamp(made.CreatedAt), ulid.DefaultEntropy()).String(), made.Agent, made.Tool, made.EndUserID)
	bad.When = json.RawMessage(`{"properties": {"amount": {"maximum": "x"}}}`)
	if err := h.store.CreateRule(h.ctx, bad); err != nil {
		t.Fatal(err)
	}
	wantAsked(t, h, h.startAs(bo, "refunds", "alice", input))
}
