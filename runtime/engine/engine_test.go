package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stead/approvals"
	"stead/runtime/bundle"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/store"
)

func TestUngatedRunSucceeds(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("plain", `{}`)
	wantStatus(t, r, store.RunSucceeded, "")
	want := []string{"run.created", "run.started",
		"step.started", "step.completed", "step.started", "step.completed",
		"step.started", "cost.recorded", "step.completed", "run.succeeded"}
	if got := h.eventTypes(r.ID); !slices.Equal(got, want) {
		t.Errorf("trace = %v\nwant    %v", got, want)
	}
	// Expressions carried outputs forward: two got one's user, three got two's output.
	if c := h.calls(r.ID, "two"); len(c) != 1 || c[0].Input["text"] != "alice" {
		t.Errorf("step two calls = %+v", c)
	}
	if c := h.calls(r.ID, "three"); len(c) != 1 || jsonString(c[0].Input["prev"]) != `{"noted":"alice"}` {
		t.Errorf("step three calls = %+v", c)
	}
	if string(r.Output) != `{"ok":true}` {
		t.Errorf("output = %s", r.Output)
	}
	if r.Costs != (store.Costs{TokensInput: 100, TokensOutput: 20, CostUSD: 0.5}) {
		t.Errorf("costs = %+v", r.Costs)
	}
	steps, err := h.store.ListSteps(h.ctx, r.ID)
	if err != nil || len(steps) != 3 {
		t.Fatalf("steps = %v, %v", steps, err)
	}
	if steps[2].Costs.CostUSD != 0.5 || steps[0].Costs.CostUSD != 0 {
		t.Errorf("step costs = %+v / %+v", steps[0].Costs, steps[2].Costs)
	}
	for i, s := range steps {
		if s.IdempotencyKey != engine.IdempotencyKey(h.project, r.ID, i, s.ID) {
			t.Errorf("step %d key = %s", i, s.IdempotencyKey)
		}
	}
	// Log lines are captured, and the broker token in them is redacted.
	var logged []string
	for _, e := range h.events(r.ID) {
		if e.Type == "log" {
			logged = append(logged, string(e.Data))
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "spent [REDACTED]") || strings.Contains(logged[0], "brk_") {
		t.Errorf("log events = %v", logged)
	}
}

func TestApprovePath(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	if a.Tool != "refundOrder" || a.StepID != "refund" || a.Reason == "" || a.RunID != r.ID || a.EndUserID != "alice" {
		t.Errorf("approval = %+v", a)
	}
	if !a.ExpiresAt.Equal(a.RequestedAt.Add(time.Hour)) {
		t.Errorf("expiresAt = %v, want the tool's 1h timeout after %v", a.ExpiresAt, a.RequestedAt)
	}
	if jsonString(json.RawMessage(a.Input)) != `{"item":{"amount":12,"id":"o-1"}}` {
		t.Errorf("approval input = %s", a.Input)
	}
	// Nothing ran for the gated step before the decision.
	if c := h.calls(r.ID, "refund"); len(c) != 0 {
		t.Fatalf("gated handler ran before approval: %+v", c)
	}
	got, err := h.decide(h.owner, a.ID, true, "ok", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != approvals.Approved || got.DecidedBy != "key_owner" || got.Note != "ok" {
		t.Errorf("decided approval = %+v", got)
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunSucceeded, "")
	if r.ApprovalID != "" {
		t.Errorf("the run still names approval %s after the step it gated completed", r.ApprovalID)
	}
	if string(r.Output) != `{"refunded":12,"orderId":"o-1"}` {
		t.Errorf("output = %s", r.Output)
	}
	// The first step did not run again on resume; the gated one ran once with
	// the key shown in the approval request.
	if c := h.calls(r.ID, "orders"); len(c) != 1 {
		t.Errorf("orders ran %d times", len(c))
	}
	c := h.calls(r.ID, "refund")
	if len(c) != 1 {
		t.Fatalf("refund ran %d times", len(c))
	}
	if key := h.eventData(r.ID, "approval.requested")["idempotencyKey"]; c[0].Key != key || c[0].Key != engine.IdempotencyKey(h.project, r.ID, 1, "refund") {
		t.Errorf("key at run %s, announced %v", c[0].Key, key)
	}
	want := []string{"run.created", "run.started", "step.started", "step.completed", "approval.requested",
		"approval.approved", "run.started", "step.started", "step.completed", "run.succeeded"}
	if got := h.eventTypes(r.ID); !slices.Equal(got, want) {
		t.Errorf("trace = %v\nwant    %v", got, want)
	}
	if d := h.eventData(r.ID, "approval.approved"); d["by"] != "key_owner" || d["note"] != "ok" {
		t.Errorf("approval.approved data = %v", d)
	}
}

func TestApproveWithEditedInput(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)

	// An edit the schema refuses decides nothing.
	_, err := h.decide(h.dev, a.ID, true, "", `{"item":{"id":"o-1","amount":"all of it"}}`)
	var ee *engine.EditError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), `Invalid arguments for "refundOrder": item.amount: must be a number`) {
		t.Fatalf("invalid edit: err = %v", err)
	}
	if still := h.pending(r.ID); still.Status != approvals.Pending || string(still.Input) != string(a.Input) {
		t.Fatalf("invalid edit changed the approval: %+v", still)
	}
	if _, err := h.decide(h.dev, a.ID, true, "", `{not json`); !errors.As(err, &ee) {
		t.Fatalf("malformed edit: err = %v", err)
	}

	// A valid edit is what runs, and the trace records it and who approved.
	got, err := h.decide(h.dev, a.ID, true, "half only", `{"item": {"id": "o-1", "amount": 6}}`)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Input) != `{"item":{"amount":6,"id":"o-1"}}` || string(got.OriginalInput) != string(a.Input) {
		t.Errorf("approval input %s original %s", got.Input, got.OriginalInput)
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunSucceeded, "")
	c := h.calls(r.ID, "refund")
	if len(c) != 1 || jsonString(c[0].Input) != `{"item":{"amount":6,"id":"o-1"}}` {
		t.Fatalf("refund ran with %+v, want the edited input", c)
	}
	d := h.eventData(r.ID, "approval.approved")
	if d["edited"] != true || d["by"] != "key_dev" || jsonString(d["input"]) != `{"item":{"amount":6,"id":"o-1"}}` {
		t.Errorf("approval.approved = %v", d)
	}
}

