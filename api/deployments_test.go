package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"stead/api"
	"stead/api/wire"
)

func TestDeployAndAgents(t *testing.T) {
	t.Parallel()
	w := setup(t)
	d := w.deploy(w.developer)
	sum := sha256.Sum256([]byte(testHandlers))
	if d.Version != 2 || d.Digest != hex.EncodeToString(sum[:]) || d.BundleSize != int64(len(testHandlers)) ||
		strings.Join(d.Agents, ",") != "leak,plain,refunds" || d.CreatedAt.IsZero() || d.CreatedBy == "" {
		t.Fatalf("deployment %+v", d)
	}

	var list wire.DeploymentList
	w.must(w.do("GET", "/v1/deployments?limit=1", w.owner, nil), 200).decode(&list)
	if len(list.Deployments) != 1 || list.Deployments[0].Version != 2 || list.NextCursor == "" {
		t.Fatalf("first page %+v", list)
	}
	var second wire.DeploymentList
	w.must(w.do("GET", "/v1/deployments?limit=1&cursor="+list.NextCursor, w.owner, nil), 200).decode(&second)
	if len(second.Deployments) != 1 || second.Deployments[0].Version != 1 || second.NextCursor != "" {
		t.Fatalf("second page %+v", second)
	}

	var agents wire.AgentList
	w.must(w.do("GET", "/v1/agents", w.developer, nil), 200).decode(&agents)
	if agents.Deployment != 2 || len(agents.Agents) != 3 {
		t.Fatalf("agents %+v", agents)
	}
	refunds := agents.Agents[2]
	if refunds.Name != "refunds" || refunds.Description == "" || refunds.ApprovalTimeout != "10m0s" || len(refunds.Input) == 0 {
		t.Errorf("refunds %+v", refunds)
	}
	if len(refunds.Tools) != 2 || len(refunds.Steps) != 2 {
		t.Fatalf("refunds tools %+v steps %+v", refunds.Tools, refunds.Steps)
	}
	list0, refund := refunds.Tools[0], refunds.Tools[1]
	if list0.Name != "listOrders" || list0.Effect != "read" || list0.Source != "internal" || list0.RequiresApproval || list0.TimeoutMs != 30000 {
		t.Errorf("listOrders %+v", list0)
	}
	if refund.Name != "refundOrder" || refund.Effect != "write" || !refund.RequiresApproval || refund.TimeoutMs != 5000 ||
		refund.ApprovalTimeout != "10m0s" || !strings.Contains(string(refund.Input), `"required":["orderId","amount"]`) {
		t.Errorf("refundOrder %+v (input %s)", refund, refund.Input)
	}
	step := refunds.Steps[1]
	if b, _ := json.Marshal(step.Input); step.ID != "refund" || step.Tool != "refundOrder" || step.Kind != "tool" ||
		string(b) != `{"amount":"$input.amount","orderId":"$input.orderId"}` {
		t.Errorf("step %+v (input %s)", step, b)
	}
}

func TestNothingDeployed(t *testing.T) {
	t.Parallel()
	w := setup(t)
	_, key, err := api.Bootstrap(context.Background(), w.store, "empty", w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	var agents wire.AgentList
	w.must(w.do("GET", "/v1/agents", key, nil), 200).decode(&agents)
	if agents.Deployment != 0 || agents.Agents == nil || len(agents.Agents) != 0 {
		t.Errorf("agents %+v", agents)
	}
	resp := w.must(w.do("POST", "/v1/agents/plain/runs", key, map[string]any{"endUserId": "alice"}), 404)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "nothing is deployed yet") {
		t.Errorf("message %q", msg)
	}
}

