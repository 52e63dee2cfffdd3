package agent

// Call returns the agent as it runs one call of its tool name — an MCP
// client's tools/call: the same tools, policy and approvals, and a single
// tool step, whose id is the tool's name and whose input is the run input
// ($input). The lease, the gate and the trace of that step are those of any
// tool step. ok is false when the agent has no such tool.
func (a *Agent) Call(tool string) (*Agent, bool) {
	if _, ok := a.Tools[tool]; !ok {
		return nil, false
	}
	in, err := ParseExpr("$input")
	if err != nil {
		panic("agent: $input does not parse: " + err.Error())
	}
	call := *a
	call.Steps = []*Step{{Index: 0, ID: tool, Kind: ToolStep, Tool: tool, Input: "$input", input: exprNode{ptr: "/input", e: in}}}
	call.stepAt = map[string]int{tool: 0}
	return &call, true
}
