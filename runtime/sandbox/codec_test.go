package sandbox

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
)

// codecMessages are frames of every type, the hot ones with every member
// set and with none.
func codecMessages() []*message {
	return []*message{
		{T: msgReady, V: protocolVersion},
		{T: msgLoaded},
		{T: msgLoaded, Error: &errorMsg{Code: "bundle-invalid", Message: "bad", File: "h.ts", Line: 3, Column: 9}},
		{T: msgLoaded, Exports: []bundle.Export{{Name: "h", Function: true}}},
		{T: msgLoad, Load: &loadMsg{Name: "h.mjs", Source: []byte("export const x = 1;"), Exports: []bundle.Export{{Name: "x"}}, Limits: limitsMsg{MemoryLimit: 1 << 20}}},
		{T: msgCall, Seq: 1, Call: &callMsg{}},
		{T: msgCall, Seq: 18446744073709551615, Call: &callMsg{Export: "noop", Input: jsontext.Value(`{"n":42,"s":"a b","u":"é\u00e9\"<>&"}`),
			RunID: "run_01", StepID: "lookup", StepIndex: -2, EndUserID: "user_7", IdempotencyKey: "idem\x01\"\\é\u2028",
			BrokerToken: "brk_secret", Broker: true, Deadline: 1789000000000}},
		{T: msgCall, Seq: 2, Call: &callMsg{Export: "e", Input: jsontext.Value(` [ 1 , { "a" : "x y" } ] `)}},
		{T: msgHost, Seq: 3, ID: 9, Host: &hostMsg{Op: opPut, Collection: "c", Key: "k", Value: jsontext.Value(`{"a":1}`)}},
		{T: msgHost, Seq: 3, ID: 10, Host: &hostMsg{Op: opFetch, Fetch: &jsvm.FetchRequest{URL: "https://example.com/", Method: "GET"}}},
		{T: msgReply, Seq: 3, ID: 9, Reply: &replyMsg{Found: true, Value: jsontext.Value(`"v"`), Items: []brokerItem{{Key: "k", Value: jsontext.Value(`1`)}}}},
		{T: msgUntrusted, Seq: 4, Origin: "https://example.com/x?y=1"},
		{T: msgCancel, Seq: 5},
		{T: msgDone, Seq: 6, Done: &doneMsg{}},
		{T: msgDone, Seq: 6, Done: &doneMsg{Output: jsontext.Value(`{"ok":true,"n":42,"run":"run_01"}`)}},
		{T: msgDone, Seq: 7, Done: &doneMsg{
			Error:         &errorMsg{Code: jsvm.CodeHandlerError, Message: "boom\n\ttab", Name: "TypeError", Stack: "at h (handlers.ts:1:2)"},
			Cost:          costMsg{TokensInput: 3, TokensOutput: 1 << 40, CostUSD: 0.000001234},
			Untrusted:     []string{"a", "é"},
			Logs:          []logMsg{{Level: "log", Message: "hi", At: 1789000000000000}, {Level: "warn", Message: "", At: -1}},
			LogsTruncated: true,
			Retired:       true,
		}},
		{T: msgDone, Seq: 8, Done: &doneMsg{Output: jsontext.Value(`null`), Cost: costMsg{CostUSD: 1e21}, Untrusted: []string{}, Logs: []logMsg{}}},
		{T: msgDone, Seq: 9, Done: &doneMsg{Output: jsontext.Value(`1`), Cost: costMsg{CostUSD: -123456.5, TokensInput: -1}}},
		{T: msgDone, Seq: 10, Done: &doneMsg{Output: jsontext.Value(`[]`), Cost: costMsg{CostUSD: 5e-7}}},
		{T: msgDone, Seq: 11, Done: &doneMsg{Output: jsontext.Value(`0`), Cost: costMsg{CostUSD: 1e-6}}}, // the smallest number JavaScript prints without an exponent
	}
}

// The codec's frames are json's, byte for byte, and read back as the same
// message.
func TestCodecMatchesJSON(t *testing.T) {
	for _, m := range codecMessages() {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendMessage([]byte("prefix"), m)
		if err != nil {
			t.Errorf("appendMessage(%s): %v", want, err)
			continue
		}
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Errorf("appendMessage:\n got %s\nwant %s", got[len("prefix"):], want)
		}
		var back, again message
		if err := json.Unmarshal(want, &back, strict); err != nil {
			t.Fatalf("read %s back: %v", want, err)
		}
		if err := json.Unmarshal(got[len("prefix"):], &again, strict); err != nil || !reflect.DeepEqual(back, again) {
			t.Errorf("read %s back: %v %+v, want %+v", got, err, again, back)
		}
	}
}

// The codec refuses what json's encoder refuses: invalid UTF-8 in a string,
// an invalid value, a number JSON cannot carry.
func TestCodecRefusesWhatJSONRefuses(t *testing.T) {
	for _, m := range []*message{
		{T: "done\xff"},
		{T: msgUntrusted, Origin: "a\xffb"},
		{T: msgCall, Call: &callMsg{Export: "h", Input: jsontext.Value(`{"a":1,"a":2}`)}},
		{T: msgCall, Call: &callMsg{Export: "h", Input: jsontext.Value(`{"a":`)}},
		{T: msgCall, Call: &callMsg{Export: "h", Input: jsontext.Value("\"\xff\"")}},
		{T: msgCall, Call: &callMsg{Export: "h", Input: jsontext.Value(`1 2`)}},
		{T: msgCall, Call: &callMsg{Export: "h", Input: jsontext.Value{}}},
		{T: msgDone, Done: &doneMsg{Output: jsontext.Value(`{"a":"\ud800"}`)}},
		{T: msgDone, Done: &doneMsg{Logs: []logMsg{{Level: "log", Message: "\xff"}}}},
		{T: msgDone, Done: &doneMsg{Untrusted: []string{"\xff"}}},
		{T: msgDone, Done: &doneMsg{Cost: costMsg{CostUSD: math.NaN()}}},
		{T: msgDone, Done: &doneMsg{Cost: costMsg{CostUSD: math.Inf(1)}}},
	} {
		_, errWant := json.Marshal(m)
		_, errGot := appendMessage(nil, m)
		if (errGot == nil) != (errWant == nil) {
			t.Errorf("appendMessage(%+v) = %v; json.Marshal says %v", m, errGot, errWant)
		}
	}
}

// BenchmarkFrameCodec encodes and decodes the frames of
// BenchmarkInvokeWarm's call.
func BenchmarkFrameCodec(b *testing.B) {
	call := &message{T: msgCall, Seq: 12345, Call: &callMsg{Export: "noop", Input: jsontext.Value(`{"n":42}`), RunID: "run_01", StepID: "lookup", StepIndex: 2,
		EndUserID: "user_7", IdempotencyKey: "idem_run_01_lookup", BrokerToken: "brk_secret_token_value", Broker: true, Deadline: 1789000000000}}
	done := &message{T: msgDone, Seq: 12345, Done: &doneMsg{Output: jsontext.Value(`{"ok":true,"n":42,"run":"run_01"}`)}}
	for _, tc := range []struct {
		name string
		m    *message
	}{{"call", call}, {"done", done}} {
		b.Run(tc.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = appendMessage(buf[:0], tc.m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			var frame, buf []byte
			if err := writeFrame((*appender)(&frame), &buf, tc.m); err != nil {
				b.Fatal(err)
			}
			var m message
			for b.Loop() {
				if err := readFrame(bytes.NewReader(frame), &buf, len(frame), &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
