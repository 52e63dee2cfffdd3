package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"testing"
	"unicode/utf8"

	"stead/strictjson"
)

// FuzzCheck holds the decoder to a reference built on encoding/json: a
// document is accepted exactly when it is valid JSON, valid UTF-8, escapes
// no half surrogate pair, repeats no name in an object and nests at most
// MaxDepth deep. Accepted documents decode, re-encode and decode again to
// the same value. Nothing panics.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `"x"`, `12345678901234567890`, `{"a":[1,{"b":null}],"c":"é"}`,
		`{"endUserId":"a","ENDUSERID":"mallory"}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
		"{\"endUserId\":\"eu\xff\"}", `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `[[[[[[[[]]]]]]]]`,
		`{"a":1} {}`, `{"a":1,}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := strictjson.Check(data)
		want := reference(data)
		if (err == nil) != want {
			t.Fatalf("Check(%q) = %v; the reference says accepted=%v", data, err, want)
		}
		if err != nil {
			var e *strictjson.Error
			if !errors.As(err, &e) || e.Message == "" {
				t.Fatalf("Check(%q) = %#v, not an *Error with a message", data, err)
			}
			return
		}
		v, err := strictjson.Value(data)
		if err != nil {
			t.Fatalf("Check accepted %q, Value refused it: %v", data, err)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("re-encode %q: %v", data, err)
		}
		w, err := strictjson.Value(again)
		if err != nil || !reflect.DeepEqual(v, w) {
			t.Fatalf("%q re-encoded as %q decodes to %#v (%v), not %#v", data, again, w, err, v)
		}
	})
}

// reference says whether data should be accepted, using encoding/json for
// the grammar and checking the rest by hand.
func reference(data []byte) bool {
	if !utf8.Valid(data) || !json.Valid(data) || halfSurrogate(data) {
		return false
	}
	type frame struct {
		object  bool
		names   map[string]bool
		wantKey bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			name := tok.(string)
			if top.names[name] {
				return false
			}
			top.names[name] = true
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack)+1 > strictjson.MaxDepth {
				return false
			}
			stack = append(stack, &frame{object: tok == json.Delim('{'), names: map[string]bool{}, wantKey: true})
			continue
		case json.Delim(']'), json.Delim('}'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
	}
}

// halfSurrogate reports whether valid JSON text escapes half a surrogate
// pair (encoding/json turns those into U+FFFD).
func halfSurrogate(data []byte) bool {
	hex := func(i int) (rune, bool) {
		if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		r, ok := hex(i)
		if !ok {
			i++ // a two-byte escape such as \\ or \"
			continue
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := hex(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
		i += 5
	}
	return false
}
