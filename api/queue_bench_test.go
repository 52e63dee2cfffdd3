package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
	"stead/approvals"
	"stead/infra/testclock"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/store"
	"stead/store/boltstore"
	"stead/store/fsblob"
	"stead/store/storetest"
)

// BenchmarkApprovalQueue: one project with many pending approvals (10,000
// and 100,000), on bbolt as `stead dev` keeps it (fsync on), behind the API
// on loopback HTTP.
//
//   - first-page/newest and first-page/expiring: GET /v1/approvals (the
//     default page, 50 approvals) in each order; first-page/run: the
//     approvals of one run (?runId=); p50 and p99 per request.
//   - sweep: each op makes 100 more approvals due (deadlines in the past;
//     all the others are in the future) and runs Engine.Sweep. It reports
//     what the sweep touched, counted at the store: approvals listed as due
//     and decisions written, per sweep (100 each, whatever the queue holds),
//     and p50 and p99 per sweep (100 decisions, each its own fsync).
//
// The queue is seeded through the store (storetest.Awaiting: a run created
// and committed into awaiting-approval with its approval), many writers
// at once so that bbolt's group commit shares transactions, with fsync off;
// the store is then reopened with fsync on. Seeding 100,000 takes some 10 s.
func BenchmarkApprovalQueue(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) { benchApprovalQueue(b, n) })
	}
}

func benchApprovalQueue(b *testing.B, pending int) {
	q := newQueueBench(b, pending)
	for _, c := range []struct {
		name, query string
		want        int
	}{
		{"newest", "?order=newest", store.DefaultLimit},
		{"expiring", "?order=expiring", store.DefaultLimit},
		{"run", "?runId=" + queueRunID(pending/2), 1},
	} {
		b.Run("first-page/"+c.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				n := q.firstPage(b, c.query)
				took = append(took, time.Since(t0))
				if n != c.want {
					b.Fatalf("first page holds %d approvals, want %d", n, c.want)
				}
			}
			reportPercentiles(b, took)
		})
	}
	b.Run("sweep", func(b *testing.B) {
		const due = 100
		var took []time.Duration
		q.counts.reset()
		for b.Loop() {
			b.StopTimer()
			q.seedDue(b, due)
			b.StartTimer()
			t0 := time.Now()
			res, err := q.eng.Sweep(context.Background())
			took = append(took, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			if res.Expired != due {
				b.Fatalf("sweep expired %d approvals, want %d", res.Expired, due)
			}
		}
		sweeps := float64(len(took))
		b.ReportMetric(float64(q.counts.due.Load())/sweeps, "due-listed/sweep")
		b.ReportMetric(float64(q.counts.decided.Load())/sweeps, "decisions/sweep")
		reportPercentiles(b, took)
	})
	b.Logf("seeded %d pending approvals in %s", pending, q.seedTime.Round(time.Millisecond))
}

// reportPercentiles reports the p50 and p99 of took in milliseconds.
func reportPercentiles(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
}

// queueBench is the stack over a bbolt store seeded with a queue of pending
// approvals, its clock and the store calls the engine made.
type queueBench struct {
	st      store.Store
	eng     *engine.Engine
	clock   *testclock.Clock
	counts  *storeCounts
	url     string
	key     string
	project store.Project
	// seeded counts the runs made so far (their ids are numbered).
	seeded   int
	seedTime time.Duration
}

// storeCounts wraps a store and counts what the sweeper asks of it.
type storeCounts struct {
	store.Store
	due, decided atomic.Int64
}

func (s *storeCounts) reset() { s.due.Store(0); s.decided.Store(0) }

func (s *storeCounts) ListDueApprovals(ctx context.Context, now time.Time, limit int) ([]approvals.Approval, error) {
	as, err := s.Store.ListDueApprovals(ctx, now, limit)
	s.due.Add(int64(len(as)))
	return as, err
}

func (s *storeCounts) DecideApproval(ctx context.Context, p store.DecideParams) (approvals.Approval, store.Run, error) {
	s.decided.Add(1)
	return s.Store.DecideApproval(ctx, p)
}

