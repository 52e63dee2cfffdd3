package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"stead"
	"stead/approvals"
	"stead/store"
)

// jsonField reads a string (or renders any value) at a dotted path of a
// JSON document.
func jsonField(t testing.TB, doc, path string) string {
	t.Helper()
	v := jsonValue(t, doc, path)
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonValue(t testing.TB, doc, path string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, doc)
	}
	if path == "" {
		return v
	}
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				t.Fatalf("no %q in %s (at %q)", path, doc, k)
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				t.Fatalf("no %q in %s", path, doc)
			}
			v = x[i]
		default:
			t.Fatalf("no %q in %s", path, doc)
		}
	}
	return v
}

// TestGolden walks the README's walkthrough (deploy, run, approvals,
// approve, deny, trace) through the CLI and compares each
// command's human output with testdata/*.golden. Ids, keys and digests are
// replaced by numbered placeholders; times come from the injected clock.
func TestGolden(t *testing.T) {
	s := newTestStack(t)
	z := newNormalizer()
	check := func(name string, r result, wantCode int) {
		t.Helper()
		if r.code != wantCode {
			t.Fatalf("%s: %s", name, r)
		}
		out := r.stdout
		if wantCode != 0 {
			out = r.stderr
		}
		golden(t, name, z.replace(out))
	}

	dir := writeExample(t, nil)
	check("deploy", s.cli("deploy", dir), 0)

	r := s.cli("run", "refunds", "--input", `{"orderId":"o-1001","reason":"damaged"}`, "--end-user", "demo-user", "--wait")
	check("run_wait", r, 0)
	if !strings.Contains(r.stderr, "started run run_") || !strings.Contains(r.stderr, "waiting…") {
		t.Errorf("run --wait printed no progress on stderr: %q", r.stderr)
	}
	first := s.latestRun()
	if first.Status != store.RunAwaitingApproval {
		t.Fatalf("run is %s, want awaiting-approval", first.Status)
	}

	s.clock.Advance(2 * time.Minute)
	check("approvals", s.cli("approvals"), 0)
	check("approval", s.cli("approval", first.ApprovalID), 0)
	check("runs", s.cli("runs"), 0)
	check("approve", s.cli("approve", first.ApprovalID, "--note", "damaged in transit, refund it"), 0)
	s.waitRun(first.ID, terminal)
	check("trace_approved", s.cli("trace", first.ID), 0)

	check("run_nowait", s.cli("run", "refunds", "--input", `{"orderId":"o-1002","reason":"never arrived"}`, "--end-user", "demo-user"), 0)
	second := s.latestRun()
	second = s.waitRun(second.ID, func(r store.Run) bool { return r.Status == store.RunAwaitingApproval })
	check("deny", s.cli("deny", second.ApprovalID, "--note", "tracking shows it was delivered"), 0)
	s.waitRun(second.ID, terminal)
	check("trace_denied", s.cli("trace", second.ID), 0)

	check("approve_twice", s.cli("approve", first.ApprovalID), 1)

	third := s.startAwaiting("o-1003")
	s.clock.Advance(16 * time.Minute)
	check("approve_expired", s.cli("approve", third.ApprovalID), 1)
	s.waitRun(third.ID, terminal)
	check("runs_after", s.cli("runs"), 0)
	check("approvals_all", s.cli("approvals", "--status", "all", "--order", "expiring"), 0)

	check("keys_create", s.cli("keys", "create", "--role", "developer", "--name", "ci"), 0)
	check("keys_list", s.cli("keys", "list"), 0)
}

// latestRun returns the project's newest run.
func (s *testStack) latestRun() store.Run {
	s.t.Helper()
	page, err := s.stack.Store.ListRuns(t0ctx(), store.RunFilter{ProjectID: s.project, Limit: 1})
	if err != nil || len(page.Items) == 0 {
		s.t.Fatalf("no runs: %v", err)
	}
	return page.Items[0]
}

