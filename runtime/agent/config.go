package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"stead/approvals"
)

// Defaults and limits.
const (
	// DefaultToolTimeout is how long a tool call may run when timeoutMs is
	// not set.
	DefaultToolTimeout = 30 * time.Second
	// MaxToolTimeout is the largest timeoutMs (15 minutes).
	MaxToolTimeout = 15 * time.Minute
	// MaxApprovalTimeout is the longest approvals.timeout (7 days).
	MaxApprovalTimeout = 7 * 24 * time.Hour
)

// Config is a parsed, validated stead.json. It is immutable after Parse and
// safe for concurrent use by any number of goroutines; callers must not
// modify its maps, slices or raw values.
type Config struct {
	// Handlers is the path of the handler bundle or source entry, "" if
	// not set.
	Handlers string
	// Agents holds the agents by name.
	Agents map[string]*Agent
	// Models holds the language models by name (empty when the file has no
	// "models").
	Models map[string]*Model
	// MCPServers holds the remote MCP servers by name (empty when the file
	// has no "mcpServers").
	MCPServers map[string]*MCPServer
	// Branding is how the project presents itself to its customers on the
	// status page and in embed.js (nil when the file has no "branding").
	Branding *Branding
	// Raw is the file as parsed.
	Raw json.RawMessage
	// Warnings are things that are allowed but probably not meant, such as
	// an allow rule that can never take effect. Parse succeeds with them.
	Warnings []Problem

	pos *positions
	// groupRefs are the pointers of every "group" the config's approvers
	// name, by group.
	groupRefs map[string][]string
}

// Branding is the project's name, logo and accent colour as its customers
// see them. The schema checks each value (a logo is an https: or data:image
// URL, the accent a #rrggbb colour), so a parsed Branding is safe to show.
type Branding struct {
	Name        string
	LogoURL     string
	AccentColor string
}

// brandingOf reads "branding" after the schema checked it.
func brandingOf(v any) *Branding {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	b := &Branding{}
	b.Name, _ = m["name"].(string)
	b.LogoURL, _ = m["logoUrl"].(string)
	b.AccentColor, _ = m["accentColor"].(string)
	return b
}

// Effect is a tool's declared effect.
type Effect string

// The effects.
const (
	EffectRead  Effect = "read"
	EffectWrite Effect = "write"
)

// Source says where a tool's output comes from.
type Source string

// The sources.
const (
	// SourceInternal output comes from the project's own systems.
	SourceInternal Source = "internal"
	// SourceExternal output comes from outside (web pages, emails,
	// reviews); it lowers the run's trust.
	SourceExternal Source = "external"
)

// Agent is one entry of "agents".
type Agent struct {
	Name        string
	Description string
	// InputSchema is the raw JSON Schema of the run input, nil if none.
	InputSchema json.RawMessage
	// Tools holds the tools by name.
	Tools map[string]*Tool
	// Steps in run order.
	Steps []*Step
	// Policy rules in file order.
	Policy []*Rule
	// ApprovalTimeout is the agent's approvals.timeout, or
	// approvals.DefaultTimeout when not set. Each tool's ApprovalTimeout is
	// already resolved against it.
	ApprovalTimeout time.Duration

	input  *jsonschema.Schema
	stepAt map[string]int
	// policyRaw is the policy array as written, for PostureDigest.
	policyRaw json.RawMessage
}

