package redact_test

import (
	"encoding/json"
	"testing"

	"stead/runtime/redact"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in      string
		secrets []string
		want    string
	}{
		{"key sk-1 here", []string{"sk-1"}, "key [REDACTED] here"},
		{`quoted "a\"b" and raw a"b`, []string{`a"b`}, `quoted "[REDACTED]" and raw [REDACTED]`},
		// Longest first: a secret containing another goes whole.
		{"tok-long and tok", []string{"tok", "tok-long"}, "[REDACTED] and [REDACTED]"},
		{"nothing", []string{"", "zzz"}, "nothing"},
		{"héllo", []string{"é"}, "h[REDACTED]llo"},
		// A text quoting JSON carries a backslash or a newline escaped.
		{`path "C:\\key"`, []string{`C:\key`}, `path "[REDACTED]"`},
		{`pem "line1\nline2"`, []string{"line1\nline2"}, `pem "[REDACTED]"`},
	} {
		if got := redact.String(tc.in, tc.secrets...); got != tc.want {
			t.Errorf("String(%q, %q) = %q, want %q", tc.in, tc.secrets, got, tc.want)
		}
	}
	var zero redact.Set
	if got := zero.String("sk-1"); got != "sk-1" {
		t.Errorf("the zero Set redacted %q", got)
	}
}

func TestJSON(t *testing.T) {
	set := redact.New("12345", "tok", `q"x`)
	for in, want := range map[string]string{
		`{"a":"tok"}`:            `{"a":"[REDACTED]"}`,
		`{"tok":1,"b":"x\"tok"}`: `{"[REDACTED]":1,"b":"x\"[REDACTED]"}`,
		`{"n":123456}`:           `"[REDACTED]"`, // outside any string: nothing is kept
		`{"a":"clean"}`:          `{"a":"clean"}`,
		`["q\"x"]`:               `["[REDACTED]"]`,
		// Strings without a secret are kept as written.
		`{"a":"tok","b":"\u00e9"}`: `{"a":"[REDACTED]","b":"\u00e9"}`,
		// Not JSON (an unclosed string): nothing is kept.
		`{"a":"tok`: `"[REDACTED]"`,
	} {
		got := set.JSON([]byte(in))
		if string(got) != want {
			t.Errorf("JSON(%s) = %s, want %s", in, got, want)
		}
		if !json.Valid(got) {
			t.Errorf("JSON(%s) = %s is not JSON", in, got)
		}
	}
}
