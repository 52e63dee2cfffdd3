package boltstore_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"stead/approvals"
	"stead/store"
	"stead/store/boltstore"
)

// finishedRun stores a run the way the engine leaves one: created with an
// idempotency key and an event, a step and its event committed, a pause for
// an approval, then denied at finished, which fails the run. It returns
// the run and its approval.
func finishedRun(t *testing.T, s *boltstore.Store, id string, finished time.Time) (store.Run, approvals.Approval) {
	t.Helper()
	ctx := t.Context()
	ev := func(typ string) []store.Event {
		return []store.Event{{Type: typ, At: t0, Data: json.RawMessage(`{"run":"` + id + `"}`)}}
	}
	r, err := s.CreateRun(ctx, store.Run{ID: id, ProjectID: "p1", Status: store.RunRunning, CreatedAt: t0, IdempotencyKey: fmt.Sprintf("idem-%x", id)}, ev("run.created"))
	if err != nil {
		t.Fatalf("create run %s: %v", id, err)
	}
	step := store.Step{Index: 0, ID: "lookup", Output: json.RawMessage(`{"ok":true}`), IdempotencyKey: id + ":0", CompletedAt: t0}
	if r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Steps: []store.Step{step}, Events: ev("step.succeeded")}); err != nil {
		t.Fatalf("commit step of %s: %v", id, err)
	}
	a, err := approvals.New(approvals.Request{
		ProjectID: "p1", RunID: id, StepID: "refund", CallID: "refund", Tool: "refundOrder", Input: json.RawMessage(`{}`),
		RequestedAt: t0, Timeout: 24 * time.Hour,
	}, "u-"+id)
	if err != nil {
		t.Fatal(err)
	}
	r.Status, r.ApprovalID = store.RunAwaitingApproval, a.ID
	if _, err = s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &a, Events: ev("approval.requested")}); err != nil {
		t.Fatalf("commit pause of %s: %v", id, err)
	}
	a, r, err = s.DecideApproval(ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "p1", ApprovalID: a.ID, Status: approvals.Denied, By: "owner", At: finished},
		RunStatus: store.RunFailed,
		RunError:  &store.RunError{Code: "approval-denied", Message: "denied", Step: "refund"},
		Events:    ev("run.failed"),
	})
	if err != nil {
		t.Fatalf("deny %s: %v", id, err)
	}
	return r, a
}

