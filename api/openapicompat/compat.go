// Package openapicompat finds the changes between two versions of Stead's
// OpenAPI document that break a client written against the older one:
//
//   - an operation removed, or a response status it documented;
//   - a response field removed, or its type changed to one the older
//     document did not allow (a client reading it would fail);
//   - a request field removed (a strict server refuses what clients send),
//     or its type narrowed (a value clients send is refused);
//   - a request field newly required, or a request body newly required.
//
// Each change is one line ("GET /v1/runs/{id} 200: response field
// error.stack removed"). The api package's TestOpenAPICompatible holds
// api/openapi.json against the last release's document and fails on any
// such line the CHANGELOG does not list for the coming release.
//
// It reads the subset of JSON Schema the document uses: $ref into
// components, type (a name or a list), properties, required, items, and
// oneOf, whose fields are those of every variant (a field's types those it
// has in any variant, required when every variant requires it).
package openapicompat

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

type doc struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas   map[string]json.RawMessage `json:"schemas"`
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"components"`
}

type operation struct {
	RequestBody *struct {
		Ref      string               `json:"$ref"`
		Required bool                 `json:"required"`
		Content  map[string]mediaType `json:"content"`
	} `json:"requestBody"`
	Responses map[string]json.RawMessage `json:"responses"`
}

type mediaType struct {
	Schema json.RawMessage `json:"schema"`
}

type response struct {
	Ref     string               `json:"$ref"`
	Content map[string]mediaType `json:"content"`
}

type schema struct {
	Ref        string                     `json:"$ref"`
	Type       json.RawMessage            `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
	Items      json.RawMessage            `json:"items"`
	OneOf      []json.RawMessage          `json:"oneOf"`
}

var methods = []string{"get", "put", "post", "delete", "patch", "head", "options"}

// Breaking lists the changes from older to newer that break a client of
// older, sorted.
func Breaking(older, newer []byte) ([]string, error) {
	var o, n doc
	if err := json.Unmarshal(older, &o); err != nil {
		return nil, fmt.Errorf("the older document: %w", err)
	}
	if err := json.Unmarshal(newer, &n); err != nil {
		return nil, fmt.Errorf("the newer document: %w", err)
	}
	var out []string
	for path, item := range o.Paths {
		for _, m := range methods {
			raw, ok := item[m]
			if !ok {
				continue
			}
			name := strings.ToUpper(m) + " " + path
			nraw, ok := n.Paths[path][m]
			if !ok {
				out = append(out, name+": operation removed")
				continue
			}
			var oo, no operation
			if err := json.Unmarshal(raw, &oo); err != nil {
				return nil, fmt.Errorf("%s in the older document: %w", name, err)
			}
			if err := json.Unmarshal(nraw, &no); err != nil {
				return nil, fmt.Errorf("%s in the newer document: %w", name, err)
			}
			out = append(out, compareOperation(name, &o, &n, oo, no)...)
		}
	}
	sort.Strings(out)
	return out, nil
}

func compareOperation(name string, o, n *doc, oo, no operation) []string {
	var out []string
	for status, raw := range oo.Responses {
		nraw, ok := no.Responses[status]
		if !ok {
			out = append(out, fmt.Sprintf("%s: response %s removed", name, status))
			continue
		}
		if !strings.HasPrefix(status, "2") {
			continue // error documents: their codes are one enum
		}
		os, ns := o.responseSchema(raw), n.responseSchema(nraw)
		if os == nil || ns == nil {
			continue
		}
		of, nf := o.fields(os, "", 0), n.fields(ns, "", 0)
		for _, path := range sortedKeys(of) {
			old := of[path]
			nw, ok := nf[path]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s %s: response field %s removed", name, status, path))
			case !subset(nw.types, old.types):
				out = append(out, fmt.Sprintf("%s %s: response field %s changed type from %s to %s", name, status, path, types(old.types), types(nw.types)))
			}
		}
	}
	os, ns := o.requestSchema(oo), n.requestSchema(no)
	if no.RequestBody != nil && no.RequestBody.Required && (oo.RequestBody == nil || !oo.RequestBody.Required) {
		out = append(out, name+": request body now required")
	}
	if ns == nil {
		if os != nil {
			out = append(out, name+": request body removed")
		}
		return out
	}
	of, nf := map[string]field{}, n.fields(ns, "", 0)
	if os != nil {
		of = o.fields(os, "", 0)
	}
	for _, path := range sortedKeys(of) {
		old := of[path]
		nw, ok := nf[path]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: request field %s removed", name, path))
		case !subset(old.types, nw.types):
			out = append(out, fmt.Sprintf("%s: request field %s narrowed from %s to %s", name, path, types(old.types), types(nw.types)))
		}
	}
	for _, path := range sortedKeys(nf) {
		if nf[path].required && !(of[path].required) {
			out = append(out, fmt.Sprintf("%s: request field %s now required", name, path))
		}
	}
	return out
}

