package agent

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"stead/runtime/typo"
)

// printer renders the library's own messages for the few error kinds that
// have no wording here (content assertions, which Stead leaves off).
var printer = message.NewPrinter(language.English)

//go:embed stead.schema.json
var configSchemaJSON []byte

// ConfigSchema returns the JSON Schema (Draft 2020-12) that stead.json must
// satisfy before the checks it cannot express (names, durations,
// expressions, references) run. Editors can use it for completion.
func ConfigSchema() []byte { return bytes.Clone(configSchemaJSON) }

const configSchemaURL = "stead:///stead.schema.json"

// namePattern is the pattern of agent names and step ids in the schema; its
// errors get a sentence instead of the regular expression.
const namePattern = "^[A-Za-z][A-Za-z0-9_-]{0,63}$"

// logoPattern and accentPattern are branding.logoUrl's and
// branding.accentColor's patterns in the schema.
const (
	logoPattern   = "^(https://[^\\s]+|data:image/(png|jpeg|gif|webp|svg\\+xml)(;base64)?,\\S+)$"
	accentPattern = "^#[0-9a-fA-F]{6}$"
)

var knownPatterns = map[string]string{
	namePattern:   `must start with a letter and use only letters, digits, "_" and "-" (at most 64 characters)`,
	logoPattern:   `must be an https:// URL or a data:image/… URL (png, jpeg, gif, webp or svg+xml)`,
	accentPattern: `must be a colour written #rrggbb, like "#1d4ed8"`,
}

type configSchemaT struct {
	schema *jsonschema.Schema
	doc    any // the decoded schema, to list the keys allowed in an object
}

var configSchema = sync.OnceValue(func() configSchemaT {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(configSchemaJSON))
	if err != nil {
		panic(fmt.Sprintf("agent: embedded stead.schema.json: %v", err))
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(configSchemaURL, doc); err != nil {
		panic(fmt.Sprintf("agent: embedded stead.schema.json: %v", err))
	}
	sch, err := c.Compile(configSchemaURL)
	if err != nil {
		panic(fmt.Sprintf("agent: embedded stead.schema.json: %v", err))
	}
	return configSchemaT{schema: sch, doc: doc}
})

// allowedKeys lists the keys the config schema allows in the object whose
// schema is at schemaURL (a location in the embedded schema).
func (cs configSchemaT) allowedKeys(schemaURL string) []string {
	_, frag, _ := strings.Cut(schemaURL, "#")
	v := cs.doc
	for _, tok := range strings.Split(frag, "/")[1:] {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[unescapeToken(tok)]
	}
	m, _ := v.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		if k != "$schema" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// noLoader refuses to load anything: schemas in stead.json may only refer
// to themselves, and a deployment must not reach the network or the disk
// when it compiles them. (The standard metaschemas are built into the
// library and never go through a loader.)
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s is not allowed", url)
}

// userSchemaURL is where an embedded schema lives while it compiles. It is
// hierarchical, so a relative $ref such as "other.json" resolves to a URL of
// its own (which the loader then refuses) instead of to the schema itself.
const userSchemaURL = "stead:///schema.json"

// compileSchema compiles an embedded JSON Schema found at ptr. Each schema
// gets its own compiler, so one broken schema cannot affect another.
func compileSchema(ptr string, doc any) (*jsonschema.Schema, []Problem) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	c.AssertFormat()
	if err := c.AddResource(userSchemaURL, doc); err != nil {
		return nil, []Problem{{Pointer: ptr, Message: "not a valid JSON Schema: " + cleanSchemaError(err)}}
	}
	sch, err := c.Compile(userSchemaURL)
	if err != nil {
		return nil, compileProblems(ptr, doc, err)
	}
	return sch, nil
}

func compileProblems(ptr string, doc any, err error) []Problem {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			var out []Problem
			for _, is := range (translator{instance: doc}).issues(ve) {
				out = append(out, Problem{
					Pointer: ptr + jsonPointer(is.loc...),
					Message: "not a valid JSON Schema: " + is.msg,
				})
			}
			if len(out) > 0 {
				return out
			}
		}
	}
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) {
		return []Problem{{Pointer: ptr, Message: fmt.Sprintf(
			`refers to %q, which Stead does not load: a schema here may only $ref its own parts, like "#/$defs/item"`,
			strings.TrimPrefix(le.URL, "stead:///"))}}
	}
	var pe *jsonschema.JSONPointerNotFoundError
	if errors.As(err, &pe) {
		_, frag, _ := strings.Cut(pe.URL, "#")
		return []Problem{{Pointer: ptr, Message: fmt.Sprintf(`$ref "#%s" points to nothing in this schema`, frag)}}
	}
	return []Problem{{Pointer: ptr, Message: "not a valid JSON Schema: " + cleanSchemaError(err)}}
}

