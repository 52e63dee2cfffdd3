package api_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
)

func TestApproveWithEditedInput(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	id := run.Approval.ID

	// An edit the tool's schema refuses decides nothing.
	resp := w.must(w.do("POST", "/v1/approvals/"+id+"/approve", w.owner, map[string]any{"input": map[string]any{"orderId": "o-1", "amount": "all"}}), 400)
	e := resp.apiErr()
	if e.Code != api.CodeInvalidArgument || !strings.Contains(fmt.Sprint(e.Details["fields"]), "field:input.amount message:must be a number") {
		t.Fatalf("invalid edit: %s", resp.body)
	}
	var a wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+id, w.owner, nil), 200).decode(&a)
	if a.Status != "pending" {
		t.Fatalf("approval is %s after a refused edit", a.Status)
	}

	// A valid edit becomes the approved input and is what runs.
	w.must(w.do("POST", "/v1/approvals/"+id+"/approve", w.developer, map[string]any{"input": map[string]any{"orderId": "o-1", "amount": 5}, "note": "partial refund"}), 200).decode(&a)
	if a.Status != "approved" || string(a.Input) != `{"amount":5,"orderId":"o-1"}` || string(a.OriginalInput) != `{"amount":12,"orderId":"o-1"}` ||
		a.Note != "partial refund" || a.DecidedBy == "" || a.DecidedAt.IsZero() || a.RunID != run.ID || a.Tool != "refundOrder" || a.StepID != "refund" {
		t.Fatalf("approved: %+v (input %s, original %s)", a, a.Input, a.OriginalInput)
	}
	got := w.wait(run.ID, "terminal")
	if got.Status != "succeeded" || !strings.Contains(string(got.Output), `"refunded":5`) {
		t.Fatalf("run %s, output %s; want succeeded with the edited amount", got.Status, got.Output)
	}
}

func TestDeny(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	var a wire.Approval
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/deny", w.owner, map[string]any{"note": "not eligible"}), 200).decode(&a)
	if a.Status != "denied" || a.Note != "not eligible" {
		t.Fatalf("denied: %+v", a)
	}
	got := w.wait(run.ID, "terminal")
	if got.Status != "failed" || got.Error == nil || got.Error.Code != "approval-denied" ||
		!strings.Contains(got.Error.Message, "not eligible") || got.Error.Step != "refund" {
		t.Fatalf("run after deny: %+v", got)
	}
	// The deny body takes no input.
	other := w.awaiting("alice")
	resp := w.must(w.do("POST", "/v1/approvals/"+other.Approval.ID+"/deny", w.owner, map[string]any{"input": map[string]any{}}), 400)
	if !strings.Contains(string(resp.body), `"field":"input"`) {
		t.Errorf("deny with input: %s", resp.body)
	}
}

func TestDecideTwice(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	id := run.Approval.ID
	w.must(w.do("POST", "/v1/approvals/"+id+"/approve", w.owner, nil), 200)
	for _, action := range []string{"approve", "deny"} {
		resp := w.must(w.do("POST", "/v1/approvals/"+id+"/"+action, w.developer, nil), 409)
		e := resp.apiErr()
		if e.Code != api.CodeApprovalNotPending || !strings.Contains(e.Message, "was already approved") || e.Details["status"] != "approved" {
			t.Errorf("%s again: %+v", action, e)
		}
	}
	if got := w.wait(run.ID, "terminal"); got.Status != "succeeded" {
		t.Errorf("run %s", got.Status)
	}
}

func TestConcurrentDecisionsOneWins(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	const n = 8
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		action, key := "approve", w.owner
		if i%2 == 1 {
			action, key = "deny", w.developer
		}
		req := w.request("POST", "/v1/approvals/"+run.Approval.ID+"/"+action, key, nil)
		wg.Go(func() {
			statuses[i] = w.send(req).status
		})
	}
	wg.Wait()
	won := 0
	for _, s := range statuses {
		switch s {
		case 200:
			won++
		case 409:
		default:
			t.Errorf("status %d", s)
		}
	}
	if won != 1 {
		t.Fatalf("%d decisions accepted (%v), want exactly 1", won, statuses)
	}
}

func TestApproveExpired(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	expires := run.Approval.ExpiresAt
	w.clock.Advance(13 * time.Minute) // the timeout is 10m: 3m past it
	resp := w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", w.owner, nil), 409)
	e := resp.apiErr()
	want := fmt.Sprintf("approval %s expired at %s (3m ago); it can no longer be approved", run.Approval.ID, expires.UTC().Format("15:04:05Z"))
	if e.Code != api.CodeApprovalExpired || e.Message != want {
		t.Fatalf("got %q %q, want %q %q", e.Code, e.Message, api.CodeApprovalExpired, want)
	}
	// Expired is not denied: the run fails approval-expired.
	got := w.wait(run.ID, "terminal")
	if got.Status != "failed" || got.Error == nil || got.Error.Code != "approval-expired" {
		t.Fatalf("run %+v", got)
	}
	var a wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+run.Approval.ID, w.owner, nil), 200).decode(&a)
	if a.Status != "expired" {
		t.Errorf("approval %s", a.Status)
	}
	// Deciding it again still says expired, not "not pending".
	resp = w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/deny", w.owner, nil), 409)
	if e := resp.apiErr(); e.Code != api.CodeApprovalExpired || !strings.Contains(e.Message, "expired at") {
		t.Errorf("deny after expiry: %+v", e)
	}
}

func TestListApprovals(t *testing.T) {
	t.Parallel()
	w := setup(t)
	first := w.awaiting("alice")
	w.clock.Advance(time.Second)
	second := w.awaiting("bob")
	w.clock.Advance(time.Second)
	third := w.awaiting("carol")
	w.must(w.do("POST", "/v1/approvals/"+third.Approval.ID+"/deny", w.owner, nil), 200)

	list := func(q string) []wire.Approval {
		t.Helper()
		var l wire.ApprovalList
		w.must(w.do("GET", "/v1/approvals"+q, w.developer, nil), 200).decode(&l)
		return l.Approvals
	}
	pending := list("")
	if len(pending) != 2 || pending[0].ID != second.Approval.ID || pending[1].ID != first.Approval.ID {
		t.Fatalf("pending, newest first: %+v", pending)
	}
	a := pending[1]
	if a.RunID != first.ID || a.Agent != "refunds" || a.EndUserID != "alice" || a.Tool != "refundOrder" ||
		string(a.Input) != `{"amount":12,"orderId":"o-1"}` || a.Reason == "" || a.Status != "pending" || a.ExpiresAt.IsZero() {
		t.Errorf("approval %+v", a)
	}
	if l := list("?status=denied"); len(l) != 1 || l[0].ID != third.Approval.ID {
		t.Errorf("denied: %+v", l)
	}
	if l := list("?status=all"); len(l) != 3 {
		t.Errorf("all: %d", len(l))
	}
	if l := list("?order=expiring"); len(l) != 2 || l[0].ID != first.Approval.ID {
		t.Errorf("expiring first: %+v", l)
	}
	if l := list("?runId=" + second.ID); len(l) != 1 || l[0].ID != second.Approval.ID {
		t.Errorf("by run: %+v", l)
	}
	for _, q := range []string{"?status=open", "?order=oldest", "?limit=-3"} {
		w.must(w.do("GET", "/v1/approvals"+q, w.developer, nil), 400)
	}
}
