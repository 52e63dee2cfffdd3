package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"stead/store"
	"stead/store/boltstore"
	"stead/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "stead.db"), boltstore.Options{NoSync: true})
	})
}

// open opens a store and closes it when the test ends.
func open(t testing.TB, path string, o boltstore.Options) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(path, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "nested", "stead.db") // Open makes the folder
	s, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	r := store.Run{ID: "r1", ProjectID: "p1", Status: store.RunQueued, CreatedAt: t0, LeaseUntil: t0.Add(time.Minute)}
	if _, err := s.CreateRun(ctx, r, []store.Event{{Type: "run.created", At: t0}}); err != nil {
		t.Fatalf("create run: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := s.GetRun(ctx, "r1"); !errors.Is(err, boltstore.ErrClosed) {
		t.Fatalf("get run from a closed store: got %v, want ErrClosed", err)
	}

	s = open(t, path, boltstore.Options{})
	got, err := s.GetRun(ctx, "r1")
	if err != nil {
		t.Fatalf("get run after reopen: %v", err)
	}
	if got.Version != 1 || got.LastSeq != 1 || !got.CreatedAt.Equal(t0) {
		t.Fatalf("run after reopen: %+v", got)
	}
	// The indexes came back too.
	stalled, err := s.ListStalledRuns(ctx, t0.Add(time.Hour), 10)
	if err != nil || len(stalled) != 1 || stalled[0].ID != "r1" {
		t.Fatalf("stalled runs after reopen: %v, %v", stalled, err)
	}
	page, err := s.ListRuns(ctx, store.RunFilter{ProjectID: "p1"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("runs after reopen: %v, %v", page.Items, err)
	}
}

func TestCloseReleasesLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stead.db")
	s, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	_, err = boltstore.Open(path, boltstore.Options{Timeout: 50 * time.Millisecond})
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("second open while the first holds the lock: got %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	open(t, path, boltstore.Options{Timeout: 50 * time.Millisecond})
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "stead.db"), boltstore.Options{NoSync: true})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.CreateProject(ctx, store.Project{ID: "p1"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("create with a canceled context: got %v", err)
	}
	if _, err := s.GetProject(t.Context(), "p1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("project written despite a canceled context: %v", err)
	}
}

// BenchmarkBoltCommit is the baseline: one raw bbolt transaction writing a
// small value, fsync on. Its commits/s is what one writer at a time gets.
func BenchmarkBoltCommit(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, nil)
	if err != nil {
		b.Fatalf("open: %v", err)
	}
	defer db.Close()
	name := []byte("bench")
	value := make([]byte, 256)
	start := time.Now()
	i := 0
	for b.Loop() {
		i++
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists(name)
			if err != nil {
				return err
			}
			return bk.Put(fmt.Appendf(nil, "k%09d", i), value)
		})
		if err != nil {
			b.Fatalf("update: %v", err)
		}
	}
	b.ReportMetric(float64(i)/time.Since(start).Seconds(), "commits/s")
}

// BenchmarkBoltBatch is bbolt's own group commit, db.Batch with its default
// MaxBatchDelay, from 16 goroutines each writing a small value, fsync on:
// the reference that the store's committer (commit.go) is measured against.
func BenchmarkBoltBatch(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, nil)
	if err != nil {
		b.Fatalf("open: %v", err)
	}
	defer db.Close()
	name := []byte("bench")
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(name); return err }); err != nil {
		b.Fatalf("create bucket: %v", err)
	}
	value := make([]byte, 256)
	const writers = 16
	errs := make([]error, writers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range share(b.N, writers, w) {
				errs[w] = db.Batch(func(tx *bolt.Tx) error {
					return tx.Bucket(name).Put(fmt.Appendf(nil, "w%02d-%09d", w, i), value)
				})
				if errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
}

// share is writer w's part of n operations split between writers.
func share(n, writers, w int) int {
	if w < n%writers {
		return n/writers + 1
	}
	return n / writers
}

// BenchmarkCommitRunParallel runs CommitRun on distinct runs from several
// goroutines, fsync on. With group commit, 16 writers share each fsync and
// get several times the commits/s of one writer (and of BenchmarkBoltCommit).
func BenchmarkCommitRunParallel(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			benchCommitRun(b, writers)
		})
	}
}

