package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"stead/runtime/jsvm"
	"stead/runtime/sandbox"
)

const benchSource = `
export async function noop(input, context) {
  return { ok: true, n: input.n, run: context.run.id };
}
`

func benchInvocation() jsvm.Invocation {
	return jsvm.Invocation{
		Tenant:         "prj_bench",
		Export:         "noop",
		Input:          json.RawMessage(`{"n":42}`),
		RunID:          "run_01",
		StepID:         "lookup",
		StepIndex:      2,
		EndUserID:      "user_7",
		IdempotencyKey: "idem_run_01_lookup",
		Broker:         &jsvm.MemoryBroker{},
		BrokerToken:    "brk_secret_token_value",
		Secrets:        []string{"another-secret"},
	}
}

// BenchmarkInvokeWarm is a trivial async handler with the full context
// (broker, token, ids, secrets) through the sandbox: a warm worker, one
// call frame out and one done frame back. It reports the median call and
// its 90th and 99th percentiles beside the mean (ns/op), and the CPU one
// call costs the worker and the parent. jsvm's BenchmarkGojaBare is the
// in-process floor, BenchmarkPipeEcho the round trip's.
func BenchmarkInvokeWarm(b *testing.B) {
	p := newPool(b, sandbox.Options{MaxCalls: 1 << 30}) // one worker throughout: its CPU is read from /proc
	bn := load(b, benchSource)
	inv := benchInvocation()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if _, err := p.Invoke(ctx, bn, inv); err != nil { // start the worker
		b.Fatal(err)
	}
	b.ReportAllocs()
	pid := p.Stats().PIDs[0]
	workerBefore, errW := processCPU(pid)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	lat := make([]time.Duration, 0, 1<<20)
	for b.Loop() {
		t := time.Now()
		if _, err := p.Invoke(ctx, bn, inv); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	workerAfter, err := processCPU(pid)
	reportLatency(b, lat) // after the CPU is read: sorting is not a call's
	if n := len(lat); err == nil && errW == nil && n > 0 {
		b.ReportMetric(float64((workerAfter-workerBefore).Nanoseconds())/float64(n), "worker-cpu-ns/op")
		parent := time.Duration(syscall.TimevalToNsec(ru1.Utime) + syscall.TimevalToNsec(ru1.Stime) -
			syscall.TimevalToNsec(ru0.Utime) - syscall.TimevalToNsec(ru0.Stime))
		b.ReportMetric(float64(parent.Nanoseconds())/float64(n), "parent-cpu-ns/op")
	}
}

// processCPU returns the user and system CPU time of a process, from
// /proc/PID/stat (in clock ticks of 10 ms).
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, data)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, data)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// BenchmarkPipeEcho is the floor under BenchmarkInvokeWarm: a child
// process (this test binary) that echoes 256-byte frames back over two
// pipes, both ends read through Go's poller as the sandbox's are, and no
// work in between. What a warm call costs above it is the sandbox's.
func BenchmarkPipeEcho(b *testing.B) {
	childIn, toChild, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	fromChild, childOut, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{echoEnv + "=1"}
	cmd.ExtraFiles = []*os.File{childIn, childOut}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	_ = childIn.Close()
	_ = childOut.Close()
	defer func() {
		_ = toChild.Close() // the child sees end of file and exits
		_ = cmd.Wait()
		_ = fromChild.Close()
	}()
	frame := make([]byte, 256)
	back := make([]byte, len(frame))
	lat := make([]time.Duration, 0, 1<<20)
	for b.Loop() {
		t := time.Now()
		if _, err := toChild.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(fromChild, back); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	reportLatency(b, lat)
}

const echoEnv = "STEAD_SANDBOX_BENCH_ECHO"

// echoMain is BenchmarkPipeEcho's child: it echoes 256-byte frames from
// fd 3 to fd 4 until end of file. Passing them made them blocking: it
// makes them nonblocking again, so that both go through the poller.
func echoMain() {
	if os.Getenv(echoEnv) != "1" {
		return
	}
	for _, fd := range []int{3, 4} {
		if err := syscall.SetNonblock(fd, true); err != nil {
			os.Exit(2)
		}
	}
	in, out := os.NewFile(3, "in"), os.NewFile(4, "out")
	buf := make([]byte, 256)
	for {
		if _, err := io.ReadFull(in, buf); err != nil {
			os.Exit(0)
		}
		if _, err := out.Write(buf); err != nil {
			os.Exit(1)
		}
	}
}

// BenchmarkWorkerStart is a fresh worker made ready for a ~250 KiB bundle
// and its first call: process start, handshake, load (the worker compiles
// the bundle once), one call.
func BenchmarkWorkerStart(b *testing.B) {
	var src strings.Builder
	for i := 0; src.Len() < 250<<10; i++ {
		fmt.Fprintf(&src, "export function f%d(input) { const table = %q; return { i: %d, n: table.length + (input && input.n || 0) }; }\n",
			i, strings.Repeat("lorem ipsum dolor sit amet ", 8), i)
	}
	bn := load(b, src.String())
	p := newPool(b, sandbox.Options{MaxIdle: 1, MaxIdlePerBundle: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	inv := jsvm.Invocation{Export: "f0", Input: json.RawMessage(`{"n":1}`)}
	i := 0
	for b.Loop() {
		inv.Tenant = fmt.Sprintf("prj_%d", i) // a new tenant: never a warm worker
		i++
		if _, err := p.Invoke(ctx, bn, inv); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(src.String()))/1024, "KiB/bundle")
}

// BenchmarkIdleWorkerMemory reports the resident memory of one idle warm
// worker (after a call of the bench handler).
func BenchmarkIdleWorkerMemory(b *testing.B) {
	p := newPool(b, sandbox.Options{})
	bn := load(b, benchSource)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if _, err := p.Invoke(ctx, bn, benchInvocation()); err != nil {
		b.Fatal(err)
	}
	var rss int64
	for b.Loop() {
		var err error
		if rss, err = sandbox.ResidentMemory(p.Stats().PIDs[0]); err != nil {
			b.Skip(err)
		}
	}
	b.ReportMetric(float64(rss)/(1<<20), "MiB/idle-worker")
}

// reportLatency reports the median, 90th and 99th percentile of the calls'
// latencies beside the mean that ns/op is.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "ns/median")
	b.ReportMetric(float64(lat[len(lat)*9/10].Nanoseconds()), "ns/p90")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "ns/p99")
}
