package approvals_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"stead/approvals"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func pending() approvals.Approval {
	return approvals.Approval{
		ID: "apr_1", ProjectID: "prj_a", Status: approvals.Pending,
		Input: json.RawMessage(`{"a":1}`), InputDigest: "d1",
		RequestedAt: t0, ExpiresAt: t0.Add(time.Hour),
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	decided := pending()
	decided.Status = approvals.Denied
	cases := []struct {
		name   string
		a      approvals.Approval
		status approvals.Status
		at     time.Time
		want   error
	}{
		{"approve in time", pending(), approvals.Approved, t0.Add(59 * time.Minute), nil},
		{"deny in time", pending(), approvals.Denied, t0, nil},
		{"approve at the deadline", pending(), approvals.Approved, t0.Add(time.Hour), approvals.ErrExpired},
		{"deny after the deadline", pending(), approvals.Denied, t0.Add(2 * time.Hour), approvals.ErrExpired},
		{"expire before the deadline", pending(), approvals.Expired, t0.Add(59 * time.Minute), approvals.ErrNotDue},
		{"expire at the deadline", pending(), approvals.Expired, t0.Add(time.Hour), nil},
		{"cancel after the deadline", pending(), approvals.Cancelled, t0.Add(2 * time.Hour), nil},
		{"approve a decided one", decided, approvals.Approved, t0, approvals.ErrNotPending},
		{"expire a decided one", decided, approvals.Expired, t0.Add(2 * time.Hour), approvals.ErrNotPending},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := approvals.Decision{ProjectID: "prj_a", Status: tc.status, At: tc.at}.Check(tc.a)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("Check = %v, want %v", err, tc.want)
			}
		})
	}
	err := approvals.Decision{ProjectID: "prj_b", Status: approvals.Approved, At: t0}.Check(pending())
	if !approvals.IsForeign(err) {
		t.Errorf("foreign project: %v", err)
	}
	if err := (approvals.Decision{ProjectID: "prj_a", Status: approvals.Pending, At: t0}).Check(pending()); err == nil {
		t.Error("pending accepted as a decision")
	}
}

func TestApplyKeepsTheOriginalOfAnEditedInput(t *testing.T) {
	t.Parallel()
	d := approvals.Decision{Status: approvals.Approved, By: "key_1", Note: "ok", At: t0,
		Input: json.RawMessage(`{"a":2}`), InputDigest: "d2"}
	got := d.Apply(pending())
	if got.Status != approvals.Approved || got.DecidedBy != "key_1" || got.Note != "ok" || !got.DecidedAt.Equal(t0) {
		t.Errorf("Apply = %+v", got)
	}
	if string(got.Input) != `{"a":2}` || got.InputDigest != "d2" || string(got.OriginalInput) != `{"a":1}` {
		t.Errorf("input %s digest %s original %s", got.Input, got.InputDigest, got.OriginalInput)
	}
	same := approvals.Decision{Status: approvals.Approved, Input: json.RawMessage(`{"a":1}`), InputDigest: "d1"}.Apply(pending())
	if same.OriginalInput != nil {
		t.Errorf("an unchanged input was recorded as an edit: %+v", same)
	}
	denied := approvals.Decision{Status: approvals.Denied, Input: json.RawMessage(`{"a":3}`)}.Apply(pending())
	if string(denied.Input) != `{"a":1}` || denied.OriginalInput != nil {
		t.Errorf("a denial changed the input: %+v", denied)
	}
}

