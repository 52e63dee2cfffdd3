package cli

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"stead/store"
)

// TestQuorumGolden is the README's worked example, examples/finance:
// refunds over $500 need two of finance. A deploy before the group exists
// is refused naming it; a small refund needs one member; a large one shows
// its progress in the queue and the approval, names who it waits on, says
// after the first vote that the run waits for the rest, refuses a second
// vote and the requester, and resumes after the second vote.
func TestQuorumGolden(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	z := newNormalizer()
	keyOf := regexp.MustCompile(`stk_[0-9a-z]+`)
	add := func(name string) string {
		r := s.mustCLI("members", "add", name, "--email", strings.ToLower(strings.Fields(name)[0])+"@example.com", "--role", "approver", "--key")
		return keyOf.FindString(r.stdout)
	}
	ana, bo := add("Ana Diaz"), add("Bo Li")
	dir := filepath.Join("..", "examples", "finance")
	if r := s.cli("deploy", dir, "--yes"); r.code == 0 || !strings.Contains(r.stderr, `group "finance" does not exist in this project`) {
		t.Fatalf("deploy before the group exists: %s", r)
	}
	s.mustCLI("groups", "create", "finance", "--member", "Ana Diaz", "--member", "Bo Li")
	s.mustCLI("deploy", dir, "--yes")

	start := func(amount string) store.Run {
		r := s.mustCLI("run", "refunds", "--input", `{"orderId":"o-`+amount+`","amount":`+amount+`}`, "--end-user", "demo-user", "--json")
		return s.waitRun(jsonField(t, r.stdout, "id"), func(r store.Run) bool { return r.Status == store.RunAwaitingApproval || r.Status.Terminal() })
	}
	small := start("40")
	if r := s.mustCLI("approval", small.ApprovalID); strings.Contains(r.stdout, "approvers") {
		t.Errorf("a $40 refund asks finance: %s", r.stdout)
	}
	s.mustCLI("approve", small.ApprovalID)
	if done := s.waitRun(small.ID, terminal); done.Status != store.RunSucceeded {
		t.Errorf("the $40 refund %s after one approval", done.Status)
	}

	run := start("900")
	s.clock.Advance(2 * time.Minute)
	check := func(name string, r result) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %s", name, r)
		}
		golden(t, name, z.replace(r.stdout))
	}
	check("approvals_quorum", s.cli("approvals"))
	check("approve_vote", s.run(cliEnv{EnvKey: ana}, "approve", run.ApprovalID))
	if r := s.run(cliEnv{EnvKey: ana}, "approve", run.ApprovalID); r.code == 0 || !strings.Contains(r.stderr, "you have already approved") {
		t.Errorf("a second vote: %s", r)
	}
	// The owner started the run: separated from it, as the default with
	// approvers says.
	if r := s.cli("approve", run.ApprovalID); r.code == 0 || !strings.Contains(r.stderr, "you started this run") {
		t.Errorf("the requester: %s", r)
	}
	check("approval_quorum", s.cli("approval", run.ApprovalID))
	check("approve_quorum", s.run(cliEnv{EnvKey: bo}, "approve", run.ApprovalID))
	if done := s.waitRun(run.ID, terminal); done.Status != store.RunSucceeded {
		t.Errorf("run %s after the quorum", done.Status)
	}
}