// Tool is the posture of one tool: one function the bundle exports, or a
// remote MCP server's tool (MCP set).
type Tool struct {
	// Name is the tool name, which is also the name of the exported handler
	// (of a bundle tool).
	Name string
	// MCP, when set, makes the tool MCP-backed: a call goes to that remote
	// tool instead of a handler. Nil for a bundle tool.
	MCP *MCPRef
	// Agent is the name of the agent that declares the tool.
	Agent       string
	Description string
	// Label is what customers read for the tool ("Refund" for refundOrder)
	// on the status page and in embed.js; "" when not set.
	Label  string
	Effect Effect
	// Source is SourceInternal unless the config says external
	// (SourceExternal for an MCP-backed tool unless it says internal).
	Source           Source
	RequiresApproval bool
	// Approvers is who must approve the tool's calls (approvals.approvers,
	// the tool's else its agent's); none means any member who may decide.
	// The Eligible lists are empty: the engine fills them in when it asks.
	Approvers []approvals.Requirement
	// Notices are the reminders, escalation and expiry warning of the
	// tool's approvals (approvals.remind, escalateAfter/escalateTo,
	// expiringAt: each the tool's, else its agent's), as durations after
	// the request.
	Notices []approvals.Notice
	// RememberMax is the longest a remembered decision on the tool's calls
	// may last (approvals.remember.max, the tool's else its agent's); zero
	// when the tool does not opt in.
	RememberMax time.Duration
	// NoteToCustomer: a deny note on this tool's approvals is shown to the
	// customer (approvals.noteToCustomer, the tool's else its agent's).
	NoteToCustomer bool
	// Timeout is how long one call may run (timeoutMs; default 30s).
	Timeout time.Duration
	// ApprovalTimeout is how long an approval of a call stays pending: the
	// tool's approvals.timeout, else the agent's, else
	// approvals.DefaultTimeout.
	ApprovalTimeout time.Duration
	// InputSchema and OutputSchema are the raw JSON Schemas (nil if not
	// set), for describing the tool to a model.
	InputSchema, OutputSchema json.RawMessage

	input, output *jsonschema.Schema
	// separate is the tool's separateFrom ("requester", "none"), the
	// tool's else its agent's; approversOn says where Approvers is set.
	separate    setting
	approversOn string
	// raw is the tool's posture as written, for PostureDigest; pinned the
	// fingerprint of an MCP-backed tool's remote definition (AdoptRemote).
	raw    json.RawMessage
	pinned string
}

// setting is an approvals setting as a tool has it: its value and where it
// was set ("tool refundOrder", "agent refunds"); both "" when unset.
type setting struct{ value, on string }

// StepKind says what a step does.
type StepKind string

// The step kinds. A step object has exactly one kind key: "tool", "model"
// or "agent".
const (
	// ToolStep calls one tool: {"id", "tool", "input"}.
	ToolStep StepKind = "tool"
	// ModelStep asks a model once: {"id", "model", "system", "prompt",
	// "output"}. Its output is the answer: a string, or the JSON value that
	// matched the output schema.
	ModelStep StepKind = "model"
	// AgentStep lets a model call tools until it answers: {"id", "agent":
	// {"model", "instructions", "prompt", "tools", "maxTurns",
	// "onDecline"}}. Its output is the model's final text.
	AgentStep StepKind = "agent"
)

// OnDecline says what a refused call of an agent step does.
type OnDecline string

// The OnDecline values.
const (
	// DeclineFail fails the run: approval-denied, approval-expired or
	// policy-denied.
	DeclineFail OnDecline = "fail"
	// DeclineTellModel gives the model the refusal as the call's result and
	// lets it go on.
	DeclineTellModel OnDecline = "tell-model"
)

// Loop is the "agent" of an AgentStep.
type Loop struct {
	// Model names the model (a key of Config.Models).
	Model string
	// Instructions is the system prompt, nil when not set.
	Instructions *Template
	// Prompt is the first user message, nil when not set (the run input
	// as JSON is sent then).
	Prompt *Template
	// Tools are the tools offered to the model, in config order.
	Tools []string
	// MaxTurns is how many times the model may answer (default 8).
	MaxTurns int
	// OnDecline is DeclineFail (default) or DeclineTellModel.
	OnDecline OnDecline
}

// Step is one element of an agent's steps.
type Step struct {
	// Index is the step's position in steps.
	Index int
	// ID is unique among the agent's steps.
	ID   string
	Kind StepKind
	// Tool is the tool a ToolStep calls.
	Tool string
	// Input is the step's input as written (JSON values, numbers as
	// json.Number, expressions still as strings); nil when the step has no
	// input. Use ResolveInput to get the input of a call.
	Input any
	// Model names the model of a ModelStep or AgentStep.
	Model string
	// System and Prompt are a ModelStep's prompts (System nil when not set).
	System, Prompt *Template
	// OutputSchema is a ModelStep's output JSON Schema, nil for a text
	// answer.
	OutputSchema json.RawMessage
	// Loop is an AgentStep's settings.
	Loop *Loop

	input  node
	output *jsonschema.Schema
}

