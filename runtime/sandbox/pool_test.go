package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
	"stead/runtime/sandbox"
)

const poolHandlers = `
let n = 0;
export async function count() { return ++n; }
export async function recurse() { function r() { return r() + 1; } return r(); }
export async function gate(input, context) { await context.broker.get("gate", "k"); return ++n; }
export async function echoInput(input) { return input; }
export async function nested(input) { let a = []; for (let i = 1; i < input.n; i++) a = [a]; return a; }
export async function fetchMany(input) {
  let s = 0;
  for (let i = 0; i < input.n; i++) s += (await fetch(input.url)).status;
  return s;
}
export async function mark(input, context) {
  context.markUntrusted("web:" + input.s);
  if (input.crash) { JSON.parse("[".repeat(3e6) + "]".repeat(3e6)); }
  return "ok";
}
`

// gateBroker holds every get until release is closed or its call ends,
// telling entered about each.
type gateBroker struct {
	jsvm.MemoryBroker
	entered chan struct{}
	release chan struct{}
}

func newGate() *gateBroker {
	return &gateBroker{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gateBroker) Get(ctx context.Context, _, _ string) (json.RawMessage, bool, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return nil, false, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// count calls count on p for tenant and returns what the worker's module
// counted.
func count(t *testing.T, p *sandbox.Pool, b *bundle.Bundle, tenant string) string {
	t.Helper()
	res, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Tenant: tenant, Export: "count"})
	if e != nil {
		t.Fatalf("count: %+v", e)
	}
	return string(res.Output)
}

// A worker whose VM is spent (a stack overflow, a cancelled call) is not
// given another call, and one that served MaxCalls calls is replaced: the
// next call meets fresh module state.
func TestSpentWorkersAreNotReused(t *testing.T) {
	t.Parallel()
	b := load(t, poolHandlers)
	p := newPool(t, sandbox.Options{})
	if got := count(t, p, b, ""); got != "1" {
		t.Fatalf("count = %s, want 1", got)
	}
	if _, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "recurse"}); e == nil || e.Code != jsvm.CodeStackOverflow {
		t.Fatalf("recurse: %+v, want %s", e, jsvm.CodeStackOverflow)
	}
	if got := count(t, p, b, ""); got != "1" {
		t.Errorf("after a stack overflow, count = %s: the spent worker served the call", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := newGate()
	go func() {
		<-g.entered
		cancel()
	}()
	if _, err := p.Invoke(ctx, b, jsvm.Invocation{Tenant: "prj_test", Export: "gate", Broker: g}); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	if got := count(t, p, b, ""); got != "1" {
		t.Errorf("after a cancelled call, count = %s: the interrupted worker served the call", got)
	}

	p = newPool(t, sandbox.Options{MaxCalls: 2})
	for i, want := range []string{"1", "2", "1"} {
		if got := count(t, p, b, ""); got != want {
			t.Errorf("call %d with MaxCalls 2: count = %s, want %s", i+1, got, want)
		}
	}
}

// A cancelled call is told to its worker, which answers at once: the
// parent does not wait for Grace and kill it. A call cancelled while it
// waits for a worker is cancelled, not timed out.
func TestCancelIsToldToTheWorker(t *testing.T) {
	t.Parallel()
	b := load(t, poolHandlers)
	p := newPool(t, sandbox.Options{Grace: time.Minute, MaxWorkers: 1, MaxPerTenant: 1})
	ctx, cancel := context.WithCancel(context.Background())
	g := newGate()
	go func() {
		<-g.entered
		cancel()
	}()
	_, err := p.Invoke(ctx, b, jsvm.Invocation{Tenant: "prj_test", Export: "gate", Broker: g})
	if e, ok := jsvm.AsError(err); !ok || e.Code != jsvm.CodeCancelled || strings.Contains(e.Message, "stopped") {
		t.Fatalf("%v, want cancelled by the worker itself", err)
	}

	holder := newGate()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "gate", Broker: holder}); e != nil {
			t.Errorf("the call holding the worker: %+v", e)
		}
	})
	<-holder.entered
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = p.Invoke(ctx, b, jsvm.Invocation{Tenant: "prj_test", Export: "count"})
	if e, ok := jsvm.AsError(err); !ok || e.Code != jsvm.CodeCancelled || !strings.Contains(e.Message, "while waiting for a free sandbox worker") {
		t.Errorf("%v, want cancelled while waiting", err)
	}
	close(holder.release)
	wg.Wait()
}

