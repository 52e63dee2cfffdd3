package agent

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Outcome is what the policy decides about one tool call.
type Outcome string

// The outcomes.
const (
	// Allow runs the call now.
	Allow Outcome = "allow"
	// Ask stops the run in awaiting-approval until a project owner decides.
	Ask Outcome = "ask"
	// Deny refuses the call; the run fails.
	Deny Outcome = "deny"
)

// Rule is one element of an agent's policy.
type Rule struct {
	// Index is the rule's position in the policy array.
	Index int
	// Tool is the tool the rule applies to, or "*" for every tool.
	Tool string
	// Outcome is what the rule decides when it matches.
	Outcome Outcome
	// Reason is the author's explanation, possibly "".
	Reason string
	// When is the raw JSON Schema the input must match; nil means the rule
	// matches every call of its tool.
	When json.RawMessage
	// SeparateFromRequester: an ask rule's approvals may not be decided by
	// the member who started the run ("separateFrom": "requester").
	SeparateFromRequester bool

	when *jsonschema.Schema
}

// Verdict is the policy's answer for one tool call.
type Verdict struct {
	Outcome Outcome
	// Reason says why, for the approval queue and the run trace.
	Reason string
	// Rule is the index of the policy rule that decided, or -1 if the
	// tool's posture or the default decided.
	Rule int
	// Untrusted: the call asks only because the run is untrusted (its tool
	// has effect write); the caller may name what lowered the trust.
	Untrusted bool
	// SeparatedBy, on an ask, names the setting that keeps the run's
	// requester from deciding it ("separateFrom \"requester\" on tool
	// refundOrder"); empty when none does.
	SeparatedBy string
}

// Evaluate judges one call of tool with its resolved (and validated) input,
// before anything runs. untrusted says whether the run's trust has been
// lowered (by an external tool's output or context.markUntrusted).
//
// The order is fixed; the first that applies decides:
//
//  1. a matching deny rule: deny (deny always wins);
//  2. a matching ask rule, else the tool's requiresApproval: ask;
//  3. the run is untrusted and the tool's effect is write: ask;
//  4. a matching allow rule: allow, with the rule's reason;
//  5. otherwise: allow.
//
// So an allow rule never overrides requiresApproval or the untrusted-write
// check; it only names the reason a call that nothing stopped is allowed.
// Among rules of the same decision the first matching one (lowest index)
// decides. A rule matches when its tool is the called tool or "*" and the
// input satisfies its when schema (if any). A when schema that cannot be
// evaluated against the input (a value that is not JSON, a $ref loop)
// counts as matching for deny and ask rules and as not matching for allow
// rules: uncertainty never lets a call through.
//
// A tool the agent does not declare is denied. Evaluate is safe for
// concurrent use.
func (a *Agent) Evaluate(tool string, input any, untrusted bool) Verdict {
	t, ok := a.Tools[tool]
	if !ok {
		return Verdict{Outcome: Deny, Rule: -1, Reason: fmt.Sprintf("tool %q is not declared in agent %q", tool, a.Name)}
	}
	if r := a.firstMatch(Deny, tool, input); r != nil {
		return Verdict{Outcome: Deny, Rule: r.Index, Reason: r.explain("denied by")}
	}
	if r := a.firstMatch(Ask, tool, input); r != nil {
		v := Verdict{Outcome: Ask, Rule: r.Index, Reason: r.explain("approval required by"), SeparatedBy: t.separatedBy()}
		if r.SeparateFromRequester {
			v.SeparatedBy = fmt.Sprintf(`separateFrom "requester" on policy rule %d`, r.Index)
		}
		return v
	}
	if t.RequiresApproval {
		return Verdict{Outcome: Ask, Rule: -1, Reason: fmt.Sprintf("%s requires approval (requiresApproval)", tool), SeparatedBy: t.separatedBy()}
	}
	if untrusted && t.Effect == EffectWrite {
		return Verdict{Outcome: Ask, Rule: -1, Reason: fmt.Sprintf("run is untrusted and %s has effect write", tool), Untrusted: true, SeparatedBy: t.separatedBy()}
	}
	if r := a.firstMatch(Allow, tool, input); r != nil {
		return Verdict{Outcome: Allow, Rule: r.Index, Reason: r.explain("allowed by")}
	}
	return Verdict{Outcome: Allow, Rule: -1, Reason: fmt.Sprintf("allowed: %s has effect %s and needs no approval", tool, t.Effect)}
}

func (a *Agent) firstMatch(d Outcome, tool string, input any) *Rule {
	for _, r := range a.Policy {
		if r.Outcome == d && (r.Tool == tool || r.Tool == "*") && r.matches(input) {
			return r
		}
	}
	return nil
}

// matches reports whether input satisfies the rule's when schema.
func (r *Rule) matches(input any) bool {
	if r.when == nil {
		return true
	}
	err := r.when.Validate(input)
	if err == nil {
		return true
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) && !indeterminate(ve) {
		return false
	}
	// The schema could not judge the input: fail closed.
	return r.Outcome != Allow
}

// indeterminate reports whether a validation failed because the input or
// the schema could not be evaluated, rather than because the input does not
// match.
func indeterminate(e *jsonschema.ValidationError) bool {
	switch e.ErrorKind.(type) {
	case *kind.InvalidJsonValue, *kind.RefCycle:
		return true
	}
	for _, c := range e.Causes {
		if indeterminate(c) {
			return true
		}
	}
	return false
}

// explain reads "denied by policy rule 2" or, with a reason,
// "allowed by policy rule 0: small refunds are automatic".
func (r *Rule) explain(verb string) string {
	s := fmt.Sprintf("%s policy rule %d", verb, r.Index)
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// separatedBy names the tool's (or its agent's) separateFrom setting, or
// "" when it has none.
func (t *Tool) separatedBy() string {
	switch t.SeparateFrom {
	case sepTool:
		return fmt.Sprintf(`separateFrom "requester" on tool %s`, t.Name)
	case sepAgent:
		return fmt.Sprintf(`separateFrom "requester" on agent %s`, t.Agent)
	}
	return ""
}