func TestDeny(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	if _, err := h.decide(h.owner, a.ID, false, "not eligible", ""); err != nil {
		t.Fatal(err)
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodeApprovalDenied)
	if !strings.Contains(r.Error.Message, "not eligible") || r.Error.Step != "refund" {
		t.Errorf("error = %+v", r.Error)
	}
	if c := h.calls(r.ID, "refund"); len(c) != 0 {
		t.Errorf("denied call ran: %+v", c)
	}
	types := h.eventTypes(r.ID)
	if types[len(types)-2] != "approval.denied" || types[len(types)-1] != "run.failed" {
		t.Errorf("trace ends %v", types)
	}
	if d := h.eventData(r.ID, "approval.denied"); d["note"] != "not eligible" || d["customerNote"] != nil {
		t.Errorf("approval.denied = %v, want the note, and none for the customer (the tool does not set noteToCustomer)", d)
	}
	// Deciding again is refused with the approval as it stands.
	got, err := h.decide(h.owner, a.ID, true, "", "")
	wantErr(t, err, approvals.ErrNotPending)
	if got.Status != approvals.Denied {
		t.Errorf("refused decision returned %+v", got)
	}
}

func TestExpiryViaSweeper(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)

	h.clock.Advance(59 * time.Minute)
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Expired != 0 {
		t.Fatalf("sweep before the deadline: %+v, %v", res, err)
	}
	h.clock.Advance(time.Minute)
	res, err := h.eng.Sweep(h.ctx)
	if err != nil || res.Expired != 1 {
		t.Fatalf("sweep at the deadline: %+v, %v", res, err)
	}
	h.drain()
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodeApprovalExpired)
	got, _ := h.eng.GetApproval(h.ctx, h.owner, a.ID)
	if got.Status != approvals.Expired {
		t.Errorf("approval status = %s, want expired (not denied)", got.Status)
	}
	if slices.Contains(h.eventTypes(r.ID), "approval.denied") || !slices.Contains(h.eventTypes(r.ID), "approval.expired") {
		t.Errorf("trace = %v", h.eventTypes(r.ID))
	}
	if _, err := h.decide(h.owner, a.ID, true, "", ""); !errors.Is(err, approvals.ErrNotPending) {
		t.Errorf("approve after expiry: %v", err)
	}
}

func TestDecisionAfterExpiryRefusedBeforeSweep(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	h.clock.Advance(time.Hour) // exactly at the deadline: too late
	_, err := h.decide(h.owner, a.ID, true, "", "")
	wantErr(t, err, approvals.ErrExpired)
	if c := h.calls(r.ID, "refund"); len(c) != 0 {
		t.Errorf("expired approval ran the call: %+v", c)
	}
	// The refused decision settled it as expired on the spot.
	wantStatus(t, h.run(r.ID), store.RunFailed, engine.CodeApprovalExpired)
	if _, err := h.decide(h.owner, a.ID, false, "", ""); !errors.Is(err, approvals.ErrNotPending) {
		t.Errorf("deny after expiry: %v", err)
	}
}

