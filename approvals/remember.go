package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// Remembered decisions.
//
// A Rule is a remembered decision: a person who approved a call allowed
// matching calls again, for a while ("allow this again for a day"). It is
// scoped to its project, agent, tool and end user, and optionally to the
// exact input (InputDigest) or to inputs that satisfy a JSON Schema (When);
// it records who made it, from which approval, and the deployment and tool
// posture it was made under. It is visible, revocable and expires: at most
// MaxRemember after it was made. Whether it applies to a call is decided by
// the engine (which also checks When, and never lets a rule stand in for a
// deny rule, an untrusted run or a quorum); Matches is the part of that
// decision that needs no schema.

// MaxRemember is the longest a remembered decision may last: 7 days.
const MaxRemember = 7 * 24 * time.Hour

// MaxRuleWhen bounds a rule's When schema, in bytes of JSON.
const MaxRuleWhen = 8 << 10

// RuleIDSkew is how far the time in a rule's id may be from its CreatedAt:
// the id and the time are made by the same clock a moment apart. Stores
// rely on it to find the rules in force without reading older ones (see
// RuleIDFloor).
const RuleIDSkew = time.Second

// Rule is a remembered decision.
type Rule struct {
	// ID is "rul_", a ULID made when the rule was, "_", its scope's hash
	// (NewRuleID): stores find a rule's scope from its id.
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	Agent     string `json:"agent"`
	Tool      string `json:"tool"`
	EndUserID string `json:"endUserId"`
	// InputDigest, when set, limits the rule to calls whose input has that
	// Digest: the approved input, exactly.
	InputDigest string `json:"inputDigest,omitempty"`
	// When, when set, is a JSON Schema a call's input must satisfy. At most
	// one of InputDigest and When is set; neither means any input.
	When json.RawMessage `json:"when,omitempty"`
	// ApprovalID is the approval the rule was made from, RunID its run.
	ApprovalID string `json:"approvalId"`
	RunID      string `json:"runId"`
	// Deployment is the deployment the approval's run was pinned to, and
	// PostureDigest the tool's posture and the agent's policy in it
	// (agent.PostureDigest): a call under another posture is not matched.
	Deployment    int    `json:"deployment"`
	PostureDigest string `json:"postureDigest"`
	// CreatedBy is the key that made the rule, CreatedByMember and
	// CreatedByName the member it belongs to (as named then).
	CreatedBy       string    `json:"createdBy"`
	CreatedByMember string    `json:"createdByMember,omitempty"`
	CreatedByName   string    `json:"createdByName,omitempty"`
	CreatedAt       time.Time `json:"createdAt"`
	ExpiresAt       time.Time `json:"expiresAt"`
	// RevokedAt is zero while the rule is not revoked; RevokedBy and
	// RevokedByName say who revoked it.
	RevokedAt     time.Time `json:"revokedAt,omitzero"`
	RevokedBy     string    `json:"revokedBy,omitempty"`
	RevokedByName string    `json:"revokedByName,omitempty"`
}

// Revoked reports whether the rule was revoked.
func (r Rule) Revoked() bool { return !r.RevokedAt.IsZero() }

// Active reports whether the rule is in force at now: not revoked, not yet
// expired.
func (r Rule) Active(now time.Time) bool { return !r.Revoked() && now.Before(r.ExpiresAt) }

// InScope reports whether the rule is one of those of a call of tool by
// agent for endUserID, in project projectID.
func (r Rule) InScope(projectID, agent, tool, endUserID string) bool {
	return r.ProjectID == projectID && r.Agent == agent && r.Tool == tool && r.EndUserID == endUserID
}

// RuleCall is a gated call as a rule sees it.
type RuleCall struct {
	ProjectID, Agent, Tool, EndUserID string
	// InputDigest is the Digest of the call's input.
	InputDigest string
	// PostureDigest is the tool's posture in the call's deployment
	// (agent.PostureDigest).
	PostureDigest string
}

// Matches reports whether the rule lets c through at now as far as no
// schema is involved: it is in c's scope and in force, it was made under
// c's posture, and its InputDigest, if set, is c's. A rule with When
// matches only if c's input satisfies it too, which the caller checks.
func (r Rule) Matches(c RuleCall, now time.Time) bool {
	return r.InScope(c.ProjectID, c.Agent, c.Tool, c.EndUserID) && r.Active(now) &&
		r.PostureDigest != "" && r.PostureDigest == c.PostureDigest &&
		(r.InputDigest == "" || r.InputDigest == c.InputDigest)
}

// MadeBy is how the rule's maker is named to people: "Ana Diaz (key_…)",
// or the key id alone when no member is known.
func (r Rule) MadeBy() string {
	if r.CreatedByName != "" {
		return r.CreatedByName + " (" + r.CreatedBy + ")"
	}
	return r.CreatedBy
}

