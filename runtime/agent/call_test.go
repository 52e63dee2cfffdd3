package agent_test

import (
	"testing"

	"stead/runtime/agent"
)

func TestCall(t *testing.T) {
	cfg, err := agent.Parse([]byte(`{"agents": {"support": {
		"tools": {"refundOrder": {"effect": "write", "requiresApproval": true, "input": {"type": "object"}}},
		"steps": [{"id": "one", "tool": "refundOrder", "input": {"orderId": "o1"}}, {"id": "two", "tool": "refundOrder"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ag, _ := cfg.Agent("support")
	if _, ok := ag.Call("missing"); ok {
		t.Fatal("Call of an undeclared tool: ok")
	}
	call, ok := ag.Call("refundOrder")
	if !ok {
		t.Fatal("Call refundOrder: not ok")
	}
	if len(call.Steps) != 1 || call.Steps[0].ID != "refundOrder" || call.Steps[0].Tool != "refundOrder" || call.Steps[0].Kind != agent.ToolStep {
		t.Fatalf("steps = %+v, want one tool step refundOrder", call.Steps)
	}
	if len(ag.Steps) != 2 {
		t.Fatalf("the agent's own steps changed: %d", len(ag.Steps))
	}
	in := map[string]any{"orderId": "o9", "amount": 12}
	got, err := call.Steps[0].ResolveInput(agent.Scope{Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := got.(map[string]any); m["orderId"] != "o9" || m["amount"] != 12 {
		t.Fatalf("input = %v, want the run input", got)
	}
	if s, ok := call.Step("refundOrder"); !ok || s != call.Steps[0] {
		t.Fatal("Step(refundOrder) does not find the call's step")
	}
	if v := call.Evaluate("refundOrder", in, false); v.Outcome != agent.Ask {
		t.Fatalf("policy of the call = %s, want ask (the agent's own)", v.Outcome)
	}
}
