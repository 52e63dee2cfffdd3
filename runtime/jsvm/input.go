package jsvm

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// The handler's input is built as fresh VM values (never vm.ToValue of a Go
// map or slice, which would alias Go memory). goja's JSON.parse does that,
// but it drives encoding/json's token API and is about three times slower:
// BenchmarkInputToVM, medians of 5 interleaved runs on 2 shared cores,
// 7.7 µs against 25 µs for a 261-byte order (113 allocations against 289),
// 38 µs against 120 µs at 1 KB and 3.1 ms against 9.1 ms at 64 KB — at
// 1 KB the difference is about a whole warm call through the sandbox
// (43–91 µs, package sandbox's BenchmarkInvokeWarm). The same builder over
// jsontext's tokenizer in place of the grammar below measured about 20%
// slower at 261 B and 1 KB.
//
// decodeInput builds the same values directly, with JSON.parse's semantics
// as goja implements them (encoding/json string unquoting, float64 numbers,
// data properties defined without setters — an own "__proto__" included),
// and hands anything it does not handle — a syntax error, a number out of
// range, invalid UTF-8, nesting deeper than maxInputDepth — to JSON.parse
// itself, which then decides (and reports the error). So it buys speed and
// nothing else: a handler sees what JSON.parse would give it. Strictness
// is not its job: an input was read strictly at the edge (strictjson) and
// encoded again by Go before it reaches a worker.
// TestDecodeInputMatchesJSONParse and FuzzDecodeInput pin the equivalence.

const maxInputDepth = 200

func (w *worker) decodeInput(data []byte) (goja.Value, error) {
	if v, ok := fastDecode(w.vm, data); ok {
		return v, nil
	}
	return w.parse(goja.Undefined(), w.vm.ToValue(string(data)))
}

// fastDecode decodes data, or reports that JSON.parse must.
func fastDecode(vm *goja.Runtime, data []byte) (goja.Value, bool) {
	d := inputDecoder{vm: vm, data: data}
	d.space()
	v, ok := d.value(0)
	d.space()
	return v, ok && d.pos == len(data)
}

type inputDecoder struct {
	vm   *goja.Runtime
	data []byte
	pos  int
}

func (d *inputDecoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *inputDecoder) value(depth int) (goja.Value, bool) {
	if d.pos >= len(d.data) || depth > maxInputDepth {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, ok := d.string()
		if !ok {
			return nil, false
		}
		return d.vm.ToValue(s), true
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case d.literal("true"):
		return d.vm.ToValue(true), true
	case d.literal("false"):
		return d.vm.ToValue(false), true
	case d.literal("null"):
		return goja.Null(), true
	}
	return nil, false
}

func (d *inputDecoder) literal(lit string) bool {
	if len(d.data)-d.pos >= len(lit) && string(d.data[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return true
	}
	return false
}

func (d *inputDecoder) object(depth int) (goja.Value, bool) {
	o := d.vm.NewObject()
	d.pos++ // {
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return o, true
	}
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, false
		}
		key, ok := d.string()
		if !ok {
			return nil, false
		}
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		d.space()
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		// Define, as JSON.parse does: no setter runs, not even __proto__'s.
		if o.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE) != nil {
			return nil, false
		}
		d.space()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.space()
		case '}':
			d.pos++
			return o, true
		default:
			return nil, false
		}
	}
}

func (d *inputDecoder) array(depth int) (goja.Value, bool) {
	d.pos++ // [
	d.space()
	var items []any
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return d.vm.NewArray(), true
	}
	for {
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		items = append(items, v)
		d.space()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.space()
		case ']':
			d.pos++
			return d.vm.NewArray(items...), true
		default:
			return nil, false
		}
	}
}

// string reads a string literal. Literals with escapes are unquoted by
// encoding/json, as goja's JSON.parse does.
func (d *inputDecoder) string() (string, bool) {
	start := d.pos
	escaped, ascii := false, true
	for i := start + 1; i < len(d.data); i++ {
		switch c := d.data[i]; {
		case c == '"':
			d.pos = i + 1
			raw := d.data[start+1 : i]
			if !ascii && !utf8.Valid(raw) {
				return "", false
			}
			if !escaped {
				return string(raw), true
			}
			var s string
			if json.Unmarshal(d.data[start:i+1], &s) != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			escaped = true
			i++ // the escaped byte cannot end the literal
		case c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", false
}

// number reads a number with the JSON grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *inputDecoder) number() (goja.Value, bool) {
	start := d.pos
	p := d.pos
	digits := func() bool {
		n := p
		for p < len(d.data) && d.data[p] >= '0' && d.data[p] <= '9' {
			p++
		}
		return p > n
	}
	if p < len(d.data) && d.data[p] == '-' {
		p++
	}
	switch {
	case p < len(d.data) && d.data[p] == '0':
		p++
	case !digits():
		return nil, false
	}
	if p < len(d.data) && d.data[p] == '.' {
		p++
		if !digits() {
			return nil, false
		}
	}
	if p < len(d.data) && (d.data[p] == 'e' || d.data[p] == 'E') {
		p++
		if p < len(d.data) && (d.data[p] == '+' || d.data[p] == '-') {
			p++
		}
		if !digits() {
			return nil, false
		}
	}
	f, err := strconv.ParseFloat(string(d.data[start:p]), 64)
	if err != nil {
		return nil, false // out of range: JSON.parse decides
	}
	d.pos = p
	return d.vm.ToValue(f), true
}
