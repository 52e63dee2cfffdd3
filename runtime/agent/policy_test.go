package agent_test

import (
	"reflect"
	"testing"

	"stead/runtime/agent"
)

const policyConfig = `{"agents": {
	"rules": {
		"tools": {
			"listOrders":  {"effect": "read"},
			"refundOrder": {"effect": "write", "requiresApproval": true},
			"updateNote":  {"effect": "write"},
			"fetchReviews": {"effect": "read", "source": "external"}
		},
		"policy": [
			{"tool": "refundOrder", "decision": "deny", "reason": "refunds over 500 are never automatic",
			 "when": {"properties": {"amount": {"exclusiveMinimum": 500}}}},
			{"tool": "updateNote", "decision": "ask", "reason": "urgent notes need review", "when": {"required": ["urgent"]}},
			{"tool": "updateNote", "decision": "allow", "reason": "notes are harmless"},
			{"tool": "*", "decision": "deny", "when": {"required": ["dropTables"]}},
			{"tool": "*", "decision": "ask", "when": {"required": ["askMe"]}}
		],
		"steps": [{"id": "s", "tool": "listOrders"}]
	},
	"plain": {
		"tools": {"listOrders": {"effect": "read"}, "updateNote": {"effect": "write"}, "postReply": {"effect": "write", "source": "external"}},
		"steps": [{"id": "s", "tool": "listOrders"}]
	}
}}`

