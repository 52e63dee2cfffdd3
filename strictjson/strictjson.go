// Package strictjson is the one JSON decoder for everything Stead reads from
// outside: API request bodies, approval edits and broker values, stead.json,
// and the Lambda events of the runner, the sweeper and API Gateway.
//
// Go's encoding/json matches field names case-insensitively, keeps the last
// of duplicate names and turns invalid UTF-8 into U+FFFD, so two parsers (a
// proxy in front of Stead and Stead itself) can read one body two ways. This
// package reads JSON one way, with json/v2 semantics
// (github.com/go-json-experiment/json):
//
//   - names match exactly (a case variant is just an unknown name);
//   - an object repeating a name is refused, also inside values held raw
//     (jsontext.Value) and in objects of user data;
//   - invalid UTF-8, and \u escapes of half a surrogate pair, are refused;
//   - nesting deeper than MaxDepth objects and arrays is refused;
//   - exactly one value, with nothing but whitespace after it.
//
// Unmarshal decodes Stead's own shapes and refuses unknown names;
// UnmarshalForeign decodes shapes Stead does not own (AWS events), whose
// senders add fields, and ignores unknown names. Check holds raw user data to
// the same rules, and Value decodes it into Go values.
// ValueAllowingDuplicates is for stead.json alone, which reports duplicate
// keys itself, beside its other problems.
//
// Every refusal is an *Error that says where (a JSON pointer, a dotted path)
// and what to do.
package strictjson

import (
	"bytes"
	"encoding/json" // only for json.Number, the number type Stead's values use
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// MaxDepth is how deeply objects and arrays may nest: {"a": [1]} is depth 2.
const MaxDepth = 64

// Reason is what kind of refusal an Error is.
type Reason string

// The reasons.
const (
	// Syntax: not JSON (a stray character, an unclosed string, the end
	// too early).
	Syntax Reason = "syntax"
	// InvalidUTF8: a string or name that is not valid UTF-8, or a \u
	// escape of half a surrogate pair.
	InvalidUTF8 Reason = "invalid-utf8"
	// Duplicate: an object repeats a name.
	Duplicate Reason = "duplicate-name"
	// Unknown: a name the shape does not have (Unmarshal only). Names are
	// case-sensitive, so a case variant of a known name is unknown.
	Unknown Reason = "unknown-name"
	// TooDeep: objects and arrays nest deeper than MaxDepth.
	TooDeep Reason = "too-deep"
	// WrongType: a value of the wrong JSON type for its field.
	WrongType Reason = "wrong-type"
	// Trailing: data after the value.
	Trailing Reason = "trailing-data"
)

// Error is JSON this package refused.
type Error struct {
	Reason Reason
	// Pointer is where, as a JSON pointer (RFC 6901): "/input/items/0" is
	// the first item of the input; "" is the whole document. For Duplicate
	// and Unknown it names the member.
	Pointer string
	// Offset is the byte offset in the input at or just before the problem.
	Offset int64
	// Message says what is wrong and what to do, without the place:
	// "appears more than once; send each name once".
	Message string

	path string
}

// Error reads "path: message", or "the document <message>" for the whole
// document.
func (e *Error) Error() string {
	if p := e.Path(); p != "" {
		return p + ": " + e.Message
	}
	return "the document " + e.Message
}

// Path is the place as a field path: "input.items[0]", `meta["a b"]`;
// "" is the whole document. Object names are joined with dots (names that
// are not identifiers are written ["name"]), array indices are written [n].
// A path longer than 200 bytes is cut, ending in "…".
func (e *Error) Path() string {
	if e.path != "" || e.Pointer == "" {
		return cut(e.path)
	}
	// No kinds known (a semantic error of Unmarshal): Stead's own shapes
	// have no numeric names, so a number is an index.
	var kinds []jsontext.Kind
	for tok := range jsontext.Pointer(e.Pointer).Tokens() {
		k := jsontext.Kind('{')
		if _, err := strconv.ParseUint(tok, 10, 64); err == nil {
			k = '['
		}
		kinds = append(kinds, k)
	}
	return cut(fieldPath(jsontext.Pointer(e.Pointer), kinds))
}

func cut(path string) string {
	const n = 200
	if len(path) <= n {
		return path
	}
	i := n
	for i > 0 && !utf8.RuneStart(path[i]) {
		i--
	}
	return path[:i] + "…"
}

// Unmarshal decodes data, one of Stead's own shapes, into v (a pointer):
// the rules in the package comment, and every name must be a field of v.
func Unmarshal(data []byte, v any) error {
	return unmarshal(data, v, true)
}

// UnmarshalForeign decodes data, a shape Stead does not own (an API Gateway
// or EventBridge event), into v (a pointer): the rules in the package
// comment, but names v does not have are ignored.
func UnmarshalForeign(data []byte, v any) error {
	return unmarshal(data, v, false)
}

func unmarshal(data []byte, v any, rejectUnknown bool) error {
	if _, err := decode(data, false); err != nil {
		return err
	}
	err := jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(rejectUnknown))
	if err == nil {
		return nil
	}
	return translate(err, nil)
}