// MaxPerTenant is half of MaxWorkers by default, and MaxWorkers bounds
// the calls of all tenants together: a call past either waits (here, to
// its StartBy: sandbox-busy) while another tenant's call runs.
func TestTenantShares(t *testing.T) {
	t.Parallel()
	b := load(t, poolHandlers)
	for _, tc := range []struct {
		name        string
		opts        sandbox.Options
		busy, other string // the tenant refused and the one served beside the holding call
	}{
		{"half of MaxWorkers per tenant", sandbox.Options{MaxWorkers: 2}, "prj_a", "prj_b"},
		{"MaxWorkers for all", sandbox.Options{MaxWorkers: 1, MaxPerTenant: 2}, "prj_b", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPool(t, tc.opts)
			g := newGate()
			var wg sync.WaitGroup
			wg.Go(func() {
				if _, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Tenant: "prj_a", Export: "gate", Broker: g}); e != nil {
					t.Errorf("the holding call: %+v", e)
				}
			})
			<-g.entered
			_, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Tenant: tc.busy, Export: "count", StartBy: time.Now().Add(100 * time.Millisecond)})
			if e == nil || e.Code != jsvm.CodeBusy {
				t.Errorf("%s's call beside the holding one: %+v, want %s", tc.busy, e, jsvm.CodeBusy)
			}
			if tc.other != "" {
				if got := count(t, p, b, tc.other); got != "1" {
					t.Errorf("%s's call: %s", tc.other, got)
				}
			}
			close(g.release)
			wg.Wait()
		})
	}
}

// The idle bounds: MaxIdlePerBundle warm workers per tenant and bundle,
// MaxIdle in all, the one idle longest going first.
func TestIdleBounds(t *testing.T) {
	t.Parallel()
	b := load(t, poolHandlers)
	t.Run("per bundle", func(t *testing.T) {
		t.Parallel()
		p := newPool(t, sandbox.Options{MaxIdlePerBundle: 1})
		g := newGate()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "gate", Broker: g}); e != nil {
					t.Errorf("gate: %+v", e)
				}
			})
		}
		<-g.entered
		<-g.entered // two workers, each running a call
		close(g.release)
		wg.Wait()
		if s := p.Stats(); s.Idle != 1 {
			t.Errorf("stats %+v, want one idle worker", s)
		}
	})
	t.Run("in all", func(t *testing.T) {
		t.Parallel()
		p := newPool(t, sandbox.Options{MaxIdle: 2})
		for _, tenant := range []string{"prj_a", "prj_b", "prj_c"} {
			count(t, p, b, tenant)
		}
		if s := p.Stats(); s.Idle != 2 {
			t.Errorf("stats %+v, want two idle workers", s)
		}
		// prj_a's worker, idle longest, went; prj_b's stayed.
		if got := count(t, p, b, "prj_b"); got != "2" {
			t.Errorf("prj_b's count = %s, want 2 on its warm worker", got)
		}
	})
}

// A worker idle for IdleTimeout is stopped.
func TestIdleWorkersAreStopped(t *testing.T) {
	t.Parallel()
	b := load(t, poolHandlers)
	p := newPool(t, sandbox.Options{IdleTimeout: 40 * time.Millisecond})
	count(t, p, b, "")
	deadline := time.Now().Add(time.Minute)
	for p.Stats().Live != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the idle worker was never stopped: %+v", p.Stats())
		}
		time.Sleep(10 * time.Millisecond) // poll, bounded by the deadline
	}
}