func benchCommitRun(b *testing.B, writers int) {
	ctx := b.Context()
	s := open(b, filepath.Join(b.TempDir(), "stead.db"), boltstore.Options{})
	runs := make([]store.Run, writers)
	for i := range runs {
		r := store.Run{ID: fmt.Sprintf("r%d", i), ProjectID: "p1", Status: store.RunRunning, CreatedAt: t0, LeaseUntil: t0.Add(time.Hour)}
		var err error
		if runs[i], err = s.CreateRun(ctx, r, nil); err != nil {
			b.Fatalf("create run: %v", err)
		}
	}
	ev := []store.Event{{Type: "step.completed", At: t0, Data: []byte(`{"output":{"ok":true}}`)}}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			r := runs[w]
			for range share(b.N, writers, w) {
				r.Cursor++
				next, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: ev})
				if err != nil {
					errs[w] = err
					return
				}
				r = next
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
}

// Revocation records do not pile up: a revocation write deletes the records
// whose revocations all ended, and their index entries.
func TestEndedRevocationsAreDeleted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "stead.db")
	s, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		r := store.CustomerRevocation{ProjectID: "p1", EndUserID: fmt.Sprintf("u%d", i), TokenID: "ct1", Until: t0.Add(time.Hour), Now: t0}
		if i%2 == 0 {
			r.TokenID, r.IssuedBefore, r.Until = "", t0, t0.Add(24*time.Hour)
		}
		if err := s.RevokeCustomerTokens(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Past every token's expiry, two writes (each deletes up to 256) leave
	// only the record still in force.
	for i := range 2 {
		later := t0.Add(25 * time.Hour)
		r := store.CustomerRevocation{ProjectID: "p1", EndUserID: "last", TokenID: fmt.Sprintf("ct%d", i), Until: later.Add(time.Hour), Now: later}
		if err := s.RevokeCustomerTokens(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"revocations", "idx-revoked-until"} {
		if n := keyCount(t, path, name); n != 1 {
			t.Errorf("bucket %s has %d keys, want 1 (the record in force)", name, n)
		}
	}
}

// keyCount counts the keys of a bucket of the (closed) file at path.
func keyCount(t *testing.T, path, bucket string) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	err = db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket([]byte(bucket)).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A revocation record whose last revocation ends at the instant of a write
// has ended (CustomerRevocations.At) and is deleted by that write, and a
// revocation that ends when it is made leaves no record at all.
func TestRevocationsEndingNowAreDeleted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "stead.db")
	s, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	end := t0.Add(time.Hour)
	writes := []store.CustomerRevocation{
		{ProjectID: "p1", EndUserID: "u1", TokenID: "ct1", Until: end, Now: t0},
		// At u1's end: u1's record goes; u2's token expires now, so it is
		// not recorded.
		{ProjectID: "p1", EndUserID: "u2", TokenID: "ct2", Until: end, Now: end},
	}
	for _, r := range writes {
		if err := s.RevokeCustomerTokens(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"revocations", "idx-revoked-until"} {
		if n := keyCount(t, path, name); n != 0 {
			t.Errorf("bucket %s has %d keys, want none (no revocation is in force)", name, n)
		}
	}
}

// A write to a closed store fails with ErrClosed, and one that fails as a
// whole is never reported done.
func TestWriteAfterClose(t *testing.T) {
	t.Parallel()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "stead.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateRun(t.Context(), store.Run{ID: "r1", ProjectID: "p1", Status: store.RunQueued, CreatedAt: t0}, nil)
	if !errors.Is(err, boltstore.ErrClosed) {
		t.Fatalf("create a run in a closed store: got %v, want ErrClosed", err)
	}
}
