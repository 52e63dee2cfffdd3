package eventschema_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"stead/internal/eventschema"
)

func load(t *testing.T) *eventschema.Schemas {
	t.Helper()
	doc, err := os.ReadFile("../../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := eventschema.Load(doc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChecks(t *testing.T) {
	s := load(t)
	if k := s.Kinds(); !slices.Contains(k, "approval.requested") || !slices.Contains(k, "log") || len(k) < 20 {
		t.Fatalf("kinds %v", k)
	}
	const requested = `{"version":1,"seq":4,"type":"approval.requested","at":"2026-12-01T12:00:00Z","step":"refund","data":{"approvalId":"apr_1","tool":"refundOrder","expiresAt":"2026-12-01T13:00:00Z"}}`
	for _, tc := range []struct {
		name string
		err  error
		want string // in the error; "" for none
	}{
		{"documented data", s.CheckData("trust.lowered", []byte(`{"origin":"tool:fetchPage"}`)), ""},
		{"no data", s.CheckData("run.cancelled", nil), ""},
		{"an undocumented field", s.CheckData("trust.lowered", []byte(`{"origin":"x","why":"y"}`)), "why"},
		{"a missing required field", s.CheckData("log", []byte(`{"level":"info"}`)), "message"},
		{"a wrong type", s.CheckData("run.started", []byte(`{"attempt":"1"}`)), "attempt"},
		{"an unknown kind", s.CheckData("run.exploded", []byte(`{}`)), "not one of"},
		{"an event", s.CheckEvent([]byte(requested)), ""},
		{"an event of another version", s.CheckEvent([]byte(strings.Replace(requested, `"version":1`, `"version":2`, 1))), "version"},
		{"a message", s.CheckMessage("4", "approval.requested", []byte(requested)), ""},
		{"a message whose id is not the seq", s.CheckMessage("5", "approval.requested", []byte(requested)), "seq"},
		{"a message whose event is not the type", s.CheckMessage("4", "approval.approved", []byte(requested)), "type"},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("%s: %v", tc.name, tc.err)
		case tc.want != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error naming %q", tc.name, tc.err, tc.want)
		}
	}
}
