package agent_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"stead/runtime/agent"
)

const modelsConfig = `{
  "models": {
    "default": { "provider": "openai", "baseUrl": "https://gateway.example.com/v1", "model": "gpt-4o-mini",
                 "apiKeyEnv": "GATEWAY_KEY", "prices": { "input": 0.15, "output": 0.6 },
                 "timeoutMs": 30000, "maxRetries": 2, "maxTokens": 800, "temperature": 0 },
    "claude": { "provider": "bedrock", "modelId": "anthropic.claude-3-5-haiku-20241022-v1:0", "region": "us-east-1" }
  },
  "agents": {
    "support": {
      "tools": {
        "listOrders": { "effect": "read", "description": "List orders." },
        "refundOrder": { "effect": "write", "requiresApproval": true }
      },
      "steps": [
        { "id": "summary", "model": "claude", "system": "Be brief.", "prompt": "Summarize {{ $input.text }}" },
        { "id": "facts", "model": "default", "prompt": "Facts of {{ $steps.summary.output }}",
          "output": { "type": "object", "required": ["topic"], "properties": { "topic": { "type": "string" } } } },
        { "id": "triage", "agent": { "model": "default", "instructions": "Help {{ $run.endUserId }}.",
          "prompt": "Topic: {{ $steps.facts.output.topic }}", "tools": ["listOrders", "refundOrder"],
          "maxTurns": 4, "onDecline": "tell-model" } },
        { "id": "done", "tool": "listOrders", "input": { "note": "$steps.triage.output" } }
      ]
    }
  }
}`

func TestParseModelsAndStepKinds(t *testing.T) {
	t.Parallel()
	c := mustParse(t, modelsConfig)
	if got := c.ModelNames(); !slices.Equal(got, []string{"claude", "default"}) {
		t.Fatalf("ModelNames = %v", got)
	}
	m, _ := c.Model("default")
	if m.Provider != agent.OpenAI || m.BaseURL != "https://gateway.example.com/v1" || m.Model != "gpt-4o-mini" ||
		m.APIKeyEnv != "GATEWAY_KEY" || m.Timeout != 30*time.Second || m.RequestTimeout != 30*time.Second ||
		m.MaxRetries != 2 || m.MaxTokens != 800 || m.Temperature == nil || *m.Temperature != 0 {
		t.Errorf("default = %+v", m)
	}
	if got := m.Cost(1_000_000, 2_000_000); got != 0.15+1.2 {
		t.Errorf("Cost = %v", got)
	}
	b, _ := c.Model("claude")
	if b.Provider != agent.Bedrock || b.Region != "us-east-1" || b.Prices != nil || b.Cost(1000, 1000) != 0 ||
		b.Timeout != agent.DefaultModelTimeout || b.RequestTimeout != agent.DefaultModelRequestTimeout || b.MaxRetries != 3 {
		t.Errorf("claude = %+v", b)
	}

	a, _ := c.Agent("support")
	kinds := []agent.StepKind{}
	for _, s := range a.Steps {
		kinds = append(kinds, s.Kind)
	}
	if !slices.Equal(kinds, []agent.StepKind{agent.ModelStep, agent.ModelStep, agent.AgentStep, agent.ToolStep}) {
		t.Fatalf("kinds = %v", kinds)
	}
	sc := agent.Scope{Input: map[string]any{"text": "a long story"}, RunID: "run_1", EndUserID: "alice",
		Outputs: map[string]any{"summary": "short", "facts": map[string]any{"topic": "refunds"}}}
	sum := a.Steps[0]
	if p, _ := sum.Prompt.Resolve(sc); p != "Summarize a long story" || sum.System.String() != "Be brief." || sum.OutputSchema != nil || sum.Model != "claude" {
		t.Errorf("summary step = %+v (prompt %q)", sum, p)
	}
	facts := a.Steps[1]
	if string(facts.OutputSchema) == "" || facts.System != nil {
		t.Errorf("facts = %+v", facts)
	}
	if err := facts.ValidateOutput("support", map[string]any{"topic": 3}); err == nil ||
		err.Error() != `Invalid output of step "facts": topic: must be a string` {
		t.Errorf("ValidateOutput = %v", err)
	}
	if err := sum.ValidateOutput("support", "anything"); err != nil {
		t.Errorf("text step ValidateOutput = %v", err)
	}
	l := a.Steps[2].Loop
	if l == nil || l.Model != "default" || l.MaxTurns != 4 || l.OnDecline != agent.DeclineTellModel ||
		!slices.Equal(l.Tools, []string{"listOrders", "refundOrder"}) {
		t.Fatalf("loop = %+v", l)
	}
	if m := a.Steps[2].Model; m != "default" {
		t.Errorf("agent step's Model = %q, want its loop's model %q", m, "default")
	}
	if p, _ := l.Prompt.Resolve(sc); p != "Topic: refunds" {
		t.Errorf("loop prompt = %q", p)
	}
	if p, _ := l.Instructions.Resolve(sc); p != "Help alice." {
		t.Errorf("instructions = %q", p)
	}
	// Defaults of a minimal loop.
	c = mustParse(t, `{"models": {"m": {"provider": "openai", "baseUrl": "http://127.0.0.1:1/v1", "model": "x"}},
	  "agents": {"a": {"steps": [{"id": "s", "agent": {"model": "m"}}]}}}`)
	l = c.Agents["a"].Steps[0].Loop
	if l.MaxTurns != agent.DefaultMaxTurns || l.OnDecline != agent.DeclineFail || l.Prompt != nil || l.Instructions != nil || len(l.Tools) != 0 {
		t.Errorf("minimal loop = %+v", l)
	}
}

