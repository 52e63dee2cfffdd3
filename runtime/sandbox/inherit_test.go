package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
	"stead/runtime/sandbox"
)

const inheritEnv = "STEAD_SANDBOX_TEST_INHERIT"

// inheritMain is TestWorkersInheritNoDescriptor's child: a parent started
// with descriptors it did not open (fds 3 to 5, not close-on-exec). It
// runs one call and prints its worker's descriptors, one "fd → target" a
// line.
func inheritMain() {
	if os.Getenv(inheritEnv) != "1" {
		return
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	p, err := sandbox.New(sandbox.Options{})
	if err != nil {
		fail(err)
	}
	defer os.Exit(0)
	defer p.Close()
	rt := jsvm.New(jsvm.Options{})
	b, err := rt.Compiler(bundle.Options{}).Load(context.Background(), "handlers.mjs", []byte(`export async function h() { return 1; }`))
	rt.Close()
	if err != nil {
		fail(err)
	}
	if _, err := p.Invoke(context.Background(), b, jsvm.Invocation{Tenant: "prj", Export: "h"}); err != nil {
		fail(err)
	}
	pid := p.Stats().PIDs[0]
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		fail(err)
	}
	for _, fd := range fds {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		fmt.Printf("%s → %s\n", fd.Name(), l)
	}
}

// A worker inherits no descriptor its parent inherited (New marks them
// close-on-exec), only its channel.
func TestWorkersInheritNoDescriptor(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	leak, err := os.CreateTemp(t.TempDir(), "inherited-")
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = []string{inheritEnv + "=1"}
	cmd.ExtraFiles = []*os.File{leak, leak, leak} // fds 3, 4 and 5 of the child
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the child parent: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "3 → pipe:") {
		t.Fatalf("the child's worker has no channel:\n%s", out)
	}
	if strings.Contains(string(out), leak.Name()) {
		t.Errorf("the worker inherited its parent's descriptor on %s:\n%s", leak.Name(), out)
	}
}

const orphanEnv = "STEAD_SANDBOX_TEST_ORPHAN"

// orphanMain is TestWorkerDiesWithItsParent's child: a parent that runs one
// call, prints its worker's pid and waits to be killed.
func orphanMain() {
	if os.Getenv(orphanEnv) != "1" {
		return
	}
	p, err := sandbox.New(sandbox.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rt := jsvm.New(jsvm.Options{})
	b, err := rt.Compiler(bundle.Options{}).Load(context.Background(), "handlers.mjs", []byte(`export async function h() { return 1; }`))
	rt.Close()
	if err == nil {
		_, err = p.Invoke(context.Background(), b, jsvm.Invocation{Tenant: "prj", Export: "h"})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(p.Stats().PIDs[0])
	select {} // until killed
}

// A worker started with another protocol version refuses to serve,
// saying why.
func TestWorkerRefusesAnotherProtocolVersion(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, sandbox.WorkerArg, "1", "0", "0", "0")
	cmd.Env = []string{}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.HasPrefix(stderr.String(), `stead sandbox worker: bad arguments ["1" "0" "0" "0"] (protocol 2 expected)`) {
		t.Errorf("%v, stderr %q; want exit status 2 and the arguments refused", err, stderr.String())
	}
}
