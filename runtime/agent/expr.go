package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Scope is what expressions resolve against while a run executes. Values
// are JSON-decoded Go values (see the package comment on numbers).
type Scope struct {
	// Input is the run input.
	Input any
	// Outputs holds the output of every completed step, by step id. A step
	// whose handler returned nothing has a nil output (present in the map).
	Outputs map[string]any
	// RunID and EndUserID are the run's identity.
	RunID, EndUserID string
}

// The expression roots.
const (
	rootInput = "input"
	rootSteps = "steps"
	rootRun   = "run"
)

// The fields of $run.
var runFields = []string{"id", "endUserId"}

// Expr is one parsed expression: $input, $input.a.b, $steps.<id>.output,
// $steps.<id>.output.items[0].id, $run.id or $run.endUserId. Path segments
// are ".name" or "[index]"; ".0" also indexes an array. Property names
// cannot contain ".", "[", "]" or white space.
//
// An Expr is immutable and safe for concurrent use.
type Expr struct {
	text  string
	root  string    // rootInput, rootSteps or rootRun
	step  string    // for $steps: the step id
	field string    // for $run: "id" or "endUserId"
	base  int       // length of the text before the path ($steps.x.output)
	path  []segment // after $input or $steps.<id>.output
}

type segment struct {
	key   string
	index bool // written [n]
	end   int  // offset in text just past this segment
}

// ParseExpr parses an expression. The error says what is wrong in words a
// config author understands.
func ParseExpr(s string) (*Expr, error) {
	if !strings.HasPrefix(s, "$") {
		return nil, fmt.Errorf("%q is not an expression: expressions start with \"$\"", s)
	}
	e := &Expr{text: s}
	i := 1
	for i < len(s) && isRootByte(s[i]) {
		i++
	}
	e.root = s[1:i]
	switch e.root {
	case rootInput:
		e.base = i
	case rootSteps:
		key, next, ok := nextKey(s, i)
		if !ok {
			return nil, fmt.Errorf("%s: name a step, as in $steps.<id>.output", s)
		}
		e.step = key
		out, next2, ok := nextKey(s, next)
		if !ok {
			if next < len(s) {
				return nil, fmt.Errorf("%s: expected \".output\" after %s", s, s[:next])
			}
			return nil, fmt.Errorf("%s: add \".output\" to use the step's result, as in %s.output", s, s)
		}
		if out != "output" {
			return nil, fmt.Errorf("%s: a step has only .output, not .%s", s, out)
		}
		i, e.base = next2, next2
	case rootRun:
		f, next, ok := nextKey(s, i)
		if !ok || !slices.Contains(runFields, f) {
			what := "name a field"
			if ok {
				what = fmt.Sprintf("unknown field %q", f)
			}
			return nil, fmt.Errorf("%s: %s; $run has $run.id and $run.endUserId", s, what)
		}
		if next < len(s) {
			return nil, fmt.Errorf("%s: $run.%s is a string; it has no properties or items", s, f)
		}
		e.field = f
		return e, nil
	default:
		return nil, unknownRoot(s, e.root)
	}
	for i < len(s) {
		switch s[i] {
		case '.':
			key, next, ok := nextKey(s, i)
			if !ok {
				return nil, fmt.Errorf("%s: expected a property name after %q at position %d", s, ".", utf8.RuneCountInString(s[:i])+1)
			}
			e.path = append(e.path, segment{key: key, end: next})
			i = next
		case '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("%s: %q is not closed by %q", s, "[", "]")
			}
			num := s[i+1 : i+j]
			if n, err := strconv.Atoi(num); err != nil || n < 0 || num != strconv.Itoa(n) {
				return nil, fmt.Errorf("%s: [%s] is not an array index; use a number such as [0]", s, num)
			}
			e.path = append(e.path, segment{key: num, index: true, end: i + j + 1})
			i += j + 1
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			return nil, fmt.Errorf("%s: unexpected %q after %s; an expression cannot contain spaces or other text (for text that starts with \"$\", write \"$$\")", s, string(r), s[:i])
		}
	}
	return e, nil
}

func unknownRoot(s, root string) error {
	hint := ""
	if m, ok := didYouMean(root, []string{rootInput, rootSteps, rootRun}); ok && root != "" {
		hint = fmt.Sprintf(" (did you mean $%s?)", m)
	}
	return fmt.Errorf("%q is not an expression%s: expressions are $input, $steps.<id>.output, $run.id and $run.endUserId; for text that starts with \"$\", write \"$$\" (\"$$5\" is the text \"$5\")", s, hint)
}

func isRootByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// nextKey reads ".name" at i and returns the name and the offset after it.
func nextKey(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '.' {
		return "", i, false
	}
	j := i + 1
	for j < len(s) {
		r, size := utf8.DecodeRuneInString(s[j:])
		if r == '.' || r == '[' || r == ']' || unicode.IsSpace(r) {
			break
		}
		j += size
	}
	if j == i+1 {
		return "", i, false
	}
	return s[i+1 : j], j, true
}

