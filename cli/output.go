package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
// fits the terminal's width — the widest column is cut, with "…", until the
// rows fit — and colours a STATUS column.
type table struct {
	w    io.Writer
	rows [][]string
}

// columnGap is the space between columns.
const columnGap = 2

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
	if term != nil && term.width > 0 {
		fit(widths, term.width)
	}
	status := -1
	if len(t.rows) > 0 {
		status = slices.Index(t.rows[0], "STATUS")
	}
	var b strings.Builder
	for n, r := range t.rows {
		var line strings.Builder
		for i, c := range r {
			c = truncate(c, widths[i])
			pad := widths[i] - utf8.RuneCountInString(c)
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

// fit narrows the widest columns until a row of widths fits in width; no
// column goes below 8 characters (or its own width, if less).
func fit(widths []int, width int) {
	total := func() int {
		n := columnGap * (len(widths) - 1)
		for _, w := range widths {
			n += w
		}
		return n
	}
	for total() > width {
		widest := 0
		for i, w := range widths {
			if w > widths[widest] {
				widest = i
			}
		}
		if widths[widest] <= 8 {
			return
		}
		widths[widest] = max(8, widths[widest]-(total()-width))
	}
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
