package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestInitScaffold: stead init writes a project that type-checks (tsc
// --noEmit, the TypeScript compiler pinned in testdata/typescript), that
// deploys at once, and whose agent runs to its approval and on to the end;
// a second init into the same folder is refused and changes nothing.
func TestInitScaffold(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	dir := filepath.Join(t.TempDir(), "proj")
	r := s.mustCLI("init", dir)
	for _, want := range []string{"handlers.ts", "stead.json", "stead.d.ts", "stead.schema.json", "tsconfig.json", ".gitignore", "stead deploy " + dir} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("init output lacks %q: %s", want, r.stdout)
		}
	}
	before, err := os.ReadFile(filepath.Join(dir, "handlers.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "handlers.ts"), append(before, []byte("// mine\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := s.cli("init", dir); r.code != 1 || !strings.Contains(r.stderr, "already has") || !strings.Contains(r.stderr, "nothing was written") {
		t.Errorf("init into a project: %s", r)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "handlers.ts")); !strings.HasSuffix(string(after), "// mine\n") {
		t.Error("a refused init changed handlers.ts")
	}

	typecheck(t, dir)

	// The test stack has the example deployed: this replaces its agents.
	if r := s.mustCLI("deploy", dir, "--yes"); !strings.Contains(r.stdout, "notify-customer") {
		t.Fatalf("deploy the scaffold: %s", r)
	}
	r = s.mustCLI("run", "notify-customer", "--input", `{"message":"hello"}`, "--end-user", "demo-user", "--wait", "--json")
	if st := jsonField(t, r.stdout, "status"); st != "awaiting-approval" {
		t.Fatalf("run: %s", r.stdout)
	}
	run, approval := jsonField(t, r.stdout, "id"), jsonField(t, r.stdout, "approval.id")
	s.mustCLI("approve", approval)
	done := s.waitRun(run, terminal)
	if done.Status != "succeeded" || !strings.Contains(string(done.Output), `"sent":true`) {
		t.Fatalf("the scaffold's run: %s %s %+v", done.Status, done.Output, done.Error)
	}
}

// typecheck runs tsc --noEmit on dir; it skips without the compiler
// (fails with CI=true).
func typecheck(t *testing.T, dir string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	tsc := filepath.Join(filepath.Dir(file), "testdata", "typescript", "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the TypeScript compiler is not installed (make typescript): %v", err)
		}
		t.Log("skipping the type check: the TypeScript compiler is not installed (make typescript)")
		return
	}
	cmd := exec.Command(tsc, "--noEmit", "-p", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc --noEmit on the scaffold: %v\n%s", err, out)
	}
}
