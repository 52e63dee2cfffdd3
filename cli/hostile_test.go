package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The hostile handlers of the sandbox suite, each as a one-step agent on a
// real `stead dev`: every run fails with its code within its timeout plus
// a second (the crashing one after its retries), the server never dies,
// and the example's normal run works afterwards.
func TestHostileHandlersOnSteadDev(t *testing.T) {
	e, tmp := newE2E(t)
	srv := e.startServer(freeAddr(t), filepath.Join(tmp, "data"))

	// timeoutMs is the tool's: 1.5 s where the outcome is the timeout, and
	// long enough for the handler to reach its own end (a crash, the memory
	// limit) on a busy machine where it is not, so that what is checked is
	// how it died, not how fast the machine is.
	cases := []struct {
		tool, body string
		codes      []string
		timeoutMs  int
		limit      time.Duration
	}{
		{"deepParse", `return JSON.parse("[".repeat(3e6) + "]".repeat(3e6));`, []string{"sandbox-crashed"}, 8000, 10 * time.Second},
		{"deepStringify", `return JSON.stringify(nest(3e6)).length;`, []string{"sandbox-crashed", "memory-limit", "timeout"}, 1500, 10 * time.Second},
		{"deepJoin", `return nest(3e6).join(",").length;`, []string{"sandbox-crashed", "memory-limit", "timeout"}, 1500, 10 * time.Second},
		{"deepReturn", `return nest(3e6);`, []string{"sandbox-crashed", "memory-limit", "timeout"}, 1500, 10 * time.Second},
		{"regex", `return /^(?=(a+)+$)a/.test("a".repeat(34) + "!");`, []string{"timeout"}, 1500, 2500 * time.Millisecond},
		{"growString", `let s = "x"; for (;;) s += s + "y";`, []string{"memory-limit"}, 8000, 9 * time.Second},
		{"hugeAlloc", `return new Array(2 ** 31).fill(0).length;`, []string{"memory-limit"}, 8000, 9 * time.Second},
		{"busy", `for (;;) {}`, []string{"timeout"}, 1500, 2500 * time.Millisecond},
		{"promiseStorm", `for (;;) { await Promise.all(Array.from({ length: 1e4 }, () => Promise.resolve(1))); }`, []string{"timeout", "memory-limit"}, 1500, 2500 * time.Millisecond},
	}
	var src, agents strings.Builder
	src.WriteString("function nest(n) { let a = []; for (let i = 0; i < n; i++) a = [a]; return a; }\n")
	for i, c := range cases {
		fmt.Fprintf(&src, "export async function %s() { %s }\n", c.tool, c.body)
		if i > 0 {
			agents.WriteString(",\n")
		}
		fmt.Fprintf(&agents, `"%s": {"tools": {"%s": {"effect": "read", "timeoutMs": %d}}, "steps": [{"id": "hostile", "tool": "%s", "input": {}}]}`, c.tool, c.tool, c.timeoutMs, c.tool)
	}
	dir := filepath.Join(tmp, "hostile")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "handlers.js"), []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	config := `{"handlers": "handlers.js", "agents": {` + agents.String() + `}}`
	if err := os.WriteFile(filepath.Join(dir, "stead.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("deploy", dir, "--yes")

	for _, c := range cases {
		start := time.Now()
		r := e.stead(nil, "run", c.tool, "--end-user", "mallory", "--wait", "--json")
		took := time.Since(start)
		if r.code != 1 {
			t.Errorf("%s: exit %d, want 1 (the run failed): %s", c.tool, r.code, r)
			continue
		}
		code := jsonField(t, r.stdout, "error.code")
		found := false
		for _, want := range c.codes {
			found = found || code == want
		}
		if !found || jsonField(t, r.stdout, "error.step") != "hostile" {
			t.Errorf("%s: failed with %s at step %s (%s), want one of %v", c.tool, code,
				jsonField(t, r.stdout, "error.step"), jsonField(t, r.stdout, "error.message"), c.codes)
		}
		if took > c.limit+time.Second { // the CLI's own start and poll included
			t.Errorf("%s: took %s, want at most %s", c.tool, took, c.limit+time.Second)
		}
		t.Logf("%s: %s after %s", c.tool, code, took.Round(time.Millisecond))
		select {
		case err := <-srv.done:
			t.Fatalf("stead dev died after %s (%v)\nstderr:\n%s", c.tool, err, srv.errb)
		default:
		}
	}

	// The example is still served: its read step runs, its write waits.
	e.must("deploy", filepath.Join("..", "examples", "refunds"), "--yes")
	r := e.must("run", "refunds", "--input", `{"orderId":"o-1001","reason":"damaged"}`, "--end-user", "demo-user", "--wait", "--json")
	if st := jsonField(t, r.stdout, "status"); st != "awaiting-approval" {
		t.Errorf("the example after the hostile runs is %s: %s", st, r)
	}
	srv.stop(t)
}
