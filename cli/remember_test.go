package cli

import (
	"strings"
	"testing"
	"time"

	"stead/store"
)

// stead approve --remember: a remember the tool does not allow, or one too
// long, decides nothing; one it allows approves, prints the rule, and the
// same end user's next refund runs without asking.
func TestApproveRemember(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	z := newNormalizer()
	dir := writeExample(t, func(cfg string) string {
		return strings.Replace(cfg, `"approvals": { "timeout": "15m", "noteToCustomer": true },`,
			`"approvals": { "timeout": "15m", "noteToCustomer": true, "remember": { "max": "24h" } },`, 1)
	})
	s.mustCLI("deploy", dir)
	run := s.startAwaiting("o-1001")
	if r := s.cli("approve", run.ApprovalID, "--exact-input"); r.code != 2 || !strings.Contains(r.stderr, "add --remember DURATION") {
		t.Errorf("--exact-input alone: %s", r)
	}
	if r := s.cli("approve", run.ApprovalID, "--remember", "48h"); r.code != 1 || !strings.Contains(r.stderr, "remember.for") ||
		!strings.Contains(r.stderr, "its approvals.remember.max is 24h") {
		t.Errorf("--remember 48h: %s", r)
	}
	if got := s.waitRun(run.ID, func(store.Run) bool { return true }); got.Status != store.RunAwaitingApproval {
		t.Fatalf("a refused remember decided: the run is %s", got.Status)
	}
	r := s.mustCLI("approve", run.ApprovalID, "--remember", "2h")
	golden(t, "approve_remember", z.replace(r.stdout))
	s.waitRun(run.ID, terminal)
	s.clock.Advance(time.Minute)
	next := s.mustCLI("run", "refunds", "--input", `{"orderId":"o-1002","reason":"damaged"}`, "--end-user", "demo-user", "--json")
	if done := s.waitRun(jsonField(t, next.stdout, "id"), terminal); done.Status != store.RunSucceeded {
		t.Errorf("the next refund with the rule in force: %s (%+v)", done.Status, done.Error)
	}
	if r := s.mustCLI("rules", "list"); !strings.Contains(r.stdout, "refundOrder") {
		t.Errorf("rules list: %s", r.stdout)
	}
}
