package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

// brokerPK is the partition of one collection inside a scope: its parts
// length-prefixed, so that no scope runs into another ("u1" vs "u10").
func brokerPK(sc store.BrokerScope, collection string) string {
	return "B#" + lp(sc.ProjectID) + lp(sc.EndUserID) + lp(collection)
}

// GetBrokerRecord returns a record or store.ErrNotFound.
func (s *Store) GetBrokerRecord(ctx context.Context, sc store.BrokerScope, collection, k string) (store.BrokerRecord, error) {
	var (
		it  item
		err error
	)
	if k != "" {
		it, err = s.getItem(ctx, key(brokerPK(sc, collection), k))
	}
	if err == nil && it == nil {
		err = store.ErrNotFound
	}
	var r store.BrokerRecord
	if err == nil {
		err = s.decode(ctx, getB(it, aBody), &r)
	}
	if err != nil {
		return store.BrokerRecord{}, fmt.Errorf("get broker record %s/%s: %w", collection, k, err)
	}
	return r, nil
}

// PutBrokerRecord creates or replaces a record.
func (s *Store) PutBrokerRecord(ctx context.Context, r store.BrokerRecord) error {
	if r.ProjectID == "" || r.Collection == "" || r.Key == "" {
		return errors.New("put broker record: projectId, collection and key are required")
	}
	body, err := s.encode(ctx, fmt.Sprintf("broker record %s/%s", r.Collection, r.Key), r)
	if err != nil {
		return fmt.Errorf("put broker record %s/%s: %w", r.Collection, r.Key, err)
	}
	it := key(brokerPK(store.BrokerScope{ProjectID: r.ProjectID, EndUserID: r.EndUserID}, r.Collection), r.Key)
	it[aBody] = avB(body)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: it}, s.callOpts...)
	if err := interpretError(err); err != nil {
		return fmt.Errorf("put broker record %s/%s: %w", r.Collection, r.Key, err)
	}
	return nil
}

// DeleteBrokerRecord removes a record; store.ErrNotFound if absent.
func (s *Store) DeleteBrokerRecord(ctx context.Context, sc store.BrokerScope, collection, k string) error {
	if k == "" {
		return fmt.Errorf("delete broker record %s/%s: %w", collection, k, store.ErrNotFound)
	}
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           &s.table,
		Key:                                 key(brokerPK(sc, collection), k),
		ConditionExpression:                 aws.String("attribute_exists(" + AttrPK + ")"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, s.callOpts...)
	if err := interpretError(err); err != nil {
		return fmt.Errorf("delete broker record %s/%s: %w", collection, k, err)
	}
	return nil
}

// ListBrokerRecords lists a collection in key order.
func (s *Store) ListBrokerRecords(ctx context.Context, sc store.BrokerScope, collection, cursor string, limit int) (store.Page[store.BrokerRecord], error) {
	l := indexList{pkAttr: AttrPK, skAttr: AttrSK, pk: brokerPK(sc, collection), cursor: cursor, limit: limit}
	page, err := indexPage(ctx, s, l, func(its []item) ([]store.BrokerRecord, error) {
		out := make([]store.BrokerRecord, len(its))
		for i, it := range its {
			if err := s.decode(ctx, getB(it, aBody), &out[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}, func(store.BrokerRecord) bool { return true })
	if err != nil {
		return store.Page[store.BrokerRecord]{}, fmt.Errorf("list broker records %s: %w", collection, err)
	}
	return page, nil
}
