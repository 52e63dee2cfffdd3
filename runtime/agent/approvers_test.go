package agent_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"stead/approvals"
	"stead/runtime/agent"
)

const approversConfig = `{"agents": {"refunds": {
  "approvals": {"approvers": {"group": "support"}},
  "tools": {
    "refundOrder": {"effect": "write", "requiresApproval": true,
      "approvals": {"approvers": {"group": "finance", "min": 2}}},
    "closeAccount": {"effect": "write", "requiresApproval": true,
      "approvals": {"approvers": {"all": [{"group": "finance"}, {"group": "legal", "min": 1}]}, "separateFrom": "none"}},
    "updateNote": {"effect": "write"},
    "listOrders": {"effect": "read"}
  },
  "policy": [
    {"tool": "listOrders", "decision": "ask", "when": {"required": ["all"]}, "approvers": {"group": "ops"}, "separateFrom": "none"},
    {"tool": "refundOrder", "decision": "ask", "when": {"required": ["rush"]}, "approvers": {"group": "ops", "min": 3}}
  ],
  "steps": [{"id": "s", "tool": "listOrders"}]
}}}`

// approvers: the ask rule's, else the tool's, else the agent's; with
// approvers, the requester is kept from deciding unless separateFrom says
// "none"; each names where it was set.
func TestEvaluateApprovers(t *testing.T) {
	t.Parallel()
	c := mustParse(t, approversConfig)
	a := c.Agents["refunds"]
	req := func(g string, min int) approvals.Requirement {
		return approvals.Requirement{Group: g, Min: min, Eligible: []approvals.Voter{}}
	}
	for _, tc := range []struct {
		name, tool, input string
		untrusted         bool
		approvers         []approvals.Requirement
		on, separatedBy   string
	}{
		{"tool approvers, separated by default", "refundOrder", `{}`, false,
			[]approvals.Requirement{req("finance", 2)}, "tool refundOrder",
			`separateFrom "requester", the default with approvers (on tool refundOrder)`},
		{"all of two groups; separateFrom none turns the default off", "closeAccount", `{}`, false,
			[]approvals.Requirement{req("finance", 1), req("legal", 1)}, "tool closeAccount", ""},
		{"the agent's approvers when the tool has none (untrusted write)", "updateNote", `{}`, true,
			[]approvals.Requirement{req("support", 1)}, "agent refunds",
			`separateFrom "requester", the default with approvers (on agent refunds)`},
		{"an ask rule's approvers and separateFrom win", "listOrders", `{"all": 1}`, false,
			[]approvals.Requirement{req("ops", 1)}, "policy rule 0", ""},
		{"an ask rule's approvers over the tool's", "refundOrder", `{"rush": 1}`, false,
			[]approvals.Requirement{req("ops", 3)}, "policy rule 1",
			`separateFrom "requester", the default with approvers (on policy rule 1)`},
	} {
		v := a.Evaluate(tc.tool, decode(t, tc.input), tc.untrusted)
		if v.Outcome != agent.Ask || !reflect.DeepEqual(v.Approvers, tc.approvers) || v.ApproversOn != tc.on || v.SeparatedBy != tc.separatedBy {
			t.Errorf("%s: %+v\nwant approvers %v on %q, separated by %q", tc.name, v, tc.approvers, tc.on, tc.separatedBy)
		}
	}
	if v := a.Evaluate("updateNote", decode(t, `{}`), false); v.Outcome != agent.Allow || v.Approvers != nil {
		t.Errorf("an allowed call carries no approvers: %+v", v)
	}
	if got, want := c.Groups(), []string{"finance", "legal", "ops", "support"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Groups = %v, want %v", got, want)
	}
}

func TestApproversProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, approvals, policy, want string }{
		{"same group twice", `{"approvers": {"all": [{"group": "finance"}, {"group": "finance", "min": 2}]}}`, `[]`,
			`group "finance" is already required by /agents/a/tools/w/approvals/approvers/all/0; raise its min instead`},
		{"approvers on an allow rule", `{}`, `[{"tool": "w", "decision": "allow", "approvers": {"group": "finance"}}]`,
			`approvers applies only to ask rules (this rule's decision is "allow")`},
		{"separateFrom on a deny rule", `{}`, `[{"tool": "w", "decision": "deny", "separateFrom": "requester"}]`,
			`separateFrom applies only to ask rules`},
		{"a group name people cannot type", `{"approvers": {"group": "Finance Team"}}`, `[]`, `/agents/a/tools/w/approvals/approvers`},
		{"min 0", `{"approvers": {"group": "finance", "min": 0}}`, `[]`, `/agents/a/tools/w/approvals/approvers`},
		{"remember too long", `{"remember": {"max": "200h"}}`, `[]`, `must be at most 168h (7 days) (got "200h")`},
	} {
		src := `{"agents": {"a": {"tools": {"w": {"effect": "write", "approvals": ` + tc.approvals + `}},
		  "policy": ` + tc.policy + `, "steps": [{"id": "s", "tool": "w"}]}}}`
		ps := problems(t, src)
		var all []string
		for _, p := range ps {
			all = append(all, p.Pointer+": "+p.Message)
		}
		if !strings.Contains(strings.Join(all, "\n"), tc.want) {
			t.Errorf("%s: problems\n%s\nwant one containing %q", tc.name, strings.Join(all, "\n"), tc.want)
		}
	}
}

// TestApproversWithoutGroups: requirements the schema refuses for a missing
// group are not also called the same group twice.
func TestApproversWithoutGroups(t *testing.T) {
	t.Parallel()
	ps := problems(t, `{"agents": {"a": {"tools": {"w": {"effect": "write",
	  "approvals": {"approvers": {"all": [{"min": 2}, {"min": 3}]}}}}, "steps": [{"id": "s", "tool": "w"}]}}}`)
	if len(ps) != 1 || ps[0].Pointer != "/agents/a/tools/w/approvals/approvers" {
		t.Errorf("problems = %v, want the one the schema gives at /agents/a/tools/w/approvals/approvers", ps)
	}
}

// TestCheckGroups: each group the config names that the project lacks is
// refused where it is named — a tool's approvers, a policy rule's, an
// escalation's — and the groups it has are not.
func TestCheckGroups(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `{"agents": {"a": {
	  "approvals": {"escalateAfter": "1h", "escalateTo": {"group": "leads"}},
	  "tools": {"w": {"effect": "write", "approvals": {"approvers": {"group": "finance"}}}},
	  "policy": [{"tool": "w", "decision": "ask", "approvers": {"group": "legal"}}],
	  "steps": [{"id": "s", "tool": "w"}]}}}`)
	have := map[string]bool{"finance": true}
	err := c.CheckGroups(func(name string) (bool, error) { return have[name], nil })
	var ce *agent.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("CheckGroups = %v, want a *agent.ConfigError", err)
	}
	var got []string
	for _, p := range ce.Problems {
		got = append(got, p.Pointer)
		if !strings.Contains(p.Message, "does not exist in this project") {
			t.Errorf("%s: message %q does not say the group does not exist", p.Pointer, p.Message)
		}
	}
	want := []string{"/agents/a/approvals/escalateTo/group", "/agents/a/policy/0/approvers/group"}
	if !slices.Equal(got, want) {
		t.Errorf("refused at %v, want %v", got, want)
	}
	if err := c.CheckGroups(func(string) (bool, error) { return true, nil }); err != nil {
		t.Errorf("CheckGroups with every group present = %v", err)
	}
}

// remember.max: the tool's, else its agent's; never where approvers are
// set (a warning says so).
func TestRemember(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `{"agents": {"a": {
	  "approvals": {"remember": {"max": "24h"}},
	  "tools": {
	    "refund": {"effect": "write", "requiresApproval": true, "approvals": {"remember": {"max": "1h"}}},
	    "note": {"effect": "write", "requiresApproval": true},
	    "close": {"effect": "write", "requiresApproval": true, "approvals": {"approvers": {"group": "legal"}}}
	  },
	  "steps": [{"id": "s", "tool": "refund"}]
	}}}`)
	tools := c.Agents["a"].Tools
	if tools["refund"].RememberMax.String() != "1h0m0s" || tools["note"].RememberMax.String() != "24h0m0s" {
		t.Errorf("RememberMax: refund %v, note %v", tools["refund"].RememberMax, tools["note"].RememberMax)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0].Message, "remember never applies to close") {
		t.Errorf("Warnings = %v", c.Warnings)
	}
}