// field is one property of a schema, by its dotted path ("error.stack",
// "approvals[].id").
type field struct {
	types    []string
	required bool // required where its parent is
}

// fields flattens a schema's properties; depth bounds recursive schemas.
func (d *doc) fields(raw json.RawMessage, prefix string, depth int) map[string]field {
	out := map[string]field{}
	s, ok := d.resolve(raw)
	if !ok || depth > 8 {
		return out
	}
	if len(s.OneOf) > 0 {
		return d.variants(s.OneOf, prefix, depth)
	}
	for name, p := range s.Properties {
		path := prefix + name
		ps, _ := d.resolve(p)
		out[path] = field{types: d.types(ps, depth), required: slices.Contains(s.Required, name)}
		for k, v := range d.fields(p, path+".", depth+1) {
			out[k] = v
		}
		if len(ps.Items) > 0 {
			for k, v := range d.fields(ps.Items, path+"[].", depth+1) {
				out[k] = v
			}
		}
	}
	if len(s.Items) > 0 && prefix == "" {
		for k, v := range d.fields(s.Items, "[].", depth+1) {
			out[k] = v
		}
	}
	return out
}

// types are the types s allows: its type, or for a oneOf every type a
// variant allows (nil, any, when one allows any).
func (d *doc) types(s schema, depth int) []string {
	if len(s.OneOf) == 0 || depth > 8 {
		return typeList(s.Type)
	}
	var out []string
	for _, v := range s.OneOf {
		vs, _ := d.resolve(v)
		ts := d.types(vs, depth+1)
		if len(ts) == 0 {
			return nil
		}
		for _, t := range ts {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// variants flattens a oneOf: each field of any variant, with the types it
// has in any of them, required only when every variant requires it.
func (d *doc) variants(oneOf []json.RawMessage, prefix string, depth int) map[string]field {
	out := map[string]field{}
	seen := map[string]int{}
	for _, v := range oneOf {
		for k, f := range d.fields(v, prefix, depth+1) {
			seen[k]++
			g, ok := out[k]
			if !ok {
				out[k] = f
				continue
			}
			if len(g.types) > 0 && len(f.types) > 0 {
				for _, t := range f.types {
					if !slices.Contains(g.types, t) {
						g.types = append(g.types, t)
					}
				}
			} else {
				g.types = nil // any
			}
			g.required = g.required && f.required
			out[k] = g
		}
	}
	for k, n := range seen {
		if n < len(oneOf) {
			f := out[k]
			f.required = false
			out[k] = f
		}
	}
	return out
}

func (d *doc) resolve(raw json.RawMessage) (schema, bool) {
	var s schema
	for range 16 {
		if err := json.Unmarshal(raw, &s); err != nil {
			return schema{}, false
		}
		name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/")
		if !ok {
			return s, s.Ref == ""
		}
		raw = d.Components.Schemas[name]
		s = schema{}
	}
	return schema{}, false
}

func (d *doc) responseSchema(raw json.RawMessage) json.RawMessage {
	var r response
	if json.Unmarshal(raw, &r) != nil {
		return nil
	}
	if name, ok := strings.CutPrefix(r.Ref, "#/components/responses/"); ok {
		if json.Unmarshal(d.Components.Responses[name], &r) != nil {
			return nil
		}
	}
	if mt, ok := r.Content["application/json"]; ok {
		return mt.Schema
	}
	return nil
}

func (d *doc) requestSchema(op operation) json.RawMessage {
	if op.RequestBody == nil {
		return nil
	}
	if mt, ok := op.RequestBody.Content["application/json"]; ok {
		return mt.Schema
	}
	return nil
}

// typeList reads "type": a name or a list; none means any.
func typeList(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "integer" {
			return []string{"integer"}
		}
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(raw, &many)
	return many
}

// subset: every type of a is allowed by b (no types: any; integer is a
// number).
func subset(a, b []string) bool {
	if len(b) == 0 {
		return true
	}
	if len(a) == 0 {
		return false
	}
	for _, t := range a {
		asNumber := t == "integer" && slices.Contains(b, "number")
		if !slices.Contains(b, t) && !asNumber {
			return false
		}
	}
	return true
}

func types(t []string) string {
	if len(t) == 0 {
		return "any"
	}
	return strings.Join(t, "|")
}

func sortedKeys(m map[string]field) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