func TestDigestIgnoresSpacing(t *testing.T) {
	t.Parallel()
	a, err := approvals.Digest(json.RawMessage(`{"b": 1, "a": [1, 2]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := approvals.Digest(json.RawMessage(`{"a":[1,2],"b":1}`))
	c, _ := approvals.Digest(json.RawMessage(`{"a":[2,1],"b":1}`))
	if a != b || a == c || len(a) != 64 {
		t.Errorf("digests %s %s %s", a, b, c)
	}
	if _, err := approvals.Digest(json.RawMessage(`{`)); err == nil {
		t.Error("digest of broken JSON")
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	a := pending()
	a.ExpiresAt = time.Date(2026, 11, 29, 12, 3, 4, 0, time.UTC)
	got := approvals.ExpiredMessage(a, a.ExpiresAt.Add(3*time.Minute+10*time.Second), "approved")
	if got != "approval apr_1 expired at 12:03:04Z (3m ago); it can no longer be approved" {
		t.Errorf("ExpiredMessage = %q", got)
	}
	d := approvals.Decision{Status: approvals.Approved, By: "key_1", At: t0}.Apply(pending())
	if got := approvals.NotPendingMessage(d, t0, "approved"); !strings.Contains(got, "already approved by key_1 at 12:00:00Z") {
		t.Errorf("NotPendingMessage = %q", got)
	}
	for d, want := range map[time.Duration]string{-time.Second: "0s", 45 * time.Second: "45s", 3 * time.Minute: "3m", 5 * time.Hour: "5h", 72 * time.Hour: "3d"} {
		if got := approvals.Ago(d); got != want {
			t.Errorf("Ago(%v) = %s, want %s", d, got, want)
		}
	}
}

// TestAuthorizationMatrix pins who may do what: every role × every
// permission.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	perms := []approvals.Permission{approvals.ManageKeys, approvals.ReadMembers, approvals.Deploy, approvals.ReadDeployments, approvals.RunAgents,
		approvals.ReadRuns, approvals.ReadOwnRuns, approvals.ReadApprovalRuns, approvals.ReadApprovals, approvals.Decide, approvals.UseBroker, approvals.ManageWebhooks, approvals.ManageOwnSettings,
		approvals.CallTools}
	// One letter per permission above: y may, . may not.
	want := map[approvals.Role]string{
		approvals.RoleOwner:     "yyyyyyyyyyyyy.",
		approvals.RoleDeveloper: ".yyyyyyyyyy.y.",
		approvals.RoleApprover:  ".y.....yyy..y.",
		approvals.RoleViewer:    ".y.y.yyyy...y.",
		approvals.RoleCustomer:  "......y.......",
		approvals.RoleRun:       "..........y...",
		approvals.RoleSystem:    ".....yy.......",
		approvals.RoleMCP:       ".............y",
		approvals.Role("admin"): "..............",
	}
	for role, row := range want {
		for i, p := range perms {
			if got := role.May(p); got != (row[i] == 'y') {
				t.Errorf("%q may %s = %v", role, p, got)
			}
		}
	}
	if (approvals.Actor{ProjectID: "prj_b", Role: approvals.RoleOwner}).May(approvals.Decide, "prj_a") {
		t.Error("an owner of another project decides")
	}
	if !(approvals.Actor{ProjectID: "prj_a", Role: approvals.RoleDeveloper}).May(approvals.Decide, "prj_a") {
		t.Error("a developer of the project may not decide")
	}
	for _, r := range []approvals.Role{approvals.RoleCustomer, approvals.RoleRun, approvals.RoleSystem, approvals.RoleMCP} {
		if r.IsKeyRole() {
			t.Errorf("an API key may have role %s", r)
		}
	}
}

func TestNewNamesItsRun(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a, err := approvals.New(approvals.Request{
		ProjectID: "prj_a", RunID: "run_01M8KTWNF5HDGR3HRFH7PHZQXQ", Agent: "refunds", EndUserID: "u1", Deployment: 3,
		StepIndex: 1, StepID: "refund", CallID: "refund", Tool: "refundOrder",
		Input: json.RawMessage(`{"amount": 5}`), Reason: "needs a look", RequestedAt: at, Timeout: time.Hour,
	}, "9H8GE6J6")
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := approvals.Digest(json.RawMessage(`{"amount":5}`))
	if a.ID != "apr_01M8KTWNF5HDGR3HRFH7PHZQXQ_9H8GE6J6" || a.Status != approvals.Pending || a.InputDigest != digest ||
		!a.ExpiresAt.Equal(at.Add(time.Hour)) || a.RunID != "run_01M8KTWNF5HDGR3HRFH7PHZQXQ" || a.StepIndex != 1 {
		t.Fatalf("New = %+v", a)
	}
	if run, ok := approvals.RunHint(a.ID); !ok || run != a.RunID {
		t.Errorf("RunHint(%s) = %q, %v", a.ID, run, ok)
	}
	for _, id := range []string{"apr_01M8KTWNF9H8GE6J6RXQR1AEE5", "apr1", "apr__u", "run_x_y", ""} {
		if run, ok := approvals.RunHint(id); ok {
			t.Errorf("RunHint(%q) = %q, want none", id, run)
		}
	}
	if _, err := approvals.New(approvals.Request{RunID: "run_x", Input: json.RawMessage(`{`)}, "u"); err == nil {
		t.Error("New accepted an input that is not JSON")
	}
}

// TestNewPlacesNotices: New places each notice at RequestedAt+After, in time
// order, and keeps only those strictly between the request and the deadline.
func TestNewPlacesNotices(t *testing.T) {
	t.Parallel()
	a, err := approvals.New(approvals.Request{RunID: "run_1", Input: json.RawMessage(`{}`), RequestedAt: t0, Timeout: time.Hour,
		Notices: []approvals.Notice{
			{Kind: approvals.Reminder, After: 30 * time.Minute},
			{Kind: approvals.Escalated, After: 10 * time.Minute, Group: "leads"},
			{Kind: approvals.Reminder, After: time.Hour}, // at the deadline
			{Kind: approvals.Reminder, After: 0},         // with the request
			{Kind: approvals.Expiring, After: 48 * time.Minute},
		}}, "u1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range a.Notices {
		got = append(got, fmt.Sprintf("%s at %s", n.Kind, n.At.Format("15:04")))
	}
	want := []string{"escalated at 12:10", "reminder at 12:30", "expiring at 12:48"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("Notices = %v, want %v", got, want)
	}
}
