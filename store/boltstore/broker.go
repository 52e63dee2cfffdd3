package boltstore

import (
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"stead/store"
)

// brokerPrefix is the key prefix of one collection inside a scope.
func brokerPrefix(s store.BrokerScope, collection string) []byte {
	return prefix(s.ProjectID, s.EndUserID, collection)
}

// GetBrokerRecord returns a record or store.ErrNotFound.
func (s *Store) GetBrokerRecord(ctx context.Context, sc store.BrokerScope, collection, k string) (store.BrokerRecord, error) {
	var r store.BrokerRecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return must(get(tx, bBroker, append(brokerPrefix(sc, collection), k...), &r))
	})
	if err != nil {
		return store.BrokerRecord{}, fmt.Errorf("get broker record %s/%s: %w", collection, k, interpretError(err))
	}
	return r, nil
}

// PutBrokerRecord creates or replaces a record.
func (s *Store) PutBrokerRecord(ctx context.Context, r store.BrokerRecord) error {
	if r.ProjectID == "" || r.Collection == "" || r.Key == "" {
		return errors.New("put broker record: projectId, collection and key are required")
	}
	sc := store.BrokerScope{ProjectID: r.ProjectID, EndUserID: r.EndUserID}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		return put(tx, bBroker, append(brokerPrefix(sc, r.Collection), r.Key...), r)
	})
	if err != nil {
		return fmt.Errorf("put broker record %s/%s: %w", r.Collection, r.Key, interpretError(err))
	}
	return nil
}

// DeleteBrokerRecord removes a record; store.ErrNotFound if absent.
func (s *Store) DeleteBrokerRecord(ctx context.Context, sc store.BrokerScope, collection, k string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		bk := append(brokerPrefix(sc, collection), k...)
		if !exists(tx, bBroker, bk) {
			return store.ErrNotFound
		}
		return bucket(tx, bBroker).Delete(bk)
	})
	if err != nil {
		return fmt.Errorf("delete broker record %s/%s: %w", collection, k, interpretError(err))
	}
	return nil
}

// ListBrokerRecords lists a collection in key order.
func (s *Store) ListBrokerRecords(ctx context.Context, sc store.BrokerScope, collection, cursor string, limit int) (store.Page[store.BrokerRecord], error) {
	var out store.Page[store.BrokerRecord]
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		l := list{bucket: bBroker, prefix: brokerPrefix(sc, collection), cursor: cursor, limit: limit}
		out, err = page(tx, l, func(_, v []byte) (store.BrokerRecord, bool, error) {
			var r store.BrokerRecord
			err := decode(v, &r)
			return r, err == nil, err
		})
		return err
	})
	if err != nil {
		return store.Page[store.BrokerRecord]{}, fmt.Errorf("list broker records %s: %w", collection, interpretError(err))
	}
	return out, nil
}
