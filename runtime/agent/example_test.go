package agent_test

import (
	"fmt"

	"stead/runtime/agent"
)

func ExampleParse() {
	cfg, err := agent.Parse([]byte(`{
	  "agents": {
	    "refunds": {
	      "tools": {
	        "listOrders":  { "effect": "read" },
	        "refundOrder": { "effect": "write", "requiresApproval": true,
	                         "input": { "type": "object", "required": ["item"] } }
	      },
	      "steps": [
	        { "id": "orders", "tool": "listOrders", "input": { "user": "$run.endUserId" } },
	        { "id": "refund", "tool": "refundOrder", "input": { "item": "$steps.orders.output.items[0]" } }
	      ]
	    }
	  }
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	a, _ := cfg.Agent("refunds")
	step := a.Steps[1]
	input, err := step.ResolveInput(agent.Scope{
		Outputs:   map[string]any{"orders": map[string]any{"items": []any{map[string]any{"id": "o1"}}}},
		EndUserID: "user_7",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	tool, _ := a.Tool(step.Tool)
	fmt.Println("input:", input, "valid:", tool.ValidateInput(input) == nil)
	fmt.Printf("%+v\n", a.Evaluate(step.Tool, input, false))
	fmt.Println(tool.ValidateInput(map[string]any{}))

	_, err = agent.Parse([]byte(`{"agents": {"refunds": {"tools": {"refundOrder": {"effect": "wrte"}},
	  "steps": [{"id": "refund", "tool": "refundOrdr"}]}}}`))
	fmt.Println(err)
	// Output:
	// input: map[item:map[id:o1]] valid: true
	// {Outcome:ask Reason:refundOrder requires approval (requiresApproval) Rule:-1 Untrusted:false SeparatedBy: Approvers:[] ApproversOn: Remembered:}
	// Invalid arguments for "refundOrder": item: is required
	// /agents/refunds/tools/refundOrder/effect: must be one of "read", "write"
	// /agents/refunds/steps/0/tool: tool "refundOrdr" is not declared in /agents/refunds/tools (declared: refundOrder)
}