func cleanSchemaError(err error) string {
	s := strings.ReplaceAll(err.Error(), userSchemaURL, "the schema")
	return strings.ReplaceAll(s, "stead:///", "")
}

// issue is one translated validation failure: where (instance location
// tokens) and what, in words.
type issue struct {
	loc []string
	msg string
	// types is set for a type mismatch: the wanted types, so the branches
	// of an anyOf / oneOf can be merged into "must be a string or a number".
	types []string
}

// translator turns the error tree of jsonschema/v6 into plain issues.
type translator struct {
	// unknownKey, when set, words the report of a key that
	// additionalProperties: false rejects; the issue is placed at the key.
	// Unset, the issue is placed at the object: `must not have property "x"`.
	unknownKey func(schemaURL, key string) string
	// instance is the value validated, used to repair the location of
	// propertyNames errors (see propertyLoc).
	instance any
}

func (tr translator) issues(e *jsonschema.ValidationError) []issue {
	loc := e.InstanceLocation
	at := func(msg string) []issue { return []issue{{loc: loc, msg: msg}} }
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		var out []issue
		for _, c := range e.Causes {
			out = append(out, tr.issues(c)...)
		}
		return out
	case *kind.AnyOf:
		return tr.alternatives(e)
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			return tr.alternatives(e)
		}
		return at(fmt.Sprintf("must match exactly one allowed form, but matches forms %d and %d", k.Subschemas[0], k.Subschemas[1]))
	case *kind.Type:
		return []issue{{loc: loc, msg: "must be " + describeTypes(k.Want), types: k.Want}}
	case *kind.Required:
		out := make([]issue, len(k.Missing))
		for i, m := range k.Missing {
			out[i] = issue{loc: appendLoc(loc, m), msg: "is required"}
		}
		return out
	case *kind.Dependency:
		return dependent(loc, k.Prop, k.Missing)
	case *kind.DependentRequired:
		return dependent(loc, k.Prop, k.Missing)
	case *kind.AdditionalProperties:
		props := slices.Sorted(slices.Values(k.Properties))
		out := make([]issue, len(props))
		for i, p := range props {
			if tr.unknownKey != nil {
				out[i] = issue{loc: appendLoc(loc, p), msg: tr.unknownKey(e.SchemaURL, p)}
			} else {
				out[i] = issue{loc: loc, msg: fmt.Sprintf("must not have property %q", p)}
			}
		}
		return out
	case *kind.PropertyNames:
		var why []string
		for _, c := range e.Causes {
			for _, is := range tr.issues(c) {
				why = append(why, is.msg)
			}
		}
		msg := fmt.Sprintf("invalid name %q", k.Property)
		if len(why) > 0 {
			msg += ": " + strings.Join(why, "; ")
		}
		return []issue{{loc: appendLoc(propertyLoc(tr.instance, loc, k.Property), k.Property), msg: msg}}
	case *kind.Enum:
		if len(k.Want) == 1 {
			return at("must be " + display(k.Want[0]))
		}
		vals := make([]string, len(k.Want))
		for i, v := range k.Want {
			vals[i] = display(v)
		}
		return at("must be one of " + strings.Join(vals, ", "))
	case *kind.Const:
		return at("must be " + display(k.Want))
	case *kind.Minimum:
		return at("must be at least " + ratString(k.Want))
	case *kind.Maximum:
		return at("must be at most " + ratString(k.Want))
	case *kind.ExclusiveMinimum:
		return at("must be greater than " + ratString(k.Want))
	case *kind.ExclusiveMaximum:
		return at("must be less than " + ratString(k.Want))
	case *kind.MultipleOf:
		return at("must be a multiple of " + ratString(k.Want))
	case *kind.MinLength:
		if k.Want == 1 {
			return at("must not be empty")
		}
		return at(fmt.Sprintf("must be at least %d characters long", k.Want))
	case *kind.MaxLength:
		return at(fmt.Sprintf("must be at most %d characters long", k.Want))
	case *kind.Pattern:
		if msg, ok := knownPatterns[k.Want]; ok {
			return at(msg)
		}
		return at(fmt.Sprintf("must match the pattern /%s/", k.Want))
	case *kind.Format:
		if k.Err != nil {
			return at(fmt.Sprintf("must be a valid %s (%s)", k.Want, strings.ReplaceAll(k.Err.Error(), "'", `"`)))
		}
		return at("must be a valid " + k.Want)
	case *kind.MinItems:
		if k.Want == 1 {
			return at("must not be empty")
		}
		return at(fmt.Sprintf("must have at least %d items", k.Want))
	case *kind.MaxItems:
		return at(fmt.Sprintf("must have at most %d %s", k.Want, plural(k.Want, "item", "items")))
	case *kind.MinProperties:
		if k.Want == 1 {
			return at("must not be empty")
		}
		return at(fmt.Sprintf("must have at least %d properties", k.Want))
	case *kind.MaxProperties:
		return at(fmt.Sprintf("must have at most %d %s", k.Want, plural(k.Want, "property", "properties")))
	case *kind.AdditionalItems:
		return at(fmt.Sprintf("has %d more %s than allowed", k.Count, plural(k.Count, "item", "items")))
	case *kind.UniqueItems:
		return at(fmt.Sprintf("must not contain duplicates (items %d and %d are equal)", k.Duplicates[0], k.Duplicates[1]))
	case *kind.Contains:
		return at("must contain at least one matching item")
	case *kind.MinContains:
		return at(fmt.Sprintf("must contain at least %d matching items", k.Want))
	case *kind.MaxContains:
		return at(fmt.Sprintf("must contain at most %d matching items", k.Want))
	case *kind.FalseSchema:
		return at("is not allowed")
	case *kind.Not:
		return at(`is not allowed (it matches the "not" schema)`)
	case *kind.RefCycle:
		return at("cannot be checked: the schema's $ref loops back on itself")
	case *kind.InvalidJsonValue:
		return at(fmt.Sprintf("holds a Go value of type %T, which is not a JSON value", k.Value))
	default:
		return at(strings.ReplaceAll(e.ErrorKind.LocalizedString(printer), "'", `"`))
	}
}

