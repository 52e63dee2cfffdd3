package agent

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"stead/strictjson"
)

// Problem is one thing wrong with a stead.json: where it is, as a JSON
// pointer (RFC 6901) into the file, and what is wrong, in words.
type Problem struct {
	// Pointer locates the problem: "" is the whole file,
	// "/agents/refunds/tools/refundOrder/effect" one value. A missing key's
	// pointer names the key that should be there.
	Pointer string
	// Message says what is wrong, e.g. `must be one of "read", "write"`.
	Message string
	// Line and Column (1-based, in characters) locate the problem in the
	// file: the key or value Pointer names, or its nearest ancestor present
	// in the file. Zero when unknown (a Config built by CheckExports, for
	// instance, reports them all).
	Line, Column int
}

// String renders the problem as "pointer: message"; the whole file is
// "(root)".
func (p Problem) String() string {
	ptr := p.Pointer
	if ptr == "" {
		ptr = "(root)"
	}
	return ptr + ": " + p.Message
}

// ConfigError is a stead.json that cannot be used. It lists every problem
// found, in file order, not just the first.
type ConfigError struct {
	Problems []Problem
}

// Error lists the problems one per line, each "pointer: message".
func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Code is the stable machine-readable code the API and CLI show.
func (e *ConfigError) Code() string { return "invalid-config" }

// jsonPointer renders reference tokens as an RFC 6901 pointer.
func jsonPointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	t = strings.ReplaceAll(t, "~", "~0")
	return strings.ReplaceAll(t, "/", "~1")
}

func unescapeToken(t string) string {
	if !strings.Contains(t, "~") {
		return t
	}
	t = strings.ReplaceAll(t, "~1", "/")
	return strings.ReplaceAll(t, "~0", "~")
}

// child appends one token to a pointer.
func child(ptr, token string) string { return ptr + "/" + escapeToken(token) }

// parentPointer drops the last token of a pointer ("" stays "").
func parentPointer(ptr string) string {
	i := strings.LastIndexByte(ptr, '/')
	if i < 0 {
		return ""
	}
	return ptr[:i]
}

// decodeJSON decodes one JSON document strictly (strictjson: valid UTF-8,
// at most strictjson.MaxDepth levels deep, nothing after it) into Go values,
// numbers as json.Number. Any other refusal is returned alone as a
// *ConfigError with the pointer, line and column, since nothing else can be
// checked. Duplicate keys are the exception: the document is decoded
// anyway, so that Parse lists each duplicate (scanPositions finds them)
// beside every other problem, and refuses it.
func decodeJSON(data []byte) (any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &ConfigError{Problems: []Problem{{Message: "the file is empty; it must hold a JSON object"}}}
	}
	v, err := strictjson.Value(data)
	if se, ok := errors.AsType[*strictjson.Error](err); ok && se.Reason == strictjson.Duplicate {
		v, err = strictjson.ValueAllowingDuplicates(data)
	}
	if err != nil {
		return nil, syntaxProblem(data, err)
	}
	return v, nil
}

var atByte = regexp.MustCompile(` \(at byte \d+\)`)

func syntaxProblem(data []byte, err error) error {
	var se *strictjson.Error
	if !errors.As(err, &se) {
		return &ConfigError{Problems: []Problem{{Message: "invalid JSON: " + err.Error()}}}
	}
	off := int(se.Offset)
	if se.Reason == strictjson.Syntax && strings.Contains(se.Message, "ends too early") {
		off = len(data)
	}
	line, col := lineColumn(data, off)
	p := Problem{Pointer: se.Pointer, Line: line, Column: col}
	switch se.Reason {
	case strictjson.Trailing:
		p.Message = fmt.Sprintf("invalid JSON at line %d, column %d: unexpected data after the top-level value", line, col)
	case strictjson.Syntax:
		msg := strings.TrimPrefix(se.Message, "is not valid JSON: ")
		if strings.Contains(msg, "ends too early") {
			msg = "unexpected end of file (a bracket, brace or quote is not closed)"
		}
		msg = atByte.ReplaceAllString(msg, "") // the line and column say where
		p.Message = fmt.Sprintf("invalid JSON at line %d, column %d: %s", line, col, msg)
	default: // invalid UTF-8, too deep: a place and what to do
		p.Message = se.Message
	}
	return &ConfigError{Problems: []Problem{p}}
}

// lineColumn turns a byte offset into a 1-based line and column, the column
// counted in characters.
func lineColumn(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	line = 1 + bytes.Count(data[:off], []byte{'\n'})
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return line, 1 + utf8.RuneCount(data[start:off])
}