// TestPurgeFinishedRuns: a run that finished more than Retention ago is
// deleted with its events, steps, approvals and idempotency record — no key
// or value of any bucket names it afterwards — while a run that finished
// since, one still waiting for a decision and one whose notifications have
// not gone out stay whole.
func TestPurgeFinishedRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, path := retaining(t)
	old, oldApr := finishedRun(t, s, "run_old", t0.Add(time.Minute))
	recent, _ := finishedRun(t, s, "run_recent", t0.Add(2*time.Hour))
	waiting, err := s.CreateRun(ctx, store.Run{ID: "run_waiting", ProjectID: "p1", Status: store.RunAwaitingApproval, CreatedAt: t0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	notifying, err := s.CreateRun(ctx, store.Run{ID: "run_notifying", ProjectID: "p1", Status: store.RunRunning, CreatedAt: t0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	notifying.Status, notifying.FinishedAt = store.RunSucceeded, t0
	if _, err = s.CommitRun(ctx, store.RunCommit{Run: notifying, Events: []store.Event{{Type: "run.succeeded", At: t0, Notify: true}}}); err != nil {
		t.Fatal(err)
	}

	now := t0.Add(90 * time.Minute) // run_old finished 89 minutes ago, run_recent not yet
	n, err := s.Purge(ctx, now, 10)
	if err != nil || n != 1 {
		t.Fatalf("purge: %d runs, %v; want 1 (run_old)", n, err)
	}
	if _, err := s.GetRun(ctx, old.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get purged run: %v, want ErrNotFound", err)
	}
	if _, err := s.GetApproval(ctx, oldApr.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get purged run's approval: %v, want ErrNotFound", err)
	}
	if evs, err := s.ListEvents(ctx, old.ID, 0, 100); err != nil || len(evs) != 0 {
		t.Errorf("purged run's events: %d, %v", len(evs), err)
	}
	if steps, err := s.ListSteps(ctx, old.ID); err != nil || len(steps) != 0 {
		t.Errorf("purged run's steps: %d, %v", len(steps), err)
	}
	runs, err := s.ListRuns(ctx, store.RunFilter{ProjectID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range runs.Items {
		listed = append(listed, r.ID)
	}
	slices.Sort(listed)
	if want := []string{"run_notifying", "run_recent", "run_waiting"}; !slices.Equal(listed, want) {
		t.Errorf("runs listed after the purge: %v, want %v", listed, want)
	}
	aprs, err := s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range aprs.Items {
		if a.RunID == old.ID {
			t.Errorf("purged run's approval %s still listed", a.ID)
		}
	}
	if len(aprs.Items) != 1 {
		t.Errorf("approvals listed after the purge: %d, want run_recent's", len(aprs.Items))
	}
	// Its idempotency key is free again: a new run may take it.
	if _, err := s.CreateRun(ctx, store.Run{ID: "run_again", ProjectID: "p1", Status: store.RunQueued, CreatedAt: now, IdempotencyKey: old.IdempotencyKey}, nil); err != nil {
		t.Errorf("create a run with the purged run's idempotency key: %v", err)
	}
	for _, id := range []string{recent.ID, waiting.ID, notifying.ID} {
		if _, err := s.GetRun(ctx, id); err != nil {
			t.Errorf("run %s after the purge: %v", id, err)
		}
	}
	if evs, _ := s.ListEvents(ctx, recent.ID, 0, 100); len(evs) != 4 {
		t.Errorf("run_recent's events after the purge: %d, want 4", len(evs))
	}
	if n, err := s.Purge(ctx, now, 10); err != nil || n != 0 {
		t.Errorf("second purge: %d, %v; want 0", n, err)
	}
	wantGone(t, s, path, old.ID, oldApr.ID)
	if where := mentions(t, path, recent.ID); len(where) == 0 {
		t.Errorf("run_recent is in no bucket: the check above cannot fail")
	}
}

// retaining opens a store in a fresh file that keeps what ended for an
// hour, and returns it with the file's path.
func retaining(t *testing.T) (*boltstore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stead.db")
	return open(t, path, boltstore.Options{NoSync: true, Retention: time.Hour}), path
}

// wantGone closes s and fails if a bucket of its file at path still holds
// one of ids.
func wantGone(t *testing.T, s *boltstore.Store, path string, ids ...string) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if where := mentions(t, path, ids...); len(where) > 0 {
		t.Errorf("purged, and still in the file: %v", where)
	}
}

// mentions lists the buckets of the file at path with a key or value that
// holds one of ids.
func mentions(t *testing.T, path string, ids ...string) []string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var where []string
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				for _, id := range ids {
					if bytes.Contains(k, []byte(id)) || bytes.Contains(v, []byte(id)) {
						where = append(where, fmt.Sprintf("%s: %q", name, k))
					}
				}
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return where
}

// TestPurgeInBatches: a purge deletes at most limit runs, oldest first, and
// says so; a store with no Retention deletes none.
func TestPurgeInBatches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "stead.db"), boltstore.Options{NoSync: true, Retention: time.Minute})
	for i := range 3 {
		finishedRun(t, s, fmt.Sprintf("run_%d", i), t0.Add(time.Duration(i)*time.Second))
	}
	now := t0.Add(time.Hour)
	for i, want := range []int{2, 1, 0} {
		n, err := s.Purge(ctx, now, 2)
		if err != nil || n != want {
			t.Fatalf("purge %d: %d, %v; want %d", i, n, err, want)
		}
		if i == 0 {
			if _, err := s.GetRun(ctx, "run_2"); err != nil {
				t.Fatalf("the newest run went first: %v", err)
			}
		}
	}

	keep := open(t, filepath.Join(t.TempDir(), "stead.db"), boltstore.Options{NoSync: true})
	finishedRun(t, keep, "run_kept", t0)
	if n, err := keep.Purge(ctx, t0.AddDate(10, 0, 0), 10); err != nil || n != 0 {
		t.Fatalf("purge without retention: %d, %v", n, err)
	}
}

