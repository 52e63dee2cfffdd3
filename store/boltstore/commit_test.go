package boltstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func openDB(t testing.TB) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "commit.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return db
}

func putKey(k string, fail error) func(*bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		if err := tx.Bucket([]byte("b")).Put([]byte(k), []byte("v")); err != nil {
			return err
		}
		return fail // written, then refused: must not survive
	}
}

func keys(t testing.TB, db *bolt.DB) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("b")).ForEach(func(k, _ []byte) error { got[string(k)] = true; return nil })
	})
	if err != nil {
		t.Fatalf("view: %v", err)
	}
	return got
}

// A failing write in a shared commit reaches only its caller, and nothing it
// wrote survives; the others commit without it.
func TestCommitIsolatesFailure(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	errRefused := errors.New("refused")
	runs := 0
	counted := func(tx *bolt.Tx) error { runs++; return putKey("ok1", nil)(tx) }
	batch := []*call{
		{fn: counted, done: make(chan error, 1)},
		{fn: putKey("bad", errRefused), done: make(chan error, 1)},
		{fn: putKey("ok2", nil), done: make(chan error, 1)},
	}
	commit(db, batch)
	if err := <-batch[0].done; err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := <-batch[2].done; err != nil {
		t.Fatalf("third write: %v", err)
	}
	if err := finish(db, batch[1], <-batch[1].done); !errors.Is(err, errRefused) {
		t.Fatalf("failing write: got %v, want its own error", err)
	}
	if runs != 2 {
		t.Fatalf("first write ran %d times, want 2 (once rolled back with the failure, once committed)", runs)
	}
	got := keys(t, db)
	if !got["ok1"] || !got["ok2"] || got["bad"] || len(got) != 2 {
		t.Fatalf("keys after the commit: %v, want ok1 and ok2 only", got)
	}
}

// A panicking write fails in its own caller only.
func TestCommitIsolatesPanic(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	batch := []*call{
		{fn: func(*bolt.Tx) error { panic("boom") }, done: make(chan error, 1)},
		{fn: putKey("ok", nil), done: make(chan error, 1)},
	}
	commit(db, batch)
	if err := <-batch[0].done; err != errSolo {
		t.Fatalf("panicking write: got %v, want a solo re-run", err)
	}
	if err := <-batch[1].done; err != nil {
		t.Fatalf("other write: %v", err)
	}
	if got := keys(t, db); !got["ok"] {
		t.Fatalf("keys: %v", got)
	}
}

// Many writers, some refused: each gets its own outcome, whatever batches
// they happened to share.
func TestCommitConcurrent(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	var g committer
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var fail error
			if i%3 == 0 {
				fail = fmt.Errorf("refused %d", i)
			}
			errs[i] = g.update(db, putKey(fmt.Sprint(i), fail))
		})
	}
	wg.Wait()
	got := keys(t, db)
	for i, err := range errs {
		refused := i%3 == 0
		if want := fmt.Sprintf("refused %d", i); refused && (err == nil || err.Error() != want) {
			t.Fatalf("writer %d: got %v, want %q", i, err, want)
		}
		if !refused && err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		if got[fmt.Sprint(i)] == refused {
			t.Fatalf("writer %d (refused %v): key present %v", i, refused, got[fmt.Sprint(i)])
		}
	}
	if g.leading || len(g.queue) != 0 {
		t.Fatalf("committer not idle after all writers returned: leading %v, queue %d", g.leading, len(g.queue))
	}
}

// Writers that arrive while a commit is in flight wait for it and then
// share the next one: one leader at a time, and every write that queued
// meanwhile in one transaction.
func TestCommitBatchesWritersThatQueued(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	var g committer
	inFlight, held := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // before the db closes, also when the test fails
	first := make(chan error, 1)
	go func() {
		first <- g.update(db, func(tx *bolt.Tx) error {
			close(inFlight)
			<-held
			return putKey("first", nil)(tx)
		})
	}()
	<-inFlight

	const n = 8
	var mu sync.Mutex
	txs := map[int]bool{} // the transactions the queued writes ran in
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = g.update(db, func(tx *bolt.Tx) error {
				mu.Lock()
				txs[int(tx.ID())] = true
				mu.Unlock()
				return putKey(fmt.Sprint(i), nil)(tx)
			})
		})
	}
	// The writers queue behind the commit in flight; none of them leads.
	for spins := 0; ; spins++ {
		g.mu.Lock()
		queued := len(g.queue)
		g.mu.Unlock()
		if queued == n {
			break
		}
		if spins == 1e7 {
			t.Fatalf("%d of %d writers queued behind the commit in flight: the others did not wait for it", queued, n)
		}
		runtime.Gosched()
	}
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("first write: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("queued write %d: %v", i, err)
		}
	}
	if len(txs) != 1 {
		t.Fatalf("the %d queued writes committed in %d transactions, want 1", n, len(txs))
	}
	if got := keys(t, db); len(got) != n+1 {
		t.Fatalf("keys after the commits: %v, want %d", got, n+1)
	}
	if g.leading || len(g.queue) != 0 {
		t.Fatalf("committer not idle after all writers returned: leading %v, queue %d", g.leading, len(g.queue))
	}
}
