package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// On a terminal a table fits its width (its free-text DETAIL cut with "…")
// and colours its STATUS column; elsewhere it is left whole and plain.
func TestTableFitsTheTerminal(t *testing.T) {
	fill := func(tb *table) {
		tb.row("run_01M8KTWTTKHNR177HZ387NBGF5", "failed", "approval-denied: refundOrder was denied by owner: tracking shows it was delivered")
		tb.row("run_01M8KTWNF5HDGR3HRFH7PHZQXQ", "succeeded", "")
	}
	var plain bytes.Buffer
	tb := newTable(&plain, "ID", "STATUS", "DETAIL")
	fill(tb)
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	if ansi.MatchString(plain.String()) || !strings.Contains(plain.String(), "tracking shows it was delivered\n") {
		t.Errorf("off a terminal the table changed:\n%s", plain.String())
	}

	var out bytes.Buffer
	tb = newTable(&termOut{Writer: &out, width: 72, colour: true}, "ID", "STATUS", "DETAIL")
	fill(tb)
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for _, l := range lines {
		if n := utf8.RuneCountInString(ansi.ReplaceAllString(l, "")); n > 72 {
			t.Errorf("a line of %d characters on a 72-column terminal: %q", n, l)
		}
	}
	if !strings.Contains(lines[1], "\x1b[31mfailed\x1b[0m") || !strings.Contains(lines[2], "\x1b[32msucceeded\x1b[0m") || ansi.MatchString(lines[0]) {
		t.Errorf("STATUS is not coloured (or the header is):\n%q", lines)
	}
	if !strings.HasSuffix(lines[1], "…") || !strings.Contains(lines[1], "run_01M8KTWTTKHNR177HZ387NBGF5") {
		t.Errorf("DETAIL was not the column cut: %q", lines[1])
	}

	out.Reset()
	tb = newTable(&termOut{Writer: &out, width: 72}, "ID", "STATUS", "DETAIL")
	fill(tb)
	_ = tb.flush()
	if ansi.MatchString(out.String()) {
		t.Errorf("coloured without colour (NO_COLOR, --json):\n%q", out.String())
	}
}

// On a terminal only the free-text columns are cut: the IDs people copy
// into `stead approve ID` stay whole, even inside a cut cell, and a row
// that does not fit even then runs past the edge.
func TestTableNeverCutsIDs(t *testing.T) {
	t.Parallel()
	const (
		apr = "apr_01M8KTWTTKHNR177HZ387NBGF5_EWF7TM4E"
		run = "run_01M8KTWNF5HDGR3HRFH7PHZQXQ"
		rul = "rul_01M8KTX2C4M7Q0D5W1S3E8R6TB"
	)
	render := func(width int, header []string, rows ...[]string) []string {
		t.Helper()
		var out bytes.Buffer
		tb := newTable(&termOut{Writer: &out, width: width}, header...)
		for _, r := range rows {
			tb.row(r...)
		}
		if err := tb.flush(); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	}
	width := func(l string) int { return utf8.RuneCountInString(l) }

	// stead approvals: REASON gives way; on 80 columns the two IDs alone
	// leave too little room, and the row runs past the edge.
	header := []string{"ID", "AGENT", "TOOL", "RUN", "REQUESTED", "EXPIRES IN", "REASON"}
	row := []string{apr, "refunds", "refundOrder", run, "3m ago", "12m", "Refund 129.00 EUR for order o-1001 (damaged) to the original card"}
	for _, w := range []int{130, 80} {
		lines := render(w, header, row)
		if fits := width(lines[1]) <= w; fits != (w == 130) {
			t.Errorf("%d columns: a line of %d characters: %q", w, width(lines[1]), lines[1])
		}
		if !strings.HasPrefix(lines[1], apr+"  refunds  refundOrder  "+run+"  ") || !strings.HasSuffix(lines[1], "…") {
			t.Errorf("%d columns: an ID or the tool was cut instead of REASON: %q", w, lines[1])
		}
	}

	// stead runs: DETAIL is cut, but not inside the approval ID it names;
	// there the row runs past the edge.
	lines := render(80, []string{"ID", "AGENT", "END USER", "STATUS", "CREATED", "DETAIL"},
		[]string{run, "refunds", "demo-user", "awaiting-approval", "3m ago", apr + " (refundOrder)"},
		[]string{run, "refunds", "demo-user", "failed", "3m ago", "approval-denied: refundOrder was denied by owner"})
	if !strings.HasPrefix(lines[1], run+"  ") || !strings.Contains(lines[1], apr) {
		t.Errorf("an ID was cut: %q", lines[1])
	}
	if !strings.HasSuffix(lines[2], "…") {
		t.Errorf("DETAIL's prose was not cut: %q", lines[2])
	}

	// stead rules list --all: nothing is free text but MADE BY; the IDs stay
	// whole and the line overflows.
	lines = render(80, []string{"ID", "AGENT", "TOOL", "END USER", "INPUTS", "MADE BY", "FROM APPROVAL", "EXPIRES"},
		[]string{rul, "refunds", "refundOrder", "demo-user", "exact", "Ana Diaz (owner)", apr, "revoked 5m ago"})
	if !strings.HasPrefix(lines[1], rul+"  ") || !strings.Contains(lines[1], apr+"  revoked 5m ago") {
		t.Errorf("an ID or the expiry was cut: %q", lines[1])
	}
	if width(lines[1]) <= 80 {
		t.Errorf("expected the row to run past 80 columns rather than cut an ID: %q", lines[1])
	}
}

// cut shortens prose but keeps an ID the cut would fall in.
func TestCut(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 8, "short"},
		{"denied by owner: tracking shows it", 10, "denied by…"},
		{"apr_01M8KTWTTKHNR177HZ387NBGF5_EWF7TM4E (refundOrder)", 10, "apr_01M8KTWTTKHNR177HZ387NBGF5_EWF7TM4E…"},
		{"see apr_01M8KTWTTKHNR177HZ387NBGF5_EWF7TM4E", 38, "see apr_01M8KTWTTKHNR177HZ387NBGF5_EWF7TM4E"},
		{"cancelled by key_01M8KTWTTKHNR177HZ387NBGF5 at 12:03", 20, "cancelled by key_01M8KTWTTKHNR177HZ387NBGF5…"},
		{"cancelled by key_01M8KTWTTKHNR177HZ387NBGF5 at 12:03", 13, "cancelled by…"},
	} {
		if got := cut(c.s, c.n); got != c.want {
			t.Errorf("cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
