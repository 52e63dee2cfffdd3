package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"stead/approvals"
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
	// Approvers, on an ask rule, is who must approve what it asks for,
	// instead of the tool's approvers.
	Approvers []approvals.Requirement

	// separate is the rule's separateFrom: "requester", "none" or "".
	separate string
	when     *jsonschema.Schema
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
	// Approvers, on an ask, is who must approve (the ask rule's, else the
	// tool's); none means any member who may decide. ApproversOn names
	// where it is set ("tool refundOrder", "policy rule 2").
	Approvers   []approvals.Requirement
	ApproversOn string
	// Remembered, on an allow, is the remembered decision (a rule id) that
	// let a call through that would have asked; the engine sets it, never
	// Evaluate.
	Remembered string
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
		return t.ask(Verdict{Outcome: Ask, Rule: r.Index, Reason: r.explain("approval required by")}, r)
	}
	if t.RequiresApproval {
		return t.ask(Verdict{Outcome: Ask, Rule: -1, Reason: fmt.Sprintf("%s requires approval (requiresApproval)", tool)}, nil)
	}
	if untrusted && t.Effect == EffectWrite {
		return t.ask(Verdict{Outcome: Ask, Rule: -1, Reason: fmt.Sprintf("run is untrusted and %s has effect write", tool), Untrusted: true}, nil)
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

// ask completes an ask verdict on a call of t, asked by rule r (nil when
// the tool's posture asks): who must approve — r's approvers, else the
// tool's — and whom it is separated from — r's separateFrom, else the
// tool's, else the requester wherever there are approvers.
func (t *Tool) ask(v Verdict, r *Rule) Verdict {
	v.Approvers, v.ApproversOn = t.Approvers, t.approversOn
	sep := t.separate
	if r != nil {
		on := fmt.Sprintf("policy rule %d", r.Index)
		if r.Approvers != nil {
			v.Approvers, v.ApproversOn = r.Approvers, on
		}
		if r.separate != "" {
			sep = setting{value: r.separate, on: on}
		}
	}
	switch {
	case sep.value == "requester":
		v.SeparatedBy = fmt.Sprintf(`separateFrom "requester" on %s`, sep.on)
	case sep.value == "none":
	case len(v.Approvers) > 0:
		v.SeparatedBy = fmt.Sprintf(`separateFrom "requester", the default with approvers (on %s)`, v.ApproversOn)
	}
	return v
}

// PostureDigest binds a remembered decision to what it was made under: the
// hex sha256 of the tool's posture and its agent's policy, as written. A
// deployment that changes either gives another digest.
func (a *Agent) PostureDigest(tool string) string {
	t, ok := a.Tools[tool]
	if !ok {
		return ""
	}
	h := sha256.New()
	h.Write(t.raw)
	h.Write([]byte{0})
	h.Write(a.policyRaw)
	if t.pinned != "" {
		// What an MCP-backed tool does is its remote definition too.
		h.Write([]byte{0})
		h.Write([]byte(t.pinned))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Groups are the names of the groups the config's approvers name, sorted:
// a deployment naming a group the project does not have is refused.
func (c *Config) Groups() []string {
	seen := map[string]bool{}
	add := func(rs []approvals.Requirement) {
		for _, r := range rs {
			seen[r.Group] = true
		}
	}
	for _, a := range c.Agents {
		for _, t := range a.Tools {
			add(t.Approvers)
		}
		for _, r := range a.Policy {
			add(r.Approvers)
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
