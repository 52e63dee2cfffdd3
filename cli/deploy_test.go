package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeployPlacesConfigProblems: a stead.json problem is printed where it
// is, as CONFIG.md shows — stead.json:line:column: pointer: message — for a
// syntax error the CLI finds before bundling as for what the server refuses
// (testdata/deploy_config_*.golden).
func TestDeployPlacesConfigProblems(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	dir := writeExample(t, func(c string) string {
		return strings.Replace(c, `"listOrders": { "effect": "read",`, `"listOrders": { "effect": "reed",`, 1)
	})
	r := s.cli("deploy", dir)
	if r.code != 1 {
		t.Fatalf("bad effect: %s", r)
	}
	golden(t, "deploy_config_refused", r.stderr)

	dir = writeExample(t, func(c string) string {
		return strings.Replace(c, `"reason": { "type": "string" }`, `"reason": { "type": "string" },`, 1)
	})
	r = s.cli("deploy", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "stead.json:10:") {
		t.Fatalf("trailing comma: %s", r)
	}
	golden(t, "deploy_config_syntax", r.stderr)

	if err := os.WriteFile(filepath.Join(dir, "stead.json"), []byte(`{ "handlers": "handlers.js", "agents": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := s.cli("deploy", dir); r.code != 1 || !strings.Contains(r.stderr, "  stead.json:1:41: invalid JSON at line 1, column 41: unexpected end of file") {
		t.Errorf("unclosed brace: %s", r)
	}
}

// TestDeployNamesAMissingFile: a typo'd relative import is "no such file"
// with the nearest name, not the Node builtins hint
// (testdata/deploy_import_typo.golden).
func TestDeployNamesAMissingFile(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	files := map[string]string{}
	for k, v := range thrownHandlers {
		files[k] = v
	}
	files["handlers.ts"] = strings.Replace(files["handlers.ts"], `"./money"`, `"./mony"`, 1)
	r := s.cli("deploy", writeFiles(t, files))
	if r.code != 1 || strings.Contains(r.stderr, "Node builtins") {
		t.Fatalf("typo'd import: %s", r)
	}
	golden(t, "deploy_import_typo", r.stderr)
}

// tty is a standard input that says it is a terminal.
type tty struct{ *strings.Reader }

func (tty) IsTerminal() bool { return true }

// cliWithStdin runs the CLI against the stack with stdin.
func (s *testStack) cliWithStdin(stdin io.Reader, args ...string) result {
	s.t.Helper()
	vars := map[string]string{EnvURL: s.srv.URL, EnvKey: s.key, EnvConfig: s.config}
	var out, errb bytes.Buffer
	code := Run(context.Background(), Env{
		Stdin: stdin, Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return vars[k] }, Now: s.clock.Now, HTTPClient: s.http,
	}, args)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// TestDeployConfirmsRemovedAgents: a folder without agents the latest
// deployment has is refused in a script unless --yes, naming them and the
// flag; a terminal is asked, and only "y" deploys
// (testdata/deploy_removes_*.golden).
func TestDeployConfirmsRemovedAgents(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	dir := writeFiles(t, thrownHandlers) // only "orders"; the example has refunds and review-refund
	latest := func() int {
		d, err := s.stack.Store.LatestDeployment(t0ctx(), s.project)
		if err != nil {
			t.Fatal(err)
		}
		return d.Version
	}

	r := s.cli("deploy", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "refunds, review-refund") || !strings.Contains(r.stderr, "--yes") || latest() != 1 {
		t.Fatalf("without a terminal or --yes: %s (latest deployment %d)", r, latest())
	}
	golden(t, "deploy_removes_refused", r.stderr)

	r = s.cliWithStdin(tty{strings.NewReader("n\n")}, "deploy", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "Deploy anyway? [y/N] ") || !strings.Contains(r.stderr, "deploy cancelled") || latest() != 1 {
		t.Fatalf("answered n: %s (latest deployment %d)", r, latest())
	}

	for _, answer := range []string{"\n", "ok\n", ""} { // Enter takes the default, N; only y or yes deploys
		r = s.cliWithStdin(tty{strings.NewReader(answer)}, "deploy", dir)
		if r.code != 1 || !strings.Contains(r.stderr, "deploy cancelled") || latest() != 1 {
			t.Fatalf("answered %q: %s (latest deployment %d)", answer, r, latest())
		}
	}

	r = s.cliWithStdin(tty{strings.NewReader("y\n")}, "deploy", dir)
	if r.code != 0 || latest() != 2 {
		t.Fatalf("answered y: %s (latest deployment %d)", r, latest())
	}
	z := newNormalizer()
	golden(t, "deploy_removes_confirmed", z.replace(r.String()))

	// Back to the example (which drops orders), then away again, each
	// confirmed with --yes.
	s.mustCLI("deploy", writeExample(t, nil), "--yes")
	r = s.cli("deploy", dir, "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "  removed refunds, review-refund (deployment 3 had them)\n") || latest() != 4 {
		t.Fatalf("--yes: %s (latest deployment %d)", r, latest())
	}
}