// TestJSONShapes checks that --json prints the API's shapes.
func TestJSONShapes(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)

	r := s.mustCLI("deploy", writeExample(t, nil), "--json")
	if v := jsonField(t, r.stdout, "version"); v != "2" {
		t.Errorf("deploy version = %s, want 2", v)
	}
	if d := jsonField(t, r.stdout, "digest"); len(d) != 64 {
		t.Errorf("deploy digest = %q, want 64 hex characters", d)
	}
	if a := jsonField(t, r.stdout, "agents"); a != `["refunds","review-refund"]` {
		t.Errorf("deploy agents = %s", a)
	}

	r = s.mustCLI("run", "refunds", "--input", `{"orderId":"o-1001","reason":"damaged"}`, "--end-user", "demo-user", "--wait", "--json")
	run := jsonValue(t, r.stdout, "").(map[string]any)
	for _, k := range []string{"id", "agent", "endUserId", "status", "deployment", "trust", "costs", "input", "approval"} {
		if _, ok := run[k]; !ok {
			t.Errorf("run --json has no %q: %s", k, r.stdout)
		}
	}
	if st := jsonField(t, r.stdout, "status"); st != "awaiting-approval" {
		t.Fatalf("status = %s, want awaiting-approval", st)
	}
	aprID := jsonField(t, r.stdout, "approval.id")
	if tool := jsonField(t, r.stdout, "approval.tool"); tool != "refundOrder" {
		t.Errorf("approval.tool = %s", tool)
	}
	for _, k := range []string{"approval.requestedAt", "approval.expiresAt"} {
		if _, err := time.Parse(time.RFC3339, jsonField(t, r.stdout, k)); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	runID := jsonField(t, r.stdout, "id")

	r = s.mustCLI("approvals", "--json")
	if id := jsonField(t, r.stdout, "approvals.0.id"); id != aprID {
		t.Errorf("approvals.0.id = %s, want %s", id, aprID)
	}
	for _, k := range []string{"runId", "agent", "tool", "input", "reason", "status", "requestedAt", "expiresAt"} {
		jsonValue(t, r.stdout, "approvals.0."+k)
	}

	r = s.mustCLI("approval", aprID, "--json")
	if in := jsonField(t, r.stdout, "input"); in != `{"orderId":"o-1001","reason":"damaged"}` {
		t.Errorf("approval input = %s", in)
	}

	// approve --json is one array however many ids.
	r = s.mustCLI("approve", aprID, "--json")
	if st := jsonField(t, r.stdout, "0.status"); st != "approved" {
		t.Errorf("approve status = %s", st)
	}
	if by := jsonField(t, r.stdout, "0.decidedBy"); !strings.HasPrefix(by, "key_") {
		t.Errorf("decidedBy = %s", by)
	}
	s.waitRun(runID, terminal)

	r = s.mustCLI("trace", runID, "--json")
	if st := jsonField(t, r.stdout, "run.status"); st != "succeeded" {
		t.Errorf("trace run.status = %s", st)
	}
	events := jsonValue(t, r.stdout, "events").([]any)
	var types []string
	for _, e := range events {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	for _, want := range []string{"run.created", "approval.requested", "approval.approved", "run.succeeded"} {
		if !contains(types, want) {
			t.Errorf("trace events lack %s: %v", want, types)
		}
	}
	if out := jsonField(t, r.stdout, "run.output.refunded"); out != "89.5" {
		t.Errorf("run output refunded = %s", out)
	}

	r = s.mustCLI("runs", "--json", "--status", "succeeded")
	if id := jsonField(t, r.stdout, "runs.0.id"); id != runID {
		t.Errorf("runs.0.id = %s", id)
	}

	r = s.mustCLI("keys", "list", "--json")
	if role := jsonField(t, r.stdout, "keys.0.role"); role != "owner" {
		t.Errorf("keys.0.role = %s", role)
	}
	r = s.mustCLI("keys", "create", "--json", "--name", "ci")
	if k := jsonField(t, r.stdout, "key"); !strings.HasPrefix(k, "stk_") {
		t.Errorf("created key = %s", k)
	}
	r = s.mustCLI("token", "demo-user", "--json", "--ttl", "10m")
	if tok := jsonField(t, r.stdout, "token"); !strings.HasPrefix(tok, "stc_") {
		t.Errorf("token = %s", tok)
	}
	if exp := jsonField(t, r.stdout, "expiresAt"); exp != "2026-11-29T12:10:00Z" {
		t.Errorf("token expiresAt = %s", exp)
	}
	r = s.mustCLI("version", "--json")
	if v := jsonField(t, r.stdout, "version"); v != stead.Version() || v == "" {
		t.Errorf("version --json = %s, want the VERSION file's %q", r.stdout, stead.Version())
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if r := s.mustCLI(args...); !strings.HasPrefix(r.stdout, "stead "+stead.Version()+" (go") {
			t.Errorf("stead %s = %q", strings.Join(args, " "), r.stdout)
		}
	}

	// A refused decision is the API's error document, in the same array;
	// with several ids, each in its place.
	r = s.cli("approve", aprID, "--json")
	if r.code != 1 {
		t.Fatalf("approve twice: %s", r)
	}
	if code := jsonField(t, r.stdout, "0.error.code"); code != "approval_not_pending" {
		t.Errorf("error.code = %s", code)
	}
	other := s.startAwaiting("o-1002")
	r = s.cli("approve", aprID, other.ApprovalID, "--json")
	if r.code != 1 || jsonField(t, r.stdout, "0.error.code") != "approval_not_pending" || jsonField(t, r.stdout, "1.status") != "approved" {
		t.Errorf("approve two, one refused: %s", r)
	}
}

// TestRunWaitOfAFailedRun: run --wait of a run that fails exits 1, with
// --json too, which prints the run as it ended and no error document.
func TestRunWaitOfAFailedRun(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	s.mustCLI("deploy", writeExample(t, func(c string) string {
		return strings.Replace(c, `"requiresApproval": true,`, "", 1) // refundOrder runs at once
	}))
	input := `{"orderId":"o-nope","reason":"damaged"}` // refundOrder throws: no such order
	r := s.cli("run", "refunds", "--input", input, "--end-user", "demo-user", "--wait", "--json")
	if r.code != ExitError || jsonField(t, r.stdout, "status") != "failed" { // one document: the run, no error document after it
		t.Errorf("run --wait --json of a failing run: want exit 1 and the failed run: %s", r)
	}
	r = s.cli("run", "refunds", "--input", input, "--end-user", "demo-user", "--wait")
	if r.code != ExitError || !strings.Contains(r.stdout, " failed (refunds, end user demo-user)") || !strings.Contains(r.stderr, "order o-nope not found") {
		t.Errorf("run --wait of a failing run: want exit 1 saying why: %s", r)
	}
}

// TestRunsFilters: runs --end-user, --agent and --status list only the
// runs that match.
func TestRunsFilters(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	mine := s.startAwaiting("o-1001")
	r := s.mustCLI("run", "refunds", "--input", `{"orderId":"o-1","reason":"x"}`, "--end-user", "other-user", "--json")
	other := jsonField(t, r.stdout, "id")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--end-user", "other-user"}, other},
		{[]string{"--end-user", "demo-user"}, mine.ID},
		{[]string{"--status", "awaiting-approval", "--end-user", "demo-user", "--agent", "refunds"}, mine.ID},
	} {
		r := s.mustCLI(append([]string{"runs", "--json"}, c.args...)...)
		runs := jsonValue(t, r.stdout, "runs").([]any)
		if len(runs) != 1 || jsonField(t, r.stdout, "runs.0.id") != c.want {
			t.Errorf("runs %s: want only %s: %s", strings.Join(c.args, " "), c.want, r.stdout)
		}
	}
	if r := s.mustCLI("runs", "--json", "--agent", "review-refund"); len(jsonValue(t, r.stdout, "runs").([]any)) != 0 {
		t.Errorf("runs --agent review-refund: want none: %s", r.stdout)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestExitCodes: 0 ok, 1 error (API refusals, unreachable server), 2 usage.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	cases := []struct {
		args []string
		code int
		// stderr holds this.
		want string
	}{
		{[]string{"version"}, 0, ""},
		{[]string{"runs"}, 0, ""},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"aprove", "apr_a"}, 2, `unknown command "aprove" for "stead"; did you mean approve?`},
		{[]string{"broker", "lisst"}, 2, `unknown command "lisst" for "stead broker"; did you mean list?`},
		{[]string{"runs", "--nope"}, 2, "unknown flag: --nope"},
		{[]string{"runs", "extra"}, 2, "takes no arguments"},
		{[]string{"runs", "--limit", "0"}, 2, "--limit must be from 1 to 500"},
		{[]string{"run"}, 2, "needs AGENT"},
		{[]string{"run", "refunds"}, 2, "--end-user is required"},
		{[]string{"run", "refunds", "--end-user", "u", "--input", "{bad"}, 2, "--input is not valid JSON"},
		{[]string{"run", "refunds", "--end-user", "u", "--wait", "--follow"}, 2, "not both"},
		{[]string{"approve"}, 2, "needs at least one approval ID"},
		{[]string{"approve", "apr_a", "apr_b", "--input", "{}"}, 2, "exactly one ID"},
		{[]string{"deny", "apr_a", "apr_b"}, 2, "stead deny takes one ID (got 2 arguments): deny each with its own stead deny ID --note TEXT"},
		{[]string{"approvals", "--status", "weird"}, 2, "--status must be"},
		{[]string{"approvals", "--order", "oldest"}, 2, "--order must be"},
		{[]string{"approvals", "--limit", "501"}, 2, "--limit must be from 1 to 500"},
		{[]string{"runs", "--status", "done"}, 2, "--status must be one of queued"},
		{[]string{"keys", "create", "--role", "admin"}, 2, "--role must be owner, developer, approver or viewer"},
		{[]string{"token", "u", "--ttl", "48h"}, 2, "--ttl must be"},
		{[]string{"trace"}, 2, "needs RUN"},
		{[]string{"dev", "--egress-allow", "10.1.2.3/8"}, 2, "--egress-allow: \"10.1.2.3/8\" has bits set past its /8; write the range as 10.0.0.0/8"},
		{[]string{"approval", "apr_missing"}, 1, "approval apr_missing not found"},
		{[]string{"approve", "apr_missing"}, 1, "approval apr_missing not found"},
		{[]string{"run", "nosuch", "--end-user", "u"}, 1, `agent "nosuch" is not in the latest deployment`},
		{[]string{"run", "refunds", "--end-user", "u", "--input", `{"orderId":"o-1"}`}, 1, "input"},
		{[]string{"cancel", "run_missing"}, 1, "run run_missing not found"},
		{[]string{"trace", "run_missing"}, 1, "run run_missing not found"},
		{[]string{"keys", "revoke", "key_missing"}, 1, "not found"},
	}
	for _, c := range cases {
		r := s.cli(c.args...)
		if r.code != c.code {
			t.Errorf("stead %s: exit %d, want %d\n%s", strings.Join(c.args, " "), r.code, c.code, r)
			continue
		}
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("stead %s: stderr %q lacks %q", strings.Join(c.args, " "), r.stderr, c.want)
		}
		if c.code == 2 && !strings.Contains(r.stderr, " --help' for usage.") {
			t.Errorf("stead %s: a usage error should point at --help: %q", strings.Join(c.args, " "), r.stderr)
		}
	}
}

