package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"stead/approvals"
)

// Rules keeps a project's remembered decisions (approvals.Rule). Store has
// it. A rule is written once, then only revoked; it stays listable after it
// ended (a backend may forget it some time later: each deletes it
// Retention after it expired, DynamoDB by its time to live, bbolt by Purge).
type Rules interface {
	// CreateRule stores a new rule; r must be valid (Rule.Validate) and not
	// revoked. ErrExists if its id is taken.
	CreateRule(ctx context.Context, r approvals.Rule) error
	// GetRule returns a rule of the project, an ended one too; ErrNotFound
	// if the project has no rule with that id.
	GetRule(ctx context.Context, projectID, id string) (approvals.Rule, error)
	// ListRules lists a project's rules, newest first (see RuleFilter).
	ListRules(ctx context.Context, f RuleFilter) (Page[approvals.Rule], error)
	// RevokeRule marks a rule revoked by the actor at at and returns it;
	// revoking twice keeps the first. ErrNotFound if the project has no
	// rule with that id.
	RevokeRule(ctx context.Context, projectID, id string, by approvals.Actor, at time.Time) (approvals.Rule, error)
	// MatchingRules returns the rules in force at now (Rule.Active) of one
	// call's scope — a call of tool by agent for endUserID in the project —
	// newest first. It is on the path of every gated call that may be
	// remembered: one read (DynamoDB: one Query of the scope's rules made
	// since approvals.RuleIDFloor(now)).
	MatchingRules(ctx context.Context, projectID, agent, tool, endUserID string, now time.Time) ([]approvals.Rule, error)
}

// RuleFilter selects rules of one project, newest first. Backends check it
// with Normalize.
type RuleFilter struct {
	ProjectID string
	// Agent, Tool and EndUserID are optional; with all three, the list is
	// one scope's.
	Agent, Tool, EndUserID string
	// All lists every rule; otherwise only those in force at Now (neither
	// expired nor revoked).
	All bool
	Now time.Time
	// Cursor is the NextCursor of the previous page; empty for the first.
	Cursor string
	Limit  int
}

// Rule list statuses, as users write them.
const (
	// RulesActive lists the rules in force (the default).
	RulesActive = "active"
	// RulesAll lists every rule, expired and revoked ones too.
	RulesAll = AnyStatus
)

// ParseRuleStatus reads a rule list's status as a user writes it: active
// (or nothing) for the rules in force, all for every rule. It returns
// RuleFilter.All.
func ParseRuleStatus(s string) (all bool, err error) {
	switch s {
	case "", RulesActive:
		return false, nil
	case RulesAll:
		return true, nil
	}
	return false, &FilterError{Field: "status", Value: s, Want: Choices(RulesActive, RulesAll)}
}

// Normalize checks f as a backend takes it: the project is required, an
// active-only list needs Now, and Limit is clamped (ClampLimit).
func (f RuleFilter) Normalize() (RuleFilter, error) {
	switch {
	case f.ProjectID == "":
		return f, errors.New("list rules: empty projectId")
	case !f.All && f.Now.IsZero():
		return f, errors.New("list rules: a list of the rules in force needs now")
	}
	f.Limit = ClampLimit(f.Limit)
	return f, nil
}

// Scoped reports whether f names one scope: agent, tool and end user.
func (f RuleFilter) Scoped() bool { return f.Agent != "" && f.Tool != "" && f.EndUserID != "" }

// Keep reports whether the list f selects has r in it.
func (f RuleFilter) Keep(r approvals.Rule) bool {
	return r.ProjectID == f.ProjectID && (f.Agent == "" || r.Agent == f.Agent) && (f.Tool == "" || r.Tool == f.Tool) &&
		(f.EndUserID == "" || r.EndUserID == f.EndUserID) && (f.All || r.Active(f.Now))
}

// NewRule returns r as backends store a new rule: it refuses a rule
// Validate refuses, or one already revoked.
func NewRule(r approvals.Rule) (approvals.Rule, error) {
	if err := r.Validate(); err != nil {
		return approvals.Rule{}, fmt.Errorf("create rule: %w", err)
	}
	if r.Revoked() {
		return approvals.Rule{}, fmt.Errorf("create rule %s: a new rule cannot be revoked", r.ID)
	}
	return r, nil
}
