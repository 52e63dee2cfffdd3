package sandbox

import (
	"fmt"
	"math"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The frames of every call — call and done, and cancel, untrusted, ready —
// are encoded here by hand; the others (load, loaded with exports or an
// error, host, reply) go through go-json-experiment's reflection. By hand
// because reflection took 2–3 µs to encode a call frame and 1.3 µs a done
// frame, each on the call's path, against 0.3–0.4 µs here
// (BenchmarkFrameCodec). The output is json's, byte for byte
// (TestCodecMatchesJSON): members in field order, omitzero, strings quoted
// and values checked and compacted by jsontext. Decoding stays json's own
// (json.Unmarshal with strict): a decoder by hand over jsontext measured no
// faster.

// appendMessage appends m's JSON encoding to b, as json.MarshalWrite would.
func appendMessage(b []byte, m *message) ([]byte, error) {
	if m.Load != nil || m.Host != nil || m.Reply != nil || m.Error != nil || m.Exports != nil {
		a := appender(b)
		err := json.MarshalWrite(&a, m)
		return a, err
	}
	var err error
	b = append(b, `{"t":`...)
	if b, err = appendString(b, m.T); err != nil {
		return b, err
	}
	if m.V != 0 {
		b = strconv.AppendInt(append(b, `,"v":`...), int64(m.V), 10)
	}
	if m.ID != 0 {
		b = strconv.AppendUint(append(b, `,"id":`...), m.ID, 10)
	}
	if m.Seq != 0 {
		b = strconv.AppendUint(append(b, `,"seq":`...), m.Seq, 10)
	}
	if c := m.Call; c != nil {
		if b, err = appendCall(append(b, `,"call":`...), c); err != nil {
			return b, err
		}
	}
	if m.Origin != "" {
		if b, err = appendString(append(b, `,"origin":`...), m.Origin); err != nil {
			return b, err
		}
	}
	if d := m.Done; d != nil {
		if b, err = appendDone(append(b, `,"done":`...), d); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// members appends JSON object members, each with its leading comma; the
// first error sticks and later appends are skipped.
type members struct {
	b   []byte
	err error
}

func (w *members) str(name, s string) {
	if w.err == nil && s != "" {
		w.b, w.err = appendString(append(append(w.b, ','), name...), s)
	}
}

func (w *members) int(name string, n int64) {
	if w.err == nil && n != 0 {
		w.b = strconv.AppendInt(append(append(w.b, ','), name...), n, 10)
	}
}

func (w *members) bool(name string, v bool) {
	if w.err == nil && v {
		w.b = append(append(append(w.b, ','), name...), "true"...)
	}
}

func (w *members) value(name string, v jsontext.Value) {
	if w.err == nil && v != nil {
		w.b, w.err = appendValue(append(append(w.b, ','), name...), v)
	}
}

// end closes the object opened with a name already written, dropping the
// first member's comma.
func (w *members) end(start int) ([]byte, error) {
	if w.err != nil {
		return w.b, w.err
	}
	if len(w.b) > start && w.b[start] == ',' {
		w.b = append(w.b[:start], w.b[start+1:]...)
	}
	return append(w.b, '}'), nil
}

func appendCall(b []byte, c *callMsg) ([]byte, error) {
	b = append(b, '{')
	w := members{b: b}
	start := len(b)
	// export is always written (no omitzero), even when empty.
	w.b, w.err = appendString(append(w.b, `,"export":`...), c.Export)
	w.value(`"input":`, c.Input)
	w.str(`"runId":`, c.RunID)
	w.str(`"stepId":`, c.StepID)
	w.int(`"stepIndex":`, int64(c.StepIndex))
	w.str(`"endUserId":`, c.EndUserID)
	w.str(`"idempotencyKey":`, c.IdempotencyKey)
	w.str(`"brokerToken":`, c.BrokerToken)
	w.bool(`"broker":`, c.Broker)
	w.int(`"deadline":`, c.Deadline)
	return w.end(start)
}

func appendDone(b []byte, d *doneMsg) ([]byte, error) {
	b = append(b, '{')
	w := members{b: b}
	start := len(b)
	w.value(`"output":`, d.Output)
	if d.Error != nil && w.err == nil {
		w.b, w.err = appendError(append(w.b, `,"error":`...), d.Error)
	}
	if d.Cost != (costMsg{}) && w.err == nil {
		w.b = append(w.b, `,"cost":{`...)
		cs := len(w.b)
		w.int(`"tokensInput":`, d.Cost.TokensInput)
		w.int(`"tokensOutput":`, d.Cost.TokensOutput)
		if f := d.Cost.CostUSD; f != 0 && w.err == nil {
			w.b, w.err = appendFloat(append(w.b, `,"costUsd":`...), f)
		}
		w.b, w.err = w.end(cs)
	}
	if d.Untrusted != nil && w.err == nil {
		w.b = append(w.b, `,"untrusted":[`...)
		for i, u := range d.Untrusted {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			if w.b, w.err = appendString(w.b, u); w.err != nil {
				return w.b, w.err
			}
		}
		w.b = append(w.b, ']')
	}
	if d.Logs != nil && w.err == nil {
		w.b = append(w.b, `,"logs":[`...)
		for i, l := range d.Logs {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, `{"level":`...)
			if w.b, w.err = appendString(w.b, l.Level); w.err == nil {
				w.b, w.err = appendString(append(w.b, `,"message":`...), l.Message)
			}
			if w.err != nil {
				return w.b, w.err
			}
			w.b = append(strconv.AppendInt(append(w.b, `,"at":`...), l.At, 10), '}')
		}
		w.b = append(w.b, ']')
	}
	w.bool(`"logsTruncated":`, d.LogsTruncated)
	w.bool(`"retired":`, d.Retired)
	return w.end(start)
}

func appendError(b []byte, e *errorMsg) ([]byte, error) {
	b = append(b, '{')
	w := members{b: b}
	start := len(b)
	w.b, w.err = appendString(append(w.b, `,"code":`...), e.Code)
	if w.err == nil {
		w.b, w.err = appendString(append(w.b, `,"message":`...), e.Message)
	}
	w.str(`"name":`, e.Name)
	w.str(`"stack":`, e.Stack)
	w.str(`"file":`, e.File)
	w.int(`"line":`, int64(e.Line))
	w.int(`"column":`, int64(e.Column))
	return w.end(start)
}

// appendString appends s quoted as json does: plain printable ASCII as it
// is, the rest by jsontext (which refuses invalid UTF-8).
func appendString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return jsontext.AppendQuote(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// appendValue appends a JSON value as json's encoder writes it: checked
// (exact syntax, valid UTF-8, no duplicate names) and compacted.
func appendValue(b []byte, v jsontext.Value) ([]byte, error) {
	out, err := jsontext.AppendFormat(b, v)
	if err != nil {
		return b, err
	}
	return out, nil
}

// appendFloat appends a finite number as json does (as JavaScript prints
// it).
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, fmt.Errorf("unsupported number %v", f)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1] // e-09 → e-9
		b = b[:n-1]
	}
	return b, nil
}