// TestAgentStepBounds: maxTurns may be 100, and a tool name of 64
// characters may be offered to a model, one of 65 not.
func TestAgentStepBounds(t *testing.T) {
	t.Parallel()
	long64, long65 := strings.Repeat("t", 64), strings.Repeat("u", 65)
	c := mustParse(t, `{"models": {"m": {"provider": "openai", "baseUrl": "http://127.0.0.1:1/v1", "model": "x"}},
	  "agents": {"x": {"tools": {"`+long64+`": {"effect": "read"}},
	    "steps": [{"id": "a", "agent": {"model": "m", "tools": ["`+long64+`"], "maxTurns": 100}}]}}}`)
	if l := c.Agents["x"].Steps[0].Loop; l.MaxTurns != 100 || !slices.Equal(l.Tools, []string{long64}) {
		t.Errorf("Loop = %+v, want maxTurns 100 and the 64-character tool", l)
	}
	ps := problems(t, `{"models": {"m": {"provider": "openai", "baseUrl": "http://127.0.0.1:1/v1", "model": "x"}},
	  "agents": {"x": {"tools": {"`+long65+`": {"effect": "read"}},
	    "steps": [{"id": "a", "agent": {"model": "m", "tools": ["`+long65+`"]}}]}}}`)
	want := `/agents/x/steps/0/agent/tools/0: tool "` + long65 + `" cannot be offered to a model: model providers accept tool names of letters, digits, "_" and "-" only (at most 64 characters)`
	if len(ps) != 1 || ps[0].String() != want {
		t.Errorf("problems = %v\n want %s", ps, want)
	}
}