// positions maps the JSON pointer of every value in a document to the byte
// offset where it appears (the key of an object member, the first byte of an
// array element), and notes duplicate keys, so that Parse can list each of
// them with the other problems.
type positions struct {
	data       []byte
	at         map[string]int    // pointer → offset of its key or element
	spans      map[string][2]int // pointer → [start, end) of its value
	duplicates []placed
}

// placed is a problem with the byte offset it is reported at.
type placed struct {
	Problem
	off int
}

// scanPositions walks a document that decodeJSON has already accepted with
// jsontext's decoder, which gives each token's end offset and JSON pointer;
// a value's start is its end less its length, a bracket's one byte before.
func scanPositions(data []byte) *positions {
	p := &positions{data: data, at: map[string]int{}, spans: map[string][2]int{}}
	d := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))
	type open struct {
		start int
		keys  map[string]int // an object's: key → offset of its first occurrence
	}
	var stack []open
	for {
		// in is what the next token is read in (an object, an array or
		// nothing) and n what it holds so far, keys and values counted
		// apart: an object's next token is a key when n is even.
		in, n := d.StackIndex(d.StackDepth())
		next := d.PeekKind()
		var raw jsontext.Value
		var err error
		switch next {
		case 0: // the end: the document was accepted, so not an error
			return p
		case '{', '[', '}', ']':
			_, err = d.ReadToken()
		default:
			raw, err = d.ReadValue()
		}
		if err != nil {
			return p
		}
		end := int(d.InputOffset())
		start := end - max(len(raw), 1)
		ptr := string(d.StackPointer())
		switch {
		case next == '}' || next == ']':
			p.spans[ptr] = [2]int{stack[len(stack)-1].start, end}
			stack = stack[:len(stack)-1]
		case in == '{' && n%2 == 0: // a key
			keys := stack[len(stack)-1].keys
			key := jsontext.Pointer(ptr).LastToken()
			if first, dup := keys[key]; dup {
				line, col := lineColumn(data, first)
				p.duplicates = append(p.duplicates, placed{Problem{
					Pointer: ptr,
					Message: fmt.Sprintf("duplicate key %q (first at line %d, column %d); a key may appear once in an object, so remove one of them", key, line, col),
				}, start})
			} else {
				keys[key] = start
				p.at[ptr] = start
			}
		default: // a value: a member's (placed at its key), an element or the document
			if in != '{' {
				p.at[ptr] = start
			}
			if next == '{' || next == '[' {
				stack = append(stack, open{start: start, keys: map[string]int{}})
			} else {
				p.spans[ptr] = [2]int{start, end}
			}
		}
	}
}

// offset returns where ptr, or its nearest ancestor present in the file,
// appears.
func (p *positions) offset(ptr string) int {
	for {
		if off, ok := p.at[ptr]; ok {
			return off
		}
		if ptr == "" {
			return 0
		}
		ptr = parentPointer(ptr)
	}
}

// locate fills in Line and Column and sorts problems into file order; at one
// place, by pointer, then message. Identical problems are reported once.
// Problems in at are already placed.
func (p *positions) locate(problems []Problem, at ...placed) []Problem {
	ps := slices.Clone(at)
	for _, pr := range problems {
		ps = append(ps, placed{pr, p.offset(pr.Pointer)})
	}
	for i := range ps {
		ps[i].Line, ps[i].Column = lineColumn(p.data, ps[i].off)
	}
	slices.SortStableFunc(ps, func(a, b placed) int {
		return cmp.Or(cmp.Compare(a.off, b.off), comparePointers(a.Pointer, b.Pointer), cmp.Compare(a.Message, b.Message))
	})
	out := make([]Problem, 0, len(ps))
	for i, pr := range ps {
		if i > 0 && pr.Problem == ps[i-1].Problem {
			continue
		}
		out = append(out, pr.Problem)
	}
	return out
}

// comparePointers orders pointers token by token, numeric tokens as numbers,
// so /steps/2 sorts before /steps/10.
func comparePointers(a, b string) int {
	at, bt := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(at) && i < len(bt); i++ {
		if c := compareTokens(at[i], bt[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(at), len(bt))
}

func compareTokens(a, b string) int {
	an, aerr := strconv.Atoi(a)
	bn, berr := strconv.Atoi(b)
	if aerr == nil && berr == nil {
		return cmp.Compare(an, bn)
	}
	return cmp.Compare(a, b)
}
