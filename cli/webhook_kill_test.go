package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"stead/notify"
)

// TestWebhookSurvivesKill: `stead dev` is killed with SIGKILL after a
// decision and started again on the same data; the decision's
// approval.approved reaches the receiver all the same, with a valid
// signature. Two moments: right after the decision's response — which
// often comes after the delivery already (it takes some 7 ms); that the
// outbox is written in the decision's own write, so that nothing can come
// between, is pinned by the store conformance tests (Webhook/OutboxDecide,
// Webhook/OutboxLostWrite) — and, the case this test makes sure of, while
// the delivery is in flight: the receiver holds the first try, the
// process dies with the delivery taken, and after the restart it is tried
// again once its lease runs out.
func TestWebhookSurvivesKill(t *testing.T) {
	t.Parallel()
	e, tmp := newE2E(t)
	var (
		mu       sync.Mutex
		approved = map[string]int{}
		secret   string
		bad      []string
		// holdFirst makes the receiver hold the first try of each
		// approval.approved, telling inflight.
		holdFirst bool
		inflight  = make(chan struct{}, 1)
	)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		defer mu.Unlock()
		key, err := notify.Key(secret)
		ts, _ := time.Parse(time.RFC3339, "1970-01-01T00:00:00Z")
		if sec := r.Header.Get("webhook-timestamp"); err == nil && sec != "" {
			var n int64
			_ = json.Unmarshal([]byte(sec), &n)
			ts = time.Unix(n, 0)
		}
		if err != nil || r.Header.Get("webhook-signature") != notify.Sign(key, r.Header.Get("webhook-id"), ts, body) {
			bad = append(bad, r.Header.Get("webhook-id"))
		}
		if p.Type != "approval.approved" {
			return
		}
		approved[p.Data.ApprovalID]++
		if holdFirst && approved[p.Data.ApprovalID] == 1 {
			mu.Unlock()
			inflight <- struct{}{}
			select { // until the server dies
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			mu.Lock()
		}
	}))
	t.Cleanup(rc.Close)

	data, addr := filepath.Join(tmp, "data"), freeAddr(t)
	srv := e.startServer(addr, data)
	cfg, err := readConfig(e.config)
	if err != nil {
		t.Fatal(err)
	}
	d := &devServer{server: srv, base: cfg.URL, key: cfg.Key, http: &http.Client{Timeout: time.Minute}}
	ctx := context.Background()
	var hook struct {
		Secret string `json:"secret"`
	}
	body, _ := json.Marshal(map[string]any{"url": rc.URL, "events": []string{"approval.approved"}})
	if err := d.call(ctx, http.MethodPost, "/v1/webhooks", body, &hook); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	secret = hook.Secret
	mu.Unlock()

	for _, hold := range []bool{false, true} {
		mu.Lock()
		holdFirst = hold
		mu.Unlock()
		r := e.must("run", "refunds", "--input", `{"orderId":"o-1001","reason":"damaged"}`, "--end-user", "demo-user", "--wait", "--json")
		apr := jsonField(t, r.stdout, "approval.id")
		if err := d.call(ctx, http.MethodPost, "/v1/approvals/"+apr+"/approve", []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
		want := 1
		if hold {
			select {
			case <-inflight:
			case <-time.After(10 * time.Second):
				t.Fatal("the first try of approval.approved never arrived")
			}
			want = 2 // the try the kill cut short, and the one after the restart
		}
		if err := srv.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-srv.done //nolint:errcheck // killed on purpose: its exit error tells nothing
		srv = e.startServer(addr, data)
		d.server = srv
		deadline := time.Now().Add(60 * time.Second) // a delivery taken when the process died waits out its lease
		for {
			mu.Lock()
			n := approved[apr]
			mu.Unlock()
			if n >= want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("killed after the decision (in flight: %v): approval.approved of %s arrived %d times, want %d", hold, apr, n, want)
			}
			time.Sleep(50 * time.Millisecond) // poll, bounded by the deadline
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("deliveries with a bad signature: %v", bad)
	}
}
