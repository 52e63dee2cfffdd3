package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

// A project's owner count is one item: how many active owner keys
// (aOwners) and active owner members (aOwnerMembers) it has. Every write
// that changes either changes the count in the same transaction, and one
// that lowers it is conditional on one staying (store.ErrLastOwner).
//
// The same item counts, in aNames, the writes that gave a member of the
// project a name or an email (members.go, readNames): each is conditional
// on the count it read the project's members with, so of two writes that
// read the members at the same time, one reads them again.
const (
	ownersSK      = "OWNERS"
	aOwners       = "n"
	aOwnerMembers = "m"
	aNames        = "nv"
)

// txn is a transaction being built: its writes and, for each, the judge
// of its condition.
type txn struct {
	writes []types.TransactWriteItem
	judges []judge
}

func (t *txn) add(w types.TransactWriteItem, j judge) {
	t.writes = append(t.writes, w)
	t.judges = append(t.judges, j)
}

// countOf is 1 for true, 0 for false.
func countOf(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// addOwners adds to tx the update of a project's owner count by keys
// (active owner keys) and members (active owner members), unless both are
// zero: conditional on each count it changes existing (see seedOwners)
// and, for each that goes down, staying positive (store.ErrLastOwner).
func (s *Store) addOwners(tx *txn, projectID string, keys, members int64) {
	s.addOwnersNamed(tx, projectID, keys, members, nil)
}

// addOwnersNamed is addOwners for a write that gives a member a name or an
// email, checked against names: the update then also counts the write in
// aNames, conditional on the count being the one names was read at (else
// errMoved: read the members again).
func (s *Store) addOwnersNamed(tx *txn, projectID string, keys, members int64, names *namesRead) {
	if keys == 0 && members == 0 && names == nil {
		return
	}
	e := newExpr()
	j := ownerCountJudge
	if names != nil {
		if read := names.version; read == 0 {
			e.Cond("attribute_not_exists(" + e.n(aNames) + ")")
		} else {
			e.Cond(e.n(aNames) + " = " + e.v(avN(read)))
		}
		e.Add(aNames, avN(1))
		j = func(old item) error {
			if getN(old, aNames) != names.version {
				return errMoved
			}
			return ownerCountJudge(old)
		}
	}
	for _, c := range []struct {
		attr  string
		delta int64
	}{{aOwners, keys}, {aOwnerMembers, members}} {
		switch {
		case c.delta < 0:
			e.Cond(e.n(c.attr) + " > " + e.v(avN(-c.delta)))
		case c.delta > 0:
			e.Cond("attribute_exists(" + e.n(c.attr) + ")")
		default:
			continue
		}
		e.Add(c.attr, avN(c.delta))
	}
	tx.add(types.TransactWriteItem{Update: e.txUpdate(s.table, key(projectPK(projectID), ownersSK))}, j)
}

// errNoOwnerCount: the project's owner count (or one of its two counts)
// does not exist yet.
var errNoOwnerCount = errors.New("no owner count")

// ownerCountJudge judges a failed owner count condition: errNoOwnerCount if
// a count is missing, else store.ErrLastOwner (a count would reach zero).
func ownerCountJudge(old item) error {
	if old == nil || !has(old, aOwners) || !has(old, aOwnerMembers) {
		return errNoOwnerCount
	}
	return store.ErrLastOwner
}

// ownerTransaction writes a transaction that may change a project's owner
// count, judged by judges. A transaction cancelled by a concurrent one is
// tried again after a pause; one that finds a count missing first counts
// (seedOwners).
func (s *Store) ownerTransaction(ctx context.Context, projectID string, writes []types.TransactWriteItem, judges ...judge) error {
	for try := 1; ; try++ {
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: writes}, s.callOpts...)
		if try > maxTxConflicts {
			return interpretError(err, judges...)
		}
		if transactionConflict(err) {
			if err := conflictPause(ctx, try); err != nil {
				return err
			}
			continue
		}
		err = interpretError(err, judges...)
		if !errors.Is(err, errNoOwnerCount) {
			return err
		}
		if err := s.seedOwners(ctx, projectID); err != nil {
			return err
		}
	}
}

// seedOwners creates whichever of a project's owner counts is missing from
// its keys and members: at the first owner key's or owner member's write,
// or on a table written before the counts existed. Nothing a missing count
// counts changes while it is missing (every such write is conditional on
// it), so what is read is what is there. The keys are read before the
// members: a member of an older key stored in between is read twice and
// counted once.
func (s *Store) seedOwners(ctx context.Context, projectID string) error {
	keys, err := s.projectKeys(ctx, projectID)
	if err != nil {
		return fmt.Errorf("count owners of %s: %w", projectID, err)
	}
	items, err := s.memberItems(ctx, projectID)
	if err != nil {
		return fmt.Errorf("count owners of %s: %w", projectID, err)
	}
	var n, m int64
	owner := map[string]bool{}
	for _, k := range keys {
		n += countOf(k.ActiveOwner())
		if k.Legacy() {
			owner[store.LegacyMemberID(k.ID)] = store.LegacyMember(k.APIKey).ActiveOwner()
		}
	}
	for _, mem := range items {
		owner[mem.ID] = mem.ActiveOwner()
	}
	for _, o := range owner {
		m += countOf(o)
	}
	e := newExpr()
	for _, c := range []struct {
		attr string
		n    int64
	}{{aOwners, n}, {aOwnerMembers, m}} {
		e.SetIfAbsent(c.attr, avN(c.n))
	}
	in := e.update(s.table, key(projectPK(projectID), ownersSK))
	if _, err := s.db.UpdateItem(ctx, in, s.callOpts...); err != nil {
		return fmt.Errorf("count owners of %s: %w", projectID, interpretError(err))
	}
	return nil
}

// errMoved: a write's item changed since it was read (another write came
// between); the write is built again from a new read.
var errMoved = errors.New("changed since read")

// moved is the judge of a condition on an item as read.
func moved(item) error { return errMoved }

// maxMoved bounds how often a write is built again because its items
// moved.
const maxMoved = 10

// retryMoved runs write, which reads and then writes conditionally, again
// while it returns errMoved; store.ErrConflict when it keeps losing.
func (s *Store) retryMoved(ctx context.Context, write func() error) error {
	for try := range maxMoved {
		if try > 1 {
			if err := conflictPause(ctx, try-1); err != nil {
				return err
			}
		}
		err := write()
		if !errors.Is(err, errMoved) {
			return err
		}
	}
	return fmt.Errorf("%w: other writes kept changing it (%d tries)", store.ErrConflict, maxMoved)
}
