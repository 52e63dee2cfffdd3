package agent_test

import (
	"fmt"
	"sync"
	"testing"

	"stead/runtime/agent"
)

// TestConcurrentUse shares one parsed Config between many goroutines, as a
// cached deployment is shared by many runs. Run with -race: any write to
// shared state (the config, its compiled schemas, a scope) is a failure.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `{"agents": {"refunds": {
		"input": {"type": "object", "required": ["orderId"]},
		"tools": {
			"listOrders": {"effect": "read", "output": {"type": "object", "required": ["items"]}},
			"refundOrder": {"effect": "write", "input": {"type": "object", "required": ["item"],
				"properties": {"item": {"type": "object", "properties": {"amount": {"type": "number"}}}}}}},
		"policy": [
			{"tool": "refundOrder", "decision": "deny", "when": {"properties": {"item": {"properties": {"amount": {"exclusiveMinimum": 500}}}}}},
			{"tool": "refundOrder", "decision": "allow", "reason": "small", "when": {"properties": {"item": {"properties": {"amount": {"maximum": 20}}}}}}],
		"steps": [
			{"id": "orders", "tool": "listOrders", "input": {"user": "$run.endUserId", "tags": ["a", {"b": "$input.orderId"}]}},
			{"id": "refund", "tool": "refundOrder", "input": {"item": "$steps.orders.output.items[0]", "note": "run {{ $run.id }}"}}]}}}`)
	a := c.Agents["refunds"]
	refund, _ := a.Step("refund")
	orders, _ := a.Step("orders")
	tool, _ := a.Tool("refundOrder")
	list, _ := a.Tool("listOrders")
	// One scope shared by every goroutine, as a cached output might be.
	shared := agent.Scope{
		Input:   decode(t, `{"orderId": "o1"}`),
		Outputs: map[string]any{"orders": decode(t, `{"items": [{"id": "o1", "amount": 12}]}`)},
		RunID:   "run_1", EndUserID: "u1",
	}

	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 100 {
				untrusted := (g+i)%2 == 0
				in, err := refund.ResolveInput(shared)
				if err != nil {
					t.Errorf("ResolveInput: %v", err)
					return
				}
				// Callers own the resolved input and may change it.
				in.(map[string]any)["item"].(map[string]any)["amount"] = float64(g*100 + i)
				if err := tool.ValidateInput(in); err != nil {
					t.Errorf("ValidateInput: %v", err)
				}
				d := a.Evaluate("refundOrder", in, untrusted)
				amount := g*100 + i
				switch {
				case amount > 500 && d.Outcome != agent.Deny,
					amount <= 500 && untrusted && d.Outcome != agent.Ask,
					amount <= 20 && !untrusted && (d.Outcome != agent.Allow || d.Rule != 1):
					t.Errorf("Evaluate(amount %d, untrusted %v) = %+v", amount, untrusted, d)
				}
				if _, err := orders.ResolveInput(shared); err != nil {
					t.Errorf("ResolveInput orders: %v", err)
				}
				if err := list.ValidateOutput(map[string]any{"items": []any{}}); err != nil {
					t.Errorf("ValidateOutput: %v", err)
				}
				if err := a.ValidateRunInput(map[string]any{"x": fmt.Sprint(i)}); err == nil {
					t.Error("ValidateRunInput accepted a bad input")
				}
				if err := tool.ValidateInput(map[string]any{"item": map[string]any{"amount": "x"}}); err == nil {
					t.Error("ValidateInput accepted a bad input")
				}
			}
		})
	}
	wg.Wait()
	if got := shared.Outputs["orders"].(map[string]any)["items"].([]any)[0].(map[string]any)["amount"]; fmt.Sprint(got) != "12" {
		t.Errorf("shared scope changed: amount = %v", got)
	}
}

func BenchmarkParse(b *testing.B) {
	data := readFile(b, "stead.json")
	for b.Loop() {
		if _, err := agent.Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvaluateAndResolve(b *testing.B) {
	a := mustParse(b, string(readFile(b, "stead.json"))).Agents["refunds"]
	step, _ := a.Step("refund")
	tool, _ := a.Tool("refundOrder")
	sc := agent.Scope{Input: map[string]any{"id": "o1", "amount": 5.0}}
	for b.Loop() {
		in, err := step.ResolveInput(sc)
		if err != nil {
			b.Fatal(err)
		}
		if err := tool.ValidateInput(in); err != nil {
			b.Fatal(err)
		}
		a.Evaluate("refundOrder", in, false)
	}
}
