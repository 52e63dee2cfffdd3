package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"stead/api/wire"
	"strconv"
	"strings"
	"time"
)

// traceWriter prints events: as table rows (trace), as lines while they
// arrive (run --follow), or as one JSON object per line (--json).
type traceWriter struct {
	w     io.Writer
	now   func() time.Time
	json  bool
	table *table
}

func newTraceWriter(w io.Writer, now func() time.Time, asJSON bool) *traceWriter {
	return &traceWriter{w: w, now: now, json: asJSON}
}

func (t *traceWriter) event(ev wire.Event) {
	if t.json {
		b, err := json.Marshal(ev)
		if err == nil {
			fmt.Fprintf(t.w, "%s\n", b)
		}
		return
	}
	at := ev.At.UTC().Format("15:04:05.000")
	step := orDash(ev.Step)
	sum := summary(ev)
	if t.table != nil {
		t.table.row(at, ev.Type, step, sum)
		return
	}
	fmt.Fprintf(t.w, "%s  %-18s  %-8s  %s\n", at, ev.Type, step, sum)
}

// summaryWidth bounds a summary; the full data is in `trace --json`.
const summaryWidth = 120

// summary says in a few words what an event means.
func summary(ev wire.Event) string {
	var d map[string]json.RawMessage
	_ = json.Unmarshal(ev.Data, &d)
	str := func(k string) string { return rawString(d[k]) }
	// by names who did it: the member ("Ana Diaz (key_…)"), else the key.
	by := func(d map[string]json.RawMessage) string { return named(rawString(d["by"]), rawString(d["byName"])) }
	var s string
	switch ev.Type {
	case "run.created":
		s = fmt.Sprintf("agent %s, deployment %s, input %s", str("agent"), compact(d["deployment"]), compact(d["input"]))
		if b := by(d); b != "" {
			s += ", by " + b
		}
	case "run.started":
		s = "attempt " + compact(d["attempt"])
		// Steps are counted from 1, as the console counts them; the
		// event's cursor is the index, from 0.
		if c, err := strconv.Atoi(compact(d["cursor"])); err == nil && c > 0 {
			s += ", from step " + strconv.Itoa(c+1)
		}
	case "step.started":
		s = str("tool") + " " + compact(d["input"])
		var pol map[string]json.RawMessage
		if json.Unmarshal(d["policy"], &pol) == nil {
			switch dec := rawString(pol["decision"]); dec {
			case "approved":
				s += fmt.Sprintf(" (approved by %s)", by(pol))
			case "", "allow":
			default:
				s += " (" + dec + ")"
			}
		}
	case "step.completed":
		s = str("tool") + " → " + compact(d["output"])
	case "step.failed", "run.failed", "tool.failed":
		// The position first, so that truncation keeps it.
		s = str("code")
		if f, line := str("file"), compact(d["line"]); f != "" && line != "" {
			s += " at " + f + ":" + line + ":" + compact(d["column"])
		}
		s += ": " + str("message")
	case "log":
		s = str("level") + ": " + str("message")
	case "cost.recorded":
		var c wire.Costs
		_ = json.Unmarshal(d["costs"], &c)
		s = fmt.Sprintf("%d tokens in, %d out, $%.4f", c.TokensInput, c.TokensOutput, c.CostUSD)
	case "trust.lowered":
		s = "run is untrusted from here on (" + str("origin") + ")"
	case "approval.requested":
		s = fmt.Sprintf("%s %s (expires %s): %s", str("approvalId"), str("tool"), clockOf(d["expiresAt"]), str("reason"))
	case "approval.approved":
		s = fmt.Sprintf("%s approved by %s", str("approvalId"), by(d))
		if e := compact(d["edited"]); e == "true" {
			s += ", input edited to " + compact(d["input"])
		}
		if n := str("note"); n != "" {
			s += ": " + n
		}
	case "approval.denied":
		s = fmt.Sprintf("%s denied by %s", str("approvalId"), by(d))
		if n := str("note"); n != "" {
			s += ": " + n
		}
	case "approval.expired":
		s = fmt.Sprintf("%s expired at %s without a decision", str("approvalId"), clockOf(d["expiresAt"]))
	case "approval.cancelled":
		s = fmt.Sprintf("%s cancelled by %s", str("approvalId"), by(d))
	case "run.succeeded":
		s = "output " + compact(d["output"])
	case "run.cancelled":
		s = "by " + by(d)
	default:
		s = compact(ev.Data)
	}
	return truncate(strings.TrimSpace(s), summaryWidth)
}

// rawString reads a JSON string, or renders any other value compactly.
func rawString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return compact(raw)
}

// dataString reads one string field of an event's data.
func dataString(data json.RawMessage, key string) string {
	var d map[string]json.RawMessage
	if json.Unmarshal(data, &d) != nil {
		return ""
	}
	return rawString(d[key])
}

// clockOf renders a JSON time as a time of day in UTC.
func clockOf(raw json.RawMessage) string {
	var t time.Time
	if json.Unmarshal(raw, &t) != nil {
		return rawString(raw)
	}
	return clock(t)
}

// named renders an actor for people: "Ana Diaz (key_…)" when the member is
// known, else the id.
func named(id, name string) string {
	if name == "" || id == "" {
		return id
	}
	return name + " (" + id + ")"
}
