package engine_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"stead/runtime/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Main() // the sandbox tests' workers are this test binary
	code := m.Run()
	if code == 0 {
		if err := checkKindsWritten(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if code == 0 {
		// The worker spawner's thread lives as long as the process.
		if err := goleak.Find(goleak.IgnoreTopFunction("stead/runtime/sandbox.startProcess.func1.1")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// narrowed reports whether -run or -skip chose some of the tests.
func narrowed() bool {
	for _, f := range []string{"test.run", "test.skip"} {
		if fl := flag.Lookup(f); fl != nil && fl.Value.String() != "" {
			return true
		}
	}
	return false
}
