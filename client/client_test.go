package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
	"stead/cli"
	"stead/client"
	"stead/examples/refunds"
	"stead/runtime/sandbox"
	"stead/store"
)

// TestClient drives a gated run through the typed methods against the
// whole local stack (bbolt, sandbox workers, the API on loopback): start it
// and start it again with the same idempotency key, find its approval,
// approve it, wait for its end, read it with a customer token; errors as
// *Error and *UnreachableError.
func TestClient(t *testing.T) {
	ctx := t.Context()
	var key string
	st, err := cli.OpenStack(cli.StackConfig{
		Dir: filepath.Join(t.TempDir(), "data"), Workers: 2, NoSync: true,
		EnsureProject: func(s store.Store) (string, error) {
			p, k, err := api.Bootstrap(ctx, s, "client-test", time.Now())
			key = k
			return p.ID, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = st.Close(cctx)
	})
	srv := httptest.NewServer(st.API)
	t.Cleanup(srv.Close)
	owner := &client.Client{BaseURL: srv.URL, Key: key}

	var dep wire.Deployment
	if _, err := owner.Call(ctx, client.Request{Method: http.MethodPost, Path: "/v1/deployments",
		Body: map[string]any{"bundle": string(refunds.Handlers), "config": json.RawMessage(refunds.Config)}}, &dep); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Call(ctx, client.Request{Method: http.MethodPut, Path: client.Path("v1", "broker", "orders", "o-1"), Query: url.Values{"endUserId": {"u1"}},
		Body: map[string]any{"value": map[string]any{"id": "o-1", "item": "Lamp", "amount": 30, "currency": "USD"}}}, nil); err != nil {
		t.Fatal(err)
	}
	input := json.RawMessage(`{"orderId":"o-1","reason":"damaged"}`)
	run, err := owner.StartRun(ctx, "refunds", input, "u1", "idem-1", "30s")
	if err != nil || run.Status != "awaiting-approval" || run.Approval == nil {
		t.Fatalf("start: %+v %v", run, err)
	}
	if again, err := owner.StartRun(ctx, "refunds", input, "u1", "idem-1", ""); err != nil || again.ID != run.ID {
		t.Errorf("an idempotent repeat: %+v %v", again, err)
	}
	list, err := owner.ListApprovals(ctx, url.Values{"status": {"pending"}})
	if err != nil || len(list.Approvals) != 1 || list.Approvals[0].RunID != run.ID {
		t.Fatalf("approvals: %+v %v", list, err)
	}
	if a, err := owner.Approve(ctx, list.Approvals[0].ID, "fine", nil); err != nil || a.Status != "approved" {
		t.Fatalf("approve: %+v %v", a, err)
	}
	done, err := owner.GetRun(ctx, run.ID, "30s", "terminal")
	if err != nil || done.Status != "succeeded" {
		t.Fatalf("the run: %+v %v", done, err)
	}
	tok, err := owner.CreateCustomerToken(ctx, "u1", 600)
	if err != nil {
		t.Fatal(err)
	}
	customer := &client.Client{BaseURL: srv.URL, Key: tok.Token}
	if seen, err := customer.GetRun(ctx, run.ID, "", ""); err != nil || seen.Status != "succeeded" {
		t.Errorf("the customer's view: %+v %v", seen, err)
	}
	if _, err := customer.Deny(ctx, list.Approvals[0].ID, "no"); !isAPIError(err, http.StatusForbidden, "forbidden") {
		t.Errorf("a customer denying: %v", err)
	}
	if _, err := owner.GetRun(ctx, "run_nope", "", ""); !isAPIError(err, http.StatusNotFound, "not_found") {
		t.Errorf("a missing run: %v", err)
	}
	var ue *client.UnreachableError
	if _, err := (&client.Client{BaseURL: "http://127.0.0.1:1", Key: key}).GetRun(ctx, run.ID, "", ""); !errors.As(err, &ue) {
		t.Errorf("no server: %v", err)
	}
}

func isAPIError(err error, status int, code string) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status == status && e.Code == code && len(e.Body) > 0
}

func TestMain(m *testing.M) {
	sandbox.Main() // the stack's sandbox workers are this test binary
	os.Exit(m.Run())
}
