package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"stead/api/wire"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file drives a real `stead dev` (the built binary, on loopback) for
// the CPU benchmark and the soak, and reads what its process tree costs
// from /proc.

// loadHandlers and loadConfig are the agents the benchmark and the soak
// deploy: a 3-step ungated agent of three reads (which share one commit),
// a gated one (a read, then a write that
// needs approval), and hostile handlers whose runs must fail with the
// sandbox's codes.
const loadHandlers = `
export async function lookup(input, context) { return { id: input.id, user: context.endUserId, amount: 12 } }
export async function enrich(input) { return { ...input.order, tier: "gold" } }
export async function price(input) { return { order: input.order.id, total: input.order.amount * 1.2 } }
export async function apply(input) { return { applied: true, order: input.order.id } }
export async function deepParse() { return JSON.parse("[".repeat(3e6) + "]".repeat(3e6)); }
export async function busy() { for (;;) {} }
export async function growString() { let s = "x"; for (;;) s += s + "y"; }
`

const loadConfig = `{
  "agents": {
    "ungated": {
      "tools": { "lookup": { "effect": "read" }, "enrich": { "effect": "read" }, "price": { "effect": "read" } },
      "steps": [
        { "id": "lookup", "tool": "lookup", "input": { "id": "$input.id" } },
        { "id": "enrich", "tool": "enrich", "input": { "order": "$steps.lookup.output" } },
        { "id": "price", "tool": "price", "input": { "order": "$steps.enrich.output" } }
      ]
    },
    "gated": {
      "tools": { "lookup": { "effect": "read" }, "apply": { "effect": "write", "requiresApproval": true } },
      "steps": [
        { "id": "lookup", "tool": "lookup", "input": { "id": "$input.id" } },
        { "id": "apply", "tool": "apply", "input": { "order": "$steps.lookup.output" } }
      ]
    },
    "deep-parse": {
      "tools": { "deepParse": { "effect": "read" } },
      "steps": [ { "id": "parse", "tool": "deepParse", "input": {} } ]
    },
    "busy-loop": {
      "tools": { "busy": { "effect": "read", "timeoutMs": 300 } },
      "steps": [ { "id": "spin", "tool": "busy", "input": {} } ]
    },
    "grow-string": {
      "tools": { "growString": { "effect": "read" } },
      "steps": [ { "id": "grow", "tool": "growString", "input": {} } ]
    }
  }
}`

// devServer is a running `stead dev` built from this tree, with an HTTP
// client holding the owner key.
type devServer struct {
	*server
	pid  int
	base string
	key  string
	http *http.Client
}

// startDev builds the stead binary and starts `stead dev` on a free
// loopback port with a temporary data folder and the given flags. It skips
// with -short, off Linux (the figures come from /proc), and when the binary
// cannot be built unless mustBuild.
func startDev(tb testing.TB, mustBuild bool, flags ...string) *devServer {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds the stead binary and runs a server; skipped with -short")
	}
	if runtime.GOOS != "linux" {
		tb.Skipf("reads process figures from /proc, which %s lacks", runtime.GOOS)
	}
	tmp := tb.TempDir()
	bin, out, err := buildStead(tmp)
	if err != nil {
		if mustBuild {
			tb.Fatalf("go build: %v\n%s", err, out)
		}
		tb.Skipf("cannot build the stead binary (go build: %v)\n%s", err, out)
	}
	e := &e2e{t: tb, bin: bin, config: filepath.Join(tmp, "config.json"), home: filepath.Join(tmp, "home")}
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		tb.Fatal(err)
	}
	srv := e.startServer(freeAddr(tb), filepath.Join(tmp, "data"), flags...)
	cfg, err := readConfig(e.config)
	if err != nil {
		tb.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	tb.Cleanup(client.CloseIdleConnections)
	d := &devServer{server: srv, pid: srv.cmd.Process.Pid, base: cfg.URL, key: cfg.Key, http: client}
	return d
}

// call sends a JSON request with the owner key and decodes a 2xx answer
// into out (when not nil).
func (d *devServer) call(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return nil
}

