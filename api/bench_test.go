package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/store/boltstore"
	"stead/store/fsblob"
)

const benchConfig = `{
  "agents": { "refunds": {
    "tools": { "listOrders": { "effect": "read" },
               "refundOrder": { "effect": "write", "requiresApproval": true } },
    "steps": [
      { "id": "orders", "tool": "listOrders", "input": {} },
      { "id": "refund", "tool": "refundOrder", "input": { "orderId": "o-1", "amount": 5 } } ] } } }`

// BenchmarkHTTPApprovalLatency drives gated runs through the HTTP API on
// loopback, wired as `stead dev` wires it (bbolt on disk with fsync, worker
// pool): per run, the time from POST /runs to the run awaiting approval, and
// from POST /approve to the run having resumed — measured until the long-poll
// reports it finished, so it includes executing the approved step. 1,000 runs
// per iteration; p50 and p99 of each.
func BenchmarkHTTPApprovalLatency(b *testing.B) {
	dir := b.TempDir()
	st, err := boltstore.Open(filepath.Join(dir, "stead.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	blobs, err := fsblob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		b.Fatal(err)
	}
	rt := jsvm.New(jsvm.Options{})
	defer rt.Close()
	pool := engine.NewPool(4, 1024, nil)
	eng, err := engine.New(engine.Config{
		Store: st, Blobs: blobs, Invoker: rt, Dispatch: pool,
	})
	if err != nil {
		b.Fatal(err)
	}
	pool.Start(eng.Execute)
	defer pool.Stop(context.Background())
	srv, err := api.New(api.Config{Engine: eng, Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	_, key, err := api.Bootstrap(context.Background(), st, "bench", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{}
	call := func(method, path string, body any, out any) {
		b.Helper()
		var rd io.Reader
		if body != nil {
			buf, _ := json.Marshal(body)
			rd = bytes.NewReader(buf)
		}
		req, _ := http.NewRequest(method, hs.URL+path, rd)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
		if out != nil {
			if err := json.Unmarshal(data, out); err != nil {
				b.Fatal(err)
			}
		}
	}
	call("POST", "/v1/deployments", map[string]any{"bundle": testHandlers, "config": json.RawMessage(benchConfig)}, nil)

	const runs = 1000
	var toAwaiting, toResumed []time.Duration
	for b.Loop() {
		for range runs {
			var run wire.Run
			t0 := time.Now()
			call("POST", "/v1/agents/refunds/runs?wait=10s", map[string]any{"input": map[string]any{}, "endUserId": "u1"}, &run)
			toAwaiting = append(toAwaiting, time.Since(t0))
			if run.Status != "awaiting-approval" || run.Approval == nil {
				b.Fatalf("run %s is %s", run.ID, run.Status)
			}
			t1 := time.Now()
			call("POST", "/v1/approvals/"+run.Approval.ID+"/approve", map[string]any{}, nil)
			call("GET", "/v1/runs/"+run.ID+"?wait=10s&until=terminal", nil, &run)
			toResumed = append(toResumed, time.Since(t1))
			if run.Status != "succeeded" {
				b.Fatalf("run %s is %s after approval", run.ID, run.Status)
			}
		}
	}
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, name+"-p99-ms")
	}
	report("create-to-awaiting", toAwaiting)
	report("approve-to-resumed", toResumed)
	b.ReportMetric(float64(len(toResumed)), "runs")
}
