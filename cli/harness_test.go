package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"stead/runtime/sandbox"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"stead/api"
	"stead/approvals"
	"stead/examples/refunds"
	"stead/infra/testclock"
	"stead/store"
)

func TestMain(m *testing.M) {
	sandbox.Main()                                                                                   // the stacks' sandbox workers are this test binary
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("stead/runtime/sandbox.startProcess.func1.1")) // the worker spawner's thread lives as long as the process
}

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// testStack is a Stead API served by httptest over the same embedded stack
// `stead dev` runs, with the refunds example deployed and seeded.
type testStack struct {
	t       testing.TB
	stack   *Stack
	srv     *httptest.Server
	clock   *testclock.Clock
	project string
	// key is the project's owner key.
	key string
	// config is the path the CLI's config file has in these tests.
	config string
	// http is the CLI's client, with its own connection pool.
	http *http.Client
}

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// newTestStack starts a test stack; opts change its config (the egress
// policy of a test with a loopback webhook receiver, an SMTP server). Its
// notifier runs, as in stead dev, and its own address is the public URL.
func newTestStack(t testing.TB, opts ...func(*StackConfig)) *testStack {
	t.Helper()
	return openTestStack(t, true, opts...)
}

// openTestStack is newTestStack; without notifier the test makes the
// notifier's passes itself.
func openTestStack(t testing.TB, notifier bool, opts ...func(*StackConfig)) *testStack {
	t.Helper()
	dir := t.TempDir()
	clk := testclock.New(epoch)
	srv := httptest.NewUnstartedServer(nil)
	ctx := context.Background()
	var (
		proj store.Project
		key  string
	)
	cfg := StackConfig{
		Dir: filepath.Join(dir, "data"), Workers: 2, Now: clk.Now, NoSync: true,
		PublicURL: "http://" + srv.Listener.Addr().String(),
		// As stead dev: the project exists before the channels are built.
		EnsureProject: func(st store.Store) (string, error) {
			var err error
			proj, key, err = api.Bootstrap(ctx, st, "test", clk.Now())
			return proj.ID, err
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	st, err := OpenStack(cfg)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	if _, err := deployExample(ctx, st, proj.ID, st.log); err != nil { // and its demo orders
		_ = st.Close(ctx)
		srv.Close()
		t.Fatal(err)
	}
	if notifier {
		st.StartNotifier()
	}
	srv.Config.Handler = st.API
	srv.Start()
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.CloseClientConnections()
		srv.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Close(cctx); err != nil {
			t.Errorf("close stack: %v", err)
		}
	})
	return &testStack{t: t, stack: st, srv: srv, clock: clk, project: proj.ID, key: key, config: filepath.Join(dir, "config.json"),
		http: &http.Client{Transport: tr, Timeout: time.Minute}}
}

// result is what one CLI invocation did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// cliEnv is the environment of a CLI invocation in tests: no real
// environment variables, the test's config file path.
type cliEnv map[string]string

// run runs the CLI against the stack with STEAD_URL and STEAD_KEY set to
// the stack and its owner key, unless env says otherwise ("" unsets).
func (s *testStack) run(env cliEnv, args ...string) result {
	s.t.Helper()
	vars := map[string]string{EnvURL: s.srv.URL, EnvKey: s.key, EnvConfig: s.config}
	for k, v := range env {
		vars[k] = v
	}
	return runCLI(s.clock.Now, vars, s.http, args...)
}

// cli runs the CLI with the default environment.
func (s *testStack) cli(args ...string) result {
	s.t.Helper()
	return s.run(nil, args...)
}

// mustCLI runs the CLI and fails the test unless it exits 0.
func (s *testStack) mustCLI(args ...string) result {
	s.t.Helper()
	r := s.cli(args...)
	if r.code != 0 {
		s.t.Fatalf("stead %s: %s", strings.Join(args, " "), r)
	}
	return r
}

