package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/approvals"
	"stead/store"
)

// Remembered decisions.
//
// A rule is one item in the item collection of its scope: pk
// RL#<project><scope>, the scope being approvals.RuleScope of its agent,
// tool and end user (which its id carries, so GetRule needs no index), sk
// its id. Ids begin with a ULID of when the rule was made, so a scope's
// rules sort by age, and approvals.RuleIDFloor(now) is a sort key below
// every rule in force: MatchingRules, on the path of every gated call that
// may be remembered, is one strongly consistent Query of the scope's
// partition from the floor on — the rules made in the last 7 days, a few
// hundred bytes each: 1 read unit while they fit 4 KB. Older rules, kept
// for the project's list, are never read by it.
//
// Every rule also enters byProject (g1pk RL#<project>, g1sk its id) for the
// project's list, newest first; its key never changes. CreateRule is one
// PutItem (conditional on the id being free): 1 write unit for the item
// (under 1 KB unless its When schema is large) and 1 for the index entry.
// RevokeRule reads the item and updates it (conditional on it not being
// revoked yet): 1 read and 1 write unit, no index write (the index keys
// and projected attributes do not change).
//
// Its ttl is its expiry plus Retention: expired and revoked rules stay
// listable as long as a finished run does, then DynamoDB deletes them.
// Readers check expiry themselves, so a late delete changes nothing.

const (
	rulePKPrefix = "RL#"
	ruleSKPrefix = "rul_"
)

// rulePK is the partition of one scope's rules in a project.
func rulePK(projectID, scope string) string { return rulePKPrefix + lp(projectID) + scope }

// ruleKey is the key of the rule with id in its project; false for an id
// that names no scope (approvals.NewRuleID did not make it).
func ruleKey(projectID, id string) (item, bool) {
	scope, ok := approvals.RuleIDScope(id)
	if !ok {
		return nil, false
	}
	return key(rulePK(projectID, scope), id), true
}

// ruleItem is the item of rule r.
func (s *Store) ruleItem(ctx context.Context, r approvals.Rule) (item, error) {
	body, err := s.encode(ctx, "rule "+r.ID, r)
	if err != nil {
		return nil, err
	}
	it := key(rulePK(r.ProjectID, approvals.RuleScope(r.Agent, r.Tool, r.EndUserID)), r.ID)
	it[aBody] = avB(body)
	it[AttrByProjectPK] = avS(rulePKPrefix + r.ProjectID)
	it[AttrByProjectSK] = avS(r.ID)
	if s.retention > 0 {
		it[AttrTTL] = avN(r.ExpiresAt.Add(s.retention).Unix())
	}
	if r.Revoked() {
		it[aRevoked] = avT(r.RevokedAt)
	}
	return it, nil
}

func (s *Store) decodeRule(ctx context.Context, it item) (approvals.Rule, error) {
	var r approvals.Rule
	err := s.decode(ctx, getB(it, aBody), &r)
	return r, err
}

// CreateRule stores a new rule: one PutItem, conditional on its id being
// free (store.ErrExists if it is not).
func (s *Store) CreateRule(ctx context.Context, r approvals.Rule) error {
	r, err := store.NewRule(r)
	if err != nil {
		return err
	}
	it, err := s.ruleItem(ctx, r)
	if err == nil {
		err = s.putNew(ctx, it)
	}
	if err != nil {
		return fmt.Errorf("create rule %s: %w", r.ID, err)
	}
	return nil
}

// getRule reads a rule of the project, strongly consistent;
// store.ErrNotFound if there is none.
func (s *Store) getRule(ctx context.Context, projectID, id string) (approvals.Rule, error) {
	k, ok := ruleKey(projectID, id)
	if !ok {
		return approvals.Rule{}, store.ErrNotFound
	}
	it, err := s.getItem(ctx, k)
	if err != nil {
		return approvals.Rule{}, err
	}
	if it == nil {
		return approvals.Rule{}, store.ErrNotFound
	}
	r, err := s.decodeRule(ctx, it)
	if err == nil && r.ProjectID != projectID {
		err = store.ErrNotFound
	}
	return r, err
}

// GetRule returns a rule of the project: one GetItem.
func (s *Store) GetRule(ctx context.Context, projectID, id string) (approvals.Rule, error) {
	r, err := s.getRule(ctx, projectID, id)
	if err != nil {
		return approvals.Rule{}, fmt.Errorf("get rule %s: %w", id, err)
	}
	return r, nil
}

// ListRules lists a project's rules, newest first: one scope's by a Query
// of its partition, else the project's from byProject, each page's items
// read with one BatchGetItem.
func (s *Store) ListRules(ctx context.Context, f store.RuleFilter) (store.Page[approvals.Rule], error) {
	f, err := f.Normalize()
	if err != nil {
		return store.Page[approvals.Rule]{}, err
	}
	var page store.Page[approvals.Rule]
	if f.Scoped() {
		l := indexList{pkAttr: AttrPK, skAttr: AttrSK, pk: rulePK(f.ProjectID, approvals.RuleScope(f.Agent, f.Tool, f.EndUserID)),
			skPrefix: ruleSKPrefix, desc: true, cursor: f.Cursor, limit: f.Limit}
		page, err = indexPage(ctx, s, l, func(its []item) ([]approvals.Rule, error) {
			out := make([]approvals.Rule, len(its))
			for i, it := range its {
				if out[i], err = s.decodeRule(ctx, it); err != nil {
					return nil, err
				}
			}
			return out, nil
		}, f.Keep)
	} else {
		l := indexList{index: IndexByProject, pkAttr: AttrByProjectPK, skAttr: AttrByProjectSK, pk: rulePKPrefix + f.ProjectID,
			desc: true, cursor: f.Cursor, limit: f.Limit}
		page, err = indexPage(ctx, s, l, func(entries []item) ([]approvals.Rule, error) {
			return s.loadRules(ctx, entries)
		}, f.Keep)
	}
	if err != nil {
		return store.Page[approvals.Rule]{}, fmt.Errorf("list rules of %s: %w", f.ProjectID, err)
	}
	return page, nil
}