func TestEvaluate(t *testing.T) {
	t.Parallel()
	c := mustParse(t, policyConfig)
	tests := []struct {
		name      string
		agent     string
		tool      string
		input     string
		untrusted bool
		want      agent.Verdict
	}{
		{"deny beats requiresApproval and untrusted", "rules", "refundOrder", `{"amount": 900}`, true,
			agent.Verdict{Outcome: agent.Deny, Rule: 0, Reason: "denied by policy rule 0: refunds over 500 are never automatic"}},
		{"requiresApproval asks", "rules", "refundOrder", `{"amount": 10}`, false,
			agent.Verdict{Outcome: agent.Ask, Rule: -1, Reason: "refundOrder requires approval (requiresApproval)"}},
		{"ask rule whose when matches", "rules", "updateNote", `{"urgent": true}`, false,
			agent.Verdict{Outcome: agent.Ask, Rule: 1, Reason: "approval required by policy rule 1: urgent notes need review"}},
		{"ask rule whose when does not match; the allow rule is the reason", "rules", "updateNote", `{"text": "hi"}`, false,
			agent.Verdict{Outcome: agent.Allow, Rule: 2, Reason: "allowed by policy rule 2: notes are harmless"}},
		{"untrusted write asks, the allow rule does not override it", "rules", "updateNote", `{"text": "hi"}`, true,
			agent.Verdict{Outcome: agent.Ask, Rule: -1, Reason: "run is untrusted and updateNote has effect write", Untrusted: true}},
		{"untrusted read is allowed", "rules", "listOrders", `{}`, true,
			agent.Verdict{Outcome: agent.Allow, Rule: -1, Reason: "allowed: listOrders has effect read and needs no approval"}},
		{"external source is only a posture; trust is the caller's", "rules", "fetchReviews", `{}`, false,
			agent.Verdict{Outcome: agent.Allow, Rule: -1, Reason: "allowed: fetchReviews has effect read and needs no approval"}},
		{"* deny rule", "rules", "listOrders", `{"dropTables": 1}`, false,
			agent.Verdict{Outcome: agent.Deny, Rule: 3, Reason: "denied by policy rule 3"}},
		{"* deny rule beats an earlier ask rule", "rules", "updateNote", `{"dropTables": 1, "urgent": true}`, false,
			agent.Verdict{Outcome: agent.Deny, Rule: 3, Reason: "denied by policy rule 3"}},
		{"* ask rule on a read tool", "rules", "listOrders", `{"askMe": 1}`, false,
			agent.Verdict{Outcome: agent.Ask, Rule: 4, Reason: "approval required by policy rule 4"}},
		{"ask rule wins the reason over requiresApproval", "rules", "refundOrder", `{"amount": 10, "askMe": 1}`, false,
			agent.Verdict{Outcome: agent.Ask, Rule: 4, Reason: "approval required by policy rule 4"}},
		{"undeclared tool is denied", "rules", "dropDatabase", `{}`, false,
			agent.Verdict{Outcome: agent.Deny, Rule: -1, Reason: `tool "dropDatabase" is not declared in agent "rules"`}},
		{"no rules: write allowed when trusted", "plain", "updateNote", `{}`, false,
			agent.Verdict{Outcome: agent.Allow, Rule: -1, Reason: "allowed: updateNote has effect write and needs no approval"}},
		{"no rules: write asks when untrusted", "plain", "updateNote", `{}`, true,
			agent.Verdict{Outcome: agent.Ask, Rule: -1, Reason: "run is untrusted and updateNote has effect write", Untrusted: true}},
		{"no rules: external write allowed when trusted", "plain", "postReply", `{}`, false,
			agent.Verdict{Outcome: agent.Allow, Rule: -1, Reason: "allowed: postReply has effect write and needs no approval"}},
		{"no rules: external write asks when untrusted", "plain", "postReply", `{}`, true,
			agent.Verdict{Outcome: agent.Ask, Rule: -1, Reason: "run is untrusted and postReply has effect write", Untrusted: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := c.Agents[tt.agent].Evaluate(tt.tool, decode(t, tt.input), tt.untrusted)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Evaluate =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

// TestEvaluateAllowRuleOnlyWhereNothingEarlierMatched pins the order
// with the README example: its allow rule for small refunds has no effect
// while refundOrder requires approval, and becomes the recorded reason once
// nothing earlier applies.
func TestEvaluateAllowRuleOnlyWhereNothingEarlierMatched(t *testing.T) {
	t.Parallel()
	example := mustParse(t, string(readFile(t, "stead.json"))).Agents["refunds"]
	small := decode(t, `{"item": {"id": "o1", "amount": 5}}`)
	if got := example.Evaluate("refundOrder", small, false); got.Outcome != agent.Ask || got.Rule != -1 ||
		got.Reason != "refundOrder requires approval (requiresApproval)" {
		t.Errorf("example, small refund: %+v", got)
	}

	c := mustParse(t, `{"agents": {"refunds": {
		"tools": {"refundOrder": {"effect": "write"}},
		"policy": [{"tool": "refundOrder", "when": {"properties": {"item": {"properties": {"amount": {"maximum": 20}}}}},
		            "decision": "allow", "reason": "small refunds are automatic"}],
		"steps": [{"id": "refund", "tool": "refundOrder"}]}}}`)
	a := c.Agents["refunds"]
	if len(c.Warnings) != 0 {
		t.Errorf("Warnings = %v", c.Warnings)
	}
	tests := []struct {
		input     string
		untrusted bool
		want      agent.Verdict
	}{
		{`{"item": {"amount": 5}}`, false, agent.Verdict{Outcome: agent.Allow, Rule: 0, Reason: "allowed by policy rule 0: small refunds are automatic"}},
		{`{"item": {"amount": 50}}`, false, agent.Verdict{Outcome: agent.Allow, Rule: -1, Reason: "allowed: refundOrder has effect write and needs no approval"}},
		{`{"item": {"amount": 5}}`, true, agent.Verdict{Outcome: agent.Ask, Rule: -1, Reason: "run is untrusted and refundOrder has effect write", Untrusted: true}},
	}
	for _, tt := range tests {
		if got := a.Evaluate("refundOrder", decode(t, tt.input), tt.untrusted); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Evaluate(%s, untrusted=%v) =\n %+v\nwant\n %+v", tt.input, tt.untrusted, got, tt.want)
		}
	}
}

// TestEvaluateFailsClosed checks that a when schema that cannot judge the
// input (a value that is not JSON) matches deny and ask rules but not allow
// rules.
func TestEvaluateFailsClosed(t *testing.T) {
	t.Parallel()
	c := mustParse(t, policyConfig)
	notJSON := map[string]any{"amount": struct{}{}}
	if got := c.Agents["rules"].Evaluate("refundOrder", notJSON, false); got.Outcome != agent.Deny || got.Rule != 0 {
		t.Errorf("deny rule with unjudgeable input: %+v", got)
	}
	allowOnly := mustParse(t, `{"agents": {"a": {"tools": {"w": {"effect": "write"}},
		"policy": [{"tool": "w", "decision": "allow", "when": {"properties": {"amount": {"maximum": 5}}}}],
		"steps": [{"id": "s", "tool": "w"}]}}}`).Agents["a"]
	if got := allowOnly.Evaluate("w", notJSON, false); got.Rule != -1 {
		t.Errorf("allow rule matched unjudgeable input: %+v", got)
	}

	// A $ref loop cannot judge any input either: the write is denied, not
	// let through, and the allow rule gives no reason.
	loop := `{"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`
	looped := mustParse(t, `{"agents": {"a": {"tools": {"w": {"effect": "write"}, "v": {"effect": "write"}},
		"policy": [{"tool": "w", "decision": "deny", "when": `+loop+`},
		           {"tool": "v", "decision": "allow", "when": `+loop+`}],
		"steps": [{"id": "s", "tool": "w"}]}}}`).Agents["a"]
	if got := looped.Evaluate("w", decode(t, `{"amount": 1}`), false); got.Outcome != agent.Deny || got.Rule != 0 {
		t.Errorf("deny rule whose when is a $ref loop: %+v, want deny by rule 0", got)
	}
	if got := looped.Evaluate("v", decode(t, `{"amount": 1}`), false); got.Rule != -1 {
		t.Errorf("allow rule whose when is a $ref loop matched: %+v", got)
	}
}

// TestEvaluateFirstRuleDecides: among matching rules of one decision the
// lowest index decides, and it is the one the verdict names.
func TestEvaluateFirstRuleDecides(t *testing.T) {
	t.Parallel()
	a := mustParse(t, `{"agents": {"a": {"tools": {"d": {"effect": "write"}, "q": {"effect": "write"}, "l": {"effect": "read"}},
		"policy": [
			{"tool": "d", "decision": "deny", "reason": "first deny"},
			{"tool": "d", "decision": "deny", "reason": "second deny", "when": {"required": ["x"]}},
			{"tool": "q", "decision": "ask", "reason": "first ask"},
			{"tool": "q", "decision": "ask", "reason": "second ask"},
			{"tool": "l", "decision": "allow", "reason": "first allow"},
			{"tool": "*", "decision": "allow", "reason": "second allow"}],
		"steps": [{"id": "s", "tool": "d"}]}}}`).Agents["a"]
	for _, tc := range []struct {
		tool string
		want agent.Verdict
	}{
		{"d", agent.Verdict{Outcome: agent.Deny, Rule: 0, Reason: "denied by policy rule 0: first deny"}},
		{"q", agent.Verdict{Outcome: agent.Ask, Rule: 2, Reason: "approval required by policy rule 2: first ask"}},
		{"l", agent.Verdict{Outcome: agent.Allow, Rule: 4, Reason: "allowed by policy rule 4: first allow"}},
	} {
		if got := a.Evaluate(tc.tool, decode(t, `{"x": 1}`), false); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Evaluate(%s) =\n %+v\nwant\n %+v", tc.tool, got, tc.want)
		}
	}
}

// TestEvaluateWhenIsJSONSchema pins a JSON Schema rule users trip over:
// "properties" constrains a property only when it is present, so a when
// schema without "required" matches an input that lacks the property.
func TestEvaluateWhenIsJSONSchema(t *testing.T) {
	t.Parallel()
	a := mustParse(t, `{"agents": {"a": {"tools": {"w": {"effect": "write"}, "v": {"effect": "write"}},
		"policy": [
			{"tool": "w", "decision": "deny", "when": {"properties": {"amount": {"minimum": 100}}}},
			{"tool": "v", "decision": "deny", "when": {"required": ["amount"], "properties": {"amount": {"minimum": 100}}}}],
		"steps": [{"id": "s", "tool": "w"}]}}}`).Agents["a"]
	if got := a.Evaluate("w", decode(t, `{}`), false); got.Outcome != agent.Deny {
		t.Errorf("without required, a missing amount matches: %+v", got)
	}
	if got := a.Evaluate("v", decode(t, `{}`), false); got.Outcome != agent.Allow {
		t.Errorf("with required, a missing amount does not match: %+v", got)
	}
	if got := a.Evaluate("v", decode(t, `{"amount": 150}`), false); got.Outcome != agent.Deny {
		t.Errorf("amount 150: %+v", got)
	}
}

// separateFrom "requester" on an agent, a tool or an ask rule marks the
// approvals it asks for, naming where it was set; the closest wins.
func TestEvaluateSeparateFrom(t *testing.T) {
	t.Parallel()
	c, err := agent.Parse([]byte(`{"agents": {"a": {
	  "approvals": {"separateFrom": "requester"},
	  "tools": {
	    "refund": {"effect": "write", "requiresApproval": true, "approvals": {"separateFrom": "requester"}},
	    "note": {"effect": "write"},
	    "look": {"effect": "read"}
	  },
	  "policy": [{"tool": "look", "decision": "ask", "separateFrom": "requester"}],
	  "steps": [{"id": "s", "tool": "refund", "input": {}}]
	}, "b": {
	  "tools": {"refund": {"effect": "write", "requiresApproval": true}},
	  "steps": [{"id": "s", "tool": "refund", "input": {}}]
	}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		agent, tool string
		untrusted   bool
		want        string
	}{
		{"a", "refund", false, `separateFrom "requester" on tool refund`},
		{"a", "look", false, `separateFrom "requester" on policy rule 0`},
		{"a", "note", true, `separateFrom "requester" on agent a`},
		{"b", "refund", false, ""},
	} {
		v := c.Agents[tc.agent].Evaluate(tc.tool, map[string]any{}, tc.untrusted)
		if v.Outcome != agent.Ask || v.SeparatedBy != tc.want {
			t.Errorf("%s/%s: %+v, want ask separated by %q", tc.agent, tc.tool, v, tc.want)
		}
	}
}

// approvals.noteToCustomer: the tool's setting, else its agent's.
func TestNoteToCustomer(t *testing.T) {
	t.Parallel()
	c, err := agent.Parse([]byte(`{"agents": {"a": {
	  "approvals": {"noteToCustomer": true},
	  "tools": {
	    "refund": {"effect": "write", "approvals": {"noteToCustomer": false}},
	    "note": {"effect": "write"}
	  },
	  "steps": [{"id": "s", "tool": "refund", "input": {}}]
	}, "b": {
	  "tools": {"refund": {"effect": "write"}},
	  "steps": [{"id": "s", "tool": "refund", "input": {}}]
	}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		agent, tool string
		want        bool
	}{{"a", "refund", false}, {"a", "note", true}, {"b", "refund", false}} {
		if got := c.Agents[tc.agent].Tools[tc.tool].NoteToCustomer; got != tc.want {
			t.Errorf("%s/%s: NoteToCustomer = %v, want %v", tc.agent, tc.tool, got, tc.want)
		}
	}
}

// requiresApproval gates a read tool as it gates a write: the posture asks
// whatever the tool's effect, in a trusted run or not.
func TestEvaluateRequiresApprovalOnARead(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `{"agents": {"a": {
		"tools": {"exportCustomers": {"effect": "read", "requiresApproval": true}},
		"steps": [{"id": "s", "tool": "exportCustomers"}]
	}}}`)
	want := agent.Verdict{Outcome: agent.Ask, Rule: -1, Reason: "exportCustomers requires approval (requiresApproval)"}
	for _, untrusted := range []bool{false, true} {
		if got := c.Agents["a"].Evaluate("exportCustomers", decode(t, `{}`), untrusted); !reflect.DeepEqual(got, want) {
			t.Errorf("untrusted %v: Evaluate =\n %+v\nwant\n %+v", untrusted, got, want)
		}
	}
}
