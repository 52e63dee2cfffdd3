package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/store"
)

// Remembered decisions.
//
// A member who approved a call may remember the decision (Remember): a
// rule (approvals.Rule) that lets later matching calls run without asking,
// until it expires or someone revokes it. In the policy's order it comes
// after deny rules and the untrusted-write rule and before requiresApproval
// and ask rules: the one exception to "an allow never overrides
// requiresApproval", made by a person from a real approval. It never
// applies to a run whose trust is lowered, to a call a deny rule matches
// (the policy denies before asking), to a call whose approval would need
// approvers (a quorum), to a tool that does not opt in (approvals.remember
// in the run's deployment), to a tool whose approvals.remember.max is now
// shorter than the rule lasts, or — where the call's approval would be
// separated from its requester — to the requester's own rules. A rule
// records the posture it was made under (agent.PostureDigest): a deployment
// that changes the tool's posture or the agent's policy ends it.

// RememberParams says how long, and for which inputs, a decision is
// remembered.
type RememberParams struct {
	// For is how long the rule lasts: more than 0, at most the tool's
	// approvals.remember.max and approvals.MaxRemember.
	For time.Duration
	// Exact limits the rule to the approved input (its digest).
	Exact bool
	// When, if set, is a JSON Schema later inputs must satisfy. Exact and
	// When exclude each other; neither means any input.
	When json.RawMessage
}

// RememberError refuses to remember a decision, changing nothing.
type RememberError struct {
	// Field is the parameter at fault ("for", "exact", "when"), or "" when
	// the approval or the tool's settings are.
	Field string
	// Reason is stable and machine-readable: remember-not-allowed (the tool
	// does not opt in, or the approval has approvers), remember-too-long,
	// remember-invalid, remember-not-decider.
	Reason  string
	Message string
}

func (e *RememberError) Error() string { return e.Message }

// Code is e's Reason.
func (e *RememberError) Code() string { return e.Reason }

// Reasons of a RememberError.
const (
	RememberNotAllowed = "remember-not-allowed"
	RememberTooLong    = "remember-too-long"
	RememberInvalid    = "remember-invalid"
	RememberNotDecider = "remember-not-decider"
)

// Remember makes a remembered decision from a, which actor has just
// approved: a rule scoped to a's agent, tool and end user (and, with
// p.Exact, its approved input; with p.When, inputs that satisfy a schema)
// that lasts p.For. Errors: store.ErrNotFound (another project's
// approval), ErrForbidden (the actor may not decide), *RememberError (the
// approval was not approved by the actor, has approvers, or its tool does
// not opt in in the approval's deployment; For, Exact or When is refused).
func (e *Engine) Remember(ctx context.Context, actor approvals.Actor, a approvals.Approval, p RememberParams) (approvals.Rule, error) {
	if a.ProjectID != actor.ProjectID {
		return approvals.Rule{}, fmt.Errorf("approval %s: %w", a.ID, store.ErrNotFound)
	}
	if !actor.May(approvals.Decide, a.ProjectID) {
		return approvals.Rule{}, ErrForbidden
	}
	if a.Status != approvals.Approved || a.DecidedBy != actor.ID {
		state := string(a.Status)
		if a.Status == approvals.Approved {
			state = "approved by " + a.DecidedByWho()
		}
		return approvals.Rule{}, &RememberError{Reason: RememberNotDecider, Message: fmt.Sprintf(
			"approval %s is %s; a decision is remembered by whoever approves it, with the approval", a.ID, state)}
	}
	r, err := e.ruleFor(ctx, actor, a, p)
	if err != nil {
		return approvals.Rule{}, err
	}
	if err := e.store.CreateRule(ctx, r); err != nil {
		return approvals.Rule{}, fmt.Errorf("remember approval %s: %w", a.ID, err)
	}
	return r, nil
}

