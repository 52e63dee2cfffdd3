package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"stead/approvals"
	"stead/runtime/engine"
)

// TestRules: a decision remembered after an approval is listed naming who
// made it, from which approval, its scope and expiry; shown; revoked; and
// listed as revoked with --all. --json on each.
func TestRules(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	dir := writeExample(t, func(c string) string {
		return strings.Replace(c, `"approvals": { "timeout": "15m", "noteToCustomer": true }`,
			`"approvals": { "timeout": "15m", "noteToCustomer": true, "remember": { "max": "24h" } }`, 1)
	})
	s.mustCLI("deploy", dir)
	if r := s.mustCLI("rules", "list"); !strings.Contains(r.stdout, "no remembered decisions in force") {
		t.Errorf("rules list before any: %s", r.stdout)
	}

	run := s.startAwaiting("o-1001")
	s.mustCLI("approve", run.ApprovalID)
	ctx := context.Background()
	owner := approvals.Actor{ProjectID: s.project, Role: approvals.RoleOwner, ID: "test"}
	a, err := s.stack.Engine.GetApproval(ctx, owner, run.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	decider := approvals.Actor{ProjectID: s.project, Role: approvals.RoleOwner, ID: a.DecidedBy, Name: a.DecidedByName}
	rule, err := s.stack.Engine.Remember(ctx, decider, a, engine.RememberParams{For: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(time.Hour)

	r := s.mustCLI("rules", "list")
	for _, want := range []string{"MADE BY", "FROM APPROVAL", rule.ID, "refundOrder", "demo-user", "any", a.DecidedBy, run.ApprovalID, "in 23h"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("rules list lacks %q:\n%s", want, r.stdout)
		}
	}
	if a.DecidedByName != "" && !strings.Contains(r.stdout, a.DecidedByName+" ("+a.DecidedBy+")") {
		t.Errorf("rules list does not name the member who made the rule:\n%s", r.stdout)
	}
	if r := s.mustCLI("rules", "list", "--end-user", "someone-else"); !strings.Contains(r.stdout, "no remembered decisions") {
		t.Errorf("rules list --end-user someone-else: %s", r.stdout)
	}
	if r := s.mustCLI("rules", "list", "--agent", "refunds", "--tool", "refundOrder", "--end-user", "demo-user"); !strings.Contains(r.stdout, rule.ID) {
		t.Errorf("rules list of the rule's scope: %s", r.stdout)
	}
	if r := s.mustCLI("--json", "rules", "list"); jsonField(t, r.stdout, "rules.0.id") != rule.ID {
		t.Errorf("rules list --json: %s", r.stdout)
	}

	r = s.mustCLI("rules", "show", rule.ID)
	for _, want := range []string{"rule " + rule.ID + "  refunds/refundOrder for demo-user", "made by", "approval " + run.ApprovalID + " of run " + run.ID, "any", "active, expires in 23h"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("rules show lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := s.mustCLI("--json", "rules", "show", rule.ID); jsonField(t, r.stdout, "state") != "active" || jsonField(t, r.stdout, "approvalId") != run.ApprovalID {
		t.Errorf("rules show --json: %s", r.stdout)
	}

	r = s.mustCLI("rules", "revoke", rule.ID)
	if !strings.HasPrefix(r.stdout, "revoked "+rule.ID+": calls of refundOrder for demo-user ask for approval again") || !strings.Contains(r.stdout, "revoked ") {
		t.Errorf("rules revoke: %s", r.stdout)
	}
	if r := s.mustCLI("--json", "rules", "revoke", rule.ID); jsonField(t, r.stdout, "state") != "revoked" {
		t.Errorf("rules revoke --json: %s", r.stdout)
	}
	if r := s.mustCLI("rules", "list"); strings.Contains(r.stdout, rule.ID) {
		t.Errorf("rules list shows a revoked rule: %s", r.stdout)
	}
	if r := s.mustCLI("rules", "list", "--all"); !strings.Contains(r.stdout, rule.ID) || !strings.Contains(r.stdout, "revoked 0s ago") {
		t.Errorf("rules list --all: %s", r.stdout)
	}
	if r := s.cli("rules", "show", "rul_nope"); r.code != 1 || !strings.Contains(r.stderr, "rule rul_nope not found") {
		t.Errorf("rules show of an unknown id: %s", r)
	}
	if r := s.cli("rules", "list", "--limit", "0"); r.code != 2 {
		t.Errorf("rules list --limit 0: %s", r)
	}
	if r := s.cli("rules"); r.code != 2 {
		t.Errorf("rules without a subcommand: %s", r)
	}
}