// An input of MaxInputSize bytes is taken; one byte more is refused.
func TestInputAtTheLimit(t *testing.T) {
	t.Parallel()
	b := load(t, poolHandlers)
	p := newPool(t, sandbox.Options{MaxInputSize: 8})
	res, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "echoInput", Input: json.RawMessage(`"123456"`)})
	if e != nil || string(res.Output) != `"123456"` {
		t.Errorf("an input of 8 bytes: %s %+v", res.Output, e)
	}
	if _, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "echoInput", Input: json.RawMessage(`"1234567"`)}); e == nil || e.Code != jsvm.CodeInvalidInput {
		t.Errorf("an input of 9 bytes: %+v, want %s", e, jsvm.CodeInvalidInput)
	}
}

// A result nested one level past the limit is the handler's error
// (not-serializable), found by the worker: the parent never sees it, and
// the worker lives on.
func TestResultDepthLimitIsTheHandlers(t *testing.T) {
	t.Parallel()
	b := load(t, poolHandlers)
	p := newPool(t, sandbox.Options{})
	if res, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "nested", Input: json.RawMessage(`{"n":256}`)}); e != nil || len(res.Output) != 512 {
		t.Errorf("a result 256 deep: %d bytes, %+v", len(res.Output), e)
	}
	if _, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "nested", Input: json.RawMessage(`{"n":257}`)}); e == nil || e.Code != jsvm.CodeNotSerializable {
		t.Errorf("a result 257 deep: %+v, want %s", e, jsvm.CodeNotSerializable)
	}
	if s := p.Stats(); s.Live != 1 || s.Idle != 1 {
		t.Errorf("stats %+v, want the one worker kept", s)
	}
}

// A call's fetches one after another are not counted as in flight once
// answered: more than the eight at once, in sequence, all go through.
func TestFetchesInSequence(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	b := load(t, poolHandlers)
	p := newPool(t, sandbox.Options{Fetch: jsvm.FetchOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	res, e := invoke(t, p, b, 20*time.Second, jsvm.Invocation{Export: "fetchMany", Input: json.RawMessage(`{"n":12,"url":"` + srv.URL + `"}`)})
	if e != nil || string(res.Output) != "2400" {
		t.Errorf("twelve fetches in sequence: %s %+v", res.Output, e)
	}
}

// Untrusted marks are redacted like the rest of the result, on a call
// that returns and on one whose worker died.
func TestUntrustedMarksAreRedacted(t *testing.T) {
	t.Parallel()
	b := load(t, poolHandlers)
	p := newPool(t, sandbox.Options{})
	for _, crash := range []bool{false, true} {
		input := fmt.Sprintf(`{"s":"sk-live-9","crash":%v}`, crash)
		res, _ := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "mark", Input: json.RawMessage(input), Secrets: []string{"sk-live-9"}})
		if len(res.Untrusted) != 1 || res.Untrusted[0] != "web:[REDACTED]" {
			t.Errorf("crash %v: untrusted %q, want the secret redacted", crash, res.Untrusted)
		}
	}
}

