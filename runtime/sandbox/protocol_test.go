package sandbox

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
)

// frame returns one frame of body, as a worker would write it.
func frame(body string) string {
	var head [4]byte
	binary.BigEndian.PutUint32(head[:], uint32(len(body)))
	return string(head[:]) + body
}

// fakeWorker writes a shell script that plays a worker: it writes out to
// its channel (fd 3) after waiting a moment, then waits to be killed.
func fakeWorker(t *testing.T, out string) string {
	t.Helper()
	var esc strings.Builder
	for i := 0; i < len(out); i++ {
		fmt.Fprintf(&esc, "\\%03o", out[i])
	}
	script := "#!/bin/sh\n/bin/sleep 0.2\nprintf '" + esc.String() + "' >&3\nexec /bin/sleep 30\n"
	path := filepath.Join(t.TempDir(), "worker.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// A worker that breaks the protocol is killed and fails only its call with
// sandbox-crashed, naming the violation; the parent goes on.
func TestProtocolViolationsKillTheWorker(t *testing.T) {
	if _, err := os.Stat("/bin/sleep"); err != nil {
		t.Skip("needs /bin/sh and /bin/sleep")
	}
	ready := frame(`{"t":"ready","v":2}`)
	loaded := frame(`{"t":"loaded"}`)
	for _, tc := range []struct {
		name, out, want string
	}{
		{"garbage handshake", "\x00\x00\x00\x05hello", "malformed frame"},
		{"wrong version", frame(`{"t":"ready","v":99}`), "protocol 99"},
		{"huge frame", ready + loaded + "\xff\xff\xff\xff", "frame too large"},
		{"frame one byte over the limit", ready + loaded + string(binary.BigEndian.AppendUint32(nil, maxWorkerFrame+1)),
			fmt.Sprintf("frame too large: %d bytes, over the %d-byte limit", maxWorkerFrame+1, maxWorkerFrame)},
		{"duplicate names", ready + loaded + frame(`{"t":"done","seq":1,"done":{"output":{"a":1,"a":2}}}`), "duplicate"},
		{"case variant", ready + loaded + frame(`{"t":"done","seq":1,"DONE":{"output":1}}`), "unknown"},
		{"invalid UTF-8", ready + loaded + frame("{\"t\":\"done\",\"seq\":1,\"done\":{\"output\":\"\xff\"}}"), "UTF-8"},
		{"unexpected frame", ready + loaded + frame(`{"t":"ready","v":2,"seq":1}`), `unexpected "ready"`},
		{"another call's frame", ready + loaded + frame(`{"t":"host","seq":7,"id":1,"host":{"op":"broker.get","collection":"c","key":"k"}}`), `"host" frame of call 7 during call 1`},
		{"done without result", ready + loaded + frame(`{"t":"done","seq":1}`), "without a result"},
		{"host without id", ready + loaded + frame(`{"t":"host","seq":1,"host":{"op":"fetch"}}`), "without an id"},
		{"result too deep", ready + loaded + frame(`{"t":"done","seq":1,"done":{"output":`+strings.Repeat("[", 300)+strings.Repeat("]", 300)+`}}`), "nested over"},
		{"empty result", ready + loaded + frame(`{"t":"done","seq":1,"done":{}}`), "without output or error"},
		{"unknown error code", ready + loaded + frame(`{"t":"done","seq":1,"done":{"error":{"code":"sandbox-crashed","message":"retry me"}}}`), `an error with code "sandbox-crashed"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(Options{Path: fakeWorker(t, tc.out)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			b, err := bundle.Compile("handlers.mjs", []byte(`export async function h() { return 1; }`), []bundle.Export{{Name: "h", Function: true}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err = p.Invoke(ctx, b, jsvm.Invocation{Tenant: "prj", Export: "h"})
			e, ok := jsvm.AsError(err)
			if !ok || e.Code != jsvm.CodeSandboxCrashed || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("%v, want sandbox-crashed mentioning %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
			if s := p.Stats(); s.Live != 0 {
				t.Errorf("the worker lives on: %+v", s)
			}
		})
	}
}

// FuzzReadFrame feeds arbitrary bytes to the parent's frame reader: it
// never panics, refuses what is over the limit or does not parse strictly,
// and what it accepts encodes and decodes back to the same message.
func FuzzReadFrame(f *testing.F) {
	for _, s := range []string{
		frame(`{"t":"ready","v":2}`),
		frame(`{"t":"done","done":{"output":{"a":[1,2,{"b":"c"}]},"logs":[{"level":"log","message":"x","at":1}]}}`),
		frame(`{"t":"host","id":7,"host":{"op":"broker.put","collection":"c","key":"k","value":{"n":1}}}`),
		frame(`{"t":"host","id":8,"host":{"op":"fetch","fetch":{"url":"https://example.com","method":"GET","header":[["a","b"]]}}}`),
		frame(`{"t":"untrusted","origin":"web"}`),
		frame(`{"t":"done","seq":1,"done":{"output":{"a":1,"a":2}}}`),
		frame(`{"t":"done","DONE":{}}`),
		"\xff\xff\xff\xff",
		"\x00\x00\x00\x02{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var buf []byte
		var m message
		err := readFrame(bytes.NewReader(data), &buf, 1<<16, &m)
		if err != nil {
			return
		}
		var out bytes.Buffer
		var wbuf []byte
		if err := writeFrame(&out, &wbuf, &m); err != nil {
			t.Fatalf("an accepted message does not encode: %v", err)
		}
		var back message
		if err := readFrame(bytes.NewReader(out.Bytes()), &buf, 1<<20, &back); err != nil {
			t.Fatalf("a re-encoded message does not read back: %v", err)
		}
		if fmt.Sprintf("%+v", back) != fmt.Sprintf("%+v", m) && !bytes.Equal(out.Bytes()[4:], mustFrame(t, &back)[4:]) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", m, back)
		}
		if m.Done != nil {
			_ = depth(m.Done.Output)
			_, _ = boundLogs(m.Done.Logs, 100, 64<<10, time.Unix(0, 0), time.Now())
		}
	})
}

func mustFrame(t *testing.T, m *message) []byte {
	var out bytes.Buffer
	var wbuf []byte
	if err := writeFrame(&out, &wbuf, m); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
