package boltstore

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Group commit.
//
// bbolt fsyncs once per read-write transaction, so writers that arrive
// while a commit is in flight should share the next one. db.Batch does
// that, but it starts each batch on a timer (MaxBatchDelay), and the Go
// runtime rounds a sub-millisecond timer up to a millisecond when the
// process is otherwise idle (runtime/netpoll_epoll.go: "delay < 1e6 →
// waitms = 1"). On a disk that fsyncs in a quarter of a millisecond that
// makes a batch slower than a lone db.Update (see BenchmarkBoltBatch).
//
// This committer keeps db.Batch's contract and drops the timer: the first
// writer to find no commit in flight leads; it commits every write queued
// so far in one transaction, then hands the lead to the first writer that
// queued meanwhile. A lone writer commits at once; under load a batch holds
// every write that arrived during the previous fsync.
//
// As with db.Batch, a function may run more than once and in a transaction
// shared with other writes: it must compute everything from its tx. If one
// returns an error, the shared transaction rolls back, that function is
// re-run alone in its own db.Update (so its error reaches only its caller,
// and nothing it wrote survives), and the rest are committed again without
// it.

type committer struct {
	mu      sync.Mutex
	queue   []*call
	leading bool
}

type call struct {
	fn func(*bolt.Tx) error
	// done receives errLead (this call now leads), errSolo (re-run alone),
	// or the result of the shared commit.
	done chan error
}

var (
	errLead = errors.New("lead the next commit")
	errSolo = errors.New("re-run alone")
)

// update runs fn in a read-write transaction shared with concurrent writes.
func (g *committer) update(db *bolt.DB, fn func(*bolt.Tx) error) error {
	c := &call{fn: fn, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()

	if !lead {
		if err := <-c.done; err != errLead {
			return finish(db, c, err)
		}
	}
	// Lead: commit everything queued, this call included, then pass the
	// lead on so that no writer commits batches for others indefinitely.
	g.mu.Lock()
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()

	commit(db, batch)

	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].done <- errLead
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	return finish(db, c, <-c.done)
}

// finish turns a call's outcome into its caller's error.
func finish(db *bolt.DB, c *call, err error) error {
	if err == errSolo {
		return db.Update(c.fn)
	}
	return err
}

// commit runs the batch in one transaction and tells every call its result.
func commit(db *bolt.DB, batch []*call) {
	batch = slices.Clone(batch) // failures are cut out of it below
	for len(batch) > 0 {
		failed := -1
		err := db.Update(func(tx *bolt.Tx) error {
			for i, c := range batch {
				if err := safeCall(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			batch[failed].done <- errSolo
			batch = slices.Delete(batch, failed, failed+1)
			continue
		}
		for _, c := range batch {
			c.done <- err // nil, or a bbolt error that failed them all
		}
		return
	}
}

// safeCall runs fn, turning a panic into an error so that one writer's bug
// does not take down the others; the solo re-run panics in its own caller.
func safeCall(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write panicked: %v", p)
		}
	}()
	return fn(tx)
}