// A file written before the retention indexes gets them on Open, so its old
// runs, notifications and rules are purged like new ones.
func TestFinishedIndexFilledOnOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "stead.db")
	s, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	finishedRun(t, s, "run_before", t0)
	if _, err := s.CreateRun(ctx, store.Run{ID: "run_live", ProjectID: "p1", Status: store.RunQueued, CreatedAt: t0}, nil); err != nil {
		t.Fatal(err)
	}
	settled := store.Delivery{ID: "wd_before", ProjectID: "p1", EndpointID: "we_1", Type: "run.failed", Body: json.RawMessage(`{}`),
		Status: store.DeliveryDelivered, CreatedAt: t0, UpdatedAt: t0}
	if err := s.PutDeliveries(ctx, []store.Delivery{settled}); err != nil {
		t.Fatal(err)
	}
	oldRule := expiringRule(t, s, time.Minute)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dropBuckets(t, path, "idx-run-finished", "idx-delivery-settled", "idx-rule-expiry")
	s = open(t, path, boltstore.Options{NoSync: true, Retention: time.Hour})
	if n, err := s.Purge(ctx, t0.Add(2*time.Hour), 10); err != nil || n != 3 {
		t.Fatalf("purge after reopen: %d, %v; want 3 (run_before, wd_before, its rule)", n, err)
	}
	if _, err := s.GetRule(ctx, "p1", oldRule.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the old rule after the purge: %v", err)
	}
	if _, err := s.GetDelivery(ctx, "p1", "wd_before"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("wd_before after the purge: %v", err)
	}
	if _, err := s.GetRun(ctx, "run_before"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run_before after the purge: %v", err)
	}
	if _, err := s.GetRun(ctx, "run_live"); err != nil {
		t.Errorf("the queued run after the purge: %v", err)
	}
}

// TestPurgeSettledDeliveries: a notification settled (delivered or failed)
// more than Retention ago is deleted, from the endpoint's log too; one
// still pending, one settled since, and one sent again after it settled
// stay.
func TestPurgeSettledDeliveries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, path := retaining(t)
	delivery := func(id string) store.Delivery {
		return store.Delivery{ID: id, ProjectID: "p1", EndpointID: "we_1", Type: "run.succeeded", Body: json.RawMessage(`{}`),
			Status: store.DeliveryPending, NextAt: t0, CreatedAt: t0, UpdatedAt: t0}
	}
	ids := []string{"wd_delivered", "wd_pending", "wd_recent", "wd_again"}
	var ds []store.Delivery
	for _, id := range ids {
		ds = append(ds, delivery(id))
	}
	if err := s.PutDeliveries(ctx, ds); err != nil {
		t.Fatal(err)
	}
	settle := func(id string, st store.DeliveryStatus, at time.Time) {
		t.Helper()
		d, err := s.GetDelivery(ctx, "p1", id)
		if err != nil {
			t.Fatal(err)
		}
		d.Status, d.UpdatedAt, d.Tries = st, at, d.Tries+1
		if st == store.DeliveryPending {
			d.NextAt = at
		}
		if _, err := s.UpdateDelivery(ctx, d); err != nil {
			t.Fatalf("settle %s: %v", id, err)
		}
	}
	settle("wd_delivered", store.DeliveryDelivered, t0.Add(time.Minute))
	settle("wd_recent", store.DeliveryFailed, t0.Add(2*time.Hour))
	settle("wd_again", store.DeliveryDelivered, t0.Add(time.Minute))
	settle("wd_again", store.DeliveryPending, t0.Add(2*time.Minute)) // sent again: pending once more

	n, err := s.Purge(ctx, t0.Add(90*time.Minute), 10)
	if err != nil || n != 1 {
		t.Fatalf("purge: %d, %v; want 1 (wd_delivered)", n, err)
	}
	if _, err := s.GetDelivery(ctx, "p1", "wd_delivered"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the purged delivery: %v, want ErrNotFound", err)
	}
	page, err := s.ListDeliveries(ctx, "p1", "we_1", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, d := range page.Items {
		listed = append(listed, d.ID)
	}
	slices.Sort(listed)
	if want := []string{"wd_again", "wd_pending", "wd_recent"}; !slices.Equal(listed, want) {
		t.Errorf("the endpoint's log after the purge: %v, want %v", listed, want)
	}
	wantGone(t, s, path, "wd_delivered")
}

// TestPurgeExpiredRules: a remembered decision that expired more than
// Retention ago is deleted, from its scope's list too; one that expired
// since stays.
func TestPurgeExpiredRules(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, path := retaining(t)
	old := expiringRule(t, s, time.Minute)
	recent := expiringRule(t, s, 2*time.Hour)
	n, err := s.Purge(ctx, t0.Add(90*time.Minute), 10)
	if err != nil || n != 1 {
		t.Fatalf("purge: %d, %v; want 1 (the rule that expired 89 minutes ago)", n, err)
	}
	if _, err := s.GetRule(ctx, "p1", old.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the purged rule: %v, want ErrNotFound", err)
	}
	page, err := s.ListRules(ctx, store.RuleFilter{ProjectID: "p1", Agent: "refunds", Tool: "refundOrder", EndUserID: "alice", All: true})
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != recent.ID {
		t.Fatalf("the scope's rules after the purge: %+v, %v; want only %s", page.Items, err, recent.ID)
	}
	wantGone(t, s, path, old.ID)
}

