// Package rie runs Lambda functions' real bootstrap binaries under the AWS
// Lambda Runtime Interface Emulator, for tests:
//
//	bin := rie.BuildFunctions(t, "./functions/api", "./functions/runner")
//	fn := rie.Start(t, rie.Function{Name: "stead-api", Bootstrap: bin["api"], Env: env})
//	out, err := fn.Invoke(ctx, event) // a *rie.FunctionError when the handler failed
//
// One emulator process per function, each on its own free loopback ports
// (the invoke address and the runtime API address), stopped in t.Cleanup.
// The emulator crashes on concurrent invocations (upstream issues #97 and
// #131), so an Instance passes one invocation at a time.
//
// The emulator binary is cached in <repo>/bin/aws-lambda-rie (`make
// bin/aws-lambda-rie`); Binary builds it there with `go install` when it is
// missing. When it cannot be had the test is skipped with the command that
// installs it, or fails when CI=true, so CI never passes by skipping.
//
// Queue stands in for the Lambda service's Invoke API for asynchronous
// invocations (InvocationType Event): a function under test that dispatches
// work to another function is pointed at it (AWS_ENDPOINT_URL_LAMBDA), and
// the test replays what it queued into the target's Instance, serially.
package rie

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"stead/infra/localproc"
)

// The emulator's module and the version Stead tests with.
const (
	Module  = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
	Version = "v0.0.0-20261030222936-bef5c4ba774d"
	// BinaryName is the emulator's file name in <repo>/bin.
	BinaryName = "aws-lambda-rie"
)

// HowToInstall is what a developer runs to get the emulator.
const HowToInstall = "make bin/aws-lambda-rie (that is: GOBIN=$PWD/bin go install " + Module + "@" + Version + ")"

// Timeouts.
const (
	// BuildTimeout bounds building the emulator (about 25 s cold).
	BuildTimeout = 5 * time.Minute
	// ReadyTimeout bounds waiting for an emulator to listen.
	ReadyTimeout = 10 * time.Second
	// DefaultFunctionTimeout is a function's timeout when Function.Timeout
	// is zero.
	DefaultFunctionTimeout = 30 * time.Second
)

// RepoRoot is the folder of the go.mod above the working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

var binaryMu sync.Mutex

// Binary returns the emulator's path, building it into <repo>/bin first
// when it is not there.
func Binary(t testing.TB) string {
	t.Helper()
	binaryMu.Lock()
	defer binaryMu.Unlock()
	binDir := filepath.Join(RepoRoot(t), "bin")
	path := filepath.Join(binDir, BinaryName)
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		return path
	}
	if err := build(binDir); err != nil {
		localproc.Unavailable(t, "the Lambda Runtime Interface Emulator is not in %s and could not be built: %v\nto install it: %s", binDir, err, HowToInstall)
	}
	return path
}

// build installs the emulator into a fresh folder and moves it into
// binDir, so that two test processes building at once do not clash.
func build(binDir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return errors.New("go is not on PATH")
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(binDir, ".rie-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "install", Module+"@"+Version)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0")
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go install %s@%s: %w: %s", Module, Version, err, tail(out.String(), 2000))
	}
	return os.Rename(filepath.Join(tmp, BinaryName), filepath.Join(binDir, BinaryName))
}

// BuildFunctions builds main packages (paths relative to the repo root,
// like "./functions/api") for this machine, as Lambda builds them
// (CGO_ENABLED=0, -tags lambda.norpc), and returns each binary's path by
// the package's last path element.
func BuildFunctions(t testing.TB, pkgs ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"build", "-tags", "lambda.norpc", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	bins := map[string]string{}
	for _, p := range pkgs {
		name := filepath.Base(p)
		bins[name] = filepath.Join(dir, name)
	}
	return bins
}

// Function is one function to run.
type Function struct {
	// Name is AWS_LAMBDA_FUNCTION_NAME.
	Name string
	// Bootstrap is the binary's path.
	Bootstrap string
	// Env is the function's whole environment (KEY=VALUE) besides PATH,
	// HOME (a temporary folder) and what the emulator sets: nothing of
	// the test process leaks in, AWS credentials included.
	Env []string
	// Timeout is the function's timeout; DefaultFunctionTimeout when zero.
	Timeout time.Duration
}

// Instance is one running emulator with one function.
type Instance struct {
	// URL is the emulator's invoke endpoint.
	URL string
	fn  Function
	cmd *exec.Cmd
	log *logBuffer
	// exited is closed when the emulator has exited.
	exited chan struct{}
	mu     sync.Mutex // one invocation at a time
	client *http.Client
}