// TestSettingsPrecedence: --url/--key beat STEAD_URL/STEAD_KEY, which beat
// the config file.
func TestSettingsPrecedence(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	dead := deadURL(t)
	const badKey = "stk_THISKEYDOESNOTEXISTANYWHEREATALLXXXXXXXXXXXXXXXXXXXXXXX"
	if err := writeConfig(s.config, FileConfig{URL: s.srv.URL, Key: s.key}); err != nil {
		t.Fatal(err)
	}
	unset := cliEnv{EnvURL: "", EnvKey: ""}

	// The config file alone is enough.
	if r := s.run(unset, "runs"); r.code != 0 {
		t.Fatalf("config file only: %s", r)
	}
	// The environment beats the file: a bad STEAD_KEY is used and refused.
	r := s.run(cliEnv{EnvURL: "", EnvKey: badKey}, "runs")
	if r.code != 1 || !strings.Contains(r.stderr, "$STEAD_KEY") {
		t.Errorf("env key over file: %s", r)
	}
	// A flag beats the environment.
	if r := s.run(cliEnv{EnvURL: "", EnvKey: badKey}, "runs", "--key", s.key); r.code != 0 {
		t.Errorf("flag key over env: %s", r)
	}
	// Same for the URL: env over file, flag over env.
	if err := writeConfig(s.config, FileConfig{URL: dead, Key: s.key}); err != nil {
		t.Fatal(err)
	}
	r = s.run(unset, "runs")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach Stead at "+dead) || !strings.Contains(r.stderr, "is `stead dev` running?") {
		t.Errorf("dead URL from file: %s", r)
	}
	if r := s.run(cliEnv{EnvURL: s.srv.URL, EnvKey: ""}, "runs"); r.code != 0 {
		t.Errorf("env URL over file: %s", r)
	}
	if r := s.run(cliEnv{EnvURL: dead, EnvKey: ""}, "runs", "--url", s.srv.URL); r.code != 0 {
		t.Errorf("flag URL over env: %s", r)
	}
	// No key anywhere.
	if err := os.Remove(s.config); err != nil {
		t.Fatal(err)
	}
	r = s.run(unset, "runs")
	if r.code != 1 || !strings.Contains(r.stderr, "no API key: run `stead dev` (it writes one) or `stead login") {
		t.Errorf("no key: %s", r)
	}
}