func runCLI(now func() time.Time, vars map[string]string, client *http.Client, args ...string) result {
	var out, errb bytes.Buffer
	code := Run(context.Background(), Env{
		Stdout:     &out,
		Stderr:     &errb,
		Getenv:     func(k string) string { return vars[k] },
		Now:        now,
		HTTPClient: client,
	}, args)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// waitRun waits, with a deadline, until the run satisfies done.
func (s *testStack) waitRun(id string, done func(store.Run) bool) store.Run {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	actor := approvals.Actor{ProjectID: s.project, Role: approvals.RoleOwner, ID: "test"}
	r, err := s.stack.Engine.WaitFor(ctx, actor, id, done)
	if err != nil {
		s.t.Fatalf("wait for run %s: %v", id, err)
	}
	if !done(r) {
		s.t.Fatalf("run %s did not get there in time: status %s, error %+v", id, r.Status, r.Error)
	}
	return r
}

func terminal(r store.Run) bool { return r.Status.Terminal() }

// startAwaiting starts a refund run and returns it awaiting approval.
func (s *testStack) startAwaiting(order string) store.Run {
	s.t.Helper()
	r := s.mustCLI("run", "refunds", "--input", `{"orderId":"`+order+`","reason":"damaged"}`, "--end-user", "demo-user", "--json")
	id := jsonField(s.t, r.stdout, "id")
	run := s.waitRun(id, func(r store.Run) bool { return r.Status == store.RunAwaitingApproval || r.Status.Terminal() })
	if run.Status != store.RunAwaitingApproval {
		s.t.Fatalf("run %s is %s (%+v), want awaiting-approval", id, run.Status, run.Error)
	}
	return run
}

// writeExample writes the refunds example to a folder, with an optional
// change to its stead.json.
func writeExample(t testing.TB, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := string(refunds.Config)
	if edit != nil {
		cfg = edit(cfg)
	}
	if err := os.WriteFile(filepath.Join(dir, "handlers.js"), refunds.Handlers, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stead.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// normalizer replaces ids, secrets and digests with stable placeholders,
// numbered by first appearance and as long as the original so that
// columns stay aligned.
type normalizer struct {
	seen map[string]string
	n    map[string]int
}

var volatile = regexp.MustCompile(`\b(run|apr|key|prj|req|ctk|mem|rul)_[0-9A-Za-z]{8,}(_[0-9A-Z]{8}|_[0-9a-f]{16})?\b|\bstk_[0-9A-Za-z]{20,}|\bstk_[0-9A-Za-z]{8}…|\bstc_[0-9A-Za-z_\-.]+|\bidk_[0-9a-f]+|\b[0-9a-f]{64}\b`)

func newNormalizer() *normalizer {
	return &normalizer{seen: map[string]string{}, n: map[string]int{}}
}

func (z *normalizer) replace(s string) string {
	return volatile.ReplaceAllStringFunc(s, func(m string) string {
		if r, ok := z.seen[m]; ok {
			return r
		}
		kind := "hex"
		if i := strings.IndexByte(m, '_'); i > 0 && i <= 4 {
			kind = m[:i]
		}
		z.n[kind]++
		num := strconv.Itoa(z.n[kind])
		var r string
		switch kind {
		case "hex":
			r = "digest" + strings.Repeat("0", 64-6-len(num)) + num
		case "idk":
			r = fmt.Sprintf("idk_KEY%02d", z.n[kind])
		case "stk", "stc":
			r = fmt.Sprintf("%s_SECRET%02d", kind, z.n[kind])
			if strings.HasSuffix(m, "…") {
				r = fmt.Sprintf("%s_PREFIX%02d…", kind, z.n[kind])
			}
		default:
			width := len(m) - len(kind) - 1
			r = kind + "_" + strings.Repeat("0", max(0, width-len(num))) + num
		}
		z.seen[m] = r
		return r
	})
}

// golden compares got with testdata/<name>.golden, or rewrites it with
// -update.
func golden(t testing.TB, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read golden file (run `go test ./cli -run %s -update` to create it): %v", t.Name(), err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file %s (rerun with -update if the change is intended)\n--- got\n%s\n--- want\n%s", name, p, got, want)
	}
}