func TestForeignStaleAndCustomerDecisions(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)

	_, err := h.decide(h.other, a.ID, true, "", "")
	wantErr(t, err, store.ErrNotFound)
	_, err = h.decide(h.owner, "apr_01JUNKUNKNOWN", true, "", "")
	wantErr(t, err, store.ErrNotFound)
	_, err = h.decide(h.customer, a.ID, true, "", "")
	wantErr(t, err, engine.ErrForbidden)
	if _, err := h.eng.GetRun(h.ctx, h.other, r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another project reads the run: %v", err)
	}
	if _, err := h.eng.GetApproval(h.ctx, h.other, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another project reads the approval: %v", err)
	}
	// The customer sees its own run but cannot start or cancel runs.
	if _, err := h.eng.GetRun(h.ctx, h.customer, r.ID); err != nil {
		t.Errorf("customer reads its own run: %v", err)
	}
	bob := h.customer
	bob.EndUserID, bob.ID = "bob", "customer:bob"
	if _, err := h.eng.GetRun(h.ctx, bob, r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another end user reads the run: %v", err)
	}
	if _, err := h.eng.Cancel(h.ctx, h.customer, r.ID); !errors.Is(err, engine.ErrForbidden) {
		t.Errorf("customer cancels: %v", err)
	}
	if _, _, err := h.eng.StartRun(h.ctx, h.customer, engine.StartParams{Agent: "plain", EndUserID: "alice"}); !errors.Is(err, engine.ErrForbidden) {
		t.Errorf("customer starts a run: %v", err)
	}
	// After all the refusals it is still pending, and an owner decides it.
	if h.pending(r.ID).Status != approvals.Pending {
		t.Fatal("refused decisions changed the approval")
	}
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
}

func TestConcurrentDecidersOneWins(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		wins     []bool
		refusals int
	)
	for i := range 50 {
		wg.Go(func() {
			_, err := h.eng.Decide(h.ctx, h.owner, engine.DecideParams{ApprovalID: a.ID, Approve: i%2 == 0, Note: fmt.Sprint(i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins = append(wins, i%2 == 0)
			case errors.Is(err, approvals.ErrNotPending):
				refusals++
			default:
				t.Errorf("decider %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 || refusals != 49 {
		t.Fatalf("%d decisions won, %d refused; want exactly one winner", len(wins), refusals)
	}
	h.drain()
	if wins[0] {
		wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
		if c := h.calls(r.ID, "refund"); len(c) != 1 {
			t.Errorf("approved call ran %d times", len(c))
		}
	} else {
		wantStatus(t, h.run(r.ID), store.RunFailed, engine.CodeApprovalDenied)
	}
}

func TestUntrustedEscalation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ agent, origin, lowerStep string }{
		{"reviews", "tool:fetchReviews", "reviews"},
		{"relay", "email:x@example.com", "relay"},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			r := h.start(tc.agent, `{}`)
			a := h.pending(r.ID)
			r = h.run(r.ID)
			if r.Trust != store.Untrusted || r.TrustOrigin != tc.origin {
				t.Errorf("trust = %s (%s), want untrusted by %s", r.Trust, r.TrustOrigin, tc.origin)
			}
			if a.Tool != "addNote" || !strings.Contains(a.Reason, "untrusted") {
				t.Errorf("approval = %s %q", a.Tool, a.Reason)
			}
			if d := h.eventData(r.ID, "trust.lowered"); d["origin"] != tc.origin {
				t.Errorf("trust.lowered = %v", d)
			}
			if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
				t.Fatal(err)
			}
			r = h.run(r.ID)
			wantStatus(t, r, store.RunSucceeded, "")
			if r.Trust != store.Untrusted {
				t.Error("trust went back up")
			}
		})
	}
}

func TestPolicyRules(t *testing.T) {
	t.Parallel()
	h := setup(t)
	// A matching deny rule beats requiresApproval: the run fails without asking.
	r := h.start("rules", `{"text":"hello","amount":5000}`)
	wantStatus(t, r, store.RunFailed, engine.CodePolicyDenied)
	// Worded as a person's denial is ("refundOrder was denied by owner: …").
	if want := "refundOrder was denied by policy rule 0: refunds of 1000 or more are never automatic"; r.Error.Message != want {
		t.Errorf("error = %q, want %q", r.Error.Message, want)
	}
	if c := h.calls(r.ID, "refund"); len(c) != 0 {
		t.Error("denied call ran")
	}
	if c := h.calls(r.ID, "note"); len(c) != 1 {
		t.Errorf("allowed note ran %d times", len(c))
	}
	if d := h.eventData(r.ID, "step.started"); !strings.Contains(jsonString(d["policy"]), "notes are harmless") {
		t.Errorf("the allow decision's reason is not in the trace: %v", d)
	}

	// An ask rule whose `when` matches asks, with its reason.
	r = h.start("rules", `{"text":"sensitive","amount":5}`)
	a := h.pending(r.ID)
	if a.Tool != "addNote" || !strings.HasSuffix(a.Reason, "sensitive notes need a look") {
		t.Errorf("approval = %s %q", a.Tool, a.Reason)
	}
	// Once approved, the next gated call (requiresApproval) asks again.
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	a2 := h.pending(r.ID)
	if a2.Tool != "refundOrder" || a2.ID == a.ID {
		t.Errorf("second approval = %+v", a2)
	}

	// A `when` that does not match leaves the tool's own posture.
	r = h.start("rules", `{"text":"plain","amount":5}`)
	if a := h.pending(r.ID); a.Tool != "refundOrder" {
		t.Errorf("approval for %s, want refundOrder (requiresApproval)", a.Tool)
	}
}

func TestInvalidStepInputFailsBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	h := setup(t)
	// amount is a string: the refund step's input fails its schema.
	r := h.start("refunds", `{"orderId":"o-1","amount":"twelve"}`)
	wantStatus(t, r, store.RunFailed, engine.CodeInvalidInput)
	if r.Error.Message != `Invalid arguments for "refundOrder": item.amount: must be a number` {
		t.Errorf("message = %q", r.Error.Message)
	}
	if c := h.calls(r.ID, "refund"); len(c) != 0 {
		t.Error("a call with invalid input ran")
	}
	// A run input the agent refuses creates nothing.
	_, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "refunds", Input: json.RawMessage(`{}`), EndUserID: "alice"})
	var ie *engine.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "orderId") {
		t.Fatalf("start with bad input: %v", err)
	}
	page, _ := h.store.ListRuns(h.ctx, store.RunFilter{ProjectID: h.project, Agent: "refunds"})
	if len(page.Items) != 1 {
		t.Errorf("%d refunds runs stored, want only the first", len(page.Items))
	}
}

func TestHandlerErrorFailsRunAndKeepsCosts(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("failing", `{}`)
	wantStatus(t, r, store.RunFailed, engine.CodeHandlerError)
	if !strings.Contains(r.Error.Message, "card declined") || strings.Contains(r.Error.Message, "brk_") {
		t.Errorf("error = %q (token must be redacted)", r.Error.Message)
	}
	if r.Costs.CostUSD != 0.5 {
		t.Errorf("costs = %+v", r.Costs)
	}
	for _, e := range h.events(r.ID) {
		if strings.Contains(string(e.Data), "brk_") {
			t.Errorf("event %s leaks the broker token: %s", e.Type, e.Data)
		}
	}
}

func TestCancelWhileAwaitingApproval(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	got, err := h.eng.Cancel(h.ctx, h.dev, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, got, store.RunCancelled, engine.CodeCancelled)
	if ap, _ := h.eng.GetApproval(h.ctx, h.owner, a.ID); ap.Status != approvals.Cancelled {
		t.Errorf("approval = %s, want cancelled", ap.Status)
	}
	if _, err := h.decide(h.owner, a.ID, true, "", ""); !errors.Is(err, approvals.ErrNotPending) {
		t.Errorf("approve after cancel: %v", err)
	}
	if _, err := h.eng.Cancel(h.ctx, h.dev, r.ID); !errors.Is(err, engine.ErrRunFinished) {
		t.Errorf("second cancel: %v", err)
	}
	h.drain()
	if c := h.calls(r.ID, "refund"); len(c) != 0 {
		t.Error("cancelled call ran")
	}
}

func TestCancelQueuedRun(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Cancel(h.ctx, h.owner, r.ID); err != nil {
		t.Fatal(err)
	}
	h.drain() // the dispatch finds nothing to claim
	wantStatus(t, h.run(r.ID), store.RunCancelled, engine.CodeCancelled)
	if c := h.calls(r.ID, "one"); len(c) != 0 {
		t.Error("a cancelled run executed")
	}
}

// A worker's claim ends with the cancel: the cancelled run holds no lease.
func TestCancelReleasesTheLease(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	now := h.clock.Now()
	if _, err := h.store.ClaimRun(h.ctx, store.ClaimParams{RunID: r.ID, Owner: "elsewhere/lease", Until: now.Add(time.Hour), Now: now}); err != nil {
		t.Fatal(err)
	}
	got, err := h.eng.Cancel(h.ctx, h.owner, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, got, store.RunCancelled, engine.CodeCancelled)
	if stored := h.run(r.ID); stored.LeaseOwner != "" || !stored.LeaseUntil.IsZero() {
		t.Errorf("cancelled run leased to %q until %s, want no lease", stored.LeaseOwner, stored.LeaseUntil)
	}
}

// decideRaceStore loses the first DecideApproval to a concurrent change.
type decideRaceStore struct {
	store.Store
	lost atomic.Int32
}

func (s *decideRaceStore) DecideApproval(ctx context.Context, p store.DecideParams) (approvals.Approval, store.Run, error) {
	if s.lost.Add(1) == 1 {
		return approvals.Approval{}, store.Run{}, store.ErrConflict
	}
	return s.Store.DecideApproval(ctx, p)
}

// A cancel of a run awaiting approval that loses a race with a decision
// reads the run again and cancels it, rather than failing.
func TestCancelWhileAwaitingApprovalRetriesALostRace(t *testing.T) {
	t.Parallel()
	rs := &decideRaceStore{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { rs.Store = s; return rs } })
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	got, err := h.eng.Cancel(h.ctx, h.dev, r.ID)
	if err != nil {
		t.Fatalf("cancel after a lost race: %v", err)
	}
	wantStatus(t, got, store.RunCancelled, engine.CodeCancelled)
	if ap, _ := h.eng.GetApproval(h.ctx, h.owner, a.ID); ap.Status != approvals.Cancelled {
		t.Errorf("approval = %s, want cancelled", ap.Status)
	}
	if n := rs.lost.Load(); n != 2 {
		t.Errorf("%d decide writes, want 2 (the lost one, then the cancel)", n)
	}
}

