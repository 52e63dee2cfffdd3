package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// devBenchClients is how many HTTP clients run at once, and
// devBenchBatch how many runs one iteration of the benchmark drives.
const (
	devBenchClients = 16
	devBenchBatch   = 1000
)

// BenchmarkDevRunCPU is the CPU one ungated 3-step run costs over HTTP on
// `stead dev`: the real binary on loopback with its defaults (bbolt with
// fsync, sandbox workers), 16 clients each starting a run and long-polling
// it to its end (one POST ?wait= per run). The CPU is that of the server,
// of its sandbox workers (live ones, and those it reaped) and of this
// process, the load client, together: ms-cpu/run is the median over
// batches of 1,000 runs, beside each part's share and the wall-clock
// runs/s — which swings with the disk, while the CPU does not. A first
// batch starts the workers and is not counted: the first 1,000 runs of a
// new server cost 1.2–1.6 ms each here, the next ones about 1.0 (heaps and
// the store's file still growing, goja's caches still filling), and with
// the default -benchtime only two batches are measured.
func BenchmarkDevRunCPU(b *testing.B) {
	d := startDev(b, false, "--sweep-interval", "5s") // stead dev's default
	d.deploy(b)
	ctx := context.Background()
	drive := func(runs int) error {
		var n atomic.Int64
		var mu sync.Mutex
		var first error
		var wg sync.WaitGroup
		for c := range devBenchClients {
			wg.Go(func() {
				for n.Add(1) <= int64(runs) {
					if err := d.ungatedRun(ctx, fmt.Sprintf("u%d", c)); err != nil {
						mu.Lock()
						first = cmp.Or(first, err)
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		return first
	}
	if err := drive(devBenchBatch); err != nil { // warm up
		b.Fatal(err)
	}
	var total, server, workers, client, rate []float64
	perRun := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / devBenchBatch }
	for b.Loop() {
		t0, c0, w0 := d.cpu(b), selfCPU(b), time.Now()
		if err := drive(devBenchBatch); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(w0)
		t1, c1 := d.cpu(b), selfCPU(b)
		s, w, c := perRun(t1.server-t0.server), perRun(t1.workers-t0.workers), perRun(c1-c0)
		server, workers, client = append(server, s), append(workers, w), append(client, c)
		total = append(total, s+w+c)
		rate = append(rate, devBenchBatch/wall.Seconds())
	}
	b.StopTimer()
	d.stop(b)
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
	}
	b.ReportMetric(median(total), "ms-cpu/run")
	b.ReportMetric(median(server), "server-ms/run")
	b.ReportMetric(median(workers), "workers-ms/run")
	b.ReportMetric(median(client), "client-ms/run")
	b.ReportMetric(median(rate), "runs/s")
	b.ReportMetric(0, "ns/op") // an iteration is a batch of runs: the figures above say it per run
}
