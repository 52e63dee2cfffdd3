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
// then Purge, which the engine's sweep calls, deletes it with everything
// that is only its own — its events, steps, approvals and idempotency
// record, and their index entries — in one transaction, so a reader sees
// the whole run or none of it. It is what DynamoDB's time to
// live does for dynamostore's Retention, without TTL's delay. Runs that are
// queued, running or awaiting approval are never deleted, however old.
// A notification (a webhook, email or Slack delivery) is kept as long after
// it settled, and a remembered decision (a rule) as long after it expired,
// then each is deleted too, as on DynamoDB. Broker records are an end
// user's, not a run's, and stay.
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

// indexFinishedRuns, indexSettledDeliveries and indexRuleExpiries fill
// idx-run-finished, idx-delivery-settled and idx-rule-expiry from the
// stored records, for a file written before those indexes existed.
func indexFinishedRuns(tx *bolt.Tx) error {
	return backfill(tx, bRuns, xRunFinished, func(r store.Run) ([]byte, bool) { return finishedKey(r), r.Status.Terminal() })
}

func indexSettledDeliveries(tx *bolt.Tx) error {
	return backfill(tx, bDeliveries, xDeliverySettled, func(d store.Delivery) ([]byte, bool) {
		return settledKey(d), d.Status != store.DeliveryPending
	})
}

func indexRuleExpiries(tx *bolt.Tx) error {
	return backfill(tx, bRules, xRuleExpiry, func(r approvals.Rule) ([]byte, bool) { return ruleExpiryKey(r), true })
}

// backfill marks in index the key of each record of bucket that key says
// has one.
func backfill[T any](tx *bolt.Tx, bucketName, index []byte, key func(T) ([]byte, bool)) error {
	return scan(bucket(tx, bucketName), nil, nil, false, func(_, v []byte) (bool, error) {
		var rec T
		if err := decode(v, &rec); err != nil {
			return false, err
		}
		if k, ok := key(rec); ok {
			return true, mark(tx, index, k)
		}
		return true, nil
	})
}

// deleteRule deletes the rule under rules key k and its index entries.
func deleteRule(tx *bolt.Tx, k []byte) error {
	var r approvals.Rule
	ok, err := get(tx, bRules, k, &r)
	if err != nil || !ok {
		return err
	}
	for _, e := range []indexEntry{{xRuleScopes, ruleScopeKey(r)}, {xRuleExpiry, ruleExpiryKey(r)}} {
		if err := unmark(tx, e.bucket, e.key); err != nil {
			return err
		}
	}
	return bucket(tx, bRules).Delete(k)
}

// Purge deletes up to limit of what Options.Retention no longer keeps, in
// one transaction, oldest first: runs that finished before now minus
// Retention, then notifications (webhook, email and Slack deliveries)
// settled before then, then rules that expired before then. It returns how many it deleted: fewer than limit
// when nothing else is due. A run whose notifications are still in the
// outbox waits until they went out; a pending delivery waits until it
// settles. It deletes nothing when the store keeps everything.
func (s *Store) Purge(ctx context.Context, now time.Time, limit int) (int, error) {
	if s.retention <= 0 || limit <= 0 {
		return 0, nil
	}
	end := timeKey(now.Add(-s.retention))
	isDue := func(k []byte) bool { return len(k) >= timeLen && bytes.Compare(k[:timeLen], end) < 0 }
	// Most sweeps find nothing due: they look in a read transaction, which
	// writes nothing and syncs nothing.
	var found bool
	err := s.view(ctx, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{xRunFinished, xDeliverySettled, xRuleExpiry} {
			if k, _ := bucket(tx, b).Cursor().First(); isDue(k) {
				found = true
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("purge: %w", interpretError(err))
	}
	if !found {
		return 0, nil
	}
	var n int
	err = s.update(ctx, func(tx *bolt.Tx) error {
		n = 0
		notifying := func(id []byte) bool { return exists(tx, bOutbox, id) }
		// Each kind in turn, its due entries up to what limit leaves. The
		// entry goes with what it names, and also when that is gone
		// already, so that no entry is due for ever.
		kinds := []struct {
			index  []byte
			skip   func(id []byte) bool
			delete func(id []byte) error
		}{
			{xRunFinished, notifying, func(id []byte) error { return deleteRun(tx, string(id)) }},
			{xDeliverySettled, nil, func(id []byte) error { return deleteDelivery(tx, string(id)) }},
			{xRuleExpiry, nil, func(k []byte) error { return deleteRule(tx, k) }},
		}
		for _, kind := range kinds {
			keys, err := dueKeys(tx, kind.index, isDue, limit-n, kind.skip)
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := kind.delete(k[timeLen:]); err != nil {
					return err
				}
				if err := unmark(tx, kind.index, k); err != nil {
					return err
				}
			}
			n += len(keys)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("purge: %w", interpretError(err))
	}
	return n, nil
}

// dueKeys returns up to limit keys of the time index b, oldest first, that
// are due, passing over those whose id skip names.
func dueKeys(tx *bolt.Tx, b []byte, due func(k []byte) bool, limit int, skip func(id []byte) bool) ([][]byte, error) {
	var out [][]byte
	if limit <= 0 {
		return nil, nil
	}
	err := scan(bucket(tx, b), nil, nil, false, func(k, _ []byte) (bool, error) {
		if !due(k) {
			return false, nil
		}
		if skip == nil || !skip(k[timeLen:]) {
			out = append(out, bytes.Clone(k))
		}
		return len(out) < limit, nil
	})
	return out, err
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