// String returns the expression as written.
func (e *Expr) String() string { return e.text }

// Step returns the id of the step whose output the expression reads, or ""
// if it reads no step output.
func (e *Expr) Step() string { return e.step }

// Resolve evaluates the expression. The value is shared with sc, not
// copied. A path that leads nowhere (a missing property, an index out of
// range, a property of a string) is a *ResolveError naming the part that
// failed: `$steps.orders.output.items: no property "items"`. Resolve never
// turns a missing value into null; an explicit null is returned as nil.
func (e *Expr) Resolve(sc Scope) (any, error) {
	var cur any
	switch e.root {
	case rootRun:
		if e.field == "id" {
			return sc.RunID, nil
		}
		return sc.EndUserID, nil
	case rootInput:
		cur = sc.Input
	case rootSteps:
		out, ok := sc.Outputs[e.step]
		if !ok {
			return nil, e.fail(e.base, fmt.Sprintf("step %q has no output yet", e.step))
		}
		cur = out
	}
	for _, seg := range e.path {
		next, msg := walk(cur, seg)
		if msg != "" {
			return nil, e.fail(seg.end, msg)
		}
		cur = next
	}
	return cur, nil
}

func (e *Expr) fail(end int, msg string) *ResolveError {
	return &ResolveError{Expr: e.text, At: e.text[:end], Message: msg}
}

// walk takes one step along a path; msg says why it cannot.
func walk(cur any, seg segment) (any, string) {
	switch v := cur.(type) {
	case map[string]any:
		next, ok := v[seg.key]
		if !ok {
			return nil, fmt.Sprintf("no property %q", seg.key)
		}
		return next, ""
	case []any:
		n, err := strconv.Atoi(seg.key)
		if err != nil || n < 0 {
			return nil, fmt.Sprintf("no property %q (the value is an array; use an index such as [0])", seg.key)
		}
		if n >= len(v) {
			return nil, fmt.Sprintf("no item at index %d (the array has %d %s)", n, len(v), plural(len(v), "item", "items"))
		}
		return v[n], ""
	}
	what := fmt.Sprintf("no property %q", seg.key)
	if seg.index {
		what = fmt.Sprintf("no item at index %s", seg.key)
	}
	return nil, fmt.Sprintf("%s (the value is %s)", what, describeValue(cur))
}

// describeValue names the JSON type of a value: "a string", "null".
func describeValue(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("a Go %T", v)
}

// ResolveError is an expression that could not be resolved at run time.
type ResolveError struct {
	// Step is the id of the step whose input held the expression (set by
	// Step.ResolveInput).
	Step string
	// Pointer locates the expression in the step's input: "" is the whole
	// input, "/item" its "item" property (set by Step.ResolveInput).
	Pointer string
	// Expr is the expression as written: "$steps.orders.output.items[0].id".
	Expr string
	// At is the part of Expr that could not be resolved:
	// "$steps.orders.output.items".
	At string
	// Message says why: `no property "items"`.
	Message string
}

// Error reads `$steps.orders.output.items: no property "items"`.
func (e *ResolveError) Error() string { return e.At + ": " + e.Message }

// Code is the stable machine-readable code the API and CLI show.
func (e *ResolveError) Code() string { return "unresolved-expression" }

// Template is a string with {{ expression }} parts, e.g.
// "Order {{ $input.orderId }} for {{ $run.endUserId }}". A part resolves to
// its value's text: a string as is, anything else as compact JSON (null is
// "null"). Write \{{ (in JSON: "\\{{") for a literal "{{".
//
// A Template is immutable and safe for concurrent use.
type Template struct {
	text  string
	parts []tpart
}

type tpart struct {
	lit  string
	expr *Expr // nil for a literal part
}

// ParseTemplate parses a template. Every "{{" must hold one expression and
// be closed by "}}".
func ParseTemplate(s string) (*Template, error) {
	t := &Template{text: s}
	var lit strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], `\{{`):
			lit.WriteString("{{")
			i += 3
		case strings.HasPrefix(s[i:], "{{"):
			j := strings.Index(s[i+2:], "}}")
			pos := utf8.RuneCountInString(s[:i]) + 1
			if j < 0 {
				return nil, fmt.Errorf("%q at position %d is not closed by %q (write \\{{ for a literal %q)", "{{", pos, "}}", "{{")
			}
			inner := strings.TrimSpace(s[i+2 : i+2+j])
			if inner == "" {
				return nil, fmt.Errorf("%q at position %d holds no expression", "{{ }}", pos)
			}
			e, err := ParseExpr(inner)
			if err != nil {
				return nil, err
			}
			if lit.Len() > 0 {
				t.parts = append(t.parts, tpart{lit: lit.String()})
				lit.Reset()
			}
			t.parts = append(t.parts, tpart{expr: e})
			i += 2 + j + 2
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, tpart{lit: lit.String()})
	}
	return t, nil
}

