package cli

import (
	"regexp"
	"strings"
	"testing"

	"stead/api/wire"
)

// TestFollowCancelledRun: a followed run that was cancelled ends in one
// line that says "cancelled" once and, its trace being on the screen,
// does not send the user to `stead trace`.
func TestFollowCancelledRun(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	run := s.startAwaiting("o-1001")
	s.mustCLI("cancel", run.ID)
	r := s.cli("trace", run.ID, "--follow")
	if r.code != ExitError || !strings.Contains(r.stdout, "run.cancelled") {
		t.Fatalf("trace --follow of a cancelled run: %s", r)
	}
	if want := regexp.MustCompile(`^error: run ` + run.ID + ` cancelled by key_[0-9a-z]+\n$`); !want.MatchString(r.stderr) {
		t.Errorf("want stderr to match %s: %s", want, r)
	}
	if strings.Count(r.stderr, "cancelled") != 1 || strings.Contains(r.stderr, "stead trace") {
		t.Errorf("stderr repeats itself or suggests the command running: %q", r.stderr)
	}
}

// The line a failed or cancelled run ends with names its status once.
func TestRunErrorLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    *wire.RunError
		traced bool
		want   string
	}{
		{&wire.RunError{Code: "cancelled", Message: "cancelled by key_x"}, false, "run run_1 cancelled by key_x; see `stead trace run_1`"},
		{&wire.RunError{Code: "cancelled", Message: "cancelled by key_x"}, true, "run run_1 cancelled by key_x"},
		{&wire.RunError{Code: "cancelled", Message: "cancelled"}, true, "run run_1 cancelled"},
		{&wire.RunError{Code: "cancelled", Message: "the deployment was replaced"}, true, "run run_1 cancelled: the deployment was replaced"},
		{&wire.RunError{Code: "approval-denied", Message: "refundOrder was denied by owner"}, false, "run run_1 cancelled: approval-denied: refundOrder was denied by owner; see `stead trace run_1`"},
		{nil, false, "run run_1 cancelled; see `stead trace run_1`"},
	} {
		e := &runError{run: wire.Run{ID: "run_1", Status: statusCancelled, Error: c.err}, traced: c.traced}
		if got := e.Error(); got != c.want {
			t.Errorf("%+v traced=%t: %q, want %q", c.err, c.traced, got, c.want)
		}
	}
}
