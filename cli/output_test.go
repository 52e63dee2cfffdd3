package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// On a terminal a table fits its width (the widest column cut with "…")
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
		t.Errorf("the widest column was not the one cut: %q", lines[1])
	}

	out.Reset()
	tb = newTable(&termOut{Writer: &out, width: 72}, "ID", "STATUS", "DETAIL")
	fill(tb)
	_ = tb.flush()
	if ansi.MatchString(out.String()) {
		t.Errorf("coloured without colour (NO_COLOR, --json):\n%q", out.String())
	}
}