// deadURL is a loopback URL nothing listens on.
func deadURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestLogin checks the key before saving it, with mode 0600.
func TestLogin(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	unset := cliEnv{EnvURL: "", EnvKey: ""}
	r := s.run(unset, "login", "--url", s.srv.URL, "--key", "stk_WRONGWRONGWRONGWRONGWRONGWRONGWRONGWRONGWRONGWRONGWRONG")
	if r.code != 1 || !strings.Contains(r.stderr, "check the key") {
		t.Fatalf("login with a bad key: %s", r)
	}
	if _, err := os.Stat(s.config); !os.IsNotExist(err) {
		t.Fatalf("a refused login wrote the config file (%v)", err)
	}
	if r := s.run(unset, "login"); r.code != 2 {
		t.Errorf("login without a key: %s", r)
	}
	r = s.run(unset, "login", "--url", "ftp://stead.example.com", "--key", s.key)
	if r.code != 2 || !strings.Contains(r.stderr, `--url "ftp://stead.example.com" is not an http(s) URL`) {
		t.Errorf("login to an ftp URL: %s", r)
	}
	if _, err := os.Stat(s.config); !os.IsNotExist(err) {
		t.Fatalf("a refused login wrote the config file (%v)", err)
	}
	r = s.run(unset, "login", "--url", s.srv.URL+"/", "--key", s.key)
	if r.code != 0 {
		t.Fatalf("login: %s", r)
	}
	fi, err := os.Stat(s.config)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("config mode = %o, want 600", fi.Mode().Perm())
	}
	c, err := readConfig(s.config)
	if err != nil || c.URL != s.srv.URL || c.Key != s.key {
		t.Errorf("config = %+v, %v", c, err)
	}
	if r := s.run(unset, "approvals"); r.code != 0 {
		t.Errorf("after login: %s", r)
	}
	if !strings.Contains(r.stdout, "(owner of project ") {
		t.Errorf("login does not say who the key is: %s", r.stdout)
	}
	// A customer token is not a CLI key, even though it authenticates.
	tok := strings.TrimSpace(s.mustCLI("token", "demo-user").stdout)
	r = s.run(unset, "login", "--url", s.srv.URL, "--key", tok)
	if r.code != 1 || !strings.Contains(r.stderr, "needs a project API key") {
		t.Errorf("login with a customer token: %s", r)
	}
	if c, _ := readConfig(s.config); c.Key != s.key {
		t.Error("a refused login replaced the saved key")
	}
	r = s.run(unset, "login", "--url", s.srv.URL, "--key", s.key, "--json")
	if r.code != 0 || jsonField(t, r.stdout, "url") != s.srv.URL || jsonField(t, r.stdout, "config") != s.config ||
		jsonField(t, r.stdout, "projectId") != s.project || jsonField(t, r.stdout, "role") != "owner" || !strings.HasPrefix(jsonField(t, r.stdout, "keyId"), "key_") {
		t.Errorf("login --json: want url, config, projectId, role and keyId: %s", r)
	}
}

