package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"stead/api"
	"stead/api/wire"
)

// Refunds need two of finance: the approval shows its progress, names who
// it waits on, refuses a second vote, a vote by someone outside the group
// and one on an input the voter no longer sees, and the second member's
// vote resumes the run.
func TestQuorumVotes(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var ana, bo wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana Diaz", "role": "approver", "key": true}), 201).decode(&ana)
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Bo Li", "role": "approver", "key": true}), 201).decode(&bo)
	cfg := strings.Replace(testConfig, `"approvals": { "timeout": "10m" },`,
		`"approvals": { "timeout": "10m", "approvers": { "group": "finance", "min": 2 } },`, 1)
	e := w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 400).apiErr()
	if !strings.Contains(e.Message+string(mustJSON(t, e.Details)), `group \"finance\" does not exist`) {
		t.Errorf("deploy naming a missing group: %s %s", e.Message, mustJSON(t, e.Details))
	}
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance", "members": []string{ana.ID, bo.ID}}), 201)
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201)

	run := w.awaiting("alice")
	id := run.Approval.ID
	var a wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+id, w.owner, nil), 200).decode(&a)
	if a.Progress != "0 of 2 from finance — waiting on Ana Diaz, Bo Li" || len(a.Approvers) != 1 || a.InputDigest == "" {
		t.Fatalf("asked: progress %q, approvers %+v, digest %q", a.Progress, a.Approvers, a.InputDigest)
	}

	w.must(w.do("POST", "/v1/approvals/"+id+"/approve", ana.Key.Key, map[string]any{"inputDigest": a.InputDigest}), 200).decode(&a)
	if a.Status != "pending" || a.Progress != "1 of 2 from finance — waiting on Bo Li" || len(a.Votes) != 1 || a.Votes[0].Name != "Ana Diaz" {
		t.Fatalf("after Ana: %s %q %+v", a.Status, a.Progress, a.Votes)
	}
	if e := w.must(w.do("POST", "/v1/approvals/"+id+"/approve", ana.Key.Key, map[string]any{}), 409).apiErr(); e.Code != api.CodeAlreadyVoted ||
		!strings.Contains(e.Message, "you have already approved") {
		t.Errorf("Ana again: %s %s", e.Code, e.Message)
	}
	for _, verb := range []string{"approve", "deny"} {
		if e := w.must(w.do("POST", "/v1/approvals/"+id+"/"+verb, w.owner, map[string]any{}), 403).apiErr(); e.Code != api.CodeNotAnApprover ||
			!strings.Contains(e.Message, "only by its approvers (1 of 2 from finance — waiting on Bo Li)") {
			t.Errorf("%s by the owner, not in finance: %s %s", verb, e.Code, e.Message)
		}
	}
	if e := w.must(w.do("POST", "/v1/approvals/"+id+"/approve", bo.Key.Key, map[string]any{"inputDigest": "0123"}), 409).apiErr(); e.Code != api.CodeApprovalChanged {
		t.Errorf("Bo on an input he does not see: %s %s", e.Code, e.Message)
	}
	var waiting wire.Run
	if w.must(w.do("GET", "/v1/runs/"+run.ID, w.owner, nil), 200).decode(&waiting); waiting.Status != "awaiting-approval" {
		t.Fatalf("run %s before the quorum", waiting.Status)
	}
	w.must(w.do("POST", "/v1/approvals/"+id+"/approve", bo.Key.Key, map[string]any{"inputDigest": a.InputDigest}), 200).decode(&a)
	if a.Status != "approved" || a.DecidedByName != "Bo Li" || a.Progress != "2 of 2 from finance" {
		t.Errorf("after Bo: %s by %s, %q", a.Status, a.DecidedByName, a.Progress)
	}
	if done := w.wait(run.ID, "terminal"); done.Status != "succeeded" {
		t.Errorf("run %s after the quorum", done.Status)
	}
	// The customer sees that the run waited and went on, never who voted.
	var seen wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.customer, nil), 200).decode(&seen)
	for _, ev := range seen.Events {
		if ev.Type == "approval.vote" || strings.Contains(string(ev.Data), "Ana") || strings.Contains(string(ev.Data), "Bo Li") {
			t.Errorf("the customer sees %s %s", ev.Type, ev.Data)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