// A worker runs in the temporary folder, cannot gain privileges, at a
// lower priority than its parent, with its data segment limited.
func TestWorkerIsHardened(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	b := load(t, poolHandlers)
	opts := sandbox.Options{MemoryLimit: 64 << 20, WorkerMemory: 200 << 20}
	p := newPool(t, opts)
	count(t, p, b, "")
	pid := p.Stats().PIDs[0]
	proc := func(name string) string {
		t.Helper()
		s, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(s)
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		t.Fatal(err)
	}
	if tmp, _ := filepath.EvalSymlinks(os.TempDir()); cwd != tmp {
		t.Errorf("the worker's working directory is %s, want %s", cwd, tmp)
	}
	if !strings.Contains(proc("status"), "\nNoNewPrivs:\t1\n") {
		t.Error("the worker may gain privileges (NoNewPrivs is not 1)")
	}
	nice := func(stat string) int {
		t.Helper()
		fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
		n, err := strconv.Atoi(fields[16]) // the 19th field of stat
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := nice(proc("stat")), min(19, nice(string(self))+5); got != want {
		t.Errorf("the worker's nice is %d, want %d", got, want)
	}
	var data string
	for _, line := range strings.Split(proc("limits"), "\n") {
		if strings.HasPrefix(line, "Max data size") {
			data = strings.Join(strings.Fields(line)[3:5], " ")
		}
	}
	// A race-enabled worker runs without the limit (see platformHarden).
	if want := fmt.Sprint(opts.MemoryLimit+opts.WorkerMemory, " ", opts.MemoryLimit+opts.WorkerMemory); !raceEnabled && data != want {
		t.Errorf("the worker's data-segment limit is %q, want %q", data, want)
	}
}

// failingBroker fails every delete and list.
type failingBroker struct{ jsvm.MemoryBroker }

func (*failingBroker) Delete(context.Context, string, string) (bool, error) {
	return false, errors.New("the store is down for delete")
}

func (*failingBroker) List(context.Context, string) ([]jsvm.BrokerItem, error) {
	return nil, errors.New("the store is down for list")
}

// A broker's failing delete or list reaches the handler as a rejection,
// not as "nothing found".
func TestBrokerFailuresReachTheHandler(t *testing.T) {
	t.Parallel()
	b := load(t, `
export async function del(input, context) {
  try { return "resolved " + await context.broker.delete("c", "k"); } catch (e) { return "rejected: " + e.message; }
}
export async function list(input, context) {
  try { return "resolved " + JSON.stringify(await context.broker.list("c")); } catch (e) { return "rejected: " + e.message; }
}`)
	p := newPool(t, sandbox.Options{})
	for _, tc := range []struct{ export, want string }{
		{"del", "the store is down for delete"},
		{"list", "the store is down for list"},
	} {
		res, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: tc.export, Broker: &failingBroker{}})
		var out string
		if e != nil || json.Unmarshal(res.Output, &out) != nil || !strings.HasPrefix(out, "rejected: ") || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %s %+v, want it rejected with %q", tc.export, res.Output, e, tc.want)
		}
	}
}

// A call on a closed pool is cancelled, saying the pool is closed.
func TestInvokeOnAClosedPool(t *testing.T) {
	t.Parallel()
	b := load(t, poolHandlers)
	p := newPool(t, sandbox.Options{})
	p.Close()
	_, e := invoke(t, p, b, 10*time.Second, jsvm.Invocation{Export: "count"})
	if e == nil || e.Code != jsvm.CodeCancelled || e.Message != "the sandbox pool is closed" {
		t.Errorf("%+v, want %s: the sandbox pool is closed", e, jsvm.CodeCancelled)
	}
}

// Fetches past the eight in flight wait their turn in the worker: nine at
// once against a server that never answers end in the call's timeout,
// never in a worker killed for a ninth fetch.
func TestFetchesPastTheLimitWaitInTheWorker(t *testing.T) {
	t.Parallel()
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer stuck.Close()
	b := load(t, `export async function fetchAll(input) {
  return (await Promise.all(Array.from({ length: input.n }, () => fetch(input.url)))).length;
}`)
	p := newPool(t, sandbox.Options{Fetch: jsvm.FetchOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	_, e := invoke(t, p, b, 30*time.Second, jsvm.Invocation{Export: "fetchAll", Timeout: time.Second, Input: json.RawMessage(`{"n":9,"url":"` + stuck.URL + `"}`)})
	if e == nil || e.Code != jsvm.CodeTimeout {
		t.Errorf("nine fetches at once: %+v, want %s", e, jsvm.CodeTimeout)
	}
}

// A call whose ctx ends while its worker starts is cancelled, saying so
// (the worker goes on starting, for the next call).
func TestCancelledWhileAWorkerStarts(t *testing.T) {
	t.Parallel()
	b := load(t, poolHandlers)
	p := newPool(t, sandbox.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Invoke(ctx, b, jsvm.Invocation{Tenant: "prj", Export: "count"})
	e, ok := jsvm.AsError(err)
	if !ok || e.Code != jsvm.CodeCancelled || !strings.HasSuffix(e.Message, " while starting a sandbox worker") {
		t.Errorf("%v, want %s while starting a sandbox worker", err, jsvm.CodeCancelled)
	}
}