func TestParseModelProblems(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "provider settings",
			src: `{"models": {
			  "a": {"provider": "openai", "model": "x", "modelId": "y"},
			  "b": {"provider": "bedrock", "region": "us-east-1", "apiKeyEnv": "K"},
			  "c": {"provider": "gemini"},
			  "d": {"provider": "openai", "baseUrl": "ftp://x", "model": "m", "apiKeyEnv": "1BAD", "requestTimeoutMs": 5000, "timeoutMs": 1000},
			  "e": {"provider": "openai", "baseUrl": "https://user:pw@x.example/v1", "model": "m", "prices": {"input": -1}},
			  "bad name": {"provider": "openai", "baseUrl": "https://x.example/v1", "model": "m", "maxRetries": 11}
			}, "agents": {"x": {"steps": [{"id": "s", "tool": "t"}], "tools": {"t": {"effect": "read"}}}}}`,
			want: []string{
				`/models/a/baseUrl: is required`,
				`/models/a/modelId: "modelId" is a setting of provider "bedrock"; this model's provider is "openai"`,
				`/models/b/modelId: is required`,
				`/models/b/apiKeyEnv: "apiKeyEnv" is a setting of provider "openai"; this model's provider is "bedrock"`,
				`/models/c/provider: must be one of "openai", "bedrock"`,
				`/models/d/baseUrl: must be an http or https URL such as https://api.openai.com/v1 (got "ftp://x")`,
				`/models/d/apiKeyEnv: must match the pattern /^[A-Za-z_][A-Za-z0-9_]*$/`,
				`/models/d/requestTimeoutMs: must be at most timeoutMs (1000), which bounds the whole call`,
				`/models/e/baseUrl: must not hold credentials; name the environment variable that holds the API key in apiKeyEnv`,
				`/models/e/prices/input: must be at least 0`,
				`/models/e/prices/output: is required`,
				`/models/bad name: invalid name "bad name": must start with a letter and use only letters, digits, "_" and "-" (at most 64 characters)`,
				`/models/bad name/maxRetries: must be at most 10`,
			},
		},
		{
			name: "steps",
			src: `{"models": {"m": {"provider": "openai", "baseUrl": "http://127.0.0.1:1/v1", "model": "x"}},
			  "agents": {"x": {
			    "tools": {"t": {"effect": "read"}, "t$": {"effect": "read"}},
			    "steps": [
			      {"id": "a", "model": "gpt", "prompt": "hi {{ $steps.b.output }}"},
			      {"id": "b", "model": "m"},
			      {"id": "c", "model": "m", "prompt": "p", "input": {}, "output": "json"},
			      {"id": "d", "tool": "t", "model": "m"},
			      {"id": "e", "agent": {"model": "nope", "tools": ["t", "u", "t$"], "maxTurns": 0, "onDecline": "ask", "instructions": "{{ $foo }}"}, "prompt": "x", "system": "y"},
			      {"id": "f", "agent": {"tools": ["t"]}},
			      {"id": "g", "tool": "t", "output": "text"},
			      {"id": "h", "system": "s", "prompt": "p"}
			    ]}}}`,
			want: []string{
				`/agents/x/steps/0/model: model "gpt" is not declared in /models (declared: m)`,
				`/agents/x/steps/0/prompt: $steps.b.output refers to step "b", which runs later (steps run in order); a step can only use the output of an earlier step`,
				`/agents/x/steps/1/prompt: is required: it is what the step asks its model, as in "Summarize {{ $input.text }}"`,
				`/agents/x/steps/2/input: "input" belongs to tool steps; this is a model step (it has "model"); a model step's prompt is a template, as in "Summarize {{ $input.text }}"`,
				`/agents/x/steps/2/output: must be "text"`,
				`/agents/x/steps/3: a step has exactly one of "tool", "model" or "agent"; this one has "tool" and "model": split it into one step per kind`,
				`/agents/x/steps/4/agent/model: model "nope" is not declared in /models (declared: m)`,
				`/agents/x/steps/4/agent/instructions: "$foo" is not an expression: expressions are $input, $steps.<id>.output, $run.id and $run.endUserId; for text that starts with "$", write "$$" ("$$5" is the text "$5")`,
				`/agents/x/steps/4/agent/tools/1: tool "u" is not declared in /agents/x/tools (declared: t, t$)`,
				`/agents/x/steps/4/agent/tools/2: tool "t$" cannot be offered to a model: model providers accept tool names of letters, digits, "_" and "-" only (at most 64 characters)`,
				`/agents/x/steps/4/agent/maxTurns: must be at least 1`,
				`/agents/x/steps/4/agent/onDecline: must be one of "fail", "tell-model"`,
				`/agents/x/steps/4/prompt: "prompt" belongs to model steps; this is an agent step (it has "agent"); an agent step's prompt and instructions go inside "agent"`,
				`/agents/x/steps/4/system: "system" belongs to model steps; this is an agent step (it has "agent"); an agent step's prompt and instructions go inside "agent"`,
				`/agents/x/steps/5/agent/model: is required`,
				`/agents/x/steps/6/output: "output" belongs to model steps; this is a tool step (it has "tool")`,
				`/agents/x/steps/7/model: is required`,
			},
		},
		{
			name: "reserved key variables",
			src: `{"models": {
			  "a": {"provider": "openai", "baseUrl": "https://evil.example/v1", "model": "m", "apiKeyEnv": "AWS_SECRET_ACCESS_KEY"},
			  "b": {"provider": "openai", "baseUrl": "https://x.example/v1", "model": "m", "apiKeyEnv": "stead_owner_key"},
			  "c": {"provider": "openai", "baseUrl": "https://x.example/v1", "model": "m", "apiKeyEnv": "OPENAI_API_KEY"},
			  "d": {"provider": "openai", "baseUrl": "https://x.example/v1", "model": "m", "apiKeyEnv": "LAMBDA_RUNTIME_API"},
			  "e": {"provider": "openai", "baseUrl": "https://x.example/v1", "model": "m", "apiKeyEnv": "_HANDLER"}
			}, "agents": {"x": {"steps": [{"id": "s", "tool": "t"}], "tools": {"t": {"effect": "read"}}}}}`,
			want: []string{
				`/models/a/apiKeyEnv: "AWS_SECRET_ACCESS_KEY" is a variable the platform or Stead sets (AWS_…, LAMBDA_…, STEAD_…, _…), never a model key: a config could send the server's own credentials to its baseUrl; put the key in a variable of your own, e.g. OPENAI_API_KEY`,
				`/models/b/apiKeyEnv: "stead_owner_key" is a variable the platform or Stead sets (AWS_…, LAMBDA_…, STEAD_…, _…), never a model key: a config could send the server's own credentials to its baseUrl; put the key in a variable of your own, e.g. OPENAI_API_KEY`,
				`/models/d/apiKeyEnv: "LAMBDA_RUNTIME_API" is a variable the platform or Stead sets (AWS_…, LAMBDA_…, STEAD_…, _…), never a model key: a config could send the server's own credentials to its baseUrl; put the key in a variable of your own, e.g. OPENAI_API_KEY`,
				`/models/e/apiKeyEnv: "_HANDLER" is a variable the platform or Stead sets (AWS_…, LAMBDA_…, STEAD_…, _…), never a model key: a config could send the server's own credentials to its baseUrl; put the key in a variable of your own, e.g. OPENAI_API_KEY`,
			},
		},
		{
			name: "no models section",
			src:  `{"agents": {"x": {"steps": [{"id": "a", "model": "m", "prompt": "p"}]}}}`,
			want: []string{`/agents/x/steps/0/model: model "m" is not declared in /models (no models are declared; add a "models" section)`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantProblems(t, tc.src, tc.want)
		})
	}
}

func TestModelStepOutputErrorCode(t *testing.T) {
	t.Parallel()
	c := mustParse(t, modelsConfig)
	err := c.Agents["support"].Steps[1].ValidateOutput("support", map[string]any{})
	var oe *agent.OutputError
	if !errors.As(err, &oe) || oe.Step != "facts" || oe.Tool != "" || !strings.Contains(err.Error(), "topic: is required") {
		t.Fatalf("err = %v", err)
	}
}