// A customer lists only its own end user's runs; a customer token without
// an end user lists none and reads none, not even runs started without one.
func TestCustomerSeesOnlyItsOwnRuns(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var ids []string
	for _, user := range []string{"alice", "bob", ""} {
		r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: user})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	page, err := h.eng.ListRuns(h.ctx, h.customer, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range page.Items {
		listed = append(listed, r.ID)
	}
	if !slices.Equal(listed, ids[:1]) {
		t.Errorf("alice lists %v, want only hers %v", listed, ids[:1])
	}
	anonymous := h.customer
	anonymous.EndUserID, anonymous.ID = "", "customer:"
	if _, err := h.eng.ListRuns(h.ctx, anonymous, store.RunFilter{}); !errors.Is(err, engine.ErrForbidden) {
		t.Errorf("a customer without an end user lists runs: %v", err)
	}
	if _, err := h.eng.GetRun(h.ctx, anonymous, ids[2]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a customer without an end user reads a run without one: %v", err)
	}
}

// A run that ends, succeeded or failed, holds no lease: nothing of it is
// left to a worker.
func TestFinishedRunHoldsNoLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		agent  string
		status store.RunStatus
		code   string
	}{
		{"plain", store.RunSucceeded, ""},
		{"failing", store.RunFailed, engine.CodeHandlerError},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			r := h.start(tc.agent, `{}`)
			wantStatus(t, r, tc.status, tc.code)
			if r.LeaseOwner != "" || !r.LeaseUntil.IsZero() {
				t.Errorf("%s run leased to %q until %s, want no lease", r.Status, r.LeaseOwner, r.LeaseUntil)
			}
		})
	}
}

func TestIdempotentStart(t *testing.T) {
	t.Parallel()
	h := setup(t)
	p := engine.StartParams{Agent: "plain", Input: json.RawMessage(`{"a": 1}`), EndUserID: "alice", IdempotencyKey: "k1"}
	r1, created, err := h.eng.StartRun(h.ctx, h.dev, p)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	p.Input = json.RawMessage(`{"a":1}`) // same request, other spacing
	r2, created, err := h.eng.StartRun(h.ctx, h.dev, p)
	if err != nil || created || r2.ID != r1.ID {
		t.Fatalf("repeat: %s created=%v err=%v, want %s", r2.ID, created, err, r1.ID)
	}
	p.Input = json.RawMessage(`{"a":2}`)
	if _, _, err := h.eng.StartRun(h.ctx, h.dev, p); !errors.Is(err, engine.ErrIdempotencyKeyReused) {
		t.Fatalf("different body: %v", err)
	}
	h.drain()
	if c := h.calls(r1.ID, "one"); len(c) != 1 {
		t.Errorf("the run executed %d times", len(c))
	}
}

func TestRunPinsItsDeployment(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	// Redeploy with refundOrder returning something else; the paused run
	// resumes on the version it started with.
	h.deploy(h.owner, strings.Replace(handlers, "return { refunded:", "return { v2: true, refunded:", 1), config)
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunSucceeded, "")
	if strings.Contains(string(r.Output), "v2") || r.Deployment != 1 {
		t.Errorf("run on deployment %d output %s, want version 1's", r.Deployment, r.Output)
	}
	r2 := h.start("plain", `{}`)
	if r2.Deployment != 2 {
		t.Errorf("new run pinned to %d, want 2", r2.Deployment)
	}
}

func TestDeployRefusals(t *testing.T) {
	t.Parallel()
	h := setup(t)
	_, err := h.eng.Deploy(h.ctx, h.owner, engine.DeployParams{Bundle: []byte(`export function listOrders(){}`), Config: []byte(config)})
	if err == nil || !strings.Contains(err.Error(), `config names tool "refundOrder", bundle exports: listOrders`) {
		t.Errorf("missing exports: %v", err)
	}
	_, err = h.eng.Deploy(h.ctx, h.owner, engine.DeployParams{Bundle: []byte(handlers), Config: []byte(`{"agents": {"x": {}}}`)})
	if err == nil {
		t.Error("an invalid config deployed")
	}
	if _, err := h.eng.Deploy(h.ctx, h.customer, engine.DeployParams{Bundle: []byte(handlers), Config: []byte(config)}); !errors.Is(err, engine.ErrForbidden) {
		t.Errorf("customer deploys: %v", err)
	}
	page, _ := h.store.ListDeployments(h.ctx, h.project, "", 10)
	if len(page.Items) != 1 {
		t.Errorf("%d deployments, want 1: refused deployments must store nothing", len(page.Items))
	}
}

// compilerSpy records the size limit of each compiler the engine asks its
// invoker for.
type compilerSpy struct {
	engine.Invoker
	maxSizes []int
}

func (c *compilerSpy) Compiler(o bundle.Options) *bundle.Compiler {
	c.maxSizes = append(c.maxSizes, o.MaxSize)
	return c.Invoker.Compiler(o)
}

