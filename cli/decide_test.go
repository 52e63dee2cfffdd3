package cli

import (
	"strings"
	"testing"
)

// TestDecideMistakes: an ID given twice is decided once; a reason given to
// deny as an argument points at --note and decides nothing; a refused
// decision names its approval once.
func TestDecideMistakes(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	pending := func(order string) string {
		t.Helper()
		r := s.mustCLI("run", "refunds", "--input", `{"orderId":"`+order+`","reason":"damaged"}`, "--end-user", "demo-user", "--wait", "--json")
		return jsonField(t, r.stdout, "approval.id")
	}

	a := pending("o-1001")
	r := s.cli("approve", a, a)
	if r.code != 0 || strings.Count(r.stdout, "approved "+a) != 1 || r.stderr != "" {
		t.Errorf("approve A A: want A approved once and exit 0: %s", r)
	}

	d := pending("o-1002")
	r = s.cli("deny", d, "not eligible")
	if r.code != 2 || !strings.Contains(r.stderr, `stead deny takes one ID (got 2 arguments); give the reason with --note, e.g. stead deny `+d+` --note "not eligible"`) {
		t.Errorf("deny ID REASON: %s", r)
	}
	if st := jsonField(t, s.mustCLI("approval", d, "--json").stdout, "status"); st != "pending" {
		t.Errorf("after a refused deny the approval is %s, want pending", st)
	}

	r = s.cli("approve", a, d)
	if r.code != 1 || strings.Count(r.stderr, a) != 1 || !strings.Contains(r.stderr, "already approved") {
		t.Errorf("approve of a decided approval and a pending one: want the refusal to name %s once, exit 1: %s", a, r)
	}
	if !strings.Contains(r.stdout, "approved "+d) {
		t.Errorf("the pending approval was not approved beside the refused one: %s", r)
	}

	r = s.cli("approve", "apr_01NOPEA", "apr_01NOPEB")
	if want := "error: approval apr_01NOPEA not found\nerror: approval apr_01NOPEB not found\n"; r.code != 1 || r.stderr != want || r.stdout != "" {
		t.Errorf("approve of two unknown approvals: want exit 1 and stderr %q: %s", want, r)
	}
}
