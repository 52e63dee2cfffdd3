package approvals_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"stead/approvals"
)

func quorum(reqs ...approvals.Requirement) approvals.Approval {
	return approvals.Approval{ID: "apr_1", ProjectID: "p", Status: approvals.Pending, InputDigest: "d0",
		ExpiresAt: time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC), Requirements: reqs}
}

func vs(names ...string) []approvals.Voter {
	out := make([]approvals.Voter, len(names))
	for i, n := range names {
		out[i] = approvals.Voter{Member: "mem_" + n, Name: n}
	}
	return out
}

func voteBy(a approvals.Approval, name string) approvals.Approval {
	d := approvals.Decision{ProjectID: "p", ApprovalID: a.ID, Status: approvals.Approved, By: "key_" + name, ByName: name,
		ByMember: "mem_" + name, VoteVersion: a.VoteVersion, At: a.ExpiresAt.Add(-time.Minute)}
	if err := d.Check(a); err != nil {
		panic(name + ": " + err.Error())
	}
	return d.Apply(a)
}

func TestProgressText(t *testing.T) {
	a := quorum(approvals.Requirement{Group: "finance", Min: 2, Eligible: vs("Ana", "Bo", "Cy")})
	a = voteBy(a, "Ana")
	if got, want := a.ProgressText(), "1 of 2 from finance — waiting on Bo, Cy"; got != want {
		t.Errorf("ProgressText = %q, want %q", got, want)
	}
	if a.Status != approvals.Pending || a.QuorumMet() {
		t.Errorf("one of two: %+v", a)
	}
	a = voteBy(a, "Cy")
	if a.Status != approvals.Approved || a.DecidedByName != "Cy" || a.ProgressText() != "2 of 2 from finance" {
		t.Errorf("two of two: status %s by %s, %q", a.Status, a.DecidedByName, a.ProgressText())
	}
	short := quorum(approvals.Requirement{Group: "legal", Min: 3, Eligible: vs("Di")})
	if got, want := short.ProgressText(), "0 of 3 from legal — cannot be met: only 1 eligible"; got != want || !short.Progress()[0].Short {
		t.Errorf("short: %q, want %q", got, want)
	}
}

// A member of two groups counts once; a later vote may move an earlier one
// to the other requirement so that both are met.
func TestEachVoteCountsOnce(t *testing.T) {
	a := quorum(
		approvals.Requirement{Group: "finance", Min: 1, Eligible: vs("Both", "Fin")},
		approvals.Requirement{Group: "legal", Min: 1, Eligible: vs("Both", "Law")},
	)
	a = voteBy(a, "Both")
	if a.Status != approvals.Pending {
		t.Fatalf("one member met two requirements: %s", a.ProgressText())
	}
	if got := a.ProgressText(); got != "1 of 1 from finance; 0 of 1 from legal — waiting on Law" {
		t.Errorf("after Both: %q", got)
	}
	a = voteBy(a, "Fin")
	if a.Status != approvals.Approved {
		t.Fatalf("Both moved to legal, Fin to finance: %s", a.ProgressText())
	}
	if got := a.ProgressText(); got != "1 of 1 from finance; 1 of 1 from legal" {
		t.Errorf("after Fin: %q", got)
	}
}

func TestVoteChecks(t *testing.T) {
	a := voteBy(quorum(approvals.Requirement{Group: "finance", Min: 2, Eligible: vs("Ana", "Bo")}), "Ana")
	base := approvals.Decision{ProjectID: "p", ApprovalID: a.ID, Status: approvals.Approved, At: a.ExpiresAt.Add(-time.Minute), VoteVersion: a.VoteVersion}
	for _, tc := range []struct {
		name string
		edit func(*approvals.Decision)
		want error
	}{
		{"not eligible", func(d *approvals.Decision) { d.ByMember = "mem_Zed" }, approvals.ErrNotEligible},
		{"deny by one not eligible", func(d *approvals.Decision) { d.ByMember, d.Status = "mem_Zed", approvals.Denied }, approvals.ErrNotEligible},
		{"twice", func(d *approvals.Decision) { d.ByMember = "mem_Ana" }, approvals.ErrAlreadyVoted},
		{"again, with an edit", func(d *approvals.Decision) { d.ByMember, d.Input, d.InputDigest = "mem_Ana", []byte(`{}`), "d1" }, nil},
		{"again, with the input unchanged", func(d *approvals.Decision) {
			d.ByMember, d.Input, d.InputDigest = "mem_Ana", []byte(`{}`), a.InputDigest
		}, approvals.ErrAlreadyVoted},
		{"stale version", func(d *approvals.Decision) { d.ByMember, d.VoteVersion = "mem_Bo", 0 }, approvals.ErrChanged},
		{"saw another input", func(d *approvals.Decision) { d.ByMember, d.Seen = "mem_Bo", "d9" }, approvals.ErrChanged},
		{"separated", func(d *approvals.Decision) { d.ByMember = "mem_Bo" }, nil},
		{"past the deadline", func(d *approvals.Decision) { d.ByMember, d.At = "mem_Bo", a.ExpiresAt }, approvals.ErrExpired},
	} {
		d := base
		tc.edit(&d)
		if err := d.Check(a); !errors.Is(err, tc.want) {
			t.Errorf("%s: Check = %v, want %v", tc.name, err, tc.want)
		}
	}
	sep := a
	sep.SeparateFrom = "mem_Bo"
	if err := (approvals.Decision{ProjectID: "p", Status: approvals.Approved, ByMember: "mem_Bo", VoteVersion: 1, At: base.At}).Check(sep); !errors.Is(err, approvals.ErrSeparated) {
		t.Errorf("separated voter: %v", err)
	}
	// An edit resets the votes; the editor's counts for the new input.
	ed := base
	ed.ByMember, ed.By, ed.Input, ed.InputDigest = "mem_Bo", "key_Bo", []byte(`{"x":1}`), "d1"
	got := ed.Apply(a)
	if got.Status != approvals.Pending || len(got.Votes) != 1 || got.Votes[0].Member != "mem_Bo" || got.InputDigest != "d1" || got.VoteVersion != 2 {
		t.Errorf("after an edit: %+v", got)
	}
}

// A second edit replaces the input again; OriginalInput stays what the
// run asked for, not what the first editor made of it.
func TestSecondEditKeepsTheOriginalInput(t *testing.T) {
	t.Parallel()
	a := quorum(approvals.Requirement{Group: "finance", Min: 3, Eligible: vs("Ana", "Bo", "Cy")})
	a.Input = json.RawMessage(`{"amount":100}`)
	for _, e := range []struct{ name, input, digest string }{{"Ana", `{"amount":90}`, "d1"}, {"Bo", `{"amount":80}`, "d2"}} {
		d := approvals.Decision{ProjectID: "p", ApprovalID: a.ID, Status: approvals.Approved, By: "key_" + e.name, ByMember: "mem_" + e.name,
			VoteVersion: a.VoteVersion, At: a.ExpiresAt.Add(-time.Minute), Input: json.RawMessage(e.input), InputDigest: e.digest}
		if err := d.Check(a); err != nil {
			t.Fatalf("%s's edit: %v", e.name, err)
		}
		a = d.Apply(a)
	}
	if string(a.OriginalInput) != `{"amount":100}` || string(a.Input) != `{"amount":80}` || a.InputDigest != "d2" {
		t.Errorf("after two edits: input %s (%s), original %s; want input {\"amount\":80} (d2), original {\"amount\":100}", a.Input, a.InputDigest, a.OriginalInput)
	}
}