// The engine compiles bundles with a compiler its invoker makes, once per
// engine, bounded by MaxBundle.
func TestDeployCompilesWithTheInvokersCompiler(t *testing.T) {
	t.Parallel()
	spy := &compilerSpy{}
	h := setup(t, func(o *options) {
		o.invoker = func(rt engine.Invoker) engine.Invoker { spy.Invoker = rt; return spy }
	})
	h.cfg.MaxBundle = int64(len(handlers))
	h.restart()
	if want := []int{0, len(handlers)}; !slices.Equal(spy.maxSizes, want) {
		t.Fatalf("compilers asked for with MaxSize %v, want %v", spy.maxSizes, want)
	}
	h.deploy(h.owner, handlers, config)
	_, err := h.eng.Deploy(h.ctx, h.owner, engine.DeployParams{Bundle: []byte(handlers + "\n"), Config: []byte(config)})
	if be, ok := bundle.AsError(err); !ok || be.Code != bundle.CodeTooLarge {
		t.Errorf("a bundle over MaxBundle: %v, want %s", err, bundle.CodeTooLarge)
	}
}

// A wait that runs out answers with the run as it stands, never an error,
// however short the wait and wherever it ends relative to the poll.
func TestWaitRunningOutAnswersWithTheRun(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	for _, d := range []time.Duration{0, time.Nanosecond, time.Millisecond, 5 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(h.ctx, d)
		got, err := h.eng.WaitFor(ctx, h.dev, r.ID, func(r store.Run) bool { return r.Status.Terminal() })
		cancel()
		if err != nil || got.ID != r.ID || got.Status != store.RunAwaitingApproval {
			t.Errorf("wait %v: %s %s, %v", d, got.ID, got.Status, err)
		}
	}
}

// changeAfterRead, once armed, changes the run it reads right after the
// read, as another process would.
type changeAfterRead struct {
	store.Store
	armed atomic.Bool
}

func (c *changeAfterRead) GetRun(ctx context.Context, id string) (store.Run, error) {
	r, err := c.Store.GetRun(ctx, id)
	if err == nil && c.armed.CompareAndSwap(true, false) {
		now := r.UpdatedAt
		if _, err := c.ClaimRun(ctx, store.ClaimParams{RunID: id, Owner: "elsewhere/lease", Until: now.Add(time.Hour), Now: now}); err != nil {
			return r, err
		}
	}
	return r, err
}

// A wait after a version answers with a later one: the run as read, at the
// version waited past, is no answer, and a change another process makes
// meanwhile is.
func TestWaitRunAnswersOnlyALaterVersion(t *testing.T) {
	t.Parallel()
	ch := &changeAfterRead{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { ch.Store = s; return ch } })
	h.cfg.PollInterval = 10 * time.Millisecond
	h.restart()
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
	defer cancel()
	ch.armed.Store(true)
	got, err := h.eng.WaitRun(ctx, h.dev, r.ID, r.Version)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version <= r.Version || got.Status != store.RunRunning {
		t.Errorf("wait past version %d: version %d, %s; want the claimed run, later", r.Version, got.Version, got.Status)
	}
}

// tokenSpy records the broker token of each call and what BrokerScopeOf
// made of it while the call ran.
type tokenSpy struct {
	engine.Invoker
	eng    func() *engine.Engine
	tokens []string
	scopes []store.BrokerScope
}

func (s *tokenSpy) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error) {
	scope, err := s.eng().BrokerScopeOf(ctx, inv.BrokerToken)
	if err != nil {
		return jsvm.Result{}, err
	}
	s.tokens, s.scopes = append(s.tokens, inv.BrokerToken), append(s.scopes, scope)
	return s.Invoker.Invoke(ctx, b, inv)
}

// A run's broker token names its project and end user while the run is
// active, and nothing once it has ended; a token not signed for the run
// is refused.
func TestBrokerTokenIsValidWhileTheRunIsActive(t *testing.T) {
	t.Parallel()
	spy := &tokenSpy{}
	h := setup(t, func(o *options) {
		o.invoker = func(rt engine.Invoker) engine.Invoker { spy.Invoker = rt; return spy }
	})
	spy.eng = func() *engine.Engine { return h.eng }
	r := h.start("plain", `{}`)
	wantStatus(t, r, store.RunSucceeded, "")
	want := store.BrokerScope{ProjectID: h.project, EndUserID: "alice"}
	if len(spy.scopes) != 3 || spy.scopes[0] != want {
		t.Fatalf("scopes while running: %+v, want %+v for each of 3 calls", spy.scopes, want)
	}
	if _, err := h.eng.BrokerScopeOf(h.ctx, spy.tokens[0]); !errors.Is(err, engine.ErrBrokerToken) {
		t.Errorf("the token of a finished run: %v, want ErrBrokerToken", err)
	}
	forged := spy.tokens[0][:len(spy.tokens[0])-2] + "xx"
	if _, err := h.eng.BrokerScopeOf(h.ctx, forged); !errors.Is(err, engine.ErrBrokerToken) {
		t.Errorf("a forged token: %v, want ErrBrokerToken", err)
	}
}