// ApproveAndRemember approves an approval and remembers the decision (see
// Remember) as one request: everything that could refuse the rule is
// checked before the decision, so a refused rule decides nothing. The
// rule is stored once the approval is approved by the actor; an approval
// that a vote leaves pending, or a store failure after the decision, makes
// no rule (the error says so; the approval stands).
func (e *Engine) ApproveAndRemember(ctx context.Context, actor approvals.Actor, p DecideParams, rp RememberParams) (approvals.Approval, approvals.Rule, error) {
	a, err := e.GetApproval(ctx, actor, p.ApprovalID)
	if err != nil {
		return approvals.Approval{}, approvals.Rule{}, err
	}
	if _, err := e.ruleFor(ctx, actor, a, rp); err != nil {
		return a, approvals.Rule{}, err
	}
	p.Approve = true
	decided, err := e.Decide(ctx, actor, p)
	if err != nil {
		return decided, approvals.Rule{}, err
	}
	r, err := e.Remember(ctx, actor, decided, rp)
	if err != nil {
		return decided, approvals.Rule{}, &NotRememberedError{Approval: decided.ID, Err: err}
	}
	return decided, r, nil
}

// NotRememberedError is ApproveAndRemember's error when the approval went
// through but the rule could not be made after it (the approval's status
// changed under it, a store failure): the decision stands.
type NotRememberedError struct {
	Approval string
	Err      error
}

func (e *NotRememberedError) Error() string {
	return fmt.Sprintf("approval %s is decided, but the decision was not remembered: %v", e.Approval, e.Err)
}

