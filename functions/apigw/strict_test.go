package apigw_test

import (
	"errors"
	"strings"
	"testing"

	"stead/functions/apigw"
)

// API Gateway events are not Stead's shape: fields API Gateway adds are
// ignored, but names match exactly and duplicates, invalid UTF-8 and deep
// nesting are refused, so nothing reads an event two ways.
func TestParseStrict(t *testing.T) {
	t.Parallel()
	const ok = `{"version":"2.0","rawPath":"/v1/runs","requestContext":{"http":{"method":"GET"}}`
	ev, err := apigw.Parse([]byte(ok + `,"addedLater":{"x":[1]}}`))
	if err != nil || ev.RawPath != "/v1/runs" || ev.RequestContext.HTTP.Method != "GET" {
		t.Fatalf("an unknown field must be ignored: %+v %v", ev, err)
	}
	// Whitespace around the event is not part of it.
	ev, err = apigw.Parse([]byte("\n  " + ok + "}\n"))
	if err != nil || ev.RawPath != "/v1/runs" {
		t.Fatalf("an event with surrounding whitespace: %+v %v", ev, err)
	}
	// A case variant is just another unknown field: it does not replace
	// rawPath.
	ev, err = apigw.Parse([]byte(ok + `,"RAWPATH":"/v1/keys"}`))
	if err != nil || ev.RawPath != "/v1/runs" {
		t.Fatalf("case variant: %+v %v", ev, err)
	}
	for _, c := range []struct{ name, payload, says string }{
		{"duplicate rawPath", ok + `,"rawPath":"/v1/keys"}`, "rawPath: appears more than once"},
		{"duplicate header", `{"version":"2.0","rawPath":"/","headers":{"authorization":"Bearer a","authorization":"Bearer b"},"requestContext":{"http":{"method":"GET"}}}`, "headers.authorization: appears more than once"},
		{"invalid UTF-8 body", ok + ",\"body\":\"{\\\"endUserId\\\":\\\"eu\xff\\\"}\"}", "body: is not valid UTF-8"},
		{"invalid UTF-8 in an unknown field", ok + ",\"x\":\"\xfe\"}", "x: is not valid UTF-8"},
		{"deep unknown field", ok + `,"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "deeper than 64 levels"},
		{"trailing data", ok + `} {}`, "data after the JSON value"},
	} {
		_, err := apigw.Parse([]byte(c.payload))
		var ee *apigw.EventError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "payload format 2.0") {
			t.Errorf("%s: %v, want an EventError saying %q", c.name, err, c.says)
		}
	}
}