// String returns the template as written.
func (t *Template) String() string { return t.text }

// Exprs returns the template's expressions in order.
func (t *Template) Exprs() []*Expr {
	var out []*Expr
	for _, p := range t.parts {
		if p.expr != nil {
			out = append(out, p.expr)
		}
	}
	return out
}

// Resolve renders the template. An expression that cannot be resolved is a
// *ResolveError, as for Expr.Resolve.
func (t *Template) Resolve(sc Scope) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.lit)
			continue
		}
		v, err := p.expr.Resolve(sc)
		if err != nil {
			return "", err
		}
		if s, ok := v.(string); ok {
			b.WriteString(s)
			continue
		}
		j, err := json.Marshal(v)
		if err != nil {
			return "", &ResolveError{Expr: p.expr.text, At: p.expr.text, Message: "cannot be written as text: " + err.Error()}
		}
		b.Write(j)
	}
	return b.String(), nil
}

// node is a compiled step input: literal JSON with expressions and
// templates in it.
type node interface {
	resolve(sc Scope) (any, error)
}

type litNode struct{ v any }
type exprNode struct {
	ptr string
	e   *Expr
}
type tmplNode struct {
	ptr string
	t   *Template
}
type objNode struct {
	keys  []string
	nodes []node
}
type arrNode struct{ items []node }

func (n litNode) resolve(Scope) (any, error) { return copyValue(n.v), nil }

func (n exprNode) resolve(sc Scope) (any, error) {
	v, err := n.e.Resolve(sc)
	if err != nil {
		err.(*ResolveError).Pointer = n.ptr
		return nil, err
	}
	return copyValue(v), nil
}

func (n tmplNode) resolve(sc Scope) (any, error) {
	s, err := n.t.Resolve(sc)
	if err != nil {
		err.(*ResolveError).Pointer = n.ptr
		return nil, err
	}
	return s, nil
}

func (n objNode) resolve(sc Scope) (any, error) {
	m := make(map[string]any, len(n.keys))
	for i, k := range n.keys {
		v, err := n.nodes[i].resolve(sc)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

func (n arrNode) resolve(sc Scope) (any, error) {
	a := make([]any, len(n.items))
	for i, item := range n.items {
		v, err := item.resolve(sc)
		if err != nil {
			return nil, err
		}
		a[i] = v
	}
	return a, nil
}

// compileInput turns a step's raw input into a node. ptr is the pointer of
// v inside the step input ("" for the input itself); report receives each
// bad string with its pointer. Subtrees without expressions become one
// literal.
func compileInput(v any, ptr string, exprs func(ptr string, e []*Expr) bool, report func(ptr, msg string)) node {
	switch v := v.(type) {
	case string:
		s, escaped := strings.CutPrefix(v, "$$")
		if escaped {
			s = "$" + s
		}
		switch {
		case !escaped && strings.HasPrefix(s, "$"):
			e, err := ParseExpr(s)
			if err != nil {
				report(ptr, err.Error())
				return litNode{v}
			}
			if !exprs(ptr, []*Expr{e}) {
				return litNode{v}
			}
			return exprNode{ptr: ptr, e: e}
		case strings.Contains(s, "{{"):
			t, err := ParseTemplate(s)
			if err != nil {
				report(ptr, err.Error())
				return litNode{v}
			}
			if !exprs(ptr, t.Exprs()) {
				return litNode{v}
			}
			if len(t.parts) == 1 && t.parts[0].expr == nil {
				return litNode{t.parts[0].lit}
			}
			return tmplNode{ptr: ptr, t: t}
		}
		return litNode{s}
	case map[string]any:
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range v {
				if !yield(k) {
					return
				}
			}
		})
		n := objNode{keys: keys, nodes: make([]node, len(keys))}
		allLit := true
		for i, k := range keys {
			n.nodes[i] = compileInput(v[k], child(ptr, k), exprs, report)
			_, lit := n.nodes[i].(litNode)
			allLit = allLit && lit
		}
		if allLit {
			return litNode{collectLit(n)}
		}
		return n
	case []any:
		n := arrNode{items: make([]node, len(v))}
		allLit := true
		for i, item := range v {
			n.items[i] = compileInput(item, child(ptr, strconv.Itoa(i)), exprs, report)
			_, lit := n.items[i].(litNode)
			allLit = allLit && lit
		}
		if allLit {
			return litNode{collectLit(n)}
		}
		return n
	}
	return litNode{v}
}

// collectLit builds the value of a node whose children are all literals
// (with "$$" escapes already applied).
func collectLit(n node) any {
	v, _ := n.resolve(Scope{})
	return v
}

// copyValue deep-copies JSON objects and arrays, so a resolved input never
// shares memory with the config or the scope.
func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = copyValue(x)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, x := range v {
			a[i] = copyValue(x)
		}
		return a
	}
	return v
}