// A waiter who may not see the run gets no answer from the runs this
// process keeps for waiters: another project's actor waiting on a run just
// created reads it as not found.
func TestWaitRunHidesAKeptRunFromWhoCannotSeeIt(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.cfg.SoleWriter = true // keeps created runs for their first waiters
	h.restart()
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	bob := h.customer
	bob.EndUserID, bob.ID = "bob", "customer:bob"
	for _, a := range []approvals.Actor{h.other, bob} {
		if got, err := h.eng.WaitRun(h.ctx, a, r.ID, 0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s waits on the run: %s %s, %v; want not found", a.ID, got.ID, got.Status, err)
		}
	}
	if got, err := h.eng.WaitRun(h.ctx, h.customer, r.ID, 0); err != nil || got.ID != r.ID {
		t.Errorf("alice waits on her run: %s, %v", got.ID, err)
	}
}

// countingReads counts GetRun calls.
type countingReads struct {
	store.Store
	n atomic.Int64
}

func (c *countingReads) GetRun(ctx context.Context, id string) (store.Run, error) {
	c.n.Add(1)
	return c.Store.GetRun(ctx, id)
}

// A waiter reads a run from the store once: every later state a write in
// this process stored reaches it as that write returned it — the run as
// stored, the same JSON the store gives back.
func TestWaitersReadTheRunOnce(t *testing.T) {
	t.Parallel()
	reads := &countingReads{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { reads.Store = s; return reads } })
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		run store.Run
		err error
	}
	got := make(chan answer, 1)
	before := reads.n.Load()
	go func() {
		run, err := h.eng.WaitFor(h.ctx, h.dev, r.ID, func(r store.Run) bool { return r.Status.Terminal() })
		got <- answer{run, err}
	}()
	for reads.n.Load() == before { // the waiter's first read
		time.Sleep(time.Millisecond)
	}
	h.drain() // the execution reads the run once, claims it and commits its steps
	a := <-got
	if a.err != nil || a.run.Status != store.RunSucceeded {
		t.Fatalf("waited: %s, %v", a.run.Status, a.err)
	}
	if n := reads.n.Load() - before; n != 2 {
		t.Errorf("%d reads of the run while it was waited for, want 2 (the waiter's first, the execution's)", n)
	}
	want, err := json.Marshal(h.run(r.ID))
	if err != nil {
		t.Fatal(err)
	}
	if have, _ := json.Marshal(a.run); string(have) != string(want) {
		t.Errorf("the waiter's run differs from the stored one:\n got  %s\n want %s", have, want)
	}
}

// An approver's edit cannot take a call where a deny rule forbids it, and the
// approved input is checked against deny rules again before it runs.
func TestEditCannotBypassDenyRule(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("rules", `{"text":"plain","amount":5}`)
	a := h.pending(r.ID)
	_, err := h.decide(h.owner, a.ID, true, "", `{"amount": 5000}`)
	var ee *engine.EditError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "refused by policy: ") || !strings.Contains(err.Error(), "never automatic") {
		t.Fatalf("edit into a deny rule: err = %v", err)
	}
	if still := h.pending(r.ID); still.Status != approvals.Pending || string(still.Input) != string(a.Input) {
		t.Fatalf("the refused edit changed the approval: %+v", still)
	}
	if c := h.calls(r.ID, "refund"); len(c) != 0 {
		t.Fatalf("refund ran: %+v", c)
	}
	if _, err := h.decide(h.owner, a.ID, true, "", `{"amount": 6}`); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
	if c := h.calls(r.ID, "refund"); len(c) != 1 || jsonString(c[0].Input) != `{"amount":6}` {
		t.Errorf("refund calls = %+v", c)
	}
}

// refusingDispatch refuses every dispatch, as a full queue or a throttled
// invoke would.
type refusingDispatch struct{ n int }

func (d *refusingDispatch) Dispatch(context.Context, string) error {
	d.n++
	return errors.New("queue is full")
}

