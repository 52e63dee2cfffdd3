package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"stead/notify"
)

// BenchmarkWebhookLatency is how long an approval.requested takes from its
// commit to a receiver on `stead dev`: the real binary on loopback with its
// defaults (bbolt with fsync), an endpoint that takes only
// approval.requested, and a receiver on loopback. One gated run at a time;
// the latency is the receipt time less the event's commit time (its
// timestamp, taken just before the write that commits it, so the figure
// includes the fsync). p50-ms and p99-ms are over every run of the
// benchmark.
func BenchmarkWebhookLatency(b *testing.B) {
	var (
		mu       sync.Mutex
		received = map[string]time.Time{}
		wait     = make(chan struct{}, 1)
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		var p notify.Payload
		if json.Unmarshal(body, &p) == nil && p.Type == "approval.requested" {
			mu.Lock()
			received[p.Data.RunID] = at
			mu.Unlock()
			select {
			case wait <- struct{}{}:
			default:
			}
		}
	}))
	b.Cleanup(srv.Close)
	d := startDev(b, false, "--sweep-interval", "5s")
	d.deploy(b)
	ctx := context.Background()
	body, _ := json.Marshal(map[string]any{"url": srv.URL, "events": []string{"approval.requested"}})
	if err := d.call(ctx, http.MethodPost, "/v1/webhooks", body, nil); err != nil {
		b.Fatal(err)
	}
	// The API's create dropped the engine's cached "no endpoints" for the
	// project (the same process): the next run notifies.
	var lat []float64
	for b.Loop() {
		run, err := d.startRun(ctx, "gated", "u1")
		if err != nil {
			b.Fatal(err)
		}
		var events struct {
			Events []struct {
				Type string    `json:"type"`
				At   time.Time `json:"at"`
			} `json:"events"`
		}
		if err := d.call(ctx, http.MethodGet, "/v1/runs/"+run.ID+"/events", nil, &events); err != nil {
			b.Fatal(err)
		}
		var committed time.Time
		for _, e := range events.Events {
			if e.Type == "approval.requested" {
				committed = e.At
			}
		}
		deadline := time.After(10 * time.Second)
		for {
			mu.Lock()
			at, ok := received[run.ID]
			mu.Unlock()
			if ok {
				lat = append(lat, float64(at.Sub(committed).Microseconds())/1000)
				break
			}
			select {
			case <-wait:
			case <-deadline:
				b.Fatalf("no approval.requested of %s reached the receiver in 10 s", run.ID)
			}
		}
	}
	slices.Sort(lat)
	b.ReportMetric(lat[len(lat)/2], "p50-ms")
	b.ReportMetric(lat[min(len(lat)-1, len(lat)*99/100)], "p99-ms")
}
