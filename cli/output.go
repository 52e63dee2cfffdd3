package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
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

// table writes aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

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
