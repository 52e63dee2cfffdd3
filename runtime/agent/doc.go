// Package agent owns the project config file, stead.json: it parses and
// validates it (agents, their tools, policy and steps, and the language
// models steps use), compiles the JSON Schemas in it once, resolves the
// expressions in step inputs and prompt templates, checks tool inputs and
// outputs and model-step answers, and makes the policy decision (allow, ask
// or deny) before any tool call runs.
//
// Parse returns a *Config that is immutable and safe for concurrent use: a
// deployment's config is parsed once and shared by every run. Compiled
// schemas (github.com/santhosh-tekuri/jsonschema/v6) are read-only after
// compilation: Schema.Validate builds fresh validator state per call and
// never writes to the Schema (checked against v6.0.3's validator.go, and by
// this package's -race tests).
//
// # The file
//
//	{
//	  "handlers": "src/index.ts",
//	  "models": {
//	    "default": { "provider": "openai", "baseUrl": "https://api.openai.com/v1",
//	                 "model": "gpt-4o-mini", "apiKeyEnv": "OPENAI_API_KEY",
//	                 "prices": { "input": 0.15, "output": 0.6 } }
//	  },
//	  "agents": {
//	    "refunds": {
//	      "description": "Refunds one order.",
//	      "input": { "type": "object", "required": ["orderId"] },
//	      "approvals": { "timeout": "15m" },
//	      "tools": {
//	        "listOrders":   { "effect": "read" },
//	        "refundOrder":  { "effect": "write", "requiresApproval": true,
//	                          "input": { "type": "object" }, "timeoutMs": 10000,
//	                          "approvals": { "timeout": "1h" } },
//	        "fetchReviews": { "effect": "read", "source": "external" }
//	      },
//	      "policy": [
//	        { "tool": "refundOrder", "decision": "deny", "reason": "no refunds over 500",
//	          "when": { "properties": { "item": { "properties": { "amount": { "exclusiveMinimum": 500 } } } } } }
//	      ],
//	      "steps": [
//	        { "id": "orders", "tool": "listOrders", "input": { "user": "$run.endUserId" } },
//	        { "id": "refund", "tool": "refundOrder", "input": { "item": "$input" } }
//	      ]
//	    }
//	  }
//	}
//
// Unknown keys are errors everywhere, except inside the embedded JSON
// Schemas (input, output, when) and step inputs. A "$schema" key at the top
// level is allowed and ignored, for editors; ConfigSchema returns the schema.
//
// Top level:
//
//   - handlers (string, optional): path of the handler bundle or its source
//     entry, used by the CLI. Not empty when present.
//   - models (object, optional): language models by name (same rule as agent
//     names), for model and agent steps.
//   - agents (object, required, at least one): agents by name. A name is a
//     letter followed by letters, digits, "_" or "-", at most 64 characters.
//
// Model:
//
//   - provider ("openai" | "bedrock", required).
//   - openai: baseUrl (http or https URL, required; "/chat/completions" is
//     appended), model (required), apiKeyEnv (optional: the environment
//     variable holding the API key; without it no key is sent).
//   - bedrock: modelId and region (required), baseUrl (optional endpoint).
//     A key of the other provider is an error.
//   - prices ({"input", "output"} USD per million tokens, optional).
//   - timeoutMs (1..900000, default 120000): one model call, retries
//     included; requestTimeoutMs (default 60000, at most timeoutMs): one
//     request; maxRetries (0..10, default 3); maxTokens; temperature (0..2).
//
// Agent:
//
//   - description (string, optional).
//   - input (JSON Schema, optional): the run input must match it.
//   - approvals.timeout (duration, optional, default 15m =
//     approvals.DefaultTimeout): how long an approval of any of the agent's
//     tools stays pending.
//   - tools (object, optional): tool posture by tool name. A tool name is a
//     JavaScript identifier that is not a reserved word, and must match a
//     function the bundle exports (CheckExports) unless it is MCP-backed.
//   - policy (array, optional): rules, see Policy.
//   - steps (array, required, at least one): what a run does, in order.
//
// Tool:
//
//   - effect ("read" | "write", required).
//   - source ("internal" | "external", default "internal"): external output
//     lowers the run's trust.
//   - requiresApproval (boolean, default false): every call waits for an
//     approval.
//   - description (string, optional), for people and, later, models.
//   - input, output (JSON Schema, optional): checked before and after every
//     call (ValidateInput, ValidateOutput).
//   - timeoutMs (integer 1..900000, default 30000): how long a call may run.
//   - approvals.timeout (duration, optional): wins over the agent's.
//   - mcp (server name, optional) and name (string, default the tool's
//     key): the tool is MCP-backed, the tool name on a server of the
//     top-level mcpServers ({"url", "headersFromEnv": {header: variable}},
//     variables refused as for apiKeyEnv). Its source defaults to
//     "external"; its posture comes from here only. Deploy pins the remote
//     definition and AdoptRemote gives the tool the remote schemas where it
//     declares none.
//
// A tool's approval timeout is its own approvals.timeout, else the agent's,
// else 15m; Tool.ApprovalTimeout holds the result. Durations use Go syntax
// ("90s", "15m", "1h", "1h30m"), must be greater than 0 and at most 168h
// (7 days).
//
// Step: every step has an id (same rule as agent names, unique within the
// agent) and exactly one kind key — "tool", "model" or "agent"; a key of
// another kind is an error naming the kind it belongs to. A tool step:
//
//   - id (string, required).
//   - tool (string, required): a tool declared in the agent's tools.
//   - input (any JSON, optional): the tool's input, with expressions. A step
//     without input calls its tool with an empty object.
//
// A model step asks a model once; its output is the answer:
//
//   - model (string, required): a model declared in models.
//   - system (template, optional), prompt (template, required).
//   - output ("text", the default, or a JSON Schema): with a schema the
//     answer must be JSON matching it (ValidateOutput).
//
// An agent step lets a model call tools until it answers; its output is the
// final answer's text:
//
//   - agent.model (string, required): a model declared in models.
//   - agent.instructions (template, optional): the system prompt.
//   - agent.prompt (template, optional): the first user message; default the
//     run input as JSON.
//   - agent.tools (array of declared tool names, optional): what the model
//     may call. Names must also suit providers: [A-Za-z0-9_-]{1,64}.
//   - agent.maxTurns (1..100, default 8).
//   - agent.onDecline ("fail" | "tell-model", default "fail").
//
// Templates (system, prompt, instructions) are strings in which
// {{ expression }} interpolates, with the same expressions and reference
// rules as step inputs; a "$" in them is plain text.
//
// Policy rule:
//
//   - tool (string, required): a declared tool, or "*" for every tool.
//   - decision ("allow" | "ask" | "deny", required).
//   - when (JSON Schema, optional): the rule applies only to calls whose
//     resolved input matches; without it, to every call of its tool.
//   - reason (string, optional): shown with the decision.
//
// Embedded JSON Schemas (input, output, when) default to Draft 2020-12 (a
// "$schema" of another draft is honoured), are compiled once at Parse, and
// may only $ref their own parts ("#/$defs/item"): nothing is ever loaded
// from a file or the network. The "format" keyword is asserted ("email",
// "uuid", "date-time" … are checked), unknown formats are ignored.
//
// # Expressions
//
// Strings in a step's input may be expressions:
//
//	$input                        the run input
//	$input.a.b                    a property of it
//	$steps.<id>.output            the output of an earlier step
//	$steps.<id>.output.items[0].id  a path into it; items.0.id works too
//	$run.id, $run.endUserId       the run's identity (strings)
//
// A string that is exactly an expression becomes the value, of whatever
// type ({"item": "$input"} passes the whole input object). Expressions
// inside objects and arrays are resolved recursively. A string that starts
// with "$$" is literal text with one "$" removed ("$$5" is "$5"). Any other
// string starting with "$" must be a valid expression: "$foo" is a config
// error. Other strings are literal, except that {{ expression }} inside a
// string interpolates ("Order {{ $input.orderId }}", see Template); \{{
// writes a literal "{{".
//
// Expressions are parsed at Parse. A reference to a step that does not
// exist, to the step itself or to a later step is a config error. At run
// time (Step.ResolveInput), a path that leads nowhere — a missing property,
// an index out of range, a property of a string, a step without output — is
// a *ResolveError naming the part that failed,
// `$steps.orders.output.items: no property "items"`; it never silently
// becomes null. An explicit null in the data resolves to null.
//
// # Values and numbers
//
// Values are JSON-decoded Go values: map[string]any, []any, string, bool,
// nil and numbers. This package decodes numbers as json.Number (exact; a
// large id is not rounded through float64): literal numbers in step inputs
// come out of ResolveInput as json.Number, and DecodeJSON decodes the same
// way for callers. Validation and expressions also accept float64 and Go
// integer types, so values exported from a JavaScript VM work unchanged.
//
// # Validation errors
//
// Parse reports every problem at once as a *ConfigError: each Problem has a
// JSON pointer into stead.json, a message, and the line and column. A JSON
// syntax error is reported alone, with its line and column.
//
// Tool inputs, tool outputs and run inputs that fail their schema are an
// *InputError or *OutputError in the words of the tool contract:
//
//	Invalid arguments for "refundOrder": item.amount: must be a number
//	Invalid result from "refundOrder": refundId: is required
//	Invalid run input for agent "refunds": orderId: is required
//
// Paths join object keys with dots and write array indices in brackets
// (items[0].id); a key that is not an identifier is written ["a b"]. With
// several problems the first follows the prefix and each other one is on a
// line of its own, ordered by path.
//
// # Policy
//
// Agent.Evaluate judges a call before anything runs. The first that applies
// decides:
//
//  1. a matching deny rule: deny (deny always wins);
//  2. a matching ask rule, else the tool's requiresApproval: ask;
//  3. the run is untrusted and the tool's effect is write: ask;
//  4. a matching allow rule: allow, with that rule's reason;
//  5. otherwise: allow.
//
// An allow rule therefore never overrides requiresApproval or the
// untrusted-write check; Parse warns (Config.Warnings) about an allow rule
// for a tool that requires approval.
package agent
