package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stead/approvals"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/runtime/sandbox"
	"stead/store"
	"stead/store/boltstore"
	"stead/store/fsblob"
)

const benchHandlers = `
export async function lookup(input, context) { return { id: input.id, user: context.endUserId, amount: 12 } }
export async function enrich(input) { return { ...input.order, tier: "gold" } }
export async function apply(input) { return { applied: true, order: input.order.id } }
`

const benchConfig = `{
  "agents": {
    "ungated": {
      "tools": { "lookup": { "effect": "read" }, "enrich": { "effect": "read" }, "apply": { "effect": "write" } },
      "steps": [
        { "id": "lookup", "tool": "lookup", "input": { "id": "$input.id" } },
        { "id": "enrich", "tool": "enrich", "input": { "order": "$steps.lookup.output" } },
        { "id": "apply", "tool": "apply", "input": { "order": "$steps.enrich.output" } }
      ]
    },
    "gated": {
      "tools": { "lookup": { "effect": "read" }, "apply": { "effect": "write", "requiresApproval": true } },
      "steps": [
        { "id": "lookup", "tool": "lookup", "input": { "id": "$input.id" } },
        { "id": "apply", "tool": "apply", "input": { "order": "$steps.lookup.output" } }
      ]
    }
  }
}`

// countingStore counts the writes a run costs and notes when runs are
// claimed.
type countingStore struct {
	store.Store
	writes  atomic.Int64
	mu      sync.Mutex
	claimed map[string]time.Time
}

func (s *countingStore) CreateRun(ctx context.Context, r store.Run, evs []store.Event) (store.Run, error) {
	s.writes.Add(1)
	return s.Store.CreateRun(ctx, r, evs)
}

func (s *countingStore) CommitRun(ctx context.Context, c store.RunCommit) (store.Run, error) {
	s.writes.Add(1)
	return s.Store.CommitRun(ctx, c)
}

func (s *countingStore) ClaimRun(ctx context.Context, p store.ClaimParams) (store.Run, error) {
	s.writes.Add(1)
	r, err := s.Store.ClaimRun(ctx, p)
	if err == nil {
		s.mu.Lock()
		s.claimed[r.ID] = time.Now()
		s.mu.Unlock()
	}
	return r, err
}

func (s *countingStore) DecideApproval(ctx context.Context, p store.DecideParams) (approvals.Approval, store.Run, error) {
	s.writes.Add(1)
	return s.Store.DecideApproval(ctx, p)
}

type nopDispatch struct{}

func (nopDispatch) Dispatch(context.Context, string) error { return nil }

