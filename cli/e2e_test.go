package cli

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestEndToEnd builds the real stead binary, starts `stead dev --example`
// on a free loopback port with a temporary data folder, and walks the
// README's walkthrough through the CLI binary: approve → succeeded, deny → failed
// approval-denied with the note, a 1s approval timeout → failed
// approval-expired, a second decision refused, a customer token that
// cannot approve; then SIGTERM stops the server cleanly, a restart
// writes the CLI's config again from the data folder, and a restart with
// --retention 1s deletes the finished runs and keeps the waiting one.
func TestEndToEnd(t *testing.T) {
	e, tmp := newE2E(t)
	data := filepath.Join(tmp, "data")
	addr := freeAddr(t)
	srv := e.startServer(addr, data)

	out := srv.out.String()
	for _, want := range []string{"Created project prj_", "stk_", "stead run refunds --input", "stead approvals", "stead approve ID",
		"Loopback (127.0.0.0/8,::1/128) is allowed for handlers' fetch, models' baseUrl and webhooks"} {
		if !strings.Contains(out, want) {
			t.Errorf("stead dev output lacks %q:\n%s", want, out)
		}
	}
	if fi, err := os.Stat(e.config); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stead dev did not write the CLI config with mode 0600: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(data, "owner.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stead dev did not keep the owner key with mode 0600: %v", err)
	}

	refund := func(order string) (runID, approvalID string) {
		t.Helper()
		r := e.must("run", "refunds", "--input", `{"orderId":"`+order+`","reason":"damaged"}`, "--end-user", "demo-user", "--wait", "--json")
		if st := jsonField(t, r.stdout, "status"); st != "awaiting-approval" {
			t.Fatalf("run %s is %s, want awaiting-approval: %s", order, st, r)
		}
		return jsonField(t, r.stdout, "id"), jsonField(t, r.stdout, "approval.id")
	}

	// Approve → succeeded.
	r := e.must("run", "refunds", "--input", `{"orderId":"o-1001","reason":"damaged"}`, "--end-user", "demo-user", "--wait")
	if !strings.Contains(r.stdout, "is awaiting approval") || !strings.Contains(r.stdout, "waiting for approval apr_") {
		t.Fatalf("run --wait: %s", r)
	}
	approved := between(r.stdout, "stead approve ", " ")
	firstRun := between(r.stdout, "run ", " ")
	if r := e.must("approvals"); !strings.Contains(r.stdout, approved) || !strings.Contains(r.stdout, "refundOrder") {
		t.Fatalf("approvals does not list %s: %s", approved, r)
	}
	if r := e.must("approve", approved); !strings.Contains(r.stdout, "approved "+approved) {
		t.Fatalf("approve: %s", r)
	}
	run := e.waitStatus(firstRun, "succeeded")
	if got := jsonField(t, run, "run.output.refunded"); got != "89.5" {
		t.Errorf("refunded %s, want 89.5", got)
	}
	if r := e.must("trace", firstRun); !strings.Contains(r.stdout, "run.succeeded") || !strings.Contains(r.stdout, "approval.approved") {
		t.Errorf("trace: %s", r)
	}

	// Deny → failed approval-denied, with the note.
	deniedRun, denied := refund("o-1002")
	e.must("deny", denied, "--note", "not eligible")
	run = e.waitStatus(deniedRun, "failed")
	if code := jsonField(t, run, "run.error.code"); code != "approval-denied" {
		t.Errorf("denied run error code = %s", code)
	}
	if msg := jsonField(t, run, "run.error.message"); !strings.Contains(msg, "not eligible") {
		t.Errorf("denied run error message %q lacks the note", msg)
	}

	// Approving twice: the second is refused, exit 1.
	r = e.stead(nil, "approve", approved)
	if r.code != 1 || !strings.Contains(r.stderr, "was already approved") {
		t.Errorf("approve twice: %s", r)
	}

	// A customer token cannot approve.
	pendingRun, pending := refund("o-1003")
	tok := strings.TrimSpace(e.must("token", "demo-user").stdout)
	r = e.stead([]string{"STEAD_KEY=" + tok}, "approve", pending)
	if r.code != 1 || !strings.Contains(r.stderr, "Customers cannot approve their own actions") {
		t.Errorf("customer approve: %s", r)
	}
	if st := jsonField(t, e.must("trace", pendingRun, "--json").stdout, "run.status"); st != "awaiting-approval" {
		t.Errorf("after a refused customer approval the run is %s", st)
	}
	e.must("cancel", pendingRun)

	// A deployment with a 1s approval timeout: the run fails
	// approval-expired, through the sweeper.
	dir := writeExample(t, func(c string) string {
		return strings.Replace(c, `"requiresApproval": true,`, `"requiresApproval": true, "approvals": { "timeout": "1s" },`, 1)
	})
	if r := e.must("deploy", dir); !strings.Contains(r.stdout, "deployed version 2") {
		t.Fatalf("deploy: %s", r)
	}
	expiringRun, expiring := refund("o-1003")
	run = e.waitStatus(expiringRun, "failed")
	if code := jsonField(t, run, "run.error.code"); code != "approval-expired" {
		t.Errorf("expired run error code = %s", code)
	}
	r = e.stead(nil, "approve", expiring)
	if r.code != 1 || !strings.Contains(r.stderr, "expired at") || !strings.Contains(r.stderr, "it can no longer be approved") {
		t.Errorf("approve an expired approval: %s", r)
	}
	if r := e.must("trace", expiringRun); !strings.Contains(r.stdout, "approval.expired") {
		t.Errorf("trace of the expired run: %s", r)
	}

	// SIGTERM: a clean, prompt exit 0, saying so in one line; the banner
	// came first, and nothing was logged (requests only with --verbose).
	srv.stop(t)
	if out := srv.out.String(); !strings.HasPrefix(out, "Stead is running at ") || !strings.HasSuffix(out, "\nStopping… stopped.\n") {
		t.Errorf("stead dev's output does not start with its banner and end with one stopping line:\n%s", out)
	}
	if errs := srv.errb.String(); errs != "" {
		t.Errorf("stead dev logged without --verbose:\n%s", errs)
	}

	// A restart writes the CLI config again from the data folder.
	if err := os.Remove(e.config); err != nil {
		t.Fatal(err)
	}
	srv = e.startServer(addr, data)
	if strings.Contains(srv.out.String(), "Created project") {
		t.Errorf("a restart created a new project:\n%s", srv.out.String())
	}
	if r := e.must("runs"); !strings.Contains(r.stdout, firstRun) {
		t.Errorf("runs after a restart: %s", r)
	}
	// --example leaves the project's own deployment (the 1s timeout) in
	// place, and says so; deploying the example brings back its 15m.
	if out := srv.out.String(); !strings.Contains(out, "Deployment 2 (by key_") || !strings.Contains(out, "is your own, so --example left it in place") {
		t.Errorf("a restart with --example does not say it kept deployment 2:\n%s", out)
	}
	if v := jsonField(t, e.must("deployments", "--json").stdout, "deployments.0.version"); v != "2" {
		t.Errorf("after a restart with --example the latest deployment is %s, want 2 (the project's own)", v)
	}
	if r := e.must("deploy", writeExample(t, nil)); !strings.Contains(r.stdout, "deployed version 3") {
		t.Fatalf("deploy the example again: %s", r)
	}

	// An open event stream does not hold up shutdown: the server ends it
	// after a short grace period instead of waiting out its shutdown
	// timeout (10s).
	streamRun, _ := refund("o-1003") // the example again: a 15m timeout
	cfg, err := readConfig(e.config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, cfg.URL+"/v1/runs/"+streamRun+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+cfg.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %s", resp.Status)
	}
	if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
		t.Fatalf("event stream: %v", err)
	}
	start := time.Now()
	srv.stop(t)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown with an open event stream took %s", d)
	}

	// --retention: the sweep at start deletes the runs that finished more
	// than a second ago — their traces are gone — and keeps the one that
	// awaits its approval.
	srv = e.startServer(addr, data, "--retention", "1s")
	finished := []string{firstRun, deniedRun, pendingRun, expiringRun}
	var runs string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		runs = e.must("runs").stdout
		if !slices.ContainsFunc(finished, func(id string) bool { return strings.Contains(runs, id) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("finished runs are still listed 15s after a restart with --retention 1s:\n%s", runs)
		}
	}
	if r := e.stead(nil, "trace", firstRun); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("trace of a deleted run: %s", r)
	}
	if !strings.Contains(runs, streamRun) {
		t.Errorf("runs after the retention's sweep lacks %s, which awaits its approval:\n%s", streamRun, runs)
	}
	srv.stop(t)
}