// alternatives words a failed anyOf / oneOf. Branches that failed only
// because the value has another type are merged ("must be a string or an
// object"); if exactly one branch got further, its issues are the answer;
// otherwise the value matches none of several shapes.
func (tr translator) alternatives(e *jsonschema.ValidationError) []issue {
	var kept [][]issue
	var types []string
	for _, c := range e.Causes {
		is := tr.issues(c)
		if len(is) == 1 && is[0].types != nil && slices.Equal(is[0].loc, e.InstanceLocation) {
			types = append(types, is[0].types...)
			continue
		}
		kept = append(kept, is)
	}
	switch len(kept) {
	case 0:
		slices.Sort(types)
		types = slices.Compact(types)
		return []issue{{loc: e.InstanceLocation, msg: "must be " + describeTypes(types), types: types}}
	case 1:
		return kept[0]
	default:
		return []issue{{loc: e.InstanceLocation, msg: "does not match any of the allowed forms"}}
	}
}

// propertyLoc returns the location of the object holding the property a
// propertyNames error names. jsonschema/v6 (v6.0.3, validator.go) stores the
// validator's location slice in that error without copying it, so a later
// sibling can overwrite its tokens; the location is trusted only if the
// instance has the property there, and otherwise found by searching the
// instance at the same depth.
func propertyLoc(instance any, loc []string, prop string) []string {
	if has(valueAt(instance, loc), prop) {
		return loc
	}
	var found [][]string
	var search func(v any, path []string)
	search = func(v any, path []string) {
		if len(path) == len(loc) {
			if has(v, prop) {
				found = append(found, slices.Clone(path))
			}
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				search(x, append(path, k))
			}
		case []any:
			for i, x := range v {
				search(x, append(path, strconv.Itoa(i)))
			}
		}
	}
	search(instance, nil)
	if len(found) == 1 {
		return found[0]
	}
	return loc
}

func has(v any, prop string) bool {
	m, ok := v.(map[string]any)
	if ok {
		_, ok = m[prop]
	}
	return ok
}

// valueAt follows instance location tokens; nil if they lead nowhere.
func valueAt(v any, loc []string) any {
	for _, tok := range loc {
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(c) {
				return nil
			}
			v = c[n]
		default:
			return nil
		}
	}
	return v
}

func dependent(loc []string, prop string, missing []string) []issue {
	out := make([]issue, len(missing))
	for i, m := range missing {
		out[i] = issue{loc: appendLoc(loc, m), msg: fmt.Sprintf("is required when %q is present", prop)}
	}
	return out
}

func appendLoc(loc []string, tok string) []string {
	return append(slices.Clip(loc), tok)
}

// describeTypes words wanted types: "a string", "an integer or null" (null
// always last).
func describeTypes(types []string) string {
	types = slices.Clone(types)
	slices.SortStableFunc(types, func(a, b string) int {
		switch {
		case a == "null" && b != "null":
			return 1
		case b == "null" && a != "null":
			return -1
		}
		return 0
	})
	words := make([]string, len(types))
	for i, t := range types {
		switch t {
		case "object", "array", "integer":
			words[i] = "an " + t
		case "null":
			words[i] = "null"
		default:
			words[i] = "a " + t
		}
	}
	switch len(words) {
	case 0:
		return "of another type"
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// display renders a JSON value as JSON: "read", 20, true, {"a":1}.
func display(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// didYouMean is typo.DidYouMean: the candidate closest to s, if it is a
// likely typo.
func didYouMean(s string, candidates []string) (string, bool) { return typo.DidYouMean(s, candidates) }