// Check reports whether data is one JSON value that keeps the rules in the
// package comment; any names are allowed. It is for user data held as raw
// JSON (a run's input, an approval edit, a broker value).
func Check(data []byte) error {
	_, err := decode(data, false)
	return err
}

// Value decodes one JSON value that keeps the rules: objects as
// map[string]any, arrays as []any, numbers as json.Number (exact, no
// float64 rounding of large ids), strings, booleans and nil.
func Value(data []byte) (any, error) {
	return decode(data, true)
}

// ValueAllowingDuplicates is Value for a caller that finds every repeated
// name itself, reports each one and refuses the document: stead.json lists
// a duplicate key beside all its other problems instead of alone. A
// repeated name keeps its last value; every other rule holds. Anything else
// uses Value.
func ValueAllowingDuplicates(data []byte) (any, error) {
	return decode(data, true, jsontext.AllowDuplicateNames(true))
}

// decode walks data token by token (jsontext refuses duplicate names and
// invalid UTF-8 as it reads, unless opts say otherwise), bounding the depth,
// and builds the value when build is set.
func decode(data []byte, build bool, opts ...jsontext.Options) (any, error) {
	if len(bytes.TrimLeft(data, " \t\r\n")) == 0 {
		return nil, &Error{Reason: Syntax, Message: "is empty; send a JSON value"}
	}
	d := &walker{data: data, dec: jsontext.NewDecoder(bytes.NewReader(data), opts...), build: build}
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	off := d.dec.InputOffset()
	if _, err := d.dec.ReadToken(); err != io.EOF {
		off += int64(len(data[off:]) - len(bytes.TrimLeft(data[off:], " \t\r\n")))
		return nil, &Error{Reason: Trailing, Offset: off, Message: fmt.Sprintf("has data after the JSON value (at byte %d); send exactly one value", off)}
	}
	return v, nil
}

type walker struct {
	data  []byte
	dec   *jsontext.Decoder
	build bool
}

func (w *walker) value() (any, error) {
	tok, err := w.dec.ReadToken()
	if err != nil {
		return nil, w.fail(err)
	}
	switch tok.Kind() {
	case '{', '[':
		if depth := w.dec.StackDepth(); depth > MaxDepth {
			ptr := w.dec.StackPointer().Parent()
			return nil, &Error{
				Reason: TooDeep, Pointer: string(ptr), Offset: w.dec.InputOffset() - 1,
				Message: fmt.Sprintf("nests objects and arrays deeper than %d levels; flatten the data", MaxDepth),
				path:    w.path(ptr),
			}
		}
		if tok.Kind() == '{' {
			return w.object()
		}
		return w.array()
	case '"':
		if w.build {
			return tok.String(), nil
		}
	case '0':
		if w.build {
			return json.Number(tok.String()), nil
		}
	case 't', 'f':
		return tok.Bool(), nil
	}
	return nil, nil
}

func (w *walker) object() (any, error) {
	var m map[string]any
	if w.build {
		m = map[string]any{}
	}
	for w.dec.PeekKind() != '}' {
		tok, err := w.dec.ReadToken() // a bad next token fails here
		if err != nil {
			return nil, w.fail(err)
		}
		var name string
		if w.build {
			name = tok.String() // before the next read voids tok
		}
		v, err := w.value()
		if err != nil {
			return nil, err
		}
		if w.build {
			m[name] = v
		}
	}
	if _, err := w.dec.ReadToken(); err != nil {
		return nil, w.fail(err)
	}
	if !w.build {
		return nil, nil
	}
	return m, nil
}

func (w *walker) array() (any, error) {
	var a []any
	if w.build {
		a = []any{}
	}
	for w.dec.PeekKind() != ']' {
		v, err := w.value()
		if err != nil {
			return nil, err
		}
		if w.build {
			a = append(a, v)
		}
	}
	if _, err := w.dec.ReadToken(); err != nil {
		return nil, w.fail(err)
	}
	if !w.build {
		return nil, nil
	}
	return a, nil
}

// path renders ptr with the kinds of the decoder's open objects and arrays.
func (w *walker) path(ptr jsontext.Pointer) string {
	var kinds []jsontext.Kind
	for i := 1; i <= w.dec.StackDepth(); i++ {
		k, _ := w.dec.StackIndex(i)
		kinds = append(kinds, k)
	}
	return fieldPath(ptr, kinds)
}

func (w *walker) fail(err error) error {
	return translate(err, w)
}

