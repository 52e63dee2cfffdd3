// Package redact replaces secrets with "[REDACTED]": in plain text, and in
// JSON texts, which stay valid JSON. It is the one implementation every
// part of Stead that records something uses — a handler's output, logs and
// errors (jsvm, in the worker, and again in the sandbox's parent with the
// secrets the worker never saw), model errors (model clients), and what the
// engine writes to the store.
package redact

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unsafe"
)

// Marker replaces each secret.
const Marker = "[REDACTED]"

// Set is a set of secrets to redact. The zero value redacts nothing. A Set
// is not safe for concurrent use (it builds its list on first use).
type Set struct {
	given []string // as given
	list  []string // the non-empty ones, longest first
	built bool
}

// New returns the Set of secrets (empty ones are ignored).
func New(secrets ...string) Set { return Set{given: secrets} }

// String returns s with every secret in it, as is or as JSON escapes it,
// replaced.
func String(s string, secrets ...string) string {
	set := New(secrets...)
	return set.String(s)
}

// list returns the secrets, longest first so that a secret containing
// another is redacted whole. It is built on first use: most texts contain
// no secret, which found needs no list for.
func (r *Set) secretList() []string {
	if !r.built {
		r.built = true
		for _, s := range r.given {
			if s != "" && !slices.Contains(r.list, s) {
				r.list = append(r.list, s)
			}
		}
		slices.SortStableFunc(r.list, func(a, b string) int { return len(b) - len(a) })
	}
	return r.list
}

// found reports whether s contains a secret, as is or as JSON escapes it.
func (r *Set) found(s string) bool {
	for _, sec := range r.given {
		if sec != "" && (strings.Contains(s, sec) || (needsEscape(sec) && strings.Contains(s, jsonEscape(sec)))) {
			return true
		}
	}
	return false
}

// String replaces every secret in s, as is or as JSON escapes it (a text
// that quotes JSON carries a secret escaped).
func (r *Set) String(s string) string {
	if !r.found(s) {
		return s
	}
	for _, sec := range r.secretList() {
		s = strings.ReplaceAll(s, sec, Marker)
		if needsEscape(sec) {
			s = strings.ReplaceAll(s, jsonEscape(sec), Marker)
		}
	}
	return s
}

// JSON redacts secrets in the string literals (keys included) of a JSON
// text, keeping it valid JSON. A secret found outside any string (inside a
// number, say) makes the whole text "[REDACTED]".
func (r *Set) JSON(out []byte) []byte {
	if !r.found(unsafe.String(unsafe.SliceData(out), len(out))) {
		return out
	}
	var b bytes.Buffer
	b.Grow(len(out))
	for i := 0; i < len(out); {
		if out[i] != '"' {
			b.WriteByte(out[i])
			i++
			continue
		}
		j := i + 1
		for j < len(out) && out[j] != '"' {
			if out[j] == '\\' {
				j++
			}
			j++
		}
		j = min(j+1, len(out))
		lit := out[i:j]
		var s string
		if err := json.Unmarshal(lit, &s); err != nil {
			return []byte(`"` + Marker + `"`)
		}
		if red := r.String(s); red != s {
			b.WriteString(jsonQuote(red))
		} else {
			b.Write(lit)
		}
		i = j
	}
	res := b.Bytes()
	for _, sec := range r.secretList() {
		if bytes.Contains(res, []byte(sec)) {
			return []byte(`"` + Marker + `"`)
		}
	}
	return res
}

// jsonQuote encodes s as a JSON string the way JSON.stringify does (no
// HTML escaping).
func jsonQuote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// needsEscape reports whether JSON.stringify writes s differently from s.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return true
		}
	}
	return false
}

func jsonEscape(s string) string {
	q := jsonQuote(s)
	return q[1 : len(q)-1]
}