// Parse parses and validates a stead.json. It returns a *ConfigError
// listing every problem found — JSON syntax (with line and column), the
// config schema, names, durations, expressions, references between steps,
// tools and policy, and the embedded JSON Schemas — each with its JSON
// pointer. A syntax error is reported alone, since nothing else can be
// checked.
func Parse(data []byte) (*Config, error) {
	doc, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	p := &parser{pos: scanPositions(data)}

	cs := configSchema()
	if err := cs.schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, fmt.Errorf("validate config: %w", err)
		}
		tr := translator{instance: doc, unknownKey: func(schemaURL, key string) string {
			allowed := cs.allowedKeys(schemaURL)
			if m, ok := didYouMean(key, allowed); ok {
				return fmt.Sprintf("unknown key %q; did you mean %q?", key, m)
			}
			return fmt.Sprintf("unknown key %q (allowed here: %s)", key, strings.Join(allowed, ", "))
		}}
		for _, is := range tr.issues(ve) {
			p.report(jsonPointer(is.loc...), is.msg)
		}
	}

	c := p.config(doc)
	if len(p.problems) > 0 || len(p.pos.duplicates) > 0 {
		return nil, &ConfigError{Problems: p.pos.locate(p.problems, p.pos.duplicates...)}
	}
	c.Raw = bytes.Clone(data)
	c.Warnings = p.pos.locate(p.warnings)
	c.pos = p.pos
	c.groupRefs = p.groupRefs
	return c, nil
}

// Agent returns the agent with the given name.
func (c *Config) Agent(name string) (*Agent, bool) {
	a, ok := c.Agents[name]
	return a, ok
}

// AgentNames returns the agent names, sorted.
func (c *Config) AgentNames() []string { return slices.Sorted(maps.Keys(c.Agents)) }

