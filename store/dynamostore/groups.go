package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

// maxGroupChecks is how many members one group write checks inside its
// transaction: DynamoDB takes at most 100 actions, one of which is the
// group item's put.
const maxGroupChecks = 99

const groupPrefix = "G#"

func groupItemKey(projectID, name string) item { return key(projectPK(projectID), groupPrefix+name) }

// groupItem is the item of group g: its payload and its version, which
// updates are conditional on.
func (s *Store) groupItem(ctx context.Context, g store.Group) (item, error) {
	body, err := s.encode(ctx, "group "+g.Name, g)
	if err != nil {
		return nil, err
	}
	it := groupItemKey(g.ProjectID, g.Name)
	it[aBody] = avB(body)
	it[aVersion] = avN(g.Version)
	return it, nil
}

// loadGroup reads a group or store.ErrNotFound; a name no group can have
// (one that could be too long for a sort key) is not found without a read.
func (s *Store) loadGroup(ctx context.Context, projectID, name string) (store.Group, error) {
	if store.CheckGroupName(name) != nil {
		return store.Group{}, store.ErrNotFound
	}
	it, err := s.getItem(ctx, groupItemKey(projectID, name))
	if err == nil && it == nil {
		err = store.ErrNotFound
	}
	var g store.Group
	if err == nil {
		err = s.decode(ctx, getB(it, aBody), &g)
	}
	return g, err
}

// CreateGroup stores a new group at Version 1: one PutItem conditional on
// the name being free when it has no members; else one transaction with a
// condition check of each member (see Groups in the package
// documentation). store.ErrExists if the name is taken.
func (s *Store) CreateGroup(ctx context.Context, g store.Group) error {
	g, err := store.NewGroup(g)
	if err != nil {
		return fmt.Errorf("create group: %w", err)
	}
	it, err := s.groupItem(ctx, g)
	if err != nil {
		return fmt.Errorf("create group %s: %w", g.Name, err)
	}
	if len(g.Members) == 0 {
		err = s.putNew(ctx, it)
	} else {
		err = s.retryMoved(ctx, func() error {
			put := &types.Put{TableName: &s.table, Item: it, ConditionExpression: notExists}
			return s.writeGroup(ctx, g, types.TransactWriteItem{Put: put}, exists, g.Members)
		})
	}
	if err != nil {
		return fmt.Errorf("create group %s: %w", g.Name, err)
	}
	return nil
}

// writeGroup writes a group with the condition checks of the members it
// adds (added), in one transaction with w, the group item's write, whose
// judge is j. The members are read first: a *store.GroupMemberError for
// one that is not a current member of the project, and nothing written.
// A check that fails (the member was removed after it was read) is
// errMoved: the write is read and built again.
//
// A transaction takes maxGroupChecks checks. A write that adds more (one
// that sets every member of a full group at once) checks the rest by
// their read alone.
func (s *Store) writeGroup(ctx context.Context, g store.Group, w types.TransactWriteItem, j judge, added []string) error {
	checks, err := s.groupMemberChecks(ctx, g, added)
	if err != nil {
		return err
	}
	tx := txn{}
	tx.add(w, j)
	for _, c := range checks[:min(len(checks), maxGroupChecks)] {
		tx.add(types.TransactWriteItem{ConditionCheck: c}, moved)
	}
	// ownerTransaction tries a transaction again after a conflict; a group
	// write moves no owner count, so that is all it does here.
	return s.ownerTransaction(ctx, g.ProjectID, tx.writes, tx.judges...)
}

// groupMemberChecks reads the members ids of g's project (their items in
// one BatchGetItem, and the key of each older key's member) and returns a
// condition check per member that it is still current: its member item
// exists and is not removed; for an older key's member, which has no
// item, its key exists and is not revoked (removing such a member revokes
// its key, and storing its item binds the key, so that changes the key as
// well). A *store.GroupMemberError for the first id that is no current
// member.
func (s *Store) groupMemberChecks(ctx context.Context, g store.Group, ids []string) ([]*types.ConditionCheck, error) {
	keys := make([]item, len(ids))
	for i, id := range ids {
		keys[i] = memberItemKey(g.ProjectID, id)
	}
	its, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	found := make(map[string]item, len(its))
	for _, it := range its {
		found[getS(it, AttrSK)] = it
	}
	var checks []*types.ConditionCheck
	for _, id := range ids {
		e := newExpr()
		e.Cond("attribute_exists(" + e.n(AttrPK) + ")")
		at := memberItemKey(g.ProjectID, id)
		if it, ok := found[getS(at, AttrSK)]; ok {
			var m store.Member
			err := s.decode(ctx, getB(it, aBody), &m)
			if err := store.CheckGroupMember(g.Name, id, m, err); err != nil {
				return nil, err
			}
			e.Cond("attribute_not_exists(" + e.n(aRemovedAt) + ")")
		} else {
			st, err := s.loadMember(ctx, g.ProjectID, id, false)
			if err := store.CheckGroupMember(g.Name, id, st.m, err); err != nil {
				return nil, err
			}
			if !st.legacy {
				return nil, errMoved // its item was put after the batch read it
			}
			e.Cond("attribute_not_exists(" + e.n(aRevoked) + ")")
			at = apiKeyKey(st.keys[0].Hash)
		}
		checks = append(checks, e.txCheck(s.table, at))
	}
	return checks, nil
}