// PostureDigest changes with the tool's posture or the agent's policy,
// and not with anything else.
func TestPostureDigest(t *testing.T) {
	t.Parallel()
	base := `{"agents": {"a": {"description": "%s", "tools": {"w": {"effect": "write"%s}}, "policy": [%s], "steps": [{"id": "s", "tool": "w"}]}}}`
	digest := func(desc, tool, policy string) string {
		return mustParse(t, fmt.Sprintf(base, desc, tool, policy)).Agents["a"].PostureDigest("w")
	}
	d0 := digest("x", "", "")
	if d0 == "" || digest("y", "", "") != d0 {
		t.Errorf("the agent's description changed the digest (or it is empty)")
	}
	if digest("x", `, "input": {"type": "object"}`, "") == d0 {
		t.Errorf("a schema change kept the digest")
	}
	if digest("x", "", `{"tool": "w", "decision": "deny", "when": {"required": ["x"]}}`) == d0 {
		t.Errorf("a policy change kept the digest")
	}
	if d := mustParse(t, fmt.Sprintf(base, "x", "", "")).Agents["a"].PostureDigest("undeclared"); d != "" {
		t.Errorf("PostureDigest of a tool the agent does not declare = %q, want \"\"", d)
	}
}

// remind, escalateAfter/escalateTo and expiringAt: each the tool's, else
// its agent's; the expiry warning at 80% of the timeout unless expiringAt
// says otherwise (0: none); escalation needs both keys and a group.
func TestNotices(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `{"agents": {"a": {
	  "approvals": {"timeout": "2h", "remind": ["30m", "90m"], "escalateAfter": "1h", "escalateTo": {"group": "finance-leads"}},
	  "tools": {
	    "refund": {"effect": "write", "requiresApproval": true, "approvals": {"remind": ["10m"], "expiringAt": 0.5}},
	    "note": {"effect": "write", "requiresApproval": true},
	    "quiet": {"effect": "write", "requiresApproval": true, "approvals": {"remind": [], "expiringAt": 0}},
	    "close": {"effect": "write", "requiresApproval": true, "approvals": {"escalateAfter": "20m", "escalateTo": {"group": "legal"}}},
	    "third": {"effect": "write", "requiresApproval": true, "approvals": {"remind": [], "expiringAt": 0.33333}}
	  },
	  "steps": [{"id": "s", "tool": "refund"}]
	}}}`)
	got := func(tool string) string {
		var parts []string
		for _, n := range c.Agents["a"].Tools[tool].Notices {
			parts = append(parts, fmt.Sprintf("%s@%s%s", n.Kind, n.After, n.Group))
		}
		return strings.Join(parts, " ")
	}
	for tool, want := range map[string]string{
		"refund": "reminder@10m0s escalated@1h0m0sfinance-leads expiring@1h0m0s",
		"note":   "reminder@30m0s reminder@1h30m0s escalated@1h0m0sfinance-leads expiring@1h36m0s",
		"quiet":  "escalated@1h0m0sfinance-leads",
		"close":  "reminder@30m0s reminder@1h30m0s escalated@20m0slegal expiring@1h36m0s",
		"third":  "escalated@1h0m0sfinance-leads expiring@40m0s",
	} {
		if g := got(tool); g != want {
			t.Errorf("%s: %s, want %s", tool, g, want)
		}
	}
	if !strings.Contains(fmt.Sprint(problems(t, `{"agents": {"a": {"approvals": {"escalateAfter": "1h"},
	  "tools": {"w": {"effect": "write"}}, "steps": [{"id": "s", "tool": "w"}]}}}`)), "needs escalateTo") {
		t.Error("escalateAfter without escalateTo was accepted")
	}
	if !strings.Contains(fmt.Sprint(problems(t, `{"agents": {"a": {"approvals": {"escalateTo": {"group": "finance-leads"}},
	  "tools": {"w": {"effect": "write"}}, "steps": [{"id": "s", "tool": "w"}]}}}`)), "needs escalateAfter") {
		t.Error("escalateTo without escalateAfter was accepted")
	}
}
