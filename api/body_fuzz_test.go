package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"stead/strictjson"
)

// FuzzReadBody feeds readBody the body of POST /v1/agents/{agent}/runs. It
// never panics; it accepts a body exactly when a reference says so (empty,
// or a JSON object that strictjson.Check accepts — fuzzed against its own
// reference — whose names are exactly "input" and "endUserId", checked
// with encoding/json, and whose endUserId is a string or null); a refusal
// is a 400 invalid_argument; an accepted body re-encodes and reads back to
// the same request.
func FuzzReadBody(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"endUserId":"alice","input":{"orderId":"o-1"}}`, `{"endUserId":null}`,
		`{"endUserId":"a","ENDUSERID":"mallory"}`, `{"endUserId":"a","endUserId":"b"}`,
		"{\"endUserId\":\"eu\xff\"}", `{"input":{"a":1,"a":2}}`, `{"INPUT":{}}`, `{"endUserId":5}`,
		`{"input":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
		`{"endUserId":"a"} {}`, `["a"]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req startRunRequest
		err := readBody(jsonRequest(data), 1<<20, &req)
		want := acceptable(data)
		if (err == nil) != want {
			t.Fatalf("readBody(%q) = %v; the reference says accepted=%v", data, err, want)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code != CodeInvalidArgument || e.Message == "" {
				t.Fatalf("readBody(%q) = %#v, want a 400 invalid_argument", data, err)
			}
			return
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", req, err)
		}
		var back startRunRequest
		if err := readBody(jsonRequest(again), 1<<20, &back); err != nil {
			t.Fatalf("%q re-encoded as %q is refused: %v", data, again, err)
		}
		if back.EndUserID != req.EndUserID || !bytes.Equal(compact(back.Input), compact(req.Input)) {
			t.Fatalf("%q re-encoded as %q reads back as %+v, not %+v", data, again, back, req)
		}
	})
}

func jsonRequest(body []byte) *http.Request {
	r := httptest.NewRequest("POST", "/v1/agents/a/runs", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func acceptable(data []byte) bool {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return true
	}
	if data[0] != '{' || strictjson.Check(data) != nil {
		return false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(data, &members) != nil {
		return false
	}
	for name, raw := range members {
		switch name {
		case "input":
		case "endUserId":
			var s *string
			if json.Unmarshal(raw, &s) != nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func compact(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
