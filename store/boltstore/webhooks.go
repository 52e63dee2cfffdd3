package boltstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"stead/store"
)

// Webhook buckets: endpoints by (project, id); deliveries by id, with an
// index per endpoint (newest first by creation), a due index of pending
// ones by NextAt and one of settled ones by their last update (for
// retention.go); the outbox by run id.
var (
	bEndpoints       = []byte("endpoints")
	bDeliveries      = []byte("deliveries")
	xDeliveryLog     = []byte("idx-delivery-endpoint")
	xDeliveryDue     = []byte("idx-delivery-due")
	xDeliverySettled = []byte("idx-delivery-settled")
	bOutbox          = []byte("outbox")
)

func endpointKey(projectID, id string) []byte { return key([]byte(id), projectID) }

// CreateEndpoint stores a new endpoint at Version 1.
func (s *Store) CreateEndpoint(ctx context.Context, e store.Endpoint) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("create endpoint: %w", err)
	}
	e.Version = 1
	err := s.update(ctx, func(tx *bolt.Tx) error {
		k := endpointKey(e.ProjectID, e.ID)
		if exists(tx, bEndpoints, k) {
			return store.ErrExists
		}
		return put(tx, bEndpoints, k, e)
	})
	if err != nil {
		return fmt.Errorf("create endpoint %s: %w", e.ID, interpretError(err))
	}
	return nil
}

// GetEndpoint returns an endpoint of the project.
func (s *Store) GetEndpoint(ctx context.Context, projectID, id string) (store.Endpoint, error) {
	var e store.Endpoint
	err := s.view(ctx, func(tx *bolt.Tx) error {
		ok, err := get(tx, bEndpoints, endpointKey(projectID, id), &e)
		if err == nil && !ok {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("get endpoint %s: %w", id, interpretError(err))
	}
	return e, nil
}

// ListEndpoints lists a project's endpoints, oldest first.
func (s *Store) ListEndpoints(ctx context.Context, projectID string) ([]store.Endpoint, error) {
	var out []store.Endpoint
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		out, err = values[store.Endpoint](tx, bEndpoints, prefix(projectID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list endpoints of %s: %w", projectID, interpretError(err))
	}
	store.SortEndpoints(out)
	return out, nil
}

// UpdateEndpoint stores e conditional on its version.
func (s *Store) UpdateEndpoint(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	if err := e.Validate(); err != nil {
		return store.Endpoint{}, fmt.Errorf("update endpoint: %w", err)
	}
	var out store.Endpoint
	// The function may run more than once (see committer): it changes
	// only its own copy.
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var old store.Endpoint
		k := endpointKey(e.ProjectID, e.ID)
		ok, err := get(tx, bEndpoints, k, &old)
		switch {
		case err != nil:
			return err
		case !ok:
			return store.ErrNotFound
		case old.Version != e.Version:
			return store.ErrConflict
		}
		out = e
		out.Version++
		out.CreatedAt = old.CreatedAt
		return put(tx, bEndpoints, k, out)
	})
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("update endpoint %s: %w", e.ID, interpretError(err))
	}
	return out, nil
}