// loadRules reads the rules of index entries, one per entry in their
// order; a rule deleted since (its ttl passed) is the zero rule, which no
// filter keeps.
func (s *Store) loadRules(ctx context.Context, entries []item) ([]approvals.Rule, error) {
	keys := make([]item, len(entries))
	for i, e := range entries {
		keys[i] = key(getS(e, AttrPK), getS(e, AttrSK))
	}
	its, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]item, len(its))
	for _, it := range its {
		byKey[getS(it, AttrPK)+"\x00"+getS(it, AttrSK)] = it
	}
	out := make([]approvals.Rule, len(entries))
	for i, e := range entries {
		it, ok := byKey[getS(e, AttrPK)+"\x00"+getS(e, AttrSK)]
		if !ok {
			continue
		}
		if out[i], err = s.decodeRule(ctx, it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// maxRevokeRuleTries bounds how often a revocation that lost to another
// write of the rule reads it again.
const maxRevokeRuleTries = 3

// RevokeRule reads the rule and, unless it is revoked already, writes it
// revoked with one UpdateItem conditional on it still not being revoked; a
// write that lost reads again and returns the revocation that won.
func (s *Store) RevokeRule(ctx context.Context, projectID, id string, by approvals.Actor, at time.Time) (approvals.Rule, error) {
	if at.IsZero() {
		return approvals.Rule{}, fmt.Errorf("revoke rule %s: the revocation time is required", id)
	}
	for try := 1; ; try++ {
		r, err := s.revokeRuleOnce(ctx, projectID, id, by, at)
		if errors.Is(err, errMoved) && try < maxRevokeRuleTries {
			continue
		}
		if err != nil {
			return approvals.Rule{}, fmt.Errorf("revoke rule %s: %w", id, err)
		}
		return r, nil
	}
}

func (s *Store) revokeRuleOnce(ctx context.Context, projectID, id string, by approvals.Actor, at time.Time) (approvals.Rule, error) {
	cur, err := s.getRule(ctx, projectID, id)
	if err != nil || cur.Revoked() {
		return cur, err
	}
	next := cur.Revoke(by, at)
	body, err := s.encode(ctx, "rule "+id, next)
	if err != nil {
		return approvals.Rule{}, err
	}
	k, _ := ruleKey(projectID, id)
	e := newExpr()
	e.Set(aBody, avB(body))
	e.Set(aRevoked, avT(at))
	e.Cond("attribute_exists(" + e.n(AttrPK) + ")")
	e.Cond("attribute_not_exists(" + e.n(aRevoked) + ")")
	in := e.update(s.table, k)
	in.ReturnValues = types.ReturnValueNone
	_, err = s.db.UpdateItem(ctx, in, s.callOpts...)
	if err := interpretError(err, func(old item) error {
		if old == nil {
			return store.ErrNotFound
		}
		return errMoved // revoked meanwhile (or by this very write, whose answer was lost): read again
	}); err != nil {
		return approvals.Rule{}, err
	}
	return next, nil
}

// MatchingRules returns the rules in force at now of one scope, newest
// first: one strongly consistent Query of the scope's partition, from
// approvals.RuleIDFloor(now) on (more only past 1 MB).
func (s *Store) MatchingRules(ctx context.Context, projectID, agent, tool, endUserID string, now time.Time) ([]approvals.Rule, error) {
	var (
		out   []approvals.Rule
		start map[string]types.AttributeValue
	)
	pk := rulePK(projectID, approvals.RuleScope(agent, tool, endUserID))
	for {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &s.table,
			KeyConditionExpression:    aws.String("#p = :p AND #s > :floor"),
			ExpressionAttributeNames:  map[string]string{"#p": AttrPK, "#s": AttrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(pk), ":floor": avS(approvals.RuleIDFloor(now))},
			ConsistentRead:            aws.Bool(true),
			ScanIndexForward:          aws.Bool(false),
			ExclusiveStartKey:         start,
		}, s.callOpts...)
		if err != nil {
			return nil, fmt.Errorf("rules of %s/%s for %s: %w", agent, tool, endUserID, interpretError(err))
		}
		for _, it := range res.Items {
			r, err := s.decodeRule(ctx, it)
			if err != nil {
				return nil, fmt.Errorf("rules of %s/%s for %s: %w", agent, tool, endUserID, err)
			}
			if r.InScope(projectID, agent, tool, endUserID) && r.Active(now) {
				out = append(out, r)
			}
		}
		if res.LastEvaluatedKey == nil {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}
