package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"stead/approvals"
)

// printJSON writes an API body re-indented, ending with a newline.
func printJSON(w io.Writer, body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		_, err = w.Write(body)
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// printValue writes v as indented JSON.
func printValue(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// table writes aligned columns. On a terminal (a *termOut writer) it
// fits the terminal's width — only the free-text columns (freeText) are
// cut, with "…", and never inside an ID; a row that still does not fit runs
// past the edge — and colours a STATUS column.
type table struct {
	w    io.Writer
	rows [][]string
}

// columnGap is the space between columns.
const columnGap = 2

// freeText names the columns a terminal's width may cut: prose, not what
// people copy into a command. IDs, names, statuses and times are never cut.
var freeText = map[string]bool{
	"REASON": true, "DETAIL": true, "SUMMARY": true, "VALUE": true,
	"LAST ATTEMPT": true, "STEPS": true, "MADE BY": true,
}

// minCut is the narrowest a free-text column is cut to.
const minCut = 8

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	t.rows = append(t.rows, row)
}

func (t *table) flush() error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	term, _ := t.w.(*termOut)
	if term != nil && term.width > 0 && len(t.rows) > 0 {
		fit(widths, t.rows[0], term.width)
	}
	status := -1
	if len(t.rows) > 0 {
		status = slices.Index(t.rows[0], "STATUS")
	}
	var b strings.Builder
	for n, r := range t.rows {
		var line strings.Builder
		for i, c := range r {
			c = cut(c, widths[i])
			pad := max(0, widths[i]-utf8.RuneCountInString(c))
			if term != nil && term.colour && n > 0 && i == status {
				c = statusColour(c)
			}
			line.WriteString(c)
			if i < len(r)-1 {
				line.WriteString(strings.Repeat(" ", pad+columnGap))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	t.rows = nil
	_, err := io.WriteString(t.w, b.String())
	return err
}

// fit narrows the free-text columns of header (freeText), the widest
// first, until a row of widths fits in width. None goes below minCut
// characters or its header's width (or its own width, if less); when the
// row still does not fit, it is left to run past the edge.
func fit(widths []int, header []string, width int) {
	total := columnGap * (len(widths) - 1)
	for _, w := range widths {
		total += w
	}
	floor := make([]int, len(widths))
	for i := range widths {
		floor[i] = widths[i]
		if i < len(header) && freeText[strings.TrimSpace(header[i])] {
			floor[i] = min(widths[i], max(minCut, utf8.RuneCountInString(header[i])))
		}
	}
	for total > width {
		widest := -1
		for i, w := range widths {
			if w > floor[i] && (widest < 0 || w > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			return
		}
		next := max(floor[widest], widths[widest]-(total-width))
		total -= widths[widest] - next
		widths[widest] = next
	}
}

// anID matches the IDs people copy out of a table: run_01J…,
// apr_01J…_EWF7TM4E, key_e2yp….
var anID = regexp.MustCompile(`\b[a-z]{2,4}_[0-9A-Za-z]{8,}(_[0-9A-Za-z]+)*`)

// cut is truncate that never cuts an ID: when the cut would fall inside
// one, the ID is kept whole and the cut comes after it.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	for _, loc := range anID.FindAllStringIndex(s, -1) {
		start, end := utf8.RuneCountInString(s[:loc[0]]), utf8.RuneCountInString(s[:loc[1]])
		if start < n-1 && end > n-1 {
			n = end + 1
		}
	}
	return truncate(s, n)
}

// statusColour colours a run or approval status for a terminal.
func statusColour(s string) string {
	code := ""
	switch strings.TrimSpace(s) {
	case "succeeded", "approved":
		code = "32" // green
	case "failed", "denied", "expired", "cancelled":
		code = "31" // red
	case "awaiting-approval", "pending":
		code = "33" // yellow
	case "running", "queued":
		code = "36" // cyan
	}
	if code == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// termOut is standard output when it is a terminal: its width, and
// whether to colour (not with NO_COLOR, TERM=dumb or --json).
type termOut struct {
	io.Writer
	width  int
	colour bool
}

// ago renders a past time relative to now: "45s ago", "3m ago".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return approvals.Ago(now.Sub(t).Round(time.Second)) + " ago"
}

// until renders a deadline relative to now: "14m", or "expired" when past.
func until(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if !now.Before(t) {
		return "expired"
	}
	return approvals.Ago(t.Sub(now).Round(time.Second))
}

// clock renders a time of day in UTC: "12:03:04Z".
func clock(t time.Time) string { return t.UTC().Format("15:04:05Z") }

// stamp renders a full UTC time: "2026-11-29 12:03:04Z".
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// truncate cuts s to n characters, marking the cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// compact renders JSON on one line; "" for nothing.
func compact(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// pretty renders JSON indented, each line prefixed.
func pretty(raw json.RawMessage, prefix string) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return prefix + "(none)"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), prefix, "  "); err != nil {
		return prefix + string(raw)
	}
	return prefix + buf.String()
}

// orDash returns s, or "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