// A sweep whose dispatches fail still tries every stalled run and says so;
// the runs stay queued for the next sweep.
func TestSweepKeepsGoingWhenDispatchFails(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for range 3 {
		if _, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	h.queue.take()
	d := &refusingDispatch{}
	h.cfg.Dispatch = d
	h.restart()
	h.clock.Advance(time.Hour)
	res, err := h.eng.Sweep(h.ctx)
	if err == nil || !strings.Contains(err.Error(), "queue is full") || d.n != 3 || res.Redispatched != 0 {
		t.Fatalf("sweep: %+v, %v; %d dispatches tried, want 3", res, err, d.n)
	}
}

// strictOutput declares listOrders' output as a list of orders, which its
// handler does not return (it returns an object), before a write.
const strictOutput = `{
  "agents": {
    "strict": {
      "tools": {
        "listOrders": { "effect": "read", "output": { "type": "array" } },
        "addNote": { "effect": "write" }
      },
      "steps": [
        { "id": "orders", "tool": "listOrders", "input": {} },
        { "id": "note", "tool": "addNote", "input": { "text": "listed" } }
      ]
    }
  }
}`

// A handler's output that its tool's output schema refuses fails the run
// invalid-output at that step; nothing after it runs.
func TestOutputSchemaRefusalFailsTheRun(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.deploy(h.owner, handlers, strictOutput)
	r := h.start("strict", `{}`)
	wantStatus(t, r, store.RunFailed, engine.CodeInvalidOutput)
	if r.Error.Step != "orders" {
		t.Errorf("error = %+v, want step orders", r.Error)
	}
	if c := h.calls(r.ID, "note"); len(c) != 0 {
		t.Errorf("the step after the refused output ran: %+v", c)
	}
}

// A run a decision queued is dispatched by the decision; the sweeper leaves
// it alone for DispatchGrace instead of dispatching it a second time.
func TestSweepLeavesADecidedRunToItsDispatch(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	if _, err := h.eng.Decide(h.ctx, h.owner, engine.DecideParams{ApprovalID: a.ID, Approve: true}); err != nil {
		t.Fatal(err)
	}
	if got := h.queue.take(); len(got) != 1 || got[0] != r.ID {
		t.Fatalf("the decision dispatched %v, want %s", got, r.ID)
	}
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Redispatched != 0 {
		t.Errorf("sweep right after the decision = %+v, %v; want nothing redispatched", res, err)
	}
}

// The runs kept for their first waiters are the newest 1024 created: a
// wait on one of them reads nothing from the store, a wait on an older
// one reads the run.
func TestOnlyTheNewestCreatedRunsAreKeptForWaiters(t *testing.T) {
	t.Parallel()
	reads := &countingReads{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { reads.Store = s; return reads } })
	h.cfg.SoleWriter = true
	h.restart()
	const kept, created = 1024, 1026
	ids := make([]string, created)
	for i := range ids {
		r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	for i, id := range ids {
		if i > 2 && i < created-1 {
			continue
		}
		before := reads.n.Load()
		if r, err := h.eng.WaitRun(h.ctx, h.dev, id, 0); err != nil || r.ID != id {
			t.Fatalf("wait on run %d: %s, %v", i, r.ID, err)
		}
		wantReads := int64(0)
		if i < created-kept {
			wantReads = 1
		}
		if n := reads.n.Load() - before; n != wantReads {
			t.Errorf("wait on run %d of %d: %d reads, want %d", i, created, n, wantReads)
		}
	}
}

// A process that is not its runs' sole writer keeps no created run for
// its waiters: a wait on a run another process changed since answers the
// change.
func TestWaitAnswersAChangeByAnotherProcessToARunJustCreated(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	now := h.clock.Now().Add(time.Hour) // past the lease its create took
	claimed, err := h.store.ClaimRun(h.ctx, store.ClaimParams{RunID: r.ID, Owner: "elsewhere/lease", Until: now.Add(time.Hour), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.eng.WaitRun(h.ctx, h.dev, r.ID, 0)
	if err != nil || got.Version != claimed.Version || got.LeaseOwner != "elsewhere/lease" {
		t.Errorf("wait: version %d, lease %q (%v); want the other process's claim, version %d", got.Version, got.LeaseOwner, err, claimed.Version)
	}
}

// A denial's note goes to the customer only where the tool sets
// approvals.noteToCustomer.
func TestDenialNoteToTheCustomer(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.deploy(h.owner, handlers, strings.Replace(config, `"approvals": { "timeout": "1h" },`, `"approvals": { "timeout": "1h", "noteToCustomer": true },`, 1))
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	if _, err := h.decide(h.owner, h.pending(r.ID).ID, false, "past the 30 days", ""); err != nil {
		t.Fatal(err)
	}
	if d := h.eventData(r.ID, "approval.denied"); d["customerNote"] != "past the 30 days" {
		t.Errorf("approval.denied = %v, want the note for the customer", d)
	}
}

// An approval "edited" to its own input (the same JSON, keys in another
// order) is no edit: the trace says nothing was edited.
func TestApproveWithTheSameInputIsNoEdit(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	if _, err := h.decide(h.dev, h.pending(r.ID).ID, true, "", `{"item": {"amount": 12, "id": "o-1"}}`); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.run(r.ID), store.RunSucceeded, "")
	if d := h.eventData(r.ID, "approval.approved"); d["edited"] != nil || d["input"] != nil || d["originalInput"] != nil {
		t.Errorf("approval.approved = %v, want no edit", d)
	}
}

// ListApprovals lists the actor's project's approvals, whatever project
// the filter names.
func TestListApprovalsOfTheActorsProjectOnly(t *testing.T) {
	t.Parallel()
	h := setup(t)
	a := h.pending(h.start("refunds", `{"orderId":"o-1","amount":12}`).ID)
	if p, err := h.eng.ListApprovals(h.ctx, h.owner, store.ApprovalFilter{}); err != nil || len(p.Items) != 1 || p.Items[0].ID != a.ID {
		t.Fatalf("the project's approvals: %+v (%v)", p.Items, err)
	}
	if p, err := h.eng.ListApprovals(h.ctx, h.other, store.ApprovalFilter{ProjectID: h.project}); err != nil || len(p.Items) != 0 {
		t.Errorf("another project lists %+v (%v)", p.Items, err)
	}
}
