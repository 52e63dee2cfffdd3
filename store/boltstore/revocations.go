package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"stead/store"
)

// sweepRevocations bounds how many ended revocation records one write
// deletes, so that a write after a long quiet time stays short; the next
// writes take the rest.
const sweepRevocations = 256

// RevokeCustomerTokens records r until r.Until (see store.Store).
func (s *Store) RevokeCustomerTokens(ctx context.Context, r store.CustomerRevocation) error {
	if err := r.Validate(); err != nil {
		return err
	}
	k := prefix(r.ProjectID, r.EndUserID)
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if err := sweepEndedRevocations(tx, r.Now); err != nil {
			return err
		}
		var old store.CustomerRevocations
		if _, err := get(tx, bRevocations, k, &old); err != nil {
			return err
		}
		next, err := old.Apply(r)
		if err != nil {
			return err
		}
		if until := old.Until(); !until.IsZero() {
			if err := unmark(tx, xRevokedUntil, append(timeKey(until), k...)); err != nil {
				return err
			}
		}
		until := next.Until()
		if until.IsZero() {
			return bucket(tx, bRevocations).Delete(k)
		}
		if err := put(tx, bRevocations, k, next); err != nil {
			return err
		}
		return mark(tx, xRevokedUntil, append(timeKey(until), k...))
	})
	if err != nil {
		return fmt.Errorf("revoke customer tokens of %s: %w", r.EndUserID, interpretError(err))
	}
	return nil
}

// sweepEndedRevocations deletes records whose every revocation ended by now.
func sweepEndedRevocations(tx *bolt.Tx, now time.Time) error {
	end := timeKey(now)
	var ended [][]byte
	err := scan(bucket(tx, xRevokedUntil), nil, nil, false, func(k, _ []byte) (bool, error) {
		if len(k) < timeLen || bytes.Compare(k[:timeLen], end) > 0 || len(ended) == sweepRevocations {
			return false, nil
		}
		ended = append(ended, bytes.Clone(k))
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range ended {
		if err := bucket(tx, bRevocations).Delete(k[timeLen:]); err != nil {
			return err
		}
		if err := unmark(tx, xRevokedUntil, k); err != nil {
			return err
		}
	}
	return nil
}

// GetCustomerRevocations returns the revocations in force at now.
func (s *Store) GetCustomerRevocations(ctx context.Context, projectID, endUserID string, now time.Time) (store.CustomerRevocations, error) {
	var rs store.CustomerRevocations
	err := s.view(ctx, func(tx *bolt.Tx) error {
		_, err := get(tx, bRevocations, prefix(projectID, endUserID), &rs)
		return err
	})
	if err != nil {
		return store.CustomerRevocations{}, fmt.Errorf("get customer token revocations of %s: %w", endUserID, interpretError(err))
	}
	return rs.At(now), nil
}