// ruleFor is the rule remembering actor's approval of a would make, or the
// *RememberError that refuses it — everything Remember checks but that a
// is approved by actor.
func (e *Engine) ruleFor(ctx context.Context, actor approvals.Actor, a approvals.Approval, p RememberParams) (approvals.Rule, error) {
	if a.ProjectID != actor.ProjectID {
		return approvals.Rule{}, fmt.Errorf("approval %s: %w", a.ID, store.ErrNotFound)
	}
	if !actor.May(approvals.Decide, a.ProjectID) {
		return approvals.Rule{}, ErrForbidden
	}
	refuse := func(field, reason, format string, args ...any) (approvals.Rule, error) {
		return approvals.Rule{}, &RememberError{Field: field, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	if a.HasQuorum() {
		return refuse("", RememberNotAllowed,
			"approval %s needs approvers (%s); a remembered decision never stands in for a quorum, so approve without remembering", a.ID, approverGroups(a))
	}
	cfg, err := e.deployments.config(ctx, a.ProjectID, a.Deployment)
	if err != nil {
		return approvals.Rule{}, fmt.Errorf("approval %s: %w", a.ID, err)
	}
	ag, ok := cfg.Agent(a.Agent)
	if !ok {
		return approvals.Rule{}, fmt.Errorf("approval %s: agent %q is not in deployment %d", a.ID, a.Agent, a.Deployment)
	}
	tool, ok := ag.Tool(a.Tool)
	if !ok {
		return approvals.Rule{}, fmt.Errorf("approval %s: tool %q is not in agent %q", a.ID, a.Tool, a.Agent)
	}
	switch max := tool.RememberMax; {
	case max <= 0:
		return refuse("", RememberNotAllowed,
			`%s of agent %s does not allow remembered decisions in deployment %d; to allow them, set "approvals": {"remember": {"max": "24h"}} on the tool or the agent in stead.json and deploy`,
			a.Tool, a.Agent, a.Deployment)
	case p.For <= 0:
		return refuse("for", RememberInvalid, "must be a duration longer than 0, like 1h or 24h (at most %s for %s)", duration(max), a.Tool)
	case p.For > approvals.MaxRemember:
		return refuse("for", RememberTooLong, "%s is longer than a decision is ever remembered: at most 168h (7 days)", duration(p.For))
	case p.For > max:
		return refuse("for", RememberTooLong, "%s is longer than %s allows: its approvals.remember.max is %s; remember it for %s or less",
			duration(p.For), a.Tool, duration(max), duration(max))
	}
	if p.Exact && p.When != nil {
		return refuse("when", RememberInvalid, "set exact or when, not both: exact allows the approved input again, when any input that matches a schema")
	}
	var when json.RawMessage
	if p.When != nil {
		if len(p.When) > approvals.MaxRuleWhen {
			return refuse("when", RememberInvalid, "has %d bytes; a schema here has at most %d", len(p.When), approvals.MaxRuleWhen)
		}
		if _, err := agent.CompileWhen(p.When); err != nil {
			return refuse("when", RememberInvalid, "is not a schema Stead can use: %v", err)
		}
		when = compactJSON(p.When)
	}
	now := e.now()
	r := approvals.Rule{
		ID:        approvals.NewRuleID(strings.TrimPrefix(e.newID("rul"), "rul_"), a.Agent, a.Tool, a.EndUserID),
		ProjectID: a.ProjectID, Agent: a.Agent, Tool: a.Tool, EndUserID: a.EndUserID,
		When:       when,
		ApprovalID: a.ID, RunID: a.RunID, Deployment: a.Deployment, PostureDigest: ag.PostureDigest(a.Tool),
		CreatedBy: actor.ID, CreatedByMember: actor.MemberID, CreatedByName: actor.Name,
		CreatedAt: now, ExpiresAt: now.Add(p.For),
	}
	if p.Exact {
		r.InputDigest = a.InputDigest
	}
	return r, nil
}

// approverGroups names the groups of a's requirements: "finance, legal".
func approverGroups(a approvals.Approval) string {
	gs := make([]string, len(a.Requirements))
	for i, r := range a.Requirements {
		gs[i] = r.Group
	}
	return strings.Join(gs, ", ")
}

// duration renders a duration as stead.json writes them: "24h", "90m",
// "1h30m".
func duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// remembered is the verdict on a call that v, the policy's, asks for, once
// the remembered decisions have had their say: an allow naming the rule
// when one applies (see Remembered decisions), else v. It reads the
// scope's rules only when one could apply.
func (x *execution) remembered(ctx context.Context, tool *agent.Tool, input any, v agent.Verdict) (agent.Verdict, error) {
	if v.Outcome != agent.Ask || v.Untrusted || x.run.Trust == store.Untrusted || len(v.Approvers) > 0 || tool.RememberMax <= 0 {
		return v, nil
	}
	now := x.e.now()
	rules, err := x.e.store.MatchingRules(ctx, x.run.ProjectID, x.run.Agent, tool.Name, x.run.EndUserID, now)
	if err != nil {
		return v, fmt.Errorf("remembered decisions on %s: %w", tool.Name, err)
	}
	if len(rules) == 0 {
		return v, nil
	}
	call := approvals.RuleCall{
		ProjectID: x.run.ProjectID, Agent: x.run.Agent, Tool: tool.Name, EndUserID: x.run.EndUserID,
		PostureDigest: x.agent.PostureDigest(tool.Name),
	}
	if raw, err := json.Marshal(input); err == nil {
		call.InputDigest, _ = approvals.Digest(raw)
	}
	for _, r := range rules {
		switch {
		case !r.Matches(call, now):
		case r.ExpiresAt.Sub(r.CreatedAt) > tool.RememberMax:
			// approvals.remember.max was lowered since: the rule lasts
			// longer than the tool now lets any.
		case v.SeparatedBy != "" && r.CreatedByMember != "" && r.CreatedByMember == x.run.Requester:
			// The requester may not approve this call, so their own
			// remembered decision may not either.
		case r.When != nil && !whenAllows(r.When, input):
		default:
			if ok, err := x.makerStillDecides(ctx, r); err != nil {
				return v, err
			} else if !ok {
				continue
			}
			who := r.CreatedByName
			if who == "" {
				who = r.CreatedBy
			}
			return agent.Verdict{
				Outcome: agent.Allow, Rule: -1, Remembered: r.ID,
				Reason: fmt.Sprintf("allowed by remembered decision %s (%s, from approval %s, until %s)",
					r.ID, who, r.ApprovalID, r.ExpiresAt.UTC().Format(time.RFC3339)),
			}, nil
		}
	}
	return v, nil
}

// makerStillDecides reports whether the member who made r may still
// decide: a remembered decision stands for its maker's approval, so it
// ends with their authority — removed from the project, or a role that
// may no longer decide. (One read, only when a rule would apply.) A rule
// with no maker member (an older key's) stands on its key alone.
func (x *execution) makerStillDecides(ctx context.Context, r approvals.Rule) (bool, error) {
	if r.CreatedByMember == "" {
		return true, nil
	}
	m, err := x.e.store.GetMember(ctx, r.ProjectID, r.CreatedByMember)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remembered decision %s: get member %s: %w", r.ID, r.CreatedByMember, err)
	}
	return !m.Removed() && m.Role.May(approvals.Decide), nil
}

// whens caches compiled When schemas by their text: compiling one costs
// some 100 µs, checking an input with it some 4 µs
// (agent.BenchmarkCompileWhen), and the same rules are read for every call
// of their scope. Keyed by content, the cache is right for any store.
var whens, _ = lru.New[string, *agent.When](256)

// whenAllows reports whether input satisfies the schema raw; a schema that
// does not compile (stored by an older version, say) allows nothing.
func whenAllows(raw json.RawMessage, input any) bool {
	w, ok := whens.Get(string(raw))
	if !ok {
		var err error
		if w, err = agent.CompileWhen(raw); err != nil {
			return false
		}
		whens.Add(string(raw), w)
	}
	return w.Allows(input)
}

// RuleState says where a remembered decision stands for new runs.
type RuleState string

// The states.
const (
	RuleActive  RuleState = "active"
	RuleExpired RuleState = "expired"
	RuleRevoked RuleState = "revoked"
	// RuleEnded: a deployment since the rule was made changed what it was
	// made under (the tool's posture, the agent's policy, whether or how
	// long the tool lets decisions be remembered), so it no longer applies
	// to runs of the latest deployment.
	RuleEnded RuleState = "ended"
)

// RuleInfo is a remembered decision with where it stands.
type RuleInfo struct {
	approvals.Rule
	State RuleState
	// EndedBy is the deployment that ended it (State RuleEnded), 0 when that
	// cannot be told cheaply; Ended says why it ended.
	EndedBy int
	Ended   string
}

// ListRules lists the actor's project's remembered decisions, newest
// first, each with its state. A list of the rules in force (f.All false)
// has every rule neither expired nor revoked, ended ones too (their state
// says so). f.ProjectID and f.Now are the engine's.
func (e *Engine) ListRules(ctx context.Context, actor approvals.Actor, f store.RuleFilter) (store.Page[RuleInfo], error) {
	if !actor.Role.May(approvals.ReadApprovals) {
		return store.Page[RuleInfo]{}, ErrForbidden
	}
	f.ProjectID, f.Now = actor.ProjectID, e.now()
	p, err := e.store.ListRules(ctx, f)
	if err != nil {
		return store.Page[RuleInfo]{}, err
	}
	st := e.ruleStates(actor.ProjectID, f.Now)
	out := store.Page[RuleInfo]{Items: make([]RuleInfo, len(p.Items)), NextCursor: p.NextCursor}
	for i, r := range p.Items {
		if out.Items[i], err = st.info(ctx, r); err != nil {
			return store.Page[RuleInfo]{}, err
		}
	}
	return out, nil
}

// GetRule returns one remembered decision of the actor's project.
func (e *Engine) GetRule(ctx context.Context, actor approvals.Actor, id string) (RuleInfo, error) {
	if !actor.Role.May(approvals.ReadApprovals) {
		return RuleInfo{}, ErrForbidden
	}
	r, err := e.store.GetRule(ctx, actor.ProjectID, id)
	if err != nil {
		return RuleInfo{}, err
	}
	return e.ruleStates(actor.ProjectID, e.now()).info(ctx, r)
}

// RevokeRule revokes a remembered decision of the actor's project: calls
// it would have let through ask again, at once. Revoking twice keeps the
// first revocation. Errors: ErrForbidden (the actor may not decide),
// store.ErrNotFound.
func (e *Engine) RevokeRule(ctx context.Context, actor approvals.Actor, id string) (RuleInfo, error) {
	if !actor.Role.May(approvals.Decide) {
		return RuleInfo{}, ErrForbidden
	}
	now := e.now()
	r, err := e.store.RevokeRule(ctx, actor.ProjectID, id, actor, now)
	if err != nil {
		return RuleInfo{}, err
	}
	return e.ruleStates(actor.ProjectID, now).info(ctx, r)
}

// maxEndedWalk bounds how many deployments before the latest are read to
// tell which one ended a rule.
const maxEndedWalk = 8

// ruleStates tells the states of one project's rules at now, against its
// latest deployment (read once).
type ruleStates struct {
	e       *Engine
	project string
	now     time.Time
	latest  *store.Deployment // nil until read; Version 0: nothing deployed
}

func (e *Engine) ruleStates(project string, now time.Time) *ruleStates {
	return &ruleStates{e: e, project: project, now: now}
}

func (s *ruleStates) info(ctx context.Context, r approvals.Rule) (RuleInfo, error) {
	info := RuleInfo{Rule: r, State: RuleActive}
	switch {
	case r.Revoked():
		info.State = RuleRevoked
		return info, nil
	case !r.Active(s.now):
		info.State = RuleExpired
		return info, nil
	}
	if s.latest == nil {
		d, err := s.e.store.LatestDeployment(ctx, s.project)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return RuleInfo{}, fmt.Errorf("latest deployment: %w", err)
		}
		s.latest = &d
	}
	why, err := s.endedIn(ctx, r, s.latest.Version)
	if err != nil || why == "" {
		return info, err
	}
	info.State, info.Ended = RuleEnded, why
	// Walk back from the latest deployment while the rule stays ended in
	// each: the first of that run of deployments ended it.
	first := s.latest.Version
	for v := s.latest.Version - 1; v > r.Deployment; v-- {
		if s.latest.Version-v > maxEndedWalk {
			return info, nil
		}
		why, err := s.endedIn(ctx, r, v)
		if err != nil {
			return RuleInfo{}, err
		}
		if why == "" {
			break
		}
		first = v
	}
	info.EndedBy = first
	return info, nil
}

