package strictjson_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"stead/strictjson"
)

type shape struct {
	EndUserID string          `json:"endUserId"`
	Input     json.RawMessage `json:"input"`
	TTL       *int64          `json:"ttlSeconds"`
	Tags      []string        `json:"tags"`
}

func TestUnmarshalRefusals(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return `{"input":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}` }
	tests := []struct {
		name, in string
		reason   strictjson.Reason
		pointer  string
		path     string
		contains string
	}{
		{"case variant", `{"endUserId":"a","ENDUSERID":"mallory"}`, strictjson.Unknown, "/ENDUSERID", "ENDUSERID", `did you mean "endUserId"?`},
		{"unknown", `{"endUserId":"a","priority":1}`, strictjson.Unknown, "/priority", "priority", "is not a known field"},
		{"duplicate", `{"endUserId":"a","endUserId":"mallory"}`, strictjson.Duplicate, "/endUserId", "endUserId", "appears more than once"},
		{"duplicate by escape", `{"endUserId":"a","\u0065ndUserId":"mallory"}`, strictjson.Duplicate, "/endUserId", "endUserId", "appears more than once"},
		{"duplicate in raw input", `{"input":{"items":[{"id":1,"id":2}]}}`, strictjson.Duplicate, "/input/items/0/id", "input.items[0].id", "appears more than once"},
		{"invalid UTF-8 value", "{\"endUserId\":\"eu\xff\"}", strictjson.InvalidUTF8, "/endUserId", "endUserId", "not valid UTF-8"},
		{"invalid UTF-8 in raw input", "{\"input\":{\"note\":\"eu\xfe\"}}", strictjson.InvalidUTF8, "/input/note", "input.note", "not valid UTF-8"},
		{"invalid UTF-8 name", "{\"input\":{\"n\xff\":1}}", strictjson.InvalidUTF8, "/input", "input", "member name that is not valid UTF-8"},
		{"lone surrogate", `{"endUserId":"\ud800"}`, strictjson.InvalidUTF8, "/endUserId", "endUserId", "half a surrogate pair"},
		{"too deep", deep(64), strictjson.TooDeep, "/input" + strings.Repeat("/0", 62), "input" + strings.Repeat("[0]", 62), "deeper than 64 levels"},
		{"invalid UTF-8 in an array", "{\"input\":[\"\xff\"]}", strictjson.InvalidUTF8, "/input/0", "input[0]", "not valid UTF-8"},
		{"duplicate name starting with a digit", `{"input":{"1st":1,"1st":2}}`, strictjson.Duplicate, "/input/1st", `input["1st"]`, "appears more than once"},
		{"far too deep", deep(10000), strictjson.TooDeep, "/input" + strings.Repeat("/0", 62), "input" + strings.Repeat("[0]", 62), "deeper than 64 levels"},
		{"wrong type", `{"endUserId":5}`, strictjson.WrongType, "/endUserId", "endUserId", "must be a string, not a number"},
		{"fraction", `{"ttlSeconds":1.5}`, strictjson.WrongType, "/ttlSeconds", "ttlSeconds", "must be a whole number"},
		{"wrong type in an array", `{"tags":["a",2]}`, strictjson.WrongType, "/tags/1", "tags[1]", "must be a string"},
		{"number of 40 digits", `{"ttlSeconds":` + strings.Repeat("9", 40) + `}`, strictjson.WrongType, "/ttlSeconds", "ttlSeconds", "not the number " + strings.Repeat("9", 40)},
		{"number of 41 digits", `{"ttlSeconds":` + strings.Repeat("9", 41) + `}`, strictjson.WrongType, "/ttlSeconds", "ttlSeconds", "must be a whole number, not a number"},
		{"trailing", `{"endUserId":"a"} {}`, strictjson.Trailing, "", "", "data after the JSON value (at byte 18)"},
		{"trailing junk", `{"endUserId":"a"} x`, strictjson.Trailing, "", "", "data after the JSON value (at byte 18)"},
		{"syntax", `{"endUserId":"a" "input":1}`, strictjson.Syntax, "", "", "is not valid JSON: invalid character"},
		{"trailing comma", `{"endUserId":"a", }`, strictjson.Syntax, "", "", "a comma before the closing bracket or brace (at byte 16); remove the trailing comma"},
		{"trailing comma in an array", `{"input":[1,]}`, strictjson.Syntax, "", "", "a comma before the closing bracket or brace (at byte 11); remove the trailing comma"},
		{"unknown before a syntax error", `{"x":`, strictjson.Syntax, "", "", "ends too early"},
		{"empty", "  ", strictjson.Syntax, "", "", "is empty"},
		{"empty but for newlines and tabs", "\n\t\r\n", strictjson.Syntax, "", "", "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v shape
			err := strictjson.Unmarshal([]byte(tt.in), &v)
			var e *strictjson.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if e.Reason != tt.reason || e.Pointer != tt.pointer || e.Path() != tt.path || !strings.Contains(e.Message, tt.contains) {
				t.Errorf("got %s %q %q %q; want %s %q %q containing %q", e.Reason, e.Pointer, e.Path(), e.Message, tt.reason, tt.pointer, tt.path, tt.contains)
			}
			if tt.path != "" && !strings.HasPrefix(e.Error(), tt.path+": ") {
				t.Errorf("Error() = %q, want it to start with the path", e.Error())
			}
		})
	}
}

