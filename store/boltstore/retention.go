package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"stead/approvals"
	"stead/store"
)

// Retention: a finished run is kept for Options.Retention after it finished;
// then PurgeFinishedRuns, which the engine's sweep calls, deletes it with
// everything that is only its own — its events, steps, approvals and
// idempotency record, and their index entries — in one transaction, so a
// reader sees the whole run or none of it. It is what DynamoDB's time to
// live does for dynamostore's Retention, without TTL's delay. Runs that are
// queued, running or awaiting approval are never deleted, however old.
// Broker records, rules and webhook deliveries are not a run's and stay.
//
// Deleting is also what keeps a long-lived store's memory flat: bbolt's
// freelist remembers every page a transaction allocated until that page is
// freed, so the Go heap grows with the live data.

// finishedKey is a finished run's entry in idx-run-finished: when it
// finished (its last update for a run that does not say), then its id.
func finishedKey(r store.Run) []byte {
	at := r.FinishedAt
	if at.IsZero() {
		at = r.UpdatedAt
	}
	return timeID(at, r.ID)
}

// indexFinishedRuns fills idx-run-finished from the stored runs, for a file
// written before it existed.
func indexFinishedRuns(tx *bolt.Tx) error {
	return scan(bucket(tx, bRuns), nil, nil, false, func(_, v []byte) (bool, error) {
		var r store.Run
		if err := decode(v, &r); err != nil {
			return false, err
		}
		if !r.Status.Terminal() {
			return true, nil
		}
		return true, mark(tx, xRunFinished, finishedKey(r))
	})
}

// PurgeFinishedRuns deletes up to limit runs that finished before now minus
// Options.Retention, oldest first, in one transaction, and returns how many
// it deleted: fewer than limit when no other is due. A run whose
// notifications are still in the outbox waits until they went out. It
// deletes nothing when the store keeps every run.
func (s *Store) PurgeFinishedRuns(ctx context.Context, now time.Time, limit int) (int, error) {
	if s.retention <= 0 || limit <= 0 {
		return 0, nil
	}
	end := timeKey(now.Add(-s.retention))
	// Most sweeps find nothing due: they look in a read transaction, which
	// writes nothing and syncs nothing.
	var oldest []byte
	err := s.view(ctx, func(tx *bolt.Tx) error {
		k, _ := bucket(tx, xRunFinished).Cursor().First()
		oldest = bytes.Clone(k)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("purge finished runs: %w", interpretError(err))
	}
	if len(oldest) < timeLen || bytes.Compare(oldest[:timeLen], end) >= 0 {
		return 0, nil
	}
	var n int
	err = s.update(ctx, func(tx *bolt.Tx) error {
		n = 0
		var due [][]byte
		err := scan(bucket(tx, xRunFinished), nil, nil, false, func(k, _ []byte) (bool, error) {
			if len(k) < timeLen || bytes.Compare(k[:timeLen], end) >= 0 {
				return false, nil
			}
			if !exists(tx, bOutbox, k[timeLen:]) {
				due = append(due, bytes.Clone(k))
			}
			return len(due) < limit, nil
		})
		if err != nil {
			return err
		}
		for _, k := range due {
			if err := deleteRun(tx, string(k[timeLen:])); err != nil {
				return err
			}
			if err := unmark(tx, xRunFinished, k); err != nil {
				return err
			}
		}
		n = len(due)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("purge finished runs: %w", interpretError(err))
	}
	return n, nil
}

// deleteRun deletes a run and what is only its own (see Retention above),
// with their index entries. A run that is gone already is no error.
func deleteRun(tx *bolt.Tx, id string) error {
	var r store.Run
	ok, err := get(tx, bRuns, []byte(id), &r)
	if err != nil || !ok {
		return err
	}
	p := prefix(id)
	for _, b := range [][]byte{bEvents, bSteps} {
		if err := deletePrefix(tx, b, p); err != nil {
			return err
		}
	}
	var aprs []string
	err = scan(bucket(tx, xAprRun), p, nil, false, func(k, _ []byte) (bool, error) {
		aprs = append(aprs, string(k[len(p)+timeLen:]))
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, aid := range aprs {
		if err := deleteApproval(tx, aid); err != nil {
			return err
		}
	}
	if r.IdempotencyKey != "" {
		ik := key([]byte(r.IdempotencyKey), r.ProjectID)
		if bytes.Equal(bucket(tx, xRunIdem).Get(ik), []byte(id)) {
			if err := unmark(tx, xRunIdem, ik); err != nil {
				return err
			}
		}
	}
	if err := unmark(tx, xRunProject, key(timeID(r.CreatedAt, r.ID), r.ProjectID)); err != nil {
		return err
	}
	return bucket(tx, bRuns).Delete([]byte(id))
}

// deleteApproval deletes an approval and its entries in every approval
// index.
func deleteApproval(tx *bolt.Tx, id string) error {
	var a approvals.Approval
	ok, err := get(tx, bApprovals, []byte(id), &a)
	if err != nil || !ok {
		return err
	}
	for _, e := range append(approvalEntries(a), pendingEntries(a)...) {
		if err := unmark(tx, e.bucket, e.key); err != nil {
			return err
		}
	}
	return bucket(tx, bApprovals).Delete([]byte(id))
}

// deletePrefix deletes the keys of bucket b that start with p.
func deletePrefix(tx *bolt.Tx, b, p []byte) error {
	var ks [][]byte
	err := scan(bucket(tx, b), p, nil, false, func(k, _ []byte) (bool, error) {
		ks = append(ks, bytes.Clone(k))
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := bucket(tx, b).Delete(k); err != nil {
			return err
		}
	}
	return nil
}