// GetGroup returns a group of the project or store.ErrNotFound.
func (s *Store) GetGroup(ctx context.Context, projectID, name string) (store.Group, error) {
	g, err := s.loadGroup(ctx, projectID, name)
	if err != nil {
		return store.Group{}, fmt.Errorf("get group %s: %w", name, err)
	}
	return g, nil
}

// ListGroups lists a project's groups by name: one Query of the group items
// of its partition, which are in name order.
func (s *Store) ListGroups(ctx context.Context, projectID string) ([]store.Group, error) {
	its, err := s.queryAll(ctx, projectPK(projectID), groupPrefix)
	if err != nil {
		return nil, fmt.Errorf("list groups of %s: %w", projectID, err)
	}
	out := make([]store.Group, len(its))
	for i, it := range its {
		if err := s.decode(ctx, getB(it, aBody), &out[i]); err != nil {
			return nil, fmt.Errorf("list groups of %s: %w", projectID, err)
		}
	}
	return out, nil
}

// UpdateGroup stores g's description, members and UpdatedAt if g.Version
// is the stored version: it reads the group, then puts it conditional on
// the version it read, in one transaction with a condition check of each
// member it adds (one PutItem when it adds none). A put that loses to
// another write is store.ErrConflict: g.Version is stale by then.
func (s *Store) UpdateGroup(ctx context.Context, g store.Group) (store.Group, error) {
	if err := g.ValidateUpdate(); err != nil {
		return store.Group{}, fmt.Errorf("update group: %w", err)
	}
	var out store.Group
	err := s.retryMoved(ctx, func() error {
		cur, err := s.loadGroup(ctx, g.ProjectID, g.Name)
		if err != nil {
			return err
		}
		next, added, err := cur.Updated(g)
		if err != nil {
			return err
		}
		it, err := s.groupItem(ctx, next)
		if err != nil {
			return err
		}
		e := newExpr()
		e.Cond(e.n(aVersion) + " = " + e.v(avN(cur.Version)))
		if len(added) == 0 {
			err = s.putVersioned(ctx, it, e)
		} else {
			err = s.writeGroup(ctx, next, types.TransactWriteItem{Put: e.txPut(s.table, it)}, staleGroup, added)
		}
		if err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		return store.Group{}, fmt.Errorf("update group %s: %w", g.Name, err)
	}
	return out, nil
}

// staleGroup judges a group put conditional on the version read: gone
// (store.ErrNotFound) or written meanwhile (store.ErrConflict).
func staleGroup(old item) error {
	if old == nil {
		return store.ErrNotFound
	}
	return store.ErrConflict
}

// putVersioned puts it conditional on e, tagged with a write token so that
// a retry of a put whose answer was lost knows it as its own (see putNew);
// judged by staleGroup.
func (s *Store) putVersioned(ctx context.Context, it item, e *expr) error {
	token := writeToken()
	it[aWriteToken] = avS(token)
	in := e.txPut(s.table, it)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: in.TableName, Item: it, ConditionExpression: in.ConditionExpression,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, s.callOpts...)
	return ownWrite(interpretError(err, func(old item) error {
		if old != nil && getS(old, aWriteToken) == token {
			return errApplied
		}
		return staleGroup(old)
	}))
}

// DeleteGroup deletes a group: one DeleteItem conditional on it existing;
// store.ErrNotFound if it does not.
func (s *Store) DeleteGroup(ctx context.Context, projectID, name string) error {
	if store.CheckGroupName(name) != nil {
		return fmt.Errorf("delete group %s: %w", name, store.ErrNotFound)
	}
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &s.table, Key: groupItemKey(projectID, name),
		ConditionExpression:                 aws.String("attribute_exists(" + AttrPK + ")"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, s.callOpts...)
	if err := interpretError(err); err != nil {
		return fmt.Errorf("delete group %s: %w", name, err)
	}
	return nil
}