// endedIn says why rule r does not apply to runs of deployment version,
// "" if it does.
func (s *ruleStates) endedIn(ctx context.Context, r approvals.Rule, version int) (string, error) {
	if version == r.Deployment {
		return "", nil
	}
	if version < 1 {
		return "nothing is deployed", nil
	}
	cfg, err := s.e.deployments.config(ctx, s.project, version)
	if err != nil {
		return "", fmt.Errorf("rule %s: %w", r.ID, err)
	}
	ag, ok := cfg.Agent(r.Agent)
	if !ok {
		return fmt.Sprintf("agent %s is not deployed", r.Agent), nil
	}
	tool, ok := ag.Tool(r.Tool)
	switch {
	case !ok:
		return fmt.Sprintf("agent %s has no tool %s", r.Agent, r.Tool), nil
	case tool.RememberMax <= 0:
		return fmt.Sprintf("%s no longer allows remembered decisions (approvals.remember)", r.Tool), nil
	case r.ExpiresAt.Sub(r.CreatedAt) > tool.RememberMax:
		return fmt.Sprintf("%s's approvals.remember.max is now %s, shorter than this rule", r.Tool, duration(tool.RememberMax)), nil
	case ag.PostureDigest(r.Tool) != r.PostureDigest:
		return fmt.Sprintf("%s's posture or agent %s's policy changed", r.Tool, r.Agent), nil
	}
	return "", nil
}