// buildStead builds the stead binary into dir — or, when STEAD_TEST_BIN
// names one, uses that: benchmarks can then compare two builds
// interleaved (docs/performance.md).
func buildStead(dir string) (bin string, out []byte, err error) {
	if prebuilt := os.Getenv("STEAD_TEST_BIN"); prebuilt != "" {
		return prebuilt, nil, nil
	}
	bin = filepath.Join(dir, "stead")
	out, err = exec.Command("go", "build", "-o", bin, "stead/cli/stead").CombinedOutput()
	return bin, out, err
}

// newE2E builds the binary into a temporary folder (skipped with -short)
// and returns the harness over it, with that folder for the test's data.
func newE2E(t testing.TB) (*e2e, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the stead binary and runs a server; skipped with -short")
	}
	tmp := t.TempDir()
	bin, out, err := buildStead(tmp)
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	e := &e2e{t: t, bin: bin, config: filepath.Join(tmp, "config.json"), home: filepath.Join(tmp, "home")}
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	return e, tmp
}

type e2e struct {
	t      testing.TB
	bin    string
	config string
	home   string
}

// env is the environment of the binary: the test's config file and home,
// and none of the caller's Stead settings.
func (e *e2e) env(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case EnvURL, EnvKey, EnvConfig, "HOME", "XDG_CONFIG_HOME":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, EnvConfig+"="+e.config, "HOME="+e.home)
	return append(env, extra...)
}