// stead dev leaves a config written by stead login for another server
// alone; it rewrites a missing one or one of an earlier local server.
func TestClaimConfig(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "config.json")
	dev := FileConfig{URL: "http://127.0.0.1:8720", Key: "stk_dev"}
	if wrote, err := claimConfig(p, dev); !wrote || err != nil {
		t.Fatalf("missing config: %v %v", wrote, err)
	}
	if wrote, _ := claimConfig(p, FileConfig{URL: "http://127.0.0.1:9999", Key: "stk_dev2"}); !wrote {
		t.Error("an earlier local server's config was not rewritten")
	}
	prod := FileConfig{URL: "https://stead.example.com", Key: "stk_prod"}
	if err := writeConfig(p, prod); err != nil {
		t.Fatal(err)
	}
	if wrote, _ := claimConfig(p, dev); wrote {
		t.Error("stead dev replaced a login to another server")
	}
	if c, _ := readConfig(p); c != prod {
		t.Errorf("config = %+v, want %+v", c, prod)
	}
}

// TestCustomerTokenCannotApprove: a customer token reads its end user's
// runs and cannot decide.
func TestCustomerTokenCannotApprove(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	run := s.startAwaiting("o-1001")
	tok := strings.TrimSpace(s.mustCLI("token", "demo-user").stdout)
	if !strings.HasPrefix(tok, "stc_") {
		t.Fatalf("token = %q", tok)
	}
	as := cliEnv{EnvKey: tok}
	r := s.run(as, "approve", run.ApprovalID)
	if r.code != 1 || !strings.Contains(r.stderr, "Customers cannot approve their own actions") {
		t.Errorf("customer approve: %s", r)
	}
	if r := s.run(as, "trace", run.ID); r.code != 0 || !strings.Contains(r.stdout, "awaiting-approval") {
		t.Errorf("customer trace of its own run: %s", r)
	}
	if r := s.run(as, "runs"); r.code != 0 || !strings.Contains(r.stdout, run.ID) {
		t.Errorf("customer runs: %s", r)
	}
	if got := s.waitRun(run.ID, func(store.Run) bool { return true }); got.Status != store.RunAwaitingApproval {
		t.Errorf("run is %s after a refused customer approval", got.Status)
	}
}