// DeleteEndpoint deletes an endpoint and its delivery log.
func (s *Store) DeleteEndpoint(ctx context.Context, projectID, id string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		k := endpointKey(projectID, id)
		if !exists(tx, bEndpoints, k) {
			return store.ErrNotFound
		}
		if err := bucket(tx, bEndpoints).Delete(k); err != nil {
			return err
		}
		var ids []string
		err := scan(bucket(tx, xDeliveryLog), prefix(projectID, id), nil, false, func(k, _ []byte) (bool, error) {
			ids = append(ids, string(k[len(prefix(projectID, id))+timeLen:]))
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, did := range ids {
			if err := deleteDelivery(tx, did); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete endpoint %s: %w", id, interpretError(err))
	}
	return nil
}

func deleteDelivery(tx *bolt.Tx, id string) error {
	var d store.Delivery
	ok, err := get(tx, bDeliveries, []byte(id), &d)
	if err != nil || !ok {
		return err
	}
	if !d.NextAt.IsZero() {
		if err := bucket(tx, xDeliveryDue).Delete(timeID(d.NextAt, id)); err != nil {
			return err
		}
	}
	if err := bucket(tx, xDeliveryLog).Delete(key(timeID(d.CreatedAt, id), d.ProjectID, d.EndpointID)); err != nil {
		return err
	}
	if err := unmark(tx, xDeliverySettled, settledKey(d)); err != nil {
		return err
	}
	return bucket(tx, bDeliveries).Delete([]byte(id))
}

// settledKey is a delivery's entry in idx-delivery-settled while it is not
// pending: its last update (its creation if it has none), then its id.
func settledKey(d store.Delivery) []byte {
	at := d.UpdatedAt
	if at.IsZero() {
		at = d.CreatedAt
	}
	return timeID(at, d.ID)
}

// PutDeliveries stores each delivery that does not exist yet.
func (s *Store) PutDeliveries(ctx context.Context, ds []store.Delivery) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		for _, d := range ds {
			if exists(tx, bDeliveries, []byte(d.ID)) {
				continue
			}
			d.Version = 1
			if err := putDelivery(tx, nil, d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put deliveries: %w", interpretError(err))
	}
	return nil
}

// putDelivery writes d over old (nil for a new one), moving its index
// entries.
func putDelivery(tx *bolt.Tx, old *store.Delivery, d store.Delivery) error {
	if old == nil {
		if err := mark(tx, xDeliveryLog, key(timeID(d.CreatedAt, d.ID), d.ProjectID, d.EndpointID)); err != nil {
			return err
		}
	} else if !old.NextAt.IsZero() {
		if err := bucket(tx, xDeliveryDue).Delete(timeID(old.NextAt, d.ID)); err != nil {
			return err
		}
	}
	if d.Status == store.DeliveryPending && !d.NextAt.IsZero() {
		if err := mark(tx, xDeliveryDue, timeID(d.NextAt, d.ID)); err != nil {
			return err
		}
	}
	// A settled delivery may be sent again (pending once more), and each
	// update moves its last update: its settled entry follows both.
	if old != nil && old.Status != store.DeliveryPending {
		if err := unmark(tx, xDeliverySettled, settledKey(*old)); err != nil {
			return err
		}
	}
	if d.Status != store.DeliveryPending {
		if err := mark(tx, xDeliverySettled, settledKey(d)); err != nil {
			return err
		}
	}
	return put(tx, bDeliveries, []byte(d.ID), d)
}

// GetDelivery returns a delivery of the project.
func (s *Store) GetDelivery(ctx context.Context, projectID, id string) (store.Delivery, error) {
	var d store.Delivery
	err := s.view(ctx, func(tx *bolt.Tx) error {
		ok, err := get(tx, bDeliveries, []byte(id), &d)
		if err == nil && (!ok || d.ProjectID != projectID) {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return store.Delivery{}, fmt.Errorf("get delivery %s: %w", id, interpretError(err))
	}
	return d, nil
}

// UpdateDelivery stores d conditional on its version.
func (s *Store) UpdateDelivery(ctx context.Context, d store.Delivery) (store.Delivery, error) {
	var out store.Delivery
	err := s.update(ctx, func(tx *bolt.Tx) error { // may run twice: see UpdateEndpoint
		var old store.Delivery
		ok, err := get(tx, bDeliveries, []byte(d.ID), &old)
		switch {
		case err != nil:
			return err
		case !ok || old.ProjectID != d.ProjectID:
			return store.ErrNotFound
		case old.Version != d.Version:
			return store.ErrConflict
		}
		out = d
		out.Version++
		out.CreatedAt, out.EndpointID = old.CreatedAt, old.EndpointID
		if out.Status != store.DeliveryPending {
			out.NextAt = time.Time{}
		}
		return putDelivery(tx, &old, out)
	})
	if err != nil {
		return store.Delivery{}, fmt.Errorf("update delivery %s: %w", d.ID, interpretError(err))
	}
	return out, nil
}

// ListDueDeliveries lists pending deliveries due at now, soonest first.
func (s *Store) ListDueDeliveries(ctx context.Context, now time.Time, limit int) ([]store.Delivery, error) {
	limit = store.ClampLimit(limit)
	var out []store.Delivery
	err := s.view(ctx, func(tx *bolt.Tx) error {
		end := string(timeKey(now))
		return scan(bucket(tx, xDeliveryDue), nil, nil, false, func(k, _ []byte) (bool, error) {
			if len(out) == limit || string(k[:timeLen]) > end {
				return false, nil
			}
			var d store.Delivery
			if _, err := get(tx, bDeliveries, k[timeLen:], &d); err != nil {
				return false, err
			}
			out = append(out, d)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list due deliveries: %w", interpretError(err))
	}
	return out, nil
}

// ListDeliveries lists an endpoint's deliveries, newest first.
func (s *Store) ListDeliveries(ctx context.Context, projectID, endpointID, cursor string, limit int) (store.Page[store.Delivery], error) {
	var out store.Page[store.Delivery]
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		p := prefix(projectID, endpointID)
		l := list{bucket: xDeliveryLog, prefix: p, cursor: cursor, desc: true, limit: store.ClampLimit(limit)}
		out, err = page(tx, l, func(k, _ []byte) (store.Delivery, bool, error) {
			var d store.Delivery
			ok, err := get(tx, bDeliveries, k[len(p)+timeLen:], &d)
			return d, ok, err
		})
		return err
	})
	if err != nil {
		return store.Page[store.Delivery]{}, fmt.Errorf("list deliveries of %s: %w", endpointID, interpretError(err))
	}
	return out, nil
}

// outboxEntry is the outbox's value for a run: its first notifying event
// not yet fanned out, its last notifying event, and when it entered.
type outboxEntry struct {
	FromSeq    int64     `json:"from"`
	ThroughSeq int64     `json:"through"`
	At         time.Time `json:"at"`
}

// markOutbox puts a run in the outbox for its notifying events among
// those just appended (numbered from first): part of the write that
// appends them.
func markOutbox(tx *bolt.Tx, runID string, first int64, events []store.Event) error {
	var e outboxEntry
	ok, err := get(tx, bOutbox, []byte(runID), &e)
	if err != nil {
		return err
	}
	changed := false
	for i, ev := range events {
		if !ev.Notify {
			continue
		}
		seq := first + int64(i)
		if !ok || seq < e.FromSeq {
			e.FromSeq = seq
		}
		if !ok {
			e.At = ev.At
		}
		ok, changed = true, true
		e.ThroughSeq = max(e.ThroughSeq, seq)
	}
	if !changed {
		return nil
	}
	return put(tx, bOutbox, []byte(runID), e)
}

// ListOutbox lists the runs in the outbox, oldest mark first.
func (s *Store) ListOutbox(ctx context.Context, limit int) ([]store.OutboxEntry, error) {
	limit = store.ClampLimit(limit)
	type entry struct {
		store.OutboxEntry
		at time.Time
	}
	var all []entry
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return scan(bucket(tx, bOutbox), nil, nil, false, func(k, v []byte) (bool, error) {
			var e outboxEntry
			if err := decode(v, &e); err != nil {
				return false, err
			}
			all = append(all, entry{store.OutboxEntry{RunID: string(k), FromSeq: e.FromSeq}, e.At})
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", interpretError(err))
	}
	slices.SortFunc(all, func(a, b entry) int { return a.at.Compare(b.at) })
	out := make([]store.OutboxEntry, 0, min(limit, len(all)))
	for _, e := range all[:min(limit, len(all))] {
		out = append(out, e.OutboxEntry)
	}
	return out, nil
}

// AckOutbox takes a run's events up to throughSeq out of the outbox.
func (s *Store) AckOutbox(ctx context.Context, runID string, throughSeq int64) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var e outboxEntry
		ok, err := get(tx, bOutbox, []byte(runID), &e)
		if err != nil || !ok {
			return err
		}
		if e.ThroughSeq <= throughSeq {
			return bucket(tx, bOutbox).Delete([]byte(runID))
		}
		e.FromSeq = max(e.FromSeq, throughSeq+1)
		return put(tx, bOutbox, []byte(runID), e)
	})
	if err != nil {
		return fmt.Errorf("ack outbox of run %s: %w", runID, interpretError(err))
	}
	return nil
}
