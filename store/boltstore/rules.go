package boltstore

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"stead/approvals"
	"stead/store"
)

// Remembered decisions: the rules bucket holds each rule under its project
// and id (ids sort by when rules were made, so a reverse scan is newest
// first); idx-rule-scope holds, per project, agent, tool and end user, the
// ids of that scope's rules, as the DynamoDB item collection of a scope
// does; idx-rule-expiry holds every rule by its expiry, for retention.go.
var (
	bRules      = []byte("rules")
	xRuleScopes = []byte("idx-rule-scope")
	xRuleExpiry = []byte("idx-rule-expiry")
)

// ruleExpiryKey is r's entry in idx-rule-expiry: its expiry, then its
// rules key.
func ruleExpiryKey(r approvals.Rule) []byte {
	return append(timeKey(r.ExpiresAt), ruleKey(r.ProjectID, r.ID)...)
}

// ruleScopeKey is r's entry in idx-rule-scope.
func ruleScopeKey(r approvals.Rule) []byte {
	return append(ruleScopePrefix(r.ProjectID, r.Agent, r.Tool, r.EndUserID), r.ID...)
}

// markRule enters r into the rule indexes.
func markRule(tx *bolt.Tx, r approvals.Rule) error {
	if err := mark(tx, xRuleScopes, ruleScopeKey(r)); err != nil {
		return err
	}
	return mark(tx, xRuleExpiry, ruleExpiryKey(r))
}

func ruleKey(projectID, id string) []byte { return key([]byte(id), projectID) }

func ruleScopePrefix(projectID, agent, tool, endUserID string) []byte {
	return prefix(projectID, agent, tool, endUserID)
}

// CreateRule stores a new rule; store.ErrExists if its id is taken.
func (s *Store) CreateRule(ctx context.Context, r approvals.Rule) error {
	r, err := store.NewRule(r)
	if err != nil {
		return err
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		k := ruleKey(r.ProjectID, r.ID)
		if exists(tx, bRules, k) {
			return store.ErrExists
		}
		if err := put(tx, bRules, k, r); err != nil {
			return err
		}
		return markRule(tx, r)
	})
	if err != nil {
		return fmt.Errorf("create rule %s: %w", r.ID, interpretError(err))
	}
	return nil
}

// GetRule returns a rule of the project or store.ErrNotFound.
func (s *Store) GetRule(ctx context.Context, projectID, id string) (approvals.Rule, error) {
	var r approvals.Rule
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return must(get(tx, bRules, ruleKey(projectID, id), &r))
	})
	if err != nil {
		return approvals.Rule{}, fmt.Errorf("get rule %s: %w", id, interpretError(err))
	}
	return r, nil
}

// ListRules lists a project's rules, newest first: one scope's from
// idx-rule-scope, else the project's from the rules bucket, filtered.
func (s *Store) ListRules(ctx context.Context, f store.RuleFilter) (store.Page[approvals.Rule], error) {
	f, err := f.Normalize()
	if err != nil {
		return store.Page[approvals.Rule]{}, err
	}
	l := list{bucket: bRules, prefix: prefix(f.ProjectID), cursor: f.Cursor, desc: true, limit: f.Limit}
	if f.Scoped() {
		l.bucket, l.prefix = xRuleScopes, ruleScopePrefix(f.ProjectID, f.Agent, f.Tool, f.EndUserID)
	}
	var out store.Page[approvals.Rule]
	err = s.view(ctx, func(tx *bolt.Tx) (err error) {
		out, err = page(tx, l, func(k, v []byte) (approvals.Rule, bool, error) {
			var r approvals.Rule
			if f.Scoped() {
				err = must(get(tx, bRules, ruleKey(f.ProjectID, string(k[len(l.prefix):])), &r))
			} else {
				err = decode(v, &r)
			}
			return r, err == nil && f.Keep(r), err
		})
		return err
	})
	if err != nil {
		return store.Page[approvals.Rule]{}, fmt.Errorf("list rules of %s: %w", f.ProjectID, interpretError(err))
	}
	return out, nil
}

// RevokeRule marks a rule revoked at at, unless it already is.
func (s *Store) RevokeRule(ctx context.Context, projectID, id string, by approvals.Actor, at time.Time) (approvals.Rule, error) {
	if at.IsZero() {
		return approvals.Rule{}, fmt.Errorf("revoke rule %s: the revocation time is required", id)
	}
	var out approvals.Rule
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var r approvals.Rule
		if err := must(get(tx, bRules, ruleKey(projectID, id), &r)); err != nil {
			return err
		}
		out = r
		if r.Revoked() {
			return nil
		}
		out = r.Revoke(by, at)
		return put(tx, bRules, ruleKey(projectID, id), out)
	})
	if err != nil {
		return approvals.Rule{}, fmt.Errorf("revoke rule %s: %w", id, interpretError(err))
	}
	return out, nil
}

// MatchingRules returns the rules in force at now of one scope, newest
// first: a reverse scan of the scope's ids down to approvals.RuleIDFloor.
func (s *Store) MatchingRules(ctx context.Context, projectID, agent, tool, endUserID string, now time.Time) ([]approvals.Rule, error) {
	p := ruleScopePrefix(projectID, agent, tool, endUserID)
	floor := approvals.RuleIDFloor(now)
	var out []approvals.Rule
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return scan(bucket(tx, xRuleScopes), p, nil, true, func(k, _ []byte) (bool, error) {
			id := string(k[len(p):])
			if id <= floor {
				return false, nil
			}
			var r approvals.Rule
			if err := must(get(tx, bRules, ruleKey(projectID, id), &r)); err != nil {
				return false, err
			}
			if r.InScope(projectID, agent, tool, endUserID) && r.Active(now) {
				out = append(out, r)
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("rules of %s/%s for %s: %w", agent, tool, endUserID, interpretError(err))
	}
	return out, nil
}