// queueStart is the benchmark's "now" when the queue is seeded.
var queueStart = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newQueueBench(b *testing.B, pending int) *queueBench {
	ctx := context.Background()
	dir := b.TempDir()
	path := filepath.Join(dir, "stead.db")
	q := &queueBench{clock: testclock.New(queueStart)}

	seedStore, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	q.project, q.key, err = api.Bootstrap(ctx, seedStore, "queue", queueStart)
	if err != nil {
		b.Fatal(err)
	}
	// Deadlines an hour and more ahead: none is due until seedDue adds some.
	t0 := time.Now()
	q.st = seedStore
	q.seed(b, pending, func(i int) (time.Time, time.Duration) {
		return queueStart.Add(-time.Duration(pending-i) * time.Millisecond), time.Hour + time.Duration(i)*time.Millisecond
	})
	q.seedTime = time.Since(t0)
	if err := seedStore.Close(); err != nil {
		b.Fatal(err)
	}

	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	q.st = st
	blobs, err := fsblob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		b.Fatal(err)
	}
	rt := jsvm.New(jsvm.Options{})
	b.Cleanup(rt.Close)
	q.counts = &storeCounts{Store: st}
	pool := engine.NewPool(2, 256, nil)
	q.eng, err = engine.New(engine.Config{
		Store: q.counts, Blobs: blobs, Invoker: rt, Dispatch: pool, Now: q.clock.Now, PollInterval: time.Minute,
	})
	if err != nil {
		b.Fatal(err)
	}
	pool.Start(q.eng.Execute)
	b.Cleanup(func() { pool.Stop(context.Background()) })
	srv, err := api.New(api.Config{Engine: q.eng, Store: st, Now: q.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	b.Cleanup(hs.Close)
	q.url = hs.URL
	// The seeded approvals name deployment 1, this one.
	q.call(b, http.MethodPost, "/v1/deployments", map[string]any{"bundle": testHandlers, "config": json.RawMessage(testConfig)})
	return q
}

// seedDue adds n approvals whose deadlines have just passed.
func (q *queueBench) seedDue(b *testing.B, n int) {
	now := q.clock.Now()
	q.seed(b, n, func(i int) (time.Time, time.Duration) {
		return now.Add(-time.Hour + time.Duration(i)*time.Millisecond), time.Hour - time.Duration(n)*time.Millisecond
	})
}

// seed makes n runs of the refunds agent that wait for the approval of
// their refund step; at(i) is when the i-th asked and for how long.
func (q *queueBench) seed(b *testing.B, n int, at func(i int) (time.Time, time.Duration)) {
	ctx := context.Background()
	first := q.seeded
	q.seeded += n
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
	)
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && failed.Load() == nil; i = int(next.Add(1) - 1) {
				req, timeout := at(i)
				if err := seedAwaiting(ctx, q.st, q.project.ID, first+i, req, timeout); err != nil {
					failed.Store(&err)
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}

// seedAwaiting writes the run numbered i as the engine leaves it at the
// gate of its refund step, its approval requested at req for timeout.
func seedAwaiting(ctx context.Context, st store.Store, project string, i int, req time.Time, timeout time.Duration) error {
	_, _, err := storetest.Awaiting(ctx, st, approvals.Request{
		ProjectID: project, RunID: queueRunID(i), Agent: "refunds", EndUserID: "alice", Deployment: 1,
		StepIndex: 1, StepID: "refund", CallID: "refund", Tool: "refundOrder", Input: json.RawMessage(`{"amount":5,"orderId":"o-1"}`),
		Reason: "refundOrder requires approval", RequestedAt: req, Timeout: timeout,
	})
	return err
}

func queueRunID(i int) string { return fmt.Sprintf("run_queue%08d", i) }

// firstPage asks for the first page of GET /v1/approvals with query and
// returns how many approvals it holds.
func (q *queueBench) firstPage(b *testing.B, query string) int {
	var list wire.ApprovalList
	if err := json.Unmarshal(q.call(b, http.MethodGet, "/v1/approvals"+query, nil), &list); err != nil {
		b.Fatal(err)
	}
	return len(list.Approvals)
}

func (q *queueBench) call(b *testing.B, method, path string, body any) []byte {
	b.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			b.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, q.url+path, rd)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+q.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode >= 300 {
		b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return data
}
