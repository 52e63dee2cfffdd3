package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

// revocationSK is the sort key of an end user's revocation item, whose
// partition is revocationPK: the auth path reads it with one GetItem.
const revocationSK = "R"

// maxRevokeTries bounds how often a revocation that lost to a concurrent
// one on the same end user reads and writes again.
const maxRevokeTries = 16

func revocationKey(projectID, endUserID string) item {
	return key("CTR#"+lp(projectID)+lp(endUserID), revocationSK)
}

// RevokeCustomerTokens records r until r.Until (see store.Store). The end
// user's revocation item is read, changed with CustomerRevocations.Apply
// and written back on the condition that its version did not move; a write
// that lost reads again. Its ttl is the end of its last revocation.
func (s *Store) RevokeCustomerTokens(ctx context.Context, r store.CustomerRevocation) error {
	if err := r.Validate(); err != nil {
		return err
	}
	k := revocationKey(r.ProjectID, r.EndUserID)
	for try := 1; ; try++ {
		err := s.revokeOnce(ctx, k, r)
		if errors.Is(err, store.ErrConflict) && try < maxRevokeTries {
			if err := conflictPause(ctx, try); err != nil {
				return fmt.Errorf("revoke customer tokens of %s: %w", r.EndUserID, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("revoke customer tokens of %s: %w", r.EndUserID, err)
		}
		return nil
	}
}

// revokeOnce is one read and conditional write of a revocation item;
// store.ErrConflict if another write came between them.
func (s *Store) revokeOnce(ctx context.Context, k item, r store.CustomerRevocation) error {
	it, err := s.getItem(ctx, k)
	if err != nil {
		return err
	}
	var old store.CustomerRevocations
	version := int64(0)
	if it != nil {
		if err := s.decode(ctx, getB(it, aBody), &old); err != nil {
			return err
		}
		version = getN(it, aItemVersion)
	}
	next, err := old.Apply(r)
	if err != nil {
		return err
	}
	cond := aws.String("attribute_not_exists(" + AttrPK + ")")
	vals := map[string]types.AttributeValue(nil)
	if it != nil {
		cond = aws.String(aItemVersion + " = :v")
		vals = map[string]types.AttributeValue{":v": avN(version)}
	}
	lost := func(item) error { return store.ErrConflict }
	until := next.Until()
	if until.IsZero() {
		if it == nil {
			return nil
		}
		_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: &s.table, Key: k,
			ConditionExpression: cond, ExpressionAttributeValues: vals,
		}, s.callOpts...)
		return interpretError(err, lost)
	}
	body, err := s.encode(ctx, "customer token revocations", next)
	if err != nil {
		return err
	}
	put := key(getS(k, AttrPK), revocationSK)
	put[aBody] = avB(body)
	put[aItemVersion] = avN(version + 1)
	put[AttrTTL] = avN(revocationTTL(until))
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: put,
		ConditionExpression: cond, ExpressionAttributeValues: vals,
	}, s.callOpts...)
	return interpretError(err, lost)
}

// revocationTTL is the ttl of a revocation item whose last revocation ends
// at until: the first whole second at or after it.
func revocationTTL(until time.Time) int64 {
	sec := until.Unix()
	if until.Nanosecond() > 0 {
		sec++
	}
	return sec
}

// GetCustomerRevocations returns the revocations in force at now: one
// strongly consistent GetItem. A revocation item past its ttl that DynamoDB
// has not deleted yet holds only ended revocations, which At drops.
func (s *Store) GetCustomerRevocations(ctx context.Context, projectID, endUserID string, now time.Time) (store.CustomerRevocations, error) {
	it, err := s.getItem(ctx, revocationKey(projectID, endUserID))
	var rs store.CustomerRevocations
	if err == nil && it != nil {
		err = s.decode(ctx, getB(it, aBody), &rs)
	}
	if err != nil {
		return store.CustomerRevocations{}, fmt.Errorf("get customer token revocations of %s: %w", endUserID, err)
	}
	return rs.At(now), nil
}