// deploy deploys loadHandlers and loadConfig.
func (d *devServer) deploy(tb testing.TB) {
	tb.Helper()
	body, err := json.Marshal(map[string]any{"bundle": loadHandlers, "config": json.RawMessage(loadConfig)})
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.call(context.Background(), http.MethodPost, "/v1/deployments", body, nil); err != nil {
		tb.Fatal(err)
	}
}

// startRun starts a run of agent for endUser and long-polls until it is
// settled (ended, or awaiting approval).
func (d *devServer) startRun(ctx context.Context, agent, endUser string) (wire.Run, error) {
	var run wire.Run
	body := `{"input":{"id":"o-1"},"endUserId":"` + endUser + `"}`
	err := d.call(ctx, http.MethodPost, "/v1/agents/"+agent+"/runs?wait=60s", []byte(body), &run)
	return run, err
}

// ungatedRun is one ungated 3-step run that must succeed.
func (d *devServer) ungatedRun(ctx context.Context, endUser string) error {
	run, err := d.startRun(ctx, "ungated", endUser)
	if err != nil {
		return err
	}
	if run.Status != "succeeded" {
		return fmt.Errorf("ungated run %s is %s (%+v), want succeeded", run.ID, run.Status, run.Error)
	}
	return nil
}

// gatedRun starts a gated run, approves it and waits for it to succeed.
func (d *devServer) gatedRun(ctx context.Context, endUser string) error {
	run, err := d.startRun(ctx, "gated", endUser)
	if err != nil {
		return err
	}
	if run.Status != "awaiting-approval" || run.Approval == nil {
		return fmt.Errorf("gated run %s is %s (%+v), want awaiting-approval", run.ID, run.Status, run.Error)
	}
	if err := d.call(ctx, http.MethodPost, "/v1/approvals/"+run.Approval.ID+"/approve", []byte(`{}`), nil); err != nil {
		return err
	}
	if err := d.call(ctx, http.MethodGet, "/v1/runs/"+run.ID+"?wait=60s&until=terminal", nil, &run); err != nil {
		return err
	}
	if run.Status != "succeeded" {
		return fmt.Errorf("approved run %s is %s (%+v), want succeeded", run.ID, run.Status, run.Error)
	}
	return nil
}

// procStat is what /proc/PID/stat says of a process.
type procStat struct {
	pid, ppid int
	state     byte
	// cpu is the process's own user+system time; reaped that of its
	// children it has waited for.
	cpu, reaped time.Duration
}

// clockTick is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name is in parentheses and may hold spaces and ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("read /proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("read /proc/%d/stat: %q", pid, b)
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	return procStat{
		pid:    pid,
		ppid:   int(n(1)),
		state:  f[0][0],
		cpu:    time.Duration(n(11)+n(12)) * clockTick,
		reaped: time.Duration(n(13)+n(14)) * clockTick,
	}, nil
}

// children returns the processes whose parent is pid.
func children(pid int) ([]procStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []procStat
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(p)
		if err != nil {
			continue // it exited meanwhile
		}
		if st.ppid == pid {
			out = append(out, st)
		}
	}
	return out, nil
}

// treeCPU is the CPU time of the server and of its workers: the server's
// own, that of the workers it reaped, and that of the live ones.
type treeCPU struct{ server, workers time.Duration }

func (d *devServer) cpu(tb testing.TB) treeCPU {
	tb.Helper()
	st, err := readProcStat(d.pid)
	if err != nil {
		tb.Fatal(err)
	}
	kids, err := children(d.pid)
	if err != nil {
		tb.Fatal(err)
	}
	t := treeCPU{server: st.cpu, workers: st.reaped}
	for _, k := range kids {
		t.workers += k.cpu
	}
	return t
}

// selfCPU is this process's user+system time.
func selfCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memory reads the resident memory of a process from /proc/PID/status:
// all of it, and its anonymous part (bbolt's memory-mapped data file is
// file-backed, and grows with the data).
func memory(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch {
		case err != nil:
		case k == "VmRSS":
			rss = kb << 10
		case k == "RssAnon":
			anon = kb << 10
		}
	}
	return rss, anon, nil
}

// openFDs counts a process's open file descriptors.
func openFDs(pid int) (int, error) {
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(entries), err
}
