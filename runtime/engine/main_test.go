package engine_test

import (
	"testing"

	"go.uber.org/goleak"

	"stead/runtime/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Main()                                                                                   // the sandbox tests' workers are this test binary
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("stead/runtime/sandbox.startProcess.func1.1")) // the worker spawner's thread lives as long as the process
}
