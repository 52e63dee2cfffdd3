package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"stead/api/mcpclient"
	"stead/api/wire"
)

// BenchmarkMCPToolsCall is an allowed tools/call over loopback HTTP on
// `stead dev`: the real binary with its defaults (bbolt with fsync, sandbox
// workers), the Go SDK's client holding an MCP key, one call at a time of
// a read tool (lookup), each a one-call run from request to result. p50-ms
// and p99-ms are over every call of the benchmark; the run's three commits
// (create, claim, complete) are fsynced, so the figures are disk-bound.
func BenchmarkMCPToolsCall(b *testing.B) {
	d := startDev(b, false, "--sweep-interval", "5s")
	d.deploy(b)
	ctx := context.Background()
	body, _ := json.Marshal(map[string]string{"agent": "ungated", "endUserId": "u1", "name": "bench"})
	var key wire.MCPKey
	if err := d.call(ctx, http.MethodPost, "/v1/mcp-keys", body, &key); err != nil {
		b.Fatal(err)
	}
	cs, err := mcpclient.ConnectGo(ctx, d.base+"/mcp", key.Key, mcpclient.GoOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	call := func() time.Duration {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"id": "o-1"}})
		took := time.Since(t0)
		if err != nil || res.IsError {
			b.Fatalf("tools/call lookup: %v %+v", err, res)
		}
		return took
	}
	for range 20 { // start the sandbox workers
		call()
	}
	var lat []float64
	for b.Loop() {
		lat = append(lat, float64(call().Microseconds())/1000)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(lat[len(lat)/2], "p50-ms")
	b.ReportMetric(lat[min(len(lat)-1, len(lat)*99/100)], "p99-ms")
}