// stead runs the binary and waits for it, at most a minute.
func (e *e2e) stead(extra []string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = e.env(extra)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		e.t.Fatalf("stead %s: %v", strings.Join(args, " "), err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (e *e2e) must(args ...string) result {
	e.t.Helper()
	r := e.stead(nil, args...)
	if r.code != 0 {
		e.t.Fatalf("stead %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// waitStatus polls `stead trace RUN --json`, with a deadline, until the run
// has the status; it returns the last output.
func (e *e2e) waitStatus(runID, status string) string {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.must("trace", runID, "--json")
		st := jsonField(e.t, r.stdout, "run.status")
		if st == status {
			return r.stdout
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s is still %s, want %s:\n%s", runID, st, status, r.stdout)
		}
		time.Sleep(100 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

// server is a running `stead dev`.
type server struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	errb *syncBuffer
	done chan error
}

// devReadyLine is the last line `stead dev` prints once it is set up (its
// project, the CLI config, the example deployed), just before it serves;
// with --json it prints one JSON line instead.
const devReadyLine = "Press Ctrl-C to stop."

// startServer starts `stead dev --example` with a 200ms sweep interval;
// flags are appended (a flag given again takes the later value). It returns
// once the server has printed its ready line, which has reached s.out, and
// answers /healthz.
func (e *e2e) startServer(addr, data string, flags ...string) *server {
	e.t.Helper()
	args := append([]string{"dev", "--addr", addr, "--data", data, "--example", "--sweep-interval", "200ms"}, flags...)
	cmd := exec.Command(e.bin, args...)
	cmd.Env = e.env(nil)
	isReady := func(line string) bool { return line == devReadyLine }
	if slices.Contains(flags, "--json") {
		isReady = func(string) bool { return true }
	}
	s := &server{cmd: cmd, out: newSyncBuffer(isReady), errb: newSyncBuffer(nil), done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.out, s.errb
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-s.done //nolint:errcheck // killed on purpose: its exit error tells nothing
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	// The output is copied from the pipe by os/exec's goroutine, so the
	// server answering /healthz does not mean its output has arrived: wait
	// for the ready line itself.
	select {
	case <-s.out.ready:
	case err := <-s.done:
		e.t.Fatalf("stead dev exited early (%v)\nstdout:\n%s\nstderr:\n%s", err, s.out, s.errb)
	case <-time.After(time.Until(deadline)):
		e.t.Fatalf("stead dev did not print %q in time\nstdout:\n%s\nstderr:\n%s", devReadyLine, s.out, s.errb)
	}
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-s.done:
			e.t.Fatalf("stead dev exited early (%v)\nstdout:\n%s\nstderr:\n%s", err, s.out, s.errb)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("stead dev did not answer /healthz in time\nstdout:\n%s\nstderr:\n%s", s.out, s.errb)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, bounded by the deadline
	}
	client.CloseIdleConnections()
	return s
}

// stop sends SIGTERM and expects a prompt exit 0.
func (s *server) stop(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("stead dev exited with %v after SIGTERM\nstderr:\n%s", err, s.errb)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("stead dev did not exit within 15s of SIGTERM\nstderr:\n%s", s.errb)
	}
}

// syncBuffer collects a process's output, which os/exec's goroutine copies
// from the pipe while the test reads it: the mutex orders the two. ready is
// closed once a whole line for which isReady holds has been written.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	scanned int // b's bytes up to here are whole lines already checked
	isReady func(line string) bool
	ready   chan struct{}
}

// newSyncBuffer returns an empty buffer; a nil isReady never closes ready.
func newSyncBuffer(isReady func(line string) bool) *syncBuffer {
	return &syncBuffer{isReady: isReady, ready: make(chan struct{})}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.b.Write(p)
	for b.isReady != nil {
		rest := b.b.Bytes()[b.scanned:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		b.scanned += i + 1
		if b.isReady(string(rest[:i])) {
			close(b.ready)
			b.isReady = nil
		}
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// between returns the text after the first before and up to the next
// stop (or the end of its line).
func between(s, before, stop string) string {
	_, rest, ok := strings.Cut(s, before)
	if !ok {
		return ""
	}
	rest, _, _ = strings.Cut(rest, "\n")
	rest, _, _ = strings.Cut(rest, stop)
	return rest
}
