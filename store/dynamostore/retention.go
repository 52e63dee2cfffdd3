package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

// keepWindow is how long past its horizon (see horizon) a run may go
// without a flush before its items could expire under it: more than four
// times the longest approval timeout, so that only an outage of the sweeper
// of some weeks could come near it. A run's items other than its run item
// carry a ttl of the horizon of the last renewal plus Retention plus two
// windows; a flush renews them when less than one window is left.
const keepWindow = 30 * 24 * time.Hour

// aKeep on a run item is the ttl (epoch seconds) its other items carry:
// commit items, approval items, the idempotency record. Absent when they
// carry none.
const aKeep = "kx"

// orNow is the first of ts that is not zero, or the time now: runs carry
// the engine's clock, and this is the fallback for the odd zero time.
func orNow(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Now()
}

// latest is the latest of t and more.
func latest(t time.Time, more ...time.Time) time.Time {
	for _, m := range more {
		if m.After(t) {
			t = m
		}
	}
	return t
}

// finishTTL is the ttl of the item of a run that finished at finished: it
// may go Retention later. Zero when the store writes no ttl.
func (s *Store) finishTTL(finished time.Time) int64 {
	if s.retention <= 0 {
		return 0
	}
	return finished.Add(s.retention).Unix()
}

// keepUntil is the ttl of a run's other items for a run whose horizon is h,
// with windows keep windows to spare.
func (s *Store) keepUntil(h time.Time, windows int) int64 {
	return h.Add(s.retention + time.Duration(windows)*keepWindow).Unix()
}

// horizon is the time by which a write of r is due anyway: the write's own
// time, the run's lease, and the deadline of the approval it is about to
// wait for (deadline; expiry is a write). Renewing against the horizon
// rather than the clock keeps the keep window independent of approval
// timeouts.
func horizon(r store.Run, deadline time.Time) time.Time {
	return latest(orNow(r.UpdatedAt, r.CreatedAt), r.LeaseUntil, deadline)
}

// setTTL puts ttl on it unless it is zero.
func setTTL(it item, ttl int64) {
	if ttl > 0 {
		it[AttrTTL] = avN(ttl)
	}
}

// keepFor returns the ttl that the other items of the run read as old get in
// a flush of c, and whether it is new: when less than a keep window is left
// past the flush's horizon, every item of the run that carries one is
// renewed first (renew), and the run item must record the new value. A run
// whose items carry no ttl gets one when the store has a Retention; one
// whose items do is kept alive even if the store has none now.
func (s *Store) keepFor(ctx context.Context, old item, c store.RunCommit) (int64, bool, error) {
	keep := getN(old, aKeep)
	if s.retention <= 0 && keep == 0 {
		return 0, false, nil
	}
	var deadline time.Time
	if c.Approval != nil {
		deadline = c.Approval.ExpiresAt
	}
	h := horizon(c.Run, deadline)
	if keep >= s.keepUntil(h, 1) {
		return keep, false, nil
	}
	keep = s.keepUntil(h, 2)
	if err := s.renew(ctx, old, keep); err != nil {
		return 0, false, fmt.Errorf("renew the ttl of run %s's items: %w", getS(old, aID), err)
	}
	return keep, true, nil
}

// renew raises the ttl of every item that belongs to the run item run, but
// the run item itself, to keep: its commit items (even invisible ones),
// the approvals it took, and its idempotency record. A run does this once
// per keep window of its life, so a run that lives as long as it must never
// loses an item; each renewed item costs a write (by its size) and its
// share of a read.
func (s *Store) renew(ctx context.Context, run item, keep int64) error {
	id := getS(run, aID)
	type target struct {
		k    item
		idem bool // the idempotency record: renewed only while it names the run
	}
	var targets []target
	for _, prefix := range []string{"E#", "S#"} {
		its, err := s.queryAll(ctx, runPK(id), prefix)
		if err != nil {
			return err
		}
		for _, it := range its {
			targets = append(targets, target{k: key(getS(it, AttrPK), getS(it, AttrSK))})
		}
	}
	if ids, ok := run[aApprovals].(*types.AttributeValueMemberSS); ok {
		for _, a := range ids.Value {
			targets = append(targets, target{k: approvalKey(a)})
		}
	}
	if ik := getS(run, aIdemKey); ik != "" {
		targets = append(targets, target{k: key(projectPK(getS(run, aProject)), "I#"+ik), idem: true})
	}

	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
		mu   sync.Mutex
		errs []error
	)
	for _, t := range targets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e := newExpr()
			e.Cond("attribute_exists(" + e.n(AttrPK) + ")")
			if t.idem {
				e.Cond(e.n(aID) + " = " + e.v(avS(id)))
			}
			ttl := e.n(AttrTTL)
			e.Cond(fmt.Sprintf("attribute_not_exists(%s) OR %s < %s", ttl, ttl, e.v(avN(keep))))
			e.Set(AttrTTL, avN(keep))
			in := e.update(s.table, t.k)
			in.ReturnValues = types.ReturnValueNone
			in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureNone
			_, err := s.db.UpdateItem(ctx, in, s.callOpts...)
			// A failed condition: the item is gone, has a later ttl already,
			// or is another run's; nothing to do.
			if err = interpretError(err); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s %s: %w", getS(t.k, AttrPK), getS(t.k, AttrSK), err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// enableTTL switches the table's time to live on, on AttrTTL, unless it is
// on already. A table whose TTL is on another attribute is an error: the
// store's items would never expire.
func (s *Store) enableTTL(ctx context.Context) error {
	out, err := s.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.table)}, s.callOpts...)
	if err != nil {
		return fmt.Errorf("describe time to live of table %s: %w", s.table, interpretError(err))
	}
	if d := out.TimeToLiveDescription; d != nil {
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if name := aws.ToString(d.AttributeName); name != AttrTTL {
				return fmt.Errorf("table %s has time to live on attribute %q; dynamostore writes %q: switch it off and on again on %q (or set Options.Retention negative to write none)",
					s.table, name, AttrTTL, AttrTTL)
			}
			return nil
		case types.TimeToLiveStatusDisabling:
			return fmt.Errorf("table %s is switching time to live off; call CreateTable again once it is off (DynamoDB takes up to an hour)", s.table)
		}
	}
	_, err = s.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(s.table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrTTL), Enabled: aws.Bool(true)},
	}, s.callOpts...)
	if err != nil {
		return fmt.Errorf("switch time to live on for table %s: %w", s.table, interpretError(err))
	}
	return nil
}
