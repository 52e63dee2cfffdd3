package boltstore_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"stead/approvals"
	"stead/store"
	"stead/store/boltstore"
)

// A file written before the by-run approval indexes gets them on Open, so
// the approvals of a run are listed from them as from a new file's.
func TestByRunIndexesFilledOnOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "stead.db")
	s, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	for i := range 3 {
		id := fmt.Sprintf("run_%d", i)
		r, err := s.CreateRun(ctx, store.Run{ID: id, ProjectID: "p1", Status: store.RunRunning, CreatedAt: t0}, nil)
		if err != nil {
			t.Fatalf("create run %s: %v", id, err)
		}
		a, err := approvals.New(approvals.Request{
			ProjectID: "p1", RunID: id, StepID: "s", CallID: "s", Tool: "t", Input: json.RawMessage(`{}`),
			RequestedAt: t0.Add(time.Duration(i) * time.Minute), Timeout: time.Hour,
		}, "u")
		if err != nil {
			t.Fatal(err)
		}
		r.Status, r.ApprovalID = store.RunAwaitingApproval, a.ID
		if _, err := s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &a}); err != nil {
			t.Fatalf("commit run %s: %v", id, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	dropBuckets(t, path, "idx-apr-run", "idx-apr-run-x")

	s = open(t, path, boltstore.Options{NoSync: true})
	for _, o := range store.ApprovalOrders {
		page, err := s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", RunID: "run_1", Order: o})
		if err != nil || len(page.Items) != 1 || page.Items[0].RunID != "run_1" {
			t.Fatalf("approvals of run_1 (%s first) after reopen: %+v, %v", o, page.Items, err)
		}
		page, err = s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p2", RunID: "run_1", Order: o})
		if err != nil || len(page.Items) != 0 {
			t.Fatalf("approvals of run_1 listed for another project: %+v, %v", page.Items, err)
		}
	}
}