// benchEngine is an engine on a bbolt file with fsync on, as `stead dev`
// runs it. Handlers run through a sandbox.Pool with stead dev's options when
// sandboxed, in this process's jsvm.Runtime otherwise.
func benchEngine(b *testing.B, sandboxed bool) (*engine.Engine, *countingStore, approvals.Actor) {
	b.Helper()
	dir := b.TempDir()
	bolt, err := boltstore.Open(filepath.Join(dir, "stead.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bolt.Close() })
	cs := &countingStore{Store: bolt, claimed: map[string]time.Time{}}
	blobs, err := fsblob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		b.Fatal(err)
	}
	var inv engine.Invoker
	if sandboxed {
		sb, err := sandbox.New(sandbox.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(sb.Close)
		inv = sb
	} else {
		rt := jsvm.New(jsvm.Options{})
		b.Cleanup(rt.Close)
		inv = rt
	}
	eng, err := engine.New(engine.Config{
		Store: cs, Blobs: blobs, Invoker: inv, Dispatch: nopDispatch{},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := bolt.CreateProject(ctx, store.Project{ID: "prj_bench", SigningKey: []byte("bench-signing-key-of-32-bytes!!!"), CreatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	actor := approvals.Actor{ProjectID: "prj_bench", Role: approvals.RoleDeveloper, ID: "key_bench"}
	if _, err := eng.Deploy(ctx, actor, engine.DeployParams{Bundle: []byte(benchHandlers), Config: []byte(benchConfig)}); err != nil {
		b.Fatal(err)
	}
	return eng, cs, actor
}

// BenchmarkRunUngated3Steps starts and executes ungated 3-step runs on the
// embedded store with fsync on, from 1 and 16 goroutines, each step's
// handler in a sandbox worker (sandbox.Pool with stead dev's defaults), and
// reports runs/s and store writes (commits) per run. The workers are started
// and warm before the timer.
func BenchmarkRunUngated3Steps(b *testing.B) {
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			eng, cs, actor := benchEngine(b, true)
			ctx := context.Background()
			warm(b, eng, actor, conc)
			var n atomic.Int64
			b.ResetTimer()
			start := time.Now()
			before := cs.writes.Load()
			var wg sync.WaitGroup
			for range conc {
				wg.Go(func() {
					for n.Add(1) <= int64(b.N) {
						r, _, err := eng.StartRun(ctx, actor, engine.StartParams{Agent: "ungated", Input: json.RawMessage(`{"id":"o-1"}`), EndUserID: "u1"})
						if err != nil {
							b.Error(err)
							return
						}
						if err := eng.Execute(ctx, r.ID); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "runs/s")
			b.ReportMetric(float64(cs.writes.Load()-before)/float64(b.N), "commits/run")
		})
	}
}

// warm runs conc runs at once, twice, so that the sandbox pool has started
// the workers the timed runs use.
func warm(b *testing.B, eng *engine.Engine, actor approvals.Actor, conc int) {
	b.Helper()
	ctx := context.Background()
	for range 2 {
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				r, _, err := eng.StartRun(ctx, actor, engine.StartParams{Agent: "ungated", Input: json.RawMessage(`{"id":"o-1"}`), EndUserID: "u1"})
				if err == nil {
					err = eng.Execute(ctx, r.ID)
				}
				if err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
}

// BenchmarkApproveResume measures, for gated runs paused at their approval,
// the time from the approve call to the run being claimed by a worker again
// (in process, embedded store with fsync on), and reports its median and p99.
func BenchmarkApproveResume(b *testing.B) {
	eng, cs, actor := benchEngine(b, false)
	ctx := context.Background()
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		b.StopTimer()
		r, _, err := eng.StartRun(ctx, actor, engine.StartParams{Agent: "gated", Input: json.RawMessage(`{"id":"o-1"}`), EndUserID: "u1"})
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.Execute(ctx, r.ID); err != nil {
			b.Fatal(err)
		}
		paused, err := eng.GetRun(ctx, actor, r.ID)
		if err != nil || paused.Status != store.RunAwaitingApproval {
			b.Fatalf("run %s: %v", paused.Status, err)
		}
		b.StartTimer()
		t0 := time.Now()
		if _, err := eng.Decide(ctx, actor, engine.DecideParams{ApprovalID: paused.ApprovalID, Approve: true}); err != nil {
			b.Fatal(err)
		}
		if err := eng.Execute(ctx, r.ID); err != nil {
			b.Fatal(err)
		}
		cs.mu.Lock()
		samples = append(samples, cs.claimed[r.ID].Sub(t0))
		cs.mu.Unlock()
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds())/1000, "ms-p99")
}

// BenchmarkSandboxCrashFailsTheRun measures, with the engine's defaults
// (DefaultSandboxRetries, DefaultSandboxBackoff, real waits) and a real
// sandbox pool, how long a run takes to fail sandbox-crashed when its
// step's handler crashes its worker at once (Go's fatal stack overflow in
// JSON.parse): every attempt starts a fresh worker. The target is 20 s.
func BenchmarkSandboxCrashFailsTheRun(b *testing.B) {
	eng, _, actor := benchEngine(b, true)
	ctx := context.Background()
	if _, err := eng.Deploy(ctx, actor, engine.DeployParams{Bundle: []byte(crashingHandlers), Config: []byte(crashingConfig)}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, _, err := eng.StartRun(ctx, actor, engine.StartParams{Agent: "crashy", EndUserID: "u1"})
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.Execute(ctx, r.ID); err != nil {
			b.Fatal(err)
		}
		if got, err := eng.GetRun(ctx, actor, r.ID); err != nil || got.Status != store.RunFailed || got.Error == nil || got.Error.Code != engine.CodeSandboxCrashed || got.Attempts != 1+engine.DefaultSandboxRetries {
			b.Fatalf("run %+v (%v), want failed sandbox-crashed after %d attempts", got, err, 1+engine.DefaultSandboxRetries)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s-to-fail")
}