func TestUnmarshal(t *testing.T) {
	t.Parallel()
	var v shape
	err := strictjson.Unmarshal([]byte(` {"endUserId":"é","input":{"a":[1,{"b":null}]},"ttlSeconds":60} `), &v)
	if err != nil || v.EndUserID != "é" || string(v.Input) != `{"a":[1,{"b":null}]}` || v.TTL == nil || *v.TTL != 60 {
		t.Fatalf("%+v %v", v, err)
	}
	// Depth 64 exactly is fine: the body is depth 1, input's arrays 2..64.
	ok := `{"input":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`
	if err := strictjson.Unmarshal([]byte(ok), &v); err != nil {
		t.Errorf("depth 64: %v", err)
	}
}

func TestUnmarshalForeign(t *testing.T) {
	t.Parallel()
	var v struct {
		Version string `json:"version"`
	}
	if err := strictjson.UnmarshalForeign([]byte(`{"version":"2.0","addedByAWS":{"x":1}}`), &v); err != nil || v.Version != "2.0" {
		t.Fatalf("unknown members must be ignored: %+v %v", v, err)
	}
	for in, reason := range map[string]strictjson.Reason{
		`{"version":"2.0","VERSION":"1.0"}`:                                 "", // ignored, and not taken for version
		`{"version":"2.0","version":"1.0"}`:                                 strictjson.Duplicate,
		"{\"version\":\"2.0\",\"x\":\"\xff\"}":                              strictjson.InvalidUTF8,
		`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`: strictjson.TooDeep,
	} {
		v.Version = ""
		err := strictjson.UnmarshalForeign([]byte(in), &v)
		var e *strictjson.Error
		switch {
		case reason == "" && (err != nil || v.Version != "2.0"):
			t.Errorf("%q: %+v %v", in, v, err)
		case reason != "" && (!errors.As(err, &e) || e.Reason != reason):
			t.Errorf("%q: %v, want %s", in, err, reason)
		}
	}
}

func TestValue(t *testing.T) {
	t.Parallel()
	v, err := strictjson.Value([]byte(`{"n":12345678901234567890,"a":[true,null,"x"],"o":{}}`))
	want := map[string]any{"n": json.Number("12345678901234567890"), "a": []any{true, nil, "x"}, "o": map[string]any{}}
	if err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("%#v %v", v, err)
	}
	if _, err := strictjson.Value([]byte(`{"a":1,"a":2}`)); err == nil {
		t.Error("a duplicate was accepted")
	}
	if err := strictjson.Check([]byte(`[{"a":1},{"a":2}]`)); err != nil {
		t.Errorf("the same name in two objects: %v", err)
	}
}

func TestErrorPathCut(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	err := strictjson.Check([]byte(`{"` + long + `":1,"` + long + `":2}`))
	var e *strictjson.Error
	if !errors.As(err, &e) || len(e.Path()) > 204 || !strings.HasSuffix(e.Path(), "…") {
		t.Fatalf("%v", err)
	}
	if e.Pointer != "/"+long {
		t.Errorf("the pointer is cut too")
	}
}

func TestErrorPathCutsAt200Bytes(t *testing.T) {
	t.Parallel()
	a200 := strings.Repeat("a", 200)
	for _, tc := range []struct{ name, path string }{
		{a200, a200},             // 200 bytes: kept whole
		{a200 + "b", a200 + "…"}, // 201 bytes: cut
		// `["a` then two-byte characters, one across byte 200: cut before it.
		{"a" + strings.Repeat("é", 150), `["a` + strings.Repeat("é", 98) + "…"},
	} {
		err := strictjson.Check([]byte(`{"` + tc.name + `":1,"` + tc.name + `":2}`))
		var e *strictjson.Error
		if !errors.As(err, &e) {
			t.Fatalf("err = %v, want an *Error", err)
		}
		if got := e.Path(); got != tc.path || !utf8.ValidString(got) {
			t.Errorf("path of a %d-byte name = %q, want %q", len(tc.name), got, tc.path)
		}
	}
	// The path of an unknown name (found in decoding, not in the walk) is cut too.
	var v shape
	err := strictjson.Unmarshal([]byte(`{"`+a200+`b":1}`), &v)
	var e *strictjson.Error
	if !errors.As(err, &e) || e.Reason != strictjson.Unknown || e.Path() != a200+"…" {
		t.Errorf("unknown 201-byte name: got %v, want an unknown name with its path cut to %q", err, a200+"…")
	}
}

// A did-you-mean names a field the JSON can set, not an unexported one.
func TestUnknownNameSuggestsNoUnexportedField(t *testing.T) {
	t.Parallel()
	var v struct {
		Name   string `json:"name"`
		secret string
	}
	err := strictjson.Unmarshal([]byte(`{"Secret":"x"}`), &v)
	var e *strictjson.Error
	if !errors.As(err, &e) || e.Reason != strictjson.Unknown || e.Message != "is not a known field" {
		t.Errorf("got %v, want %q with no suggestion", err, "Secret: is not a known field")
	}
	if v.secret != "" {
		t.Errorf("the unexported field was set to %q", v.secret)
	}
}