// translate turns a jsontext or json/v2 error into an *Error. w, when set,
// is the walker that met it (for the kinds along the path).
func translate(err error, w *walker) error {
	var se *jsontext.SyntacticError
	var me *jsonv2.SemanticError
	switch {
	case errors.As(err, &se):
		e := &Error{Pointer: string(se.JSONPointer), Offset: se.ByteOffset}
		if w != nil {
			e.path = w.path(se.JSONPointer)
		}
		switch msg := se.Err.Error(); {
		case se.Err == jsontext.ErrDuplicateName:
			e.Reason, e.Message = Duplicate, "appears more than once in its object; send each name once"
		case strings.Contains(msg, "invalid UTF-8"):
			e.Reason = InvalidUTF8
			e.Message = "is not valid UTF-8; send text as UTF-8"
			if w != nil && inName(w.dec) {
				e.Message = "has a member name that is not valid UTF-8; send text as UTF-8"
			}
		case strings.Contains(msg, "surrogate"):
			e.Reason = InvalidUTF8
			e.Message = `has a \u escape of half a surrogate pair, which is not text; escape characters outside the BMP as a pair ("\ud83d\ude00") or send them as UTF-8`
		case se.Err == io.ErrUnexpectedEOF:
			e.Reason, e.Pointer, e.path = Syntax, "", ""
			e.Message = "is not valid JSON: it ends too early (a bracket, brace or quote is not closed)"
		case w != nil && trailingComma(w.data, se.ByteOffset):
			e.Reason, e.Pointer, e.path = Syntax, "", ""
			e.Message = fmt.Sprintf("is not valid JSON: a comma before the closing bracket or brace (at byte %d); remove the trailing comma", se.ByteOffset)
		default:
			e.Reason, e.Pointer, e.path = Syntax, "", ""
			e.Message = fmt.Sprintf("is not valid JSON: %s (at byte %d)", msg, se.ByteOffset)
		}
		return e
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &Error{Reason: Syntax, Message: "is not valid JSON: it ends too early (a bracket, brace or quote is not closed)"}
	case errors.As(err, &me):
		e := &Error{Pointer: string(me.JSONPointer), Offset: me.ByteOffset}
		if errors.Is(me.Err, jsonv2.ErrUnknownName) {
			e.Reason, e.Message = Unknown, "is not a known field"
			if known := similarName(me.GoType, jsontext.Pointer(e.Pointer).LastToken()); known != "" {
				e.Message = fmt.Sprintf("is not a known field; names are case-sensitive: did you mean %q?", known)
			}
			return e
		}
		e.Reason = WrongType
		e.Message = fmt.Sprintf("must be %s, not %s", kindOf(me.GoType), jsonKind(me.JSONKind, me.JSONValue))
		return e
	}
	return &Error{Reason: Syntax, Message: "is not valid JSON: " + err.Error()}
}

// trailingComma reports whether data has a comma at off after a value and
// before '}' or ']' (jsontext calls it an invalid ',').
func trailingComma(data []byte, off int64) bool {
	if off < 0 || off >= int64(len(data)) || data[off] != ',' {
		return false
	}
	before := bytes.TrimRight(data[:off], " \t\r\n")
	rest := bytes.TrimLeft(data[off+1:], " \t\r\n")
	return len(before) > 0 && !bytes.ContainsAny(before[len(before)-1:], ":,[{") &&
		len(rest) > 0 && (rest[0] == '}' || rest[0] == ']')
}

// inName reports whether the decoder stopped where an object member name
// was due.
func inName(d *jsontext.Decoder) bool {
	k, n := d.StackIndex(d.StackDepth())
	return k == '{' && n%2 == 0
}

// similarName finds a field of struct type t whose JSON name matches name
// but for case.
func similarName(t reflect.Type, name string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if n == "" {
			n = f.Name
		}
		if n != "-" && n != name && strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}

// kindOf names what a Go type takes in JSON.
func kindOf(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

// jsonKind names the JSON value that was sent.
func jsonKind(k jsontext.Kind, v jsontext.Value) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		if len(v) > 0 && len(v) <= 40 {
			return "the number " + string(v)
		}
		return "a number"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "that value"
}

// fieldPath writes pointer tokens as a path: names joined with dots,
// indices in brackets. kinds[i] is the kind of the value token i is in;
// missing kinds count as objects.
func fieldPath(ptr jsontext.Pointer, kinds []jsontext.Kind) string {
	var b strings.Builder
	i := 0
	for tok := range ptr.Tokens() {
		k := jsontext.Kind('{')
		if i < len(kinds) {
			k = kinds[i]
		}
		i++
		switch {
		case k == '[':
			b.WriteString("[" + tok + "]")
		case IsPlainName(tok) && b.Len() == 0:
			b.WriteString(tok)
		case IsPlainName(tok):
			b.WriteString("." + tok)
		default:
			b.WriteString("[" + strconv.Quote(tok) + "]")
		}
	}
	return b.String()
}

// IsPlainName reports whether a member name can be written after a dot in
// a path (items.id rather than items["a b"]): letters, digits, "_" and "$",
// not starting with a digit.
func IsPlainName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