// CheckExports checks that every declared tool names a function the bundle
// exports (MCP-backed tools are not exports and are not checked). It returns a *ConfigError with one problem per missing tool,
// e.g. `/agents/refunds/tools/refundOrdr: config names tool "refundOrdr",
// bundle exports: listOrders, refundOrder`.
func (c *Config) CheckExports(functions []string) error {
	have := make(map[string]bool, len(functions))
	for _, f := range functions {
		have[f] = true
	}
	exports := "nothing"
	if len(have) > 0 {
		exports = strings.Join(slices.Sorted(maps.Keys(have)), ", ")
	}
	var problems []Problem
	for _, an := range c.AgentNames() {
		a := c.Agents[an]
		for _, tn := range a.ToolNames() {
			if !have[tn] && a.Tools[tn].MCP == nil {
				problems = append(problems, Problem{
					Pointer: jsonPointer("agents", an, "tools", tn),
					Message: fmt.Sprintf("config names tool %q, bundle exports: %s", tn, exports),
				})
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	if c.pos != nil {
		problems = c.pos.locate(problems)
	}
	return &ConfigError{Problems: problems}
}

// CheckGroups checks that every group the config's approvers name is a
// group of the project (have reports whether one is); a *ConfigError names
// each that is not, where it is named.
func (c *Config) CheckGroups(have func(name string) (bool, error)) error {
	var problems []Problem
	for _, g := range slices.Sorted(maps.Keys(c.groupRefs)) {
		ok, err := have(g)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		for _, ptr := range c.groupRefs[g] {
			problems = append(problems, Problem{Pointer: ptr, Message: fmt.Sprintf(
				"group %q does not exist in this project; an owner creates it first (stead groups create %s --member …): groups are project settings, never part of stead.json", g, g)})
		}
	}
	if len(problems) == 0 {
		return nil
	}
	if c.pos != nil {
		problems = c.pos.locate(problems)
	}
	return &ConfigError{Problems: problems}
}

// Tool returns the tool with the given name.
func (a *Agent) Tool(name string) (*Tool, bool) {
	t, ok := a.Tools[name]
	return t, ok
}

// ToolNames returns the tool names, sorted.
func (a *Agent) ToolNames() []string { return slices.Sorted(maps.Keys(a.Tools)) }

// Step returns the step with the given id.
func (a *Agent) Step(id string) (*Step, bool) {
	i, ok := a.stepAt[id]
	if !ok {
		return nil, false
	}
	return a.Steps[i], true
}

// ResolveInput builds the input of one call of the step: the raw input with
// every expression replaced by its value and every template rendered.
//
// A string that is exactly an expression becomes the value, whatever its
// type; objects and arrays are resolved recursively; "$$" at the start of a
// string stands for a literal "$". A step without input resolves to an
// empty object. The result never shares memory with the config or sc. An
// expression that cannot be resolved (a missing property, an index out of
// range, a step without output) is a *ResolveError naming it; it never
// becomes null.
func (s *Step) ResolveInput(sc Scope) (any, error) {
	if s.input == nil {
		return map[string]any{}, nil
	}
	v, err := s.input.resolve(sc)
	if err != nil {
		var re *ResolveError
		if errors.As(err, &re) {
			re.Step = s.ID
		}
		return nil, err
	}
	return v, nil
}

// parser builds a Config, collecting every problem on the way. It is
// tolerant: where the config schema already reported a value of the wrong
// type, the value is skipped, not reported again.
type parser struct {
	pos       *positions
	problems  []Problem
	warnings  []Problem
	groupRefs map[string][]string
}

func (p *parser) report(ptr, msg string) {
	p.problems = append(p.problems, Problem{Pointer: ptr, Message: msg})
}

func (p *parser) warn(ptr, msg string) {
	p.warnings = append(p.warnings, Problem{Pointer: ptr, Message: msg})
}

// raw returns the JSON text of the value at ptr, compacted.
func (p *parser) raw(ptr string, v any) json.RawMessage {
	if span, ok := p.pos.spans[ptr]; ok {
		var b bytes.Buffer
		if json.Compact(&b, p.pos.data[span[0]:span[1]]) == nil {
			return b.Bytes()
		}
	}
	b, _ := json.Marshal(v)
	return b
}

func (p *parser) config(doc any) *Config {
	c := &Config{Agents: map[string]*Agent{}}
	root, _ := doc.(map[string]any)
	c.Handlers, _ = root["handlers"].(string)
	c.Models = p.models(root)
	c.MCPServers = p.mcpServers(root)
	c.Branding = brandingOf(root["branding"])
	agents, _ := root["agents"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		if am, ok := agents[name].(map[string]any); ok {
			c.Agents[name] = p.agent(name, am, jsonPointer("agents", name), modelRefs(c.Models), c.MCPServers)
		}
	}
	return c
}

func (p *parser) agent(name string, m map[string]any, ptr string, models modelRefs, servers map[string]*MCPServer) *Agent {
	a := &Agent{Name: name, Tools: map[string]*Tool{}, stepAt: map[string]int{}}
	a.Description, _ = m["description"].(string)
	if v, ok := m["input"]; ok {
		a.input = p.schema(child(ptr, "input"), v)
		a.InputSchema = p.raw(child(ptr, "input"), v)
	}
	a.ApprovalTimeout = approvals.DefaultTimeout
	if d, ok := p.approvalTimeout(child(ptr, "approvals"), m["approvals"]); ok {
		a.ApprovalTimeout = d
	}
	agentPtr := child(ptr, "approvals")
	agentOn := "agent " + name
	agentSeparate := p.separate(m["approvals"], agentOn)
	agentNote, _ := approvalsSetting(m["approvals"], "noteToCustomer").(bool)
	agentApprovers := p.approvers(child(agentPtr, "approvers"), approvalsSetting(m["approvals"], "approvers"))
	agentRemember, _ := p.remember(child(agentPtr, "remember"), approvalsSetting(m["approvals"], "remember"))
	agentNotices := p.notices(agentPtr, m["approvals"])

	tools, isObject := m["tools"].(map[string]any)
	for _, tn := range slices.Sorted(maps.Keys(tools)) {
		tptr := jsonPointer("agents", name, "tools", tn)
		tm, isTool := tools[tn].(map[string]any)
		nameProblem := toolNameProblem
		if _, mcp := tm["mcp"]; mcp {
			nameProblem = mcpToolNameProblem
		}
		if msg := nameProblem(tn); msg != "" {
			p.report(tptr, msg)
		}
		if isTool {
			t := p.tool(a, tn, tm, tptr)
			p.mcpTool(t, tm, tptr, servers)
			a.Tools[tn] = t
			if t.separate.value == "" {
				t.separate = agentSeparate
			}
			if v, ok := approvalsSetting(tm["approvals"], "noteToCustomer").(bool); ok {
				t.NoteToCustomer = v
			} else {
				t.NoteToCustomer = agentNote
			}
			if t.Approvers == nil && agentApprovers != nil {
				t.Approvers, t.approversOn = agentApprovers, agentOn
			}
			if _, ok := approvalsSetting(tm["approvals"], "remember").(map[string]any); !ok {
				t.RememberMax = agentRemember
			}
			t.Notices = p.notices(child(tptr, "approvals"), tm["approvals"]).over(agentNotices).list(t.ApprovalTimeout)
			if t.Approvers != nil && t.RememberMax > 0 {
				p.warn(child(tptr, "approvals"), fmt.Sprintf(
					"remember never applies to %s: its approvals have approvers (%s), and a remembered decision never stands in for a quorum", tn, t.approversOn))
			}
		}
	}
	refs := toolRefs{
		declared: tools,
		// When "tools" is there but not an object, the schema has said so;
		// references are not checked against it.
		check: isObject || m["tools"] == nil,
		ptr:   child(ptr, "tools"),
	}
	steps, _ := m["steps"].([]any)
	p.steps(a, steps, refs, models)
	policy, _ := m["policy"].([]any)
	p.policy(a, policy, refs)
	a.policyRaw = p.raw(child(ptr, "policy"), policy)
	return a
}

// toolRefs checks references to an agent's declared tools.
type toolRefs struct {
	declared map[string]any
	check    bool
	ptr      string // of the agent's "tools"
}

// missing says why name is not a declared tool, or "".
func (r toolRefs) missing(name string) string {
	if _, ok := r.declared[name]; ok || !r.check {
		return ""
	}
	list := "no tools are declared"
	if len(r.declared) > 0 {
		list = "declared: " + strings.Join(slices.Sorted(maps.Keys(r.declared)), ", ")
	}
	return fmt.Sprintf("tool %q is not declared in %s (%s)", name, r.ptr, list)
}

func (p *parser) steps(a *Agent, steps []any, refs toolRefs, models modelRefs) {
	stepPtr := func(i int) string { return jsonPointer("agents", a.Name, "steps", strconv.Itoa(i)) }
	// Ids first, so a reference to a later step can be told apart from a
	// reference to a step that does not exist.
	for i, sv := range steps {
		sm, _ := sv.(map[string]any)
		id, ok := sm["id"].(string)
		if !ok {
			continue
		}
		if first, dup := a.stepAt[id]; dup {
			p.report(child(stepPtr(i), "id"), fmt.Sprintf("duplicate step id %q (also the id of %s)", id, stepPtr(first)))
			continue
		}
		a.stepAt[id] = i
	}
	for i, sv := range steps {
		sm, ok := sv.(map[string]any)
		if !ok {
			continue
		}
		s := &Step{Index: i}
		s.ID, _ = sm["id"].(string)
		s.Kind = p.stepKind(sm, stepPtr(i))
		switch s.Kind {
		case ToolStep:
			if tn, ok := sm["tool"].(string); ok && tn != "" {
				s.Tool = tn
				if msg := refs.missing(tn); msg != "" {
					p.report(child(stepPtr(i), "tool"), msg)
				}
			}
			if in, ok := sm["input"]; ok {
				s.Input = in
				s.input = p.stepInput(a, i, in, child(stepPtr(i), "input"))
			}
		case ModelStep:
			p.modelStep(a, s, sm, stepPtr(i), models)
		case AgentStep:
			p.agentStep(a, s, sm, stepPtr(i), refs, models)
		}
		a.Steps = append(a.Steps, s)
	}
}

func (p *parser) policy(a *Agent, policy []any, refs toolRefs) {
	for i, rv := range policy {
		rm, ok := rv.(map[string]any)
		if !ok {
			continue
		}
		rptr := jsonPointer("agents", a.Name, "policy", strconv.Itoa(i))
		r := &Rule{Index: i}
		r.Tool, _ = rm["tool"].(string)
		if r.Tool != "" && r.Tool != "*" {
			if msg := refs.missing(r.Tool); msg != "" {
				p.report(child(rptr, "tool"), msg+`; use "*" for every tool`)
			}
		}
		if d, ok := rm["decision"].(string); ok {
			r.Outcome = Outcome(d)
		}
		r.Reason, _ = rm["reason"].(string)
		r.separate, _ = rm["separateFrom"].(string)
		if v, ok := rm["approvers"]; ok {
			r.Approvers = p.approvers(child(rptr, "approvers"), v)
			if r.Outcome != Ask && r.Outcome != "" {
				p.report(child(rptr, "approvers"), fmt.Sprintf(`approvers applies only to ask rules (this rule's decision is %q); move it to an ask rule or to the tool's approvals`, r.Outcome))
			}
		}
		if r.separate != "" && r.Outcome != Ask && r.Outcome != "" {
			p.report(child(rptr, "separateFrom"), fmt.Sprintf(`separateFrom applies only to ask rules (this rule's decision is %q)`, r.Outcome))
		}
		if w, ok := rm["when"]; ok {
			r.when = p.schema(child(rptr, "when"), w)
			r.When = p.raw(child(rptr, "when"), w)
		}
		a.Policy = append(a.Policy, r)
		if t, ok := a.Tools[r.Tool]; ok && r.Outcome == Allow && t.RequiresApproval {
			p.warn(rptr, fmt.Sprintf(
				"this allow rule never lets a call through: %s has requiresApproval, which the policy checks before allow rules", r.Tool))
		}
	}
}

func (p *parser) tool(a *Agent, name string, m map[string]any, ptr string) *Tool {
	t := &Tool{
		Name:            name,
		Agent:           a.Name,
		Source:          SourceInternal,
		Timeout:         DefaultToolTimeout,
		ApprovalTimeout: a.ApprovalTimeout,
	}
	t.Description, _ = m["description"].(string)
	t.Label, _ = m["label"].(string)
	if e, ok := m["effect"].(string); ok {
		t.Effect = Effect(e)
	}
	if s, ok := m["source"].(string); ok && s != "" {
		t.Source = Source(s)
	}
	t.RequiresApproval, _ = m["requiresApproval"].(bool)
	if n, ok := m["timeoutMs"].(json.Number); ok {
		// The schema checks integer and range; convert only good values.
		if r, ok := new(big.Rat).SetString(n.String()); ok && r.IsInt() && r.Sign() > 0 &&
			r.Cmp(big.NewRat(MaxToolTimeout.Milliseconds(), 1)) <= 0 {
			t.Timeout = time.Duration(r.Num().Int64()) * time.Millisecond
		}
	}
	if d, ok := p.approvalTimeout(child(ptr, "approvals"), m["approvals"]); ok {
		t.ApprovalTimeout = d
	}
	on := "tool " + name
	t.separate = p.separate(m["approvals"], on)
	aptr := child(ptr, "approvals")
	if v := approvalsSetting(m["approvals"], "approvers"); v != nil {
		t.Approvers, t.approversOn = p.approvers(child(aptr, "approvers"), v), on
	}
	t.RememberMax, _ = p.remember(child(aptr, "remember"), approvalsSetting(m["approvals"], "remember"))
	t.raw = p.raw(ptr, m)
	if v, ok := m["input"]; ok {
		t.input = p.schema(child(ptr, "input"), v)
		t.InputSchema = p.raw(child(ptr, "input"), v)
	}
	if v, ok := m["output"]; ok {
		t.output = p.schema(child(ptr, "output"), v)
		t.OutputSchema = p.raw(child(ptr, "output"), v)
	}
	return t
}

// approvalTimeout reads {"timeout": "15m"} at ptr.
// separate reads an approvals settings object's separateFrom, set on on.
func (p *parser) separate(v any, on string) setting {
	if s, ok := approvalsSetting(v, "separateFrom").(string); ok && s != "" {
		return setting{value: s, on: on}
	}
	return setting{}
}

// approvers reads {"group": "finance", "min": 2} or {"all": [...]} at ptr
// (the schema has checked its shape); nil when it is not there. The same
// group twice in one "all" is refused: say its min instead.
func (p *parser) approvers(ptr string, v any) []approvals.Requirement {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	reqs := []any{m}
	at := func(int) string { return ptr }
	if all, ok := m["all"].([]any); ok {
		reqs = all
		at = func(i int) string { return child(child(ptr, "all"), strconv.Itoa(i)) }
	}
	out := []approvals.Requirement{}
	seen := map[string]int{}
	for i, rv := range reqs {
		rm, _ := rv.(map[string]any)
		g, _ := rm["group"].(string)
		r := approvals.Requirement{Group: g, Min: 1, Eligible: []approvals.Voter{}}
		if n, ok := rm["min"].(json.Number); ok {
			if k, err := strconv.Atoi(n.String()); err == nil {
				r.Min = k
			}
		}
		if first, dup := seen[g]; dup && g != "" {
			p.report(at(i), fmt.Sprintf("group %q is already required by %s; raise its min instead", g, at(first)))
			continue
		}
		seen[g] = i
		if g != "" {
			if p.groupRefs == nil {
				p.groupRefs = map[string][]string{}
			}
			p.groupRefs[g] = append(p.groupRefs[g], child(at(i), "group"))
		}
		out = append(out, r)
	}
	return out
}

// noticeSettings are the notice keys of one approvals settings object;
// the set flags say which it has.
type noticeSettings struct {
	remind                   []time.Duration
	remindSet                bool
	escalateAfter            time.Duration
	escalateTo               string
	escalateSet              bool
	expiringAt               float64
	expiringSet, expiringBad bool
}

// notices reads remind, escalateAfter/escalateTo and expiringAt from an
// approvals settings object at ptr.
func (p *parser) notices(ptr string, v any) noticeSettings {
	var ns noticeSettings
	m, _ := v.(map[string]any)
	if r, ok := m["remind"].([]any); ok {
		ns.remindSet = true
		for i, rv := range r {
			if d, ok := p.duration(child(child(ptr, "remind"), strconv.Itoa(i)), rv); ok {
				ns.remind = append(ns.remind, d)
			}
		}
	}
	after, hasAfter := m["escalateAfter"]
	to, hasTo := m["escalateTo"].(map[string]any)
	switch {
	case hasAfter && !hasTo:
		p.report(child(ptr, "escalateAfter"), `needs escalateTo, the group to tell: "escalateTo": {"group": "finance-leads"}`)
	case hasTo && !hasAfter:
		p.report(child(ptr, "escalateTo"), `needs escalateAfter, when to tell it: "escalateAfter": "1h"`)
	case hasAfter:
		ns.escalateSet = true
		ns.escalateAfter, _ = p.duration(child(ptr, "escalateAfter"), after)
		ns.escalateTo, _ = to["group"].(string)
		if ns.escalateTo != "" {
			if p.groupRefs == nil {
				p.groupRefs = map[string][]string{}
			}
			p.groupRefs[ns.escalateTo] = append(p.groupRefs[ns.escalateTo], child(child(ptr, "escalateTo"), "group"))
		}
	}
	if n, ok := m["expiringAt"].(json.Number); ok {
		ns.expiringSet = true
		f, err := n.Float64()
		ns.expiringAt, ns.expiringBad = f, err != nil
	}
	return ns
}

// over returns ns with what it does not set taken from base.
func (ns noticeSettings) over(base noticeSettings) noticeSettings {
	if !ns.remindSet {
		ns.remind, ns.remindSet = base.remind, base.remindSet
	}
	if !ns.escalateSet {
		ns.escalateAfter, ns.escalateTo, ns.escalateSet = base.escalateAfter, base.escalateTo, base.escalateSet
	}
	if !ns.expiringSet {
		ns.expiringAt, ns.expiringSet, ns.expiringBad = base.expiringAt, base.expiringSet, base.expiringBad
	}
	return ns
}

// DefaultExpiringAt is when an approval warns that it is about to expire
// when no expiringAt says otherwise: at 80% of its timeout.
const DefaultExpiringAt = 0.8

// list is the notices of an approval with timeout, as durations after its
// request.
func (ns noticeSettings) list(timeout time.Duration) []approvals.Notice {
	var out []approvals.Notice
	for _, d := range ns.remind {
		out = append(out, approvals.Notice{Kind: approvals.Reminder, After: d})
	}
	if ns.escalateSet && ns.escalateAfter > 0 && ns.escalateTo != "" {
		out = append(out, approvals.Notice{Kind: approvals.Escalated, After: ns.escalateAfter, Group: ns.escalateTo})
	}
	share := DefaultExpiringAt
	if ns.expiringSet && !ns.expiringBad {
		share = ns.expiringAt
	}
	if share > 0 && share < 1 {
		out = append(out, approvals.Notice{Kind: approvals.Expiring, After: time.Duration(share * float64(timeout)).Round(time.Second)})
	}
	return out
}

// remember reads {"max": "24h"} at ptr: the longest a remembered decision
// may last.
func (p *parser) remember(ptr string, v any) (time.Duration, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return 0, false
	}
	return p.duration(child(ptr, "max"), m["max"])
}

// approvalsSetting is one key of an approvals settings object (nil when
// absent).
func approvalsSetting(v any, key string) any {
	m, _ := v.(map[string]any)
	return m[key]
}

func (p *parser) approvalTimeout(ptr string, v any) (time.Duration, bool) {
	m, _ := v.(map[string]any)
	return p.duration(child(ptr, "timeout"), m["timeout"])
}

// duration reads a duration of at most 7 days at ptr.
func (p *parser) duration(ptr string, v any) (time.Duration, bool) {
	s, ok := v.(string)
	if !ok || s == "" { // absent, or the schema reported it
		return 0, false
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.report(ptr, fmt.Sprintf(`must be a duration such as "90s", "15m" or "1h" (got %q)`, s))
	case d <= 0:
		p.report(ptr, fmt.Sprintf("must be longer than 0 (got %q)", s))
	case d > MaxApprovalTimeout:
		p.report(ptr, fmt.Sprintf("must be at most 168h (7 days) (got %q)", s))
	default:
		return d, true
	}
	return 0, false
}

// schema compiles an embedded JSON Schema; the config schema has already
// reported one that is neither an object nor a boolean.
func (p *parser) schema(ptr string, v any) *jsonschema.Schema {
	switch v.(type) {
	case map[string]any, bool:
	default:
		return nil
	}
	sch, problems := compileSchema(ptr, v)
	p.problems = append(p.problems, problems...)
	return sch
}

// stepInput compiles the input of step i, checking every expression in it.
func (p *parser) stepInput(a *Agent, i int, in any, ptr string) node {
	return compileInput(in, "", p.exprCheck(a, i, ptr), func(at, msg string) { p.report(ptr+at, msg) })
}

// exprCheck returns a check of the expressions found at ptr+at in step i:
// each may only read the output of an earlier step. It reports what is wrong
// and says whether all were fine.
func (p *parser) exprCheck(a *Agent, i int, ptr string) func(at string, exprs []*Expr) bool {
	ids := slices.Sorted(maps.Keys(a.stepAt))
	return func(at string, exprs []*Expr) bool {
		ok := true
		for _, e := range exprs {
			id := e.Step()
			if id == "" {
				continue
			}
			j, found := a.stepAt[id]
			switch {
			case !found:
				p.report(ptr+at, fmt.Sprintf("%s refers to step %q, which does not exist (steps: %s)", e, id, strings.Join(ids, ", ")))
			case j == i:
				p.report(ptr+at, fmt.Sprintf("%s refers to this step's own output; a step can only use the output of an earlier step", e))
			case j > i:
				p.report(ptr+at, fmt.Sprintf("%s refers to step %q, which runs later (steps run in order); a step can only use the output of an earlier step", e, id))
			default:
				continue
			}
			ok = false
		}
		return ok
	}
}

// toolNameProblem says why name cannot be a tool name, or "". Tool names
// name exported functions, so they must be JavaScript identifiers that are
// not reserved words.
func toolNameProblem(name string) string {
	if name == "" {
		return "a tool name must not be empty; it is the name of an exported function"
	}
	for i, r := range name {
		if !identifierRune(r, i == 0) {
			what := fmt.Sprintf("contains %q", string(r))
			if i == 0 {
				what = fmt.Sprintf("starts with %q", string(r))
			}
			if r == utf8.RuneError {
				what = "is not valid UTF-8"
			}
			return fmt.Sprintf("tool name %q %s; it must be a JavaScript identifier (letters, digits, \"_\" and \"$\", not starting with a digit) because it names an exported function", name, what)
		}
	}
	if reservedWords[name] {
		return fmt.Sprintf("tool name %q is a reserved word in JavaScript, so no exported function can have it", name)
	}
	return ""
}

// identifierRune reports whether r may appear in a JavaScript identifier,
// first says at its start (ECMAScript IdentifierStart / IdentifierPart).
func identifierRune(r rune, first bool) bool {
	switch {
	case r == '$' || r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r):
		return true
	case first:
		return false
	}
	return unicode.In(r, unicode.Nd, unicode.Mn, unicode.Mc, unicode.Pc) || r == '\u200c' || r == '\u200d'
}

// reservedWords cannot name a function declaration in an ES module (strict
// mode code).
var reservedWords = map[string]bool{
	"await": true, "break": true, "case": true, "catch": true, "class": true, "const": true,
	"continue": true, "debugger": true, "default": true, "delete": true, "do": true, "else": true,
	"enum": true, "export": true, "extends": true, "false": true, "finally": true, "for": true,
	"function": true, "if": true, "import": true, "in": true, "instanceof": true, "new": true,
	"null": true, "return": true, "super": true, "switch": true, "this": true, "throw": true,
	"true": true, "try": true, "typeof": true, "var": true, "void": true, "while": true,
	"with": true, "yield": true, "let": true, "static": true, "implements": true,
	"interface": true, "package": true, "private": true, "protected": true, "public": true,
	"eval": true, "arguments": true,
}