// TestApproveSeveral: one line per approval, exit 1 if any failed.
func TestApproveSeveral(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	a := s.startAwaiting("o-1001")
	b := s.startAwaiting("o-1002")
	r := s.cli("approve", a.ApprovalID, "apr_01NOPE0000000000000000000", b.ApprovalID)
	if r.code != 1 {
		t.Fatalf("approve several: %s", r)
	}
	if n := strings.Count(r.stdout, "approved apr_"); n != 2 {
		t.Errorf("want two approved lines: %s", r)
	}
	if !strings.Contains(r.stderr, "error: approval apr_01NOPE0000000000000000000 not found\n") ||
		!strings.Contains(r.stderr, "1 of 3 approvals could not be approved") {
		t.Errorf("stderr: %q", r.stderr)
	}
	for _, run := range []store.Run{a, b} {
		if got := s.waitRun(run.ID, terminal); got.Status != store.RunSucceeded {
			t.Errorf("run %s is %s (%+v)", run.ID, got.Status, got.Error)
		}
	}
}

// TestApproveEditedInput: --input replaces the call's input, validated.
func TestApproveEditedInput(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	run := s.startAwaiting("o-1001")
	r := s.cli("approve", run.ApprovalID, "--input", `{"orderId":"o-1001","amount":5}`)
	if r.code != 1 || !strings.Contains(r.stderr, "input") {
		t.Fatalf("approve with an invalid edit: %s", r)
	}
	file := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(file, []byte(`{"orderId":"o-1002","reason":"edited"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = s.cli("approve", run.ApprovalID, "--input", "@"+file)
	if r.code != 0 || !strings.Contains(r.stdout, "with the edited input") {
		t.Fatalf("approve with an edit: %s", r)
	}
	got := s.waitRun(run.ID, terminal)
	if got.Status != store.RunSucceeded || !strings.Contains(string(got.Output), `"orderId":"o-1002"`) {
		t.Errorf("run %s output %s", got.Status, got.Output)
	}
	tr := s.mustCLI("trace", run.ID)
	if !strings.Contains(tr.stdout, `input edited to {"orderId":"o-1002"`) {
		t.Errorf("trace does not show the edit:\n%s", tr.stdout)
	}
}

// TestRunFollow prints the trace live through the approval wait (saying
// what to run) to the run's end; with --json, one line per event and the
// run last; trace --follow follows a run already under way. After
// approval, cancel refuses a finished run.
func TestRunFollow(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	r := s.followDeciding([]string{"approve"}, "run", "refunds", "--input", `{"orderId":"o-1001","reason":"damaged"}`, "--end-user", "demo-user", "--follow")
	if r.code != 0 {
		t.Fatalf("run --follow: %s", r)
	}
	run := s.latestRun()
	for _, want := range []string{"run.created", "step.completed", "listOrders: 3 orders for demo-user", "approval.requested",
		"waiting for approval apr_", "(refundOrder): stead approve apr_", "approval.approved", "run.succeeded", "run " + run.ID + " succeeded"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run --follow output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = s.followDeciding([]string{"deny", "--note", "no"}, "run", "refunds", "--input", `{"orderId":"o-1002","reason":"damaged"}`, "--end-user", "demo-user", "--follow", "--json")
	if r.code != 1 {
		t.Fatalf("run --follow --json of a denied run: %s", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if st := jsonField(t, lines[len(lines)-1], "status"); st != "failed" {
		t.Errorf("last line status = %s", st)
	}
	for _, l := range lines[:len(lines)-1] {
		jsonField(t, l, "type")
		jsonField(t, l, "seq")
	}
	// trace --follow of a finished run prints it whole and ends.
	tr := s.mustCLI("trace", run.ID, "--follow")
	if !strings.Contains(tr.stdout, "run.created") || !strings.Contains(tr.stdout, "run.succeeded") {
		t.Errorf("trace --follow of a finished run:\n%s", tr.stdout)
	}
	// trace --follow of a waiting run follows it to its end.
	waiting := s.startAwaiting("o-1003")
	r = s.deciding([]string{"approve"}, "trace --follow", nil, func() result { return s.cli("trace", waiting.ID, "--follow") })
	if r.code != 0 || !strings.Contains(r.stdout, "approval.requested") || !strings.Contains(r.stdout, "run.succeeded") {
		t.Errorf("trace --follow of a waiting run: %s", r)
	}

	r = s.cli("cancel", run.ID)
	if r.code != 1 || !strings.Contains(r.stderr, "already succeeded") {
		t.Errorf("cancel a finished run: %s", r)
	}
	pending := s.startAwaiting("o-1003")
	r = s.mustCLI("cancel", pending.ID)
	if !strings.Contains(r.stdout, "cancelled") {
		t.Errorf("cancel: %s", r)
	}
}

// TestDeployProblems: config problems as stead.json: pointer: message,
// bundle problems as file:line:col, and nothing deployed.
func TestDeployProblems(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	dir := writeExample(t, func(c string) string {
		return strings.Replace(c, `"listOrders": { "effect": "read",`, `"listOrders": { "effect": "reed",`, 1)
	})
	r := s.cli("deploy", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "stead.json:16:25: /agents/refunds/tools/listOrders/effect: ") {
		t.Errorf("bad config: %s", r)
	}

	dir = writeExample(t, nil)
	if err := os.WriteFile(filepath.Join(dir, "handlers.js"), []byte("export async function listOrders() {\n  return {;\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = s.cli("deploy", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "handlers.js:2:") {
		t.Errorf("bad bundle: %s", r)
	}

	dir = writeExample(t, func(c string) string { return strings.Replace(c, `"handlers": "handlers.js",`, "", 1) })
	r = s.cli("deploy", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "stead.json: /handlers: ") {
		t.Errorf("no handlers: %s", r)
	}
	dir = writeExample(t, func(c string) string { return strings.Replace(c, `"handlers": "handlers.js",`, `"handlers": "",`, 1) })
	r = s.cli("deploy", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "stead.json does not name the handlers:\n  stead.json: /handlers: must name") {
		t.Errorf("empty handlers: %s", r)
	}

	dir = writeExample(t, nil)
	if err := os.WriteFile(filepath.Join(dir, "handlers.js"), []byte("export async function listOrders() { return {}; }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = s.cli("deploy", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "stead.json:17:9: /agents/refunds/tools/refundOrder: ") {
		t.Errorf("missing export: %s", r)
	}

	if r := s.cli("deploy", t.TempDir()); r.code != 1 || !strings.Contains(r.stderr, "stead.json") {
		t.Errorf("no stead.json: %s", r)
	}
	r = s.mustCLI("runs") // still the example's deployment 1
	d, err := s.stack.Store.LatestDeployment(t0ctx(), s.project)
	if err != nil || d.Version != 1 {
		t.Errorf("latest deployment = %d, %v; want 1 (refused deployments store nothing)", d.Version, err)
	}
}

// TestExpiredBySweep: a short approval timeout expires through the sweeper
// and the run fails approval-expired, which reads differently from denied.
func TestExpiredBySweep(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	dir := writeExample(t, func(c string) string {
		return strings.Replace(c, `"requiresApproval": true,`, `"requiresApproval": true, "approvals": { "timeout": "1s" },`, 1)
	})
	s.mustCLI("deploy", dir)
	run := s.startAwaiting("o-1001")
	s.clock.Advance(2 * time.Second)
	if _, err := s.stack.Engine.Sweep(t0ctx()); err != nil {
		t.Fatal(err)
	}
	got := s.waitRun(run.ID, terminal)
	if got.Status != store.RunFailed || got.Error == nil || got.Error.Code != "approval-expired" {
		t.Fatalf("run %s %+v", got.Status, got.Error)
	}
	r := s.cli("approve", run.ApprovalID)
	if r.code != 1 || !strings.Contains(r.stderr, "expired at 12:00:01Z (1s ago); it can no longer be approved") {
		t.Errorf("approve expired: %s", r)
	}
	tr := s.mustCLI("trace", run.ID)
	if !strings.Contains(tr.stdout, "approval.expired") || !strings.Contains(tr.stdout, "failed: approval-expired") {
		t.Errorf("trace:\n%s", tr.stdout)
	}
}

func t0ctx() context.Context { return context.Background() }

// followDeciding runs a following command (run --follow, trace --follow)
// and, while it follows, decides the approval its run asks for with
// decision (["approve"], ["deny", "--note", "no"]) once it is pending.
func (s *testStack) followDeciding(decision []string, args ...string) result {
	s.t.Helper()
	return s.deciding(decision, strings.Join(args, " "), s.pendingApprovals(), func() result { return s.cli(args...) })
}

// deciding is followDeciding for any command; the approval it decides is
// the first pending one not in before.
func (s *testStack) deciding(decision []string, what string, before map[string]bool, command func() result) result {
	s.t.Helper()
	done := make(chan result, 1)
	go func() { done <- command() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if id := newestOf(s.pendingApprovals(), before); id != "" {
			s.mustCLI(append([]string{decision[0], id}, decision[1:]...)...)
			break
		}
		select {
		case r := <-done:
			s.t.Fatalf("%s ended before an approval was asked for: %s", what, r)
		case <-time.After(50 * time.Millisecond): // poll interval, bounded by the deadline
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: no approval was asked for", what)
		}
	}
	select {
	case r := <-done:
		return r
	case <-time.After(20 * time.Second):
		s.t.Fatalf("%s did not end after the decision", what)
		return result{}
	}
}

// pendingApprovals are the ids of the project's pending approvals.
func (s *testStack) pendingApprovals() map[string]bool {
	s.t.Helper()
	page, err := s.stack.Store.ListApprovals(t0ctx(), store.ApprovalFilter{ProjectID: s.project, Status: approvals.Pending, Limit: store.MaxLimit})
	if err != nil {
		s.t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, a := range page.Items {
		ids[a.ID] = true
	}
	return ids
}

// newestOf is an id of now not in before, "" when none.
func newestOf(now, before map[string]bool) string {
	for id := range now {
		if !before[id] {
			return id
		}
	}
	return ""
}

// TestFollowResumes: when the event stream drops, run --follow reconnects
// with Last-Event-ID and prints every event exactly once.
func TestFollowResumes(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	var mu sync.Mutex
	var lastEventIDs []string
	streams := 0
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			s.stack.API.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		streams++
		first := streams == 1
		lastEventIDs = append(lastEventIDs, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if first {
			w = &cutAfterEvents{ResponseWriter: w, left: 2}
		}
		s.stack.API.ServeHTTP(w, r)
	}))
	defer cut.Close()

	r := s.deciding([]string{"approve"}, "run --follow", s.pendingApprovals(), func() result {
		return s.run(cliEnv{EnvURL: cut.URL}, "run", "refunds", "--input", `{"orderId":"o-1001","reason":"damaged"}`, "--end-user", "demo-user", "--follow")
	})
	if r.code != 0 {
		t.Fatalf("run --follow: %s", r)
	}
	if n := strings.Count(r.stdout, "run.created"); n != 1 {
		t.Errorf("run.created printed %d times:\n%s", n, r.stdout)
	}
	if !strings.Contains(r.stdout, "approval.requested") || !strings.Contains(r.stdout, "waiting for approval apr_") {
		t.Errorf("run --follow did not reach the approval:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "resuming after event 2") {
		t.Errorf("stderr: %q", r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lastEventIDs) < 2 || lastEventIDs[0] != "" || lastEventIDs[1] != "2" {
		t.Errorf("Last-Event-ID of the streams = %q, want \"\" then \"2\"", lastEventIDs)
	}
}

// cutAfterEvents aborts the connection once left SSE events were written
// (the "retry:" preamble does not count).
type cutAfterEvents struct {
	http.ResponseWriter
	left int
}

func (c *cutAfterEvents) Write(p []byte) (int, error) {
	if c.left <= 0 {
		panic(http.ErrAbortHandler)
	}
	n, err := c.ResponseWriter.Write(p)
	if strings.HasPrefix(string(p), "id: ") {
		c.left--
	}
	if c.left <= 0 {
		http.NewResponseController(c.ResponseWriter).Flush()
	}
	return n, err
}

func (c *cutAfterEvents) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// TestJSONErrors: under --json every failure is an error document on
// standard output in the API's shape — the API's own, or the CLI's codes
// for a usage mistake and an unreachable server.
func TestJSONErrors(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	for _, tc := range []struct {
		name string
		r    result
		code int
		want string
	}{
		{"unreachable", runCLI(time.Now, map[string]string{EnvURL: "http://127.0.0.1:1", EnvKey: "stk_x"}, http.DefaultClient, "runs", "--json"), 1, "unreachable"},
		{"usage", s.cli("aprove", "--json"), 2, "usage"},
		{"refused", s.cli("approval", "apr_nope", "--json"), 1, "not_found"},
	} {
		if tc.r.code != tc.code {
			t.Errorf("%s: exit %d, want %d: %s", tc.name, tc.r.code, tc.code, tc.r)
			continue
		}
		if got := jsonField(t, tc.r.stdout, "error.code"); got != tc.want || jsonField(t, tc.r.stdout, "error.message") == "" {
			t.Errorf("%s: stdout %s, want an error document with code %s", tc.name, tc.r.stdout, tc.want)
		}
	}
}