func TestDeployRefusals(t *testing.T) {
	t.Parallel()
	w := setup(t)
	count := func() int {
		var list wire.DeploymentList
		w.must(w.do("GET", "/v1/deployments", w.owner, nil), 200).decode(&list)
		return len(list.Deployments)
	}
	before := count()

	// A config sent as text: problems carry pointer, line and column.
	text := "{\n  \"agents\": {\n    \"x\": {\n      \"tools\": { \"addNote\": { \"effect\": \"delete\" } },\n      \"steps\": [ { \"id\": \"s\", \"tool\": \"addNote\" } ]\n    }\n  }\n}\n"
	resp := w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": text}), 400)
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Details struct {
				Field    string               `json:"field"`
				Problems []wire.ConfigProblem `json:"problems"`
			} `json:"details"`
		} `json:"error"`
	}
	resp.decode(&body)
	ps := body.Error.Details.Problems
	if body.Error.Code != api.CodeInvalidArgument || body.Error.Details.Field != "config" || len(ps) != 1 ||
		ps[0].Pointer != "/agents/x/tools/addNote/effect" || ps[0].Line != 4 || !strings.Contains(ps[0].Message, `"read"`) {
		t.Fatalf("config problems: %s", resp.body)
	}

	// A tool the bundle does not export.
	cfg := strings.Replace(testConfig, `"addNote": { "effect": "write" }`, `"addNote": { "effect": "write" }, "sendMail": { "effect": "write" }`, 1)
	resp = w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 400)
	resp.decode(&body)
	if ps := body.Error.Details.Problems; len(ps) != 1 || ps[0].Pointer != "/agents/plain/tools/sendMail" {
		t.Fatalf("missing export: %s", resp.body)
	}

	// A bundle that does not parse: file and line.
	resp = w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": "export async function f() {\n  return (;\n}\n", "config": json.RawMessage(testConfig)}), 400)
	var bb struct {
		Error struct {
			Details struct {
				Field    string               `json:"field"`
				Problems []wire.BundleProblem `json:"problems"`
			} `json:"details"`
		} `json:"error"`
	}
	resp.decode(&bb)
	if bp := bb.Error.Details.Problems; bb.Error.Details.Field != "bundle" || len(bp) == 0 || bp[0].Line != 2 || bp[0].Code == "" {
		t.Fatalf("bundle problems: %s", resp.body)
	}

	// Missing and mistyped fields, all named at once.
	resp = w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"config": 7}), 400)
	fields := fmt.Sprint(resp.apiErr().Details["fields"])
	if !strings.Contains(fields, "field:bundle") || !strings.Contains(fields, "field:config") {
		t.Errorf("fields %s", fields)
	}
	if after := count(); after != before {
		t.Errorf("refused deployments were stored: %d → %d", before, after)
	}
}

func TestDeployBundleTooLarge(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.MaxBundle = 4 << 10 })
	big := testHandlers + "\n// " + strings.Repeat("x", 5<<10) + "\n"
	resp := w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": big, "config": json.RawMessage(testConfig)}), 413)
	if e := resp.apiErr(); e.Code != api.CodePayloadTooLarge || !strings.Contains(e.Message, "4 KiB") {
		t.Errorf("error %+v", e)
	}
}

// GET /v1/agents describes model and agent steps and the models, never a
// model's API key (only the variable that holds it). A price of 0 (a
// model whose input is free) is shown as 0, not left out.
func TestAgentsDescribeModelSteps(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cfg := `{
  "models": { "default": { "provider": "openai", "baseUrl": "http://127.0.0.1:9/v1", "model": "small",
                           "apiKeyEnv": "GATEWAY_KEY", "prices": { "input": 0, "output": 0.6 } } },
  "agents": { "triage": {
    "tools": { "listOrders": { "effect": "read" } },
    "steps": [
      { "id": "summary", "model": "default", "system": "Be brief.", "prompt": "Summarize {{ $input.text }}" },
      { "id": "loop", "agent": { "model": "default", "instructions": "Help.", "tools": ["listOrders"], "maxTurns": 3, "onDecline": "tell-model" } }
    ] } } }`
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201)
	var list wire.AgentList
	resp := w.must(w.do("GET", "/v1/agents", w.developer, nil), 200)
	resp.decode(&list)
	if len(list.Models) != 1 || list.Models[0].APIKeyEnv != "GATEWAY_KEY" || list.Models[0].Prices == nil || list.Models[0].Prices.Output != 0.6 {
		t.Errorf("models = %+v", list.Models)
	}
	steps := list.Agents[0].Steps
	if steps[0].Kind != "model" || steps[0].Model != "default" || steps[0].Prompt != "Summarize {{ $input.text }}" || steps[0].System != "Be brief." {
		t.Errorf("model step = %+v", steps[0])
	}
	if a := steps[1].Agent; steps[1].Kind != "agent" || a == nil || a.MaxTurns != 3 || a.OnDecline != "tell-model" || len(a.Tools) != 1 {
		t.Errorf("agent step = %+v %+v", steps[1], a)
	}
}