// Start runs fn under its own emulator until the test ends.
func Start(t testing.TB, fn Function) *Instance {
	t.Helper()
	bin := Binary(t)
	if fn.Timeout <= 0 {
		fn.Timeout = DefaultFunctionTimeout
	}
	var last error
	for range 3 { // a free port may be taken between the probe and the bind
		inst, err := start(t, bin, fn)
		if err == nil {
			t.Cleanup(func() {
				inst.Stop()
				if t.Failed() {
					t.Logf("%s emulator log (tail):\n%s", fn.Name, tail(inst.Logs(), 6000))
				}
			})
			return inst
		}
		last = err
	}
	t.Fatalf("start %s under the emulator: %v", fn.Name, last)
	return nil
}

func start(t testing.TB, bin string, fn Function) (*Instance, error) {
	invokeAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	log := &logBuffer{max: 256 << 10}
	cmd := exec.Command(bin,
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", apiAddr,
		fn.Bootstrap)
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"AWS_LAMBDA_FUNCTION_NAME=" + fn.Name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(int(fn.Timeout/time.Second)),
	}, fn.Env...)
	cmd.Dir = filepath.Dir(fn.Bootstrap)
	cmd.Stdout, cmd.Stderr = log, log
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	inst := &Instance{
		URL:    "http://" + invokeAddr + "/2015-03-31/functions/function/invocations",
		fn:     fn,
		cmd:    cmd,
		log:    log,
		exited: make(chan struct{}),
		client: &http.Client{Timeout: fn.Timeout + 10*time.Second},
	}
	go func() {
		_ = cmd.Wait()
		close(inst.exited)
	}()
	if err := inst.waitReady(invokeAddr); err != nil {
		inst.Stop()
		return nil, err
	}
	return inst, nil
}

func (i *Instance) waitReady(addr string) error {
	deadline := time.Now().Add(ReadyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-i.exited:
			return fmt.Errorf("the emulator exited before it listened: %s", tail(i.log.String(), 2000))
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the emulator did not listen on %s within %s: %s", addr, ReadyTimeout, tail(i.log.String(), 2000))
}

// Stop ends the emulator (which kills the function's process) and waits
// for it; the process group is killed if it does not stop in time.
func (i *Instance) Stop() {
	select {
	case <-i.exited:
		return
	default:
	}
	_ = i.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-i.exited:
	case <-time.After(5 * time.Second):
		killGroup(i.cmd.Process)
		<-i.exited
	}
}

// FunctionError is an invocation that failed in the function: the handler
// returned an error (the emulator answers 200 with {"errorMessage",
// "errorType"} and no X-Amz-Function-Error header, so Invoke reads the
// body), or the process exited (502, errorType Runtime.ExitError; the next
// invocation starts it again).
type FunctionError struct {
	Type    string `json:"errorType"`
	Message string `json:"errorMessage"`
}

func (e *FunctionError) Error() string { return e.Type + ": " + e.Message }

// Invoke sends one event and returns the function's answer. A handler
// error is a *FunctionError; anything else is the emulator failing.
func (i *Instance) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	select {
	case <-i.exited:
		return nil, fmt.Errorf("%s: the emulator has exited: %s", i.fn.Name, tail(i.log.String(), 2000))
	default:
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, i.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := i.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", i.fn.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: read the answer: %w", i.fn.Name, err)
	}
	if fe := functionError(body); fe != nil {
		return nil, fe // a handler error (200), or the process crashed (502, Runtime.ExitError)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("invoke %s: the emulator answered %s: %s", i.fn.Name, resp.Status, tail(string(body), 2000))
	}
	return body, nil
}

// functionError reads an error answer: an object whose only fields are
// errorMessage, errorType and optionally stackTrace.
func functionError(body []byte) *FunctionError {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	if _, ok := m["errorType"]; !ok {
		return nil
	}
	for k := range m {
		switch k {
		case "errorType", "errorMessage", "stackTrace":
		default:
			return nil
		}
	}
	var fe FunctionError
	if json.Unmarshal(body, &fe) != nil {
		return nil
	}
	return &fe
}

// Logs returns what the emulator and the function printed.
func (i *Instance) Logs() string { return i.log.String() }

var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// InitDuration is the function's init phase as the emulator reported it
// (its cold start inside the sandbox), once it has been invoked. The
// emulator's log reaches us through a pipe, possibly after the invocation
// answered: it waits up to two seconds for the report line.
func (i *Instance) InitDuration() (time.Duration, bool) {
	var m []string
	for deadline := time.Now().Add(2 * time.Second); ; {
		i.log.mu.Lock()
		head := string(i.log.head)
		i.log.mu.Unlock()
		if m = initReport.FindStringSubmatch(head); m != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m == nil {
		return 0, false
	}
	ms, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// logBuffer keeps the first and the last bytes a process printed.
type logBuffer struct {
	mu   sync.Mutex
	head []byte
	buf  []byte
	max  int
}

const headBytes = 16 << 10

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := min(len(p), headBytes-len(b.head)); n > 0 {
		b.head = append(b.head, p[:n]...)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