// Revoke returns r revoked by actor at at; a rule already revoked is
// returned as it is (revoking twice keeps the first).
func (r Rule) Revoke(by Actor, at time.Time) Rule {
	if r.Revoked() {
		return r
	}
	r.RevokedAt, r.RevokedBy, r.RevokedByName = at, by.ID, by.Name
	return r
}

// Validate refuses a rule no store may keep: one without its scope, its
// approval, its posture or its maker; with an id NewRuleID did not make for
// its scope and time; that lasts not at all or longer than MaxRemember;
// that sets both InputDigest and When, or a When that is not a JSON object
// of at most MaxRuleWhen bytes.
func (r Rule) Validate() error {
	switch {
	case r.ProjectID == "" || r.Agent == "" || r.Tool == "" || r.EndUserID == "":
		return fmt.Errorf("rule %s: projectId, agent, tool and endUserId are required", r.ID)
	case r.ApprovalID == "" || r.RunID == "" || r.Deployment < 1 || r.PostureDigest == "":
		return fmt.Errorf("rule %s: approvalId, runId, deployment and postureDigest are required", r.ID)
	case r.CreatedBy == "" || r.CreatedAt.IsZero():
		return fmt.Errorf("rule %s: createdBy and createdAt are required", r.ID)
	case !r.ExpiresAt.After(r.CreatedAt) || r.ExpiresAt.Sub(r.CreatedAt) > MaxRemember:
		return fmt.Errorf("rule %s: it must expire after it is made and at most %s later (expiresAt %s, createdAt %s)",
			r.ID, MaxRemember, r.ExpiresAt.UTC().Format(time.RFC3339), r.CreatedAt.UTC().Format(time.RFC3339))
	case r.InputDigest != "" && r.When != nil:
		return fmt.Errorf("rule %s: set inputDigest or when, not both", r.ID)
	case len(r.When) > MaxRuleWhen:
		return fmt.Errorf("rule %s: when has %d bytes, at most %d", r.ID, len(r.When), MaxRuleWhen)
	}
	if r.When != nil {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.When, &m); err != nil {
			return fmt.Errorf("rule %s: when must be a JSON Schema object: %w", r.ID, err)
		}
	}
	return r.checkID()
}

// checkID refuses an id that is not NewRuleID's for r's scope, made within
// RuleIDSkew of r.CreatedAt.
func (r Rule) checkID() error {
	rest, ok := strings.CutPrefix(r.ID, rulePrefix)
	u, scope, cut := strings.Cut(rest, "_")
	if !ok || !cut {
		return fmt.Errorf("rule id %q: want rul_<ulid>_<scope>", r.ID)
	}
	id, err := ulid.ParseStrict(u)
	if err != nil {
		return fmt.Errorf("rule id %q: %w", r.ID, err)
	}
	if d := ulid.Time(id.Time()).Sub(r.CreatedAt); d > RuleIDSkew || d < -RuleIDSkew {
		return fmt.Errorf("rule id %q: made at %s, %s from its createdAt", r.ID, ulid.Time(id.Time()).UTC().Format(time.RFC3339Nano), d)
	}
	if want := RuleScope(r.Agent, r.Tool, r.EndUserID); scope != want {
		return fmt.Errorf("rule id %q: its scope is %s, and agent, tool and end user make %s", r.ID, scope, want)
	}
	return nil
}

const rulePrefix = "rul_"

// RuleScope is the hash of a rule's scope (16 hex digits): its agent, tool
// and end user. Within a project, stores keep a scope's rules together, so
// the rules of one call are one read.
func RuleScope(agent, tool, endUserID string) string {
	h := sha256.New()
	for _, s := range []string{agent, tool, endUserID} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// NewRuleID names a rule of the scope (agent, tool, endUserID): "rul_",
// unique, "_", RuleScope. unique is a ULID (26 characters) made at the
// rule's CreatedAt (within RuleIDSkew), so ids sort by when rules were made.
func NewRuleID(unique, agent, tool, endUserID string) string {
	return rulePrefix + unique + "_" + RuleScope(agent, tool, endUserID)
}

// RuleIDScope returns the scope hash an id made by NewRuleID carries.
func RuleIDScope(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, rulePrefix)
	i := strings.LastIndexByte(rest, '_')
	if !ok || i < 0 {
		return "", false
	}
	scope := rest[i+1:]
	if _, err := hex.DecodeString(scope); err != nil || len(scope) != 16 {
		return "", false
	}
	return scope, true
}

// RuleIDFloor is an id below the id of every rule in force at now: a rule
// lasts at most MaxRemember and its id's time is within RuleIDSkew of when
// it was made, so every rule whose id sorts below the floor has expired.
// Stores read a scope's rules from it on, so that expired ones cost nothing.
func RuleIDFloor(now time.Time) string {
	t := now.Add(-MaxRemember - RuleIDSkew)
	var id ulid.ULID
	if t.After(time.UnixMilli(0)) {
		_ = id.SetTime(ulid.Timestamp(t))
	}
	return rulePrefix + id.String()
}
