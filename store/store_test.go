package store_test

import (
	"testing"
	"time"

	"stead/approvals"
	"stead/store"
)

func TestRunCommitValidate(t *testing.T) {
	t.Parallel()
	run := store.Run{ID: "run_1", ProjectID: "p1", Status: store.RunAwaitingApproval}
	pending := approvals.Approval{ID: "apr_1", ProjectID: "p1", RunID: "run_1", Status: approvals.Pending}
	with := func(f func(*approvals.Approval)) *approvals.Approval {
		a := pending
		f(&a)
		return &a
	}
	for _, c := range []struct {
		name string
		c    store.RunCommit
		ok   bool
	}{
		{"a pending approval of the run", store.RunCommit{Run: run, Approval: &pending}, true},
		{"steps in index order", store.RunCommit{Run: run, Steps: []store.Step{{Index: 0}, {Index: 1}}}, true},
		{"an unknown status", store.RunCommit{Run: store.Run{ID: "run_1", Status: "done"}}, false},
		{"a negative step index", store.RunCommit{Run: run, Steps: []store.Step{{Index: -1}}}, false},
		{"a step twice", store.RunCommit{Run: run, Steps: []store.Step{{Index: 1}, {Index: 1}}}, false},
		{"steps out of order", store.RunCommit{Run: run, Steps: []store.Step{{Index: 2}, {Index: 1}}}, false},
		{"an approval without id", store.RunCommit{Run: run, Approval: with(func(a *approvals.Approval) { a.ID = "" })}, false},
		{"an approval of another run", store.RunCommit{Run: run, Approval: with(func(a *approvals.Approval) { a.RunID = "run_2" })}, false},
		{"an approval of another project", store.RunCommit{Run: run, Approval: with(func(a *approvals.Approval) { a.ProjectID = "p2" })}, false},
		{"an approval already settled", store.RunCommit{Run: run, Approval: with(func(a *approvals.Approval) { a.Status = approvals.Approved })}, false},
	} {
		if err := c.c.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

func TestCustomerRevocationValidate(t *testing.T) {
	t.Parallel()
	ok := store.CustomerRevocation{ProjectID: "p1", EndUserID: "u1", TokenID: "tok_1", Until: t0.Add(time.Hour), Now: t0}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid revocation refused: %v", err)
	}
	for name, f := range map[string]func(*store.CustomerRevocation){
		"no end user":        func(r *store.CustomerRevocation) { r.EndUserID = "" },
		"no now":             func(r *store.CustomerRevocation) { r.Now = time.Time{} },
		"no until":           func(r *store.CustomerRevocation) { r.Until = time.Time{} },
		"token and cutoff":   func(r *store.CustomerRevocation) { r.IssuedBefore = t0 },
		"neither of the two": func(r *store.CustomerRevocation) { r.TokenID = "" },
	} {
		r := ok
		f(&r)
		if err := r.Validate(); err == nil {
			t.Errorf("a revocation with %s accepted", name)
		}
	}
}

func TestCustomerRevocationsUntilAndRevoked(t *testing.T) {
	t.Parallel()
	rs := store.CustomerRevocations{
		IssuedBefore: t0, IssuedBeforeUntil: t0.Add(time.Hour),
		Tokens: map[string]time.Time{"tok_late": t0.Add(3 * time.Hour), "tok_early": t0.Add(2 * time.Hour)},
	}
	if got := rs.Until(); !got.Equal(t0.Add(3 * time.Hour)) {
		t.Errorf("Until() = %v, want the latest revocation's end %v", got, t0.Add(3*time.Hour))
	}
	if rs.Revoked("", t0.Add(time.Minute)) {
		t.Error("a token without id, issued after the cutoff, is revoked")
	}
	if !rs.Revoked("tok_early", t0.Add(time.Minute)) || !rs.Revoked("tok_x", t0.Add(-time.Minute)) || rs.Revoked("tok_x", t0) {
		t.Error("a token is revoked by its id or when issued before the cutoff, and only then")
	}
}

func TestApplyKeepsTheLaterCutoffAndUntil(t *testing.T) {
	t.Parallel()
	rs := store.CustomerRevocations{IssuedBefore: t0, IssuedBeforeUntil: t0.Add(2 * time.Hour)}
	got, err := rs.Apply(store.CustomerRevocation{ProjectID: "p1", EndUserID: "u1",
		IssuedBefore: t0.Add(-time.Hour), Until: t0.Add(time.Hour), Now: t0.Add(-2 * time.Hour)})
	if err != nil || !got.IssuedBefore.Equal(t0) || !got.IssuedBeforeUntil.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("an earlier cutoff with an earlier until: %+v, %v; want the stored ones kept", got, err)
	}
}

func TestCostsAdd(t *testing.T) {
	t.Parallel()
	got := store.Costs{TokensInput: 1, TokensOutput: 2, CostUSD: 0.5}.Add(store.Costs{TokensInput: 10, TokensOutput: 20, CostUSD: 0.25})
	if want := (store.Costs{TokensInput: 11, TokensOutput: 22, CostUSD: 0.75}); got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
}