// expiringRule stores a rule of alice's refundOrder calls made at t0 and
// lasting lasts.
func expiringRule(t *testing.T, s *boltstore.Store, lasts time.Duration) approvals.Rule {
	t.Helper()
	u := ulid.MustNew(ulid.Timestamp(t0), ulid.DefaultEntropy()).String()
	r := approvals.Rule{
		ID: approvals.NewRuleID(u, "refunds", "refundOrder", "alice"), ProjectID: "p1", Agent: "refunds", Tool: "refundOrder", EndUserID: "alice",
		ApprovalID: "apr_" + u, RunID: "run_" + u, Deployment: 1, PostureDigest: "posture-1",
		CreatedBy: "key_ana", CreatedAt: t0, ExpiresAt: t0.Add(lasts),
	}
	if err := s.CreateRule(t.Context(), r); err != nil {
		t.Fatalf("create rule: %v", err)
	}
	return r
}

// dropBuckets deletes buckets from the closed file at path, as a file
// written before they existed lacks them.
func dropBuckets(t *testing.T, path string, names ...string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range names {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return fmt.Errorf("delete bucket %s: %w", b, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPurgeByFinishedAt: a run is kept for Retention after it finished, not
// after its last update, and still kept at exactly Retention: a purge
// deletes only what finished before now minus Retention.
func TestPurgeByFinishedAt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := retaining(t)
	r, err := s.CreateRun(ctx, store.Run{ID: "run_done", ProjectID: "p1", Status: store.RunRunning, CreatedAt: t0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	finished := t0.Add(time.Minute)
	r.Status, r.FinishedAt, r.UpdatedAt = store.RunSucceeded, finished, t0.Add(50*time.Minute)
	if _, err := s.CommitRun(ctx, store.RunCommit{Run: r}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx, finished.Add(time.Hour), 10); err != nil || n != 0 {
		t.Fatalf("purge exactly Retention after the run finished: %d, %v; want 0 (kept until after)", n, err)
	}
	if _, err := s.GetRun(ctx, r.ID); err != nil {
		t.Fatalf("run finished exactly Retention ago: %v", err)
	}
	if n, err := s.Purge(ctx, finished.Add(time.Hour+time.Nanosecond), 10); err != nil || n != 1 {
		t.Fatalf("purge just past Retention after the run finished (and before Retention after its last update): %d, %v; want 1", n, err)
	}
	if _, err := s.GetRun(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("purged run: %v, want ErrNotFound", err)
	}
}

// TestPurgeRunWithPendingApproval: a run that finished while its approval
// was still pending (failed or cancelled by a commit, not by a decision) is
// purged with the approval and its entries in the pending queues: the
// approval is not listed as pending or due afterwards, and listing them
// does not fail on an approval that is gone.
func TestPurgeRunWithPendingApproval(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, path := retaining(t)
	r, err := s.CreateRun(ctx, store.Run{ID: "run_cut", ProjectID: "p1", Status: store.RunRunning, CreatedAt: t0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := approvals.New(approvals.Request{
		ProjectID: "p1", RunID: r.ID, StepID: "refund", CallID: "refund", Tool: "refundOrder", Input: json.RawMessage(`{}`),
		RequestedAt: t0, Timeout: 24 * time.Hour,
	}, "u1")
	if err != nil {
		t.Fatal(err)
	}
	r.Status, r.ApprovalID = store.RunAwaitingApproval, a.ID
	if r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &a}); err != nil {
		t.Fatal(err)
	}
	r.Status, r.FinishedAt = store.RunCancelled, t0
	if _, err = s.CommitRun(ctx, store.RunCommit{Run: r}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx, t0.Add(2*time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v; want 1 (run_cut)", n, err)
	}
	due, err := s.ListDueApprovals(ctx, t0.Add(48*time.Hour), 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("due approvals after the purge: %v, %v; want none", approvalIDs(due), err)
	}
	for _, order := range []store.ApprovalOrder{store.NewestFirst, store.ExpiringFirst} {
		page, err := s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", Status: approvals.Pending, Order: order})
		if err != nil || len(page.Items) != 0 {
			t.Fatalf("pending approvals (%s) after the purge: %v, %v; want none", order, approvalIDs(page.Items), err)
		}
	}
	wantGone(t, s, path, r.ID, a.ID)
}

func approvalIDs(as []approvals.Approval) []string {
	ids := make([]string, len(as))
	for i, a := range as {
		ids[i] = a.ID
	}
	return ids
}
