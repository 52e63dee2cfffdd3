package api

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/store"
)

// The JSON shapes of responses. They are written out here, apart from the
// store's records, so that internal fields (lease owner, request digest,
// step state, signing keys, key hashes) can never leak into a response and
// the shapes the CLI and UIs rely on change only on purpose.

// Run is a run as the API shows it.
type Run struct {
	ID        string `json:"id"`
	Agent     string `json:"agent"`
	EndUserID string `json:"endUserId"`
	// Tool is set on a one-call run (an MCP client's tools/call): the tool
	// it calls with Input.
	Tool string `json:"tool,omitempty"`
	// Via says where the run came from when not this API: "mcp:<MCP key
	// id>" for a call through POST /mcp.
	Via string `json:"via,omitempty"`
	// Status is queued, running, awaiting-approval, succeeded, failed or
	// cancelled.
	Status     string `json:"status"`
	Deployment int    `json:"deployment"`
	// Trust, TrustOrigin and Costs are not shown to customer tokens.
	Trust       string          `json:"trust,omitempty"`
	TrustOrigin string          `json:"trustOrigin,omitempty"`
	Costs       *Costs          `json:"costs,omitempty"`
	CreatedAt   time.Time       `json:"createdAt"`
	UpdatedAt   time.Time       `json:"updatedAt"`
	FinishedAt  time.Time       `json:"finishedAt,omitzero"`
	Input       json.RawMessage `json:"input"`
	// Output is set when the run succeeded.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is set when the run failed or was cancelled.
	Error *RunError `json:"error,omitempty"`
	// Approval is set while the run is awaiting approval.
	Approval *RunApproval `json:"approval,omitempty"`
	// Branding is the project's stead.json "branding", shown to customer
	// tokens only (the status page and embed.js present it).
	Branding *Branding `json:"branding,omitempty"`
}

// Branding is how the project presents itself to its customers.
type Branding struct {
	Name        string `json:"name,omitempty"`
	LogoURL     string `json:"logoUrl,omitempty"`
	AccentColor string `json:"accentColor,omitempty"`
}

// Costs is measured usage.
type Costs struct {
	TokensInput  int64   `json:"tokensInput"`
	TokensOutput int64   `json:"tokensOutput"`
	CostUSD      float64 `json:"costUsd"`
}

// RunError says why a run failed: code approval-denied, approval-expired,
// policy-denied, invalid-input, handler-error, timeout, cancelled, ….
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Step    string `json:"step,omitempty"`
	// Stack, File, Line and Column: where a failed handler threw, in the
	// developer's sources (a bundle stead deploy made carries their map);
	// absent when unknown, and never shown to customer tokens.
	Stack  string `json:"stack,omitempty"`
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

// RunApproval is the pending approval a run waits for.
type RunApproval struct {
	ID          string    `json:"id"`
	Tool        string    `json:"tool"`
	Reason      string    `json:"reason"`
	RequestedAt time.Time `json:"requestedAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// Label is the tool's customer-facing label (its "label" in
	// stead.json), shown to customer tokens only; "" when it has none.
	Label string `json:"label,omitempty"`
}

// Approval is an approval as the API shows it.
type Approval struct {
	ID         string `json:"id"`
	RunID      string `json:"runId"`
	Agent      string `json:"agent"`
	EndUserID  string `json:"endUserId"`
	Deployment int    `json:"deployment"`
	StepID     string `json:"stepId"`
	Tool       string `json:"tool"`
	// Input is what the call runs with if approved; after an approval with
	// an edited input it is the edit, and OriginalInput what was asked.
	Input         json.RawMessage `json:"input"`
	OriginalInput json.RawMessage `json:"originalInput,omitempty"`
	Reason        string          `json:"reason"`
	// Status is pending, approved, denied, expired or cancelled.
	Status      string    `json:"status"`
	RequestedAt time.Time `json:"requestedAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// InputDigest binds Input: send it back as approve's or deny's
	// inputDigest to decide only if the input is still the one shown.
	InputDigest string `json:"inputDigest"`
	// SeparatedBy, when set, names the setting that keeps the run's
	// requester from deciding this approval.
	SeparatedBy string `json:"separatedBy,omitempty"`
	// Approvers, for an approval with approvers, is where each requirement
	// stands (its group, min, the votes counted, the members who may still
	// vote, and short when too few may), Progress the same in words ("1 of
	// 2 from finance — waiting on Bo Li, Cy Ng"), Votes the approvals
	// counted so far on the current input.
	Approvers []approvals.Tally `json:"approvers,omitempty"`
	Progress  string            `json:"progress,omitempty"`
	Votes     []approvals.Vote  `json:"votes,omitempty"`
	// NoteToCustomer: a deny note is shown to the customer.
	NoteToCustomer bool `json:"noteToCustomer,omitempty"`
	// DecidedBy is the deciding key's id ("stead" for an expiry),
	// DecidedByName the member it belongs to.
	DecidedBy     string    `json:"decidedBy,omitempty"`
	DecidedByName string    `json:"decidedByName,omitempty"`
	DecidedAt     time.Time `json:"decidedAt,omitzero"`
	Note          string    `json:"note,omitempty"`
}

// EventVersion is the version of the event schemas (the Event kinds of
// openapi.json) every Event carries; it changes with any change to them a
// reader could trip on.
const EventVersion = 1

// Event is one line of a run's trace: as JSON pages, as the data of each
// message of the SSE stream, and as stead trace --json prints it.
type Event struct {
	// Version is EventVersion.
	Version int             `json:"version"`
	Seq     int64           `json:"seq"`
	Type    string          `json:"type"`
	At      time.Time       `json:"at"`
	Step    string          `json:"step,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// Deployment is a deployed version.
type Deployment struct {
	Version    int       `json:"version"`
	Digest     string    `json:"digest"`
	BundleSize int64     `json:"bundleSize"`
	Agents     []string  `json:"agents"`
	CreatedBy  string    `json:"createdBy"`
	CreatedAt  time.Time `json:"createdAt"`
	// MCPTools are the definitions of the deployment's MCP-backed tools as
	// deploy pinned them, each with what changed since the previous
	// deployment ("new", "description, inputSchema"; none when unchanged).
	MCPTools []MCPToolPin `json:"mcpTools,omitempty"`
	// Warnings are things the config allows but probably does not mean;
	// only in the response to a deploy.
	Warnings []ConfigProblem `json:"warnings,omitempty"`
}

// Agent describes an agent of the latest deployment: its tools' posture
// and its steps.
type Agent struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	// ApprovalTimeout is the agent's approval timeout, e.g. "15m0s".
	ApprovalTimeout string       `json:"approvalTimeout"`
	Tools           []Tool       `json:"tools"`
	Steps           []Step       `json:"steps"`
	Policy          []PolicyRule `json:"policy,omitempty"`
}

// Tool is a tool's posture.
type Tool struct {
	Name             string `json:"name"`
	Description      string `json:"description,omitempty"`
	Effect           string `json:"effect"`
	Source           string `json:"source"`
	RequiresApproval bool   `json:"requiresApproval"`
	TimeoutMs        int64  `json:"timeoutMs"`
	// ApprovalTimeout is how long an approval of a call stays pending.
	ApprovalTimeout string          `json:"approvalTimeout"`
	Input           json.RawMessage `json:"input,omitempty"`
	Output          json.RawMessage `json:"output,omitempty"`
}

// Step is one step of an agent, its input as written (expressions
// unresolved).
type Step struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Tool and Input: a tool step's.
	Tool  string `json:"tool,omitempty"`
	Input any    `json:"input,omitempty"`
	// Model, System, Prompt and Output: a model step's (Output is its JSON
	// Schema, absent for a text answer).
	Model  string          `json:"model,omitempty"`
	System string          `json:"system,omitempty"`
	Prompt string          `json:"prompt,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	// Agent: an agent step's settings.
	Agent *LoopSettings `json:"agent,omitempty"`
}

// LoopSettings are an agent step's settings.
type LoopSettings struct {
	Model        string   `json:"model"`
	Instructions string   `json:"instructions,omitempty"`
	Prompt       string   `json:"prompt,omitempty"`
	Tools        []string `json:"tools"`
	MaxTurns     int      `json:"maxTurns"`
	OnDecline    string   `json:"onDecline"`
}

// Model is a configured language model. Its API key never leaves the
// server: only the name of the environment variable that holds it.
type Model struct {
	Name      string      `json:"name"`
	Provider  string      `json:"provider"`
	BaseURL   string      `json:"baseUrl,omitempty"`
	Model     string      `json:"model,omitempty"`
	ModelID   string      `json:"modelId,omitempty"`
	Region    string      `json:"region,omitempty"`
	APIKeyEnv string      `json:"apiKeyEnv,omitempty"`
	Prices    *ModelPrice `json:"prices,omitempty"`
	TimeoutMs int64       `json:"timeoutMs"`
}

// ModelPrice is USD per million tokens.
type ModelPrice struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// PolicyRule is one rule of an agent's policy.
type PolicyRule struct {
	Tool     string          `json:"tool"`
	Decision string          `json:"decision"`
	Reason   string          `json:"reason,omitempty"`
	When     json.RawMessage `json:"when,omitempty"`
}

// APIKey is a key as listed; Key, the secret, is set only in the response
// that creates it.
type APIKey struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// MemberID and MemberName: the member the key belongs to.
	MemberID   string    `json:"memberId"`
	MemberName string    `json:"memberName"`
	Role       string    `json:"role"`
	Prefix     string    `json:"prefix"`
	CreatedAt  time.Time `json:"createdAt"`
	RevokedAt  time.Time `json:"revokedAt,omitzero"`
	Key        string    `json:"key,omitempty"`
}

// MCPKey is an MCP key: one MCP client's credential for one agent's tools
// and one end user. Key, the secret, is set only in the answer that
// creates it.
type MCPKey struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Agent     string `json:"agent"`
	EndUserID string `json:"endUserId"`
	Prefix    string `json:"prefix"`
	// CreatedBy is the key id of the owner who created it, CreatedByName
	// its member.
	CreatedBy     string    `json:"createdBy"`
	CreatedByName string    `json:"createdByName,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	RevokedAt     time.Time `json:"revokedAt,omitzero"`
	Key           string    `json:"key,omitempty"`
}

// MCPKeyList is the project's MCP keys, oldest first.
type MCPKeyList struct {
	Keys []MCPKey `json:"keys"`
}

// BrokerRecord is one value in an end user's broker data.
type BrokerRecord struct {
	EndUserID  string          `json:"endUserId"`
	Collection string          `json:"collection"`
	Key        string          `json:"key"`
	Value      json.RawMessage `json:"value"`
	UpdatedAt  time.Time       `json:"updatedAt"`
}

// CustomerToken is a freshly issued customer token.
type CustomerToken struct {
	Token string `json:"token"`
	// TokenID names the token in logs and revocations; it is not secret.
	TokenID   string    `json:"tokenId"`
	EndUserID string    `json:"endUserId"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Lists.

// RunList is a page of runs.
type RunList struct {
	Runs       []Run  `json:"runs"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// ApprovalList is a page of approvals.
type ApprovalList struct {
	Approvals  []Approval `json:"approvals"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// EventList is a page of events; pass NextAfter as ?after= for the next.
type EventList struct {
	Events    []Event `json:"events"`
	NextAfter int64   `json:"nextAfter"`
}

// DeploymentList is a page of deployments, newest first.
type DeploymentList struct {
	Deployments []Deployment `json:"deployments"`
	NextCursor  string       `json:"nextCursor,omitempty"`
}

// AgentList is the agents of the latest deployment (Deployment 0 and no
// agents when nothing is deployed).
type AgentList struct {
	Deployment int     `json:"deployment"`
	Agents     []Agent `json:"agents"`
	Models     []Model `json:"models"`
}

// KeyList is a project's keys, oldest first.
type KeyList struct {
	Keys []APIKey `json:"keys"`
}

// BrokerList is a page of a broker collection in key order.
type BrokerList struct {
	Records    []BrokerRecord `json:"records"`
	NextCursor string         `json:"nextCursor,omitempty"`
}

// Converters.

func runOf(r store.Run, a *approvals.Approval) Run {
	out := Run{
		ID: r.ID, Agent: r.Agent, EndUserID: r.EndUserID, Tool: r.Tool, Via: r.Via, Status: string(r.Status),
		Deployment: r.Deployment, Trust: string(r.Trust), TrustOrigin: r.TrustOrigin,
		Costs:     &Costs{r.Costs.TokensInput, r.Costs.TokensOutput, r.Costs.CostUSD},
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt,
		Input: r.Input,
	}
	if len(out.Input) == 0 {
		out.Input = json.RawMessage("{}")
	}
	if r.Status == store.RunSucceeded {
		out.Output = r.Output
		if len(out.Output) == 0 {
			out.Output = json.RawMessage("null")
		}
	}
	if r.Error != nil && (r.Status == store.RunFailed || r.Status == store.RunCancelled) {
		e := r.Error
		out.Error = &RunError{Code: e.Code, Message: e.Message, Step: e.Step, Stack: e.Stack, File: e.File, Line: e.Line, Column: e.Column}
	}
	if a != nil && r.Status == store.RunAwaitingApproval {
		out.Approval = &RunApproval{ID: a.ID, Tool: a.Tool, Reason: a.Reason, RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt}
	}
	return out
}

// customerErrors are the words a customer token gets for a failed run: the
// code tells what happened; the operator's message (who decided, internal
// detail) stays with the operators.
var customerErrors = map[string]string{
	"approval-denied":  "a reviewer declined this action, so it did not happen",
	"approval-expired": "nobody decided in time, so the action did not happen",
	"cancelled":        "this was stopped before it finished",
}

// forCustomer trims a run to what its end user's customer UI may show:
// status, input, output, the pending approval's tool and times, and the
// error's code — no costs, trust details, reasons or operator messages.
func forCustomer(r Run) Run {
	r.Trust, r.TrustOrigin, r.Costs = "", "", nil
	if r.Approval != nil {
		a := *r.Approval
		a.Reason = ""
		r.Approval = &a
	}
	if r.Error != nil {
		msg, ok := customerErrors[r.Error.Code]
		if !ok {
			msg = "something went wrong; the action may not have happened"
		}
		r.Error = &RunError{Code: r.Error.Code, Message: msg}
	}
	return r
}

// showRun renders a run as the caller may see it (a customer token sees
// less, and the project's branding and the tool's label). The caller has
// already been allowed to see the run.
func (s *Server) showRun(ctx context.Context, c *caller, r store.Run) (Run, error) {
	out, err := s.runView(ctx, r)
	if err != nil || c.actor.Role != approvals.RoleCustomer {
		return out, err
	}
	out = forCustomer(out)
	p, err := s.engine.Presentation(ctx, r)
	if err != nil {
		return Run{}, err
	}
	if b := p.Branding; b != nil {
		out.Branding = &Branding{Name: b.Name, LogoURL: b.LogoURL, AccentColor: b.AccentColor}
	}
	if out.Approval != nil {
		out.Approval.Label = p.Labels[out.Approval.Tool]
	}
	return out, nil
}

// runView is the run with its pending approval while it awaits one.
func (s *Server) runView(ctx context.Context, r store.Run) (Run, error) {
	if r.Status != store.RunAwaitingApproval || r.ApprovalID == "" {
		return runOf(r, nil), nil
	}
	a, err := s.store.GetApproval(ctx, r.ApprovalID)
	if errors.Is(err, store.ErrNotFound) {
		return runOf(r, nil), nil
	}
	if err != nil {
		return Run{}, err
	}
	if a.ProjectID != r.ProjectID || a.RunID != r.ID {
		return runOf(r, nil), nil
	}
	return runOf(r, &a), nil
}

func approvalOf(a approvals.Approval) Approval {
	out := Approval{
		ID: a.ID, RunID: a.RunID, Agent: a.Agent, EndUserID: a.EndUserID, Deployment: a.Deployment,
		StepID: a.StepID, Tool: a.Tool, Input: a.Input, OriginalInput: a.OriginalInput,
		Reason: a.Reason, Status: string(a.Status), RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt,
		InputDigest: a.InputDigest, SeparatedBy: a.SeparatedBy, NoteToCustomer: a.NoteToCustomer,
		DecidedBy: a.DecidedBy, DecidedByName: a.DecidedByName, DecidedAt: a.DecidedAt, Note: a.Note,
	}
	if a.HasQuorum() {
		out.Approvers, out.Progress, out.Votes = a.Progress(), a.ProgressText(), a.Votes
	}
	return out
}

func eventOf(e store.Event) Event {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return Event{Version: EventVersion, Seq: e.Seq, Type: e.Type, At: e.At, Step: e.Step, Data: data}
}

// customerFields says which events an end user's customer token sees, and
// which of their fields: enough to tell what the run is doing and how it
// ended — never log lines, costs, worker names, idempotency keys, trust
// details, model conversations or who decided.
var customerFields = map[string][]string{
	"run.created":        {"agent"},
	"run.started":        {},
	"step.started":       {"tool"},
	"step.completed":     {"tool"},
	"step.failed":        {"code"},
	"approval.requested": {"approvalId", "tool", "expiresAt"},
	"approval.approved":  {"approvalId", "tool"},
	"approval.denied":    {"approvalId", "tool", "customerNote"},
	"approval.expired":   {"approvalId", "tool", "expiresAt"},
	"approval.cancelled": {"approvalId", "tool"},
	"run.succeeded":      {},
	"run.failed":         {"code"},
	"run.cancelled":      {},
}

// customerEventOf is e as a customer token sees it, or false when it does
// not see e at all.
func customerEventOf(e store.Event) (Event, bool) {
	fields, ok := customerFields[e.Type]
	if !ok {
		return Event{}, false
	}
	var all map[string]json.RawMessage
	_ = json.Unmarshal(e.Data, &all)
	kept := map[string]json.RawMessage{}
	for _, f := range fields {
		if v, ok := all[f]; ok {
			kept[f] = v
		}
	}
	if v, ok := kept["customerNote"]; ok {
		// A deny note the project shows customers (approvals.noteToCustomer)
		// reaches them as the note; other notes never do.
		delete(kept, "customerNote")
		kept["note"] = v
	}
	data, err := json.Marshal(kept)
	if err != nil {
		return Event{}, false
	}
	return Event{Version: EventVersion, Seq: e.Seq, Type: e.Type, At: e.At, Step: e.Step, Data: data}, true
}

// eventFor is e as the caller may see it.
func eventFor(c *caller, e store.Event) (Event, bool) {
	if c.actor.Role == approvals.RoleCustomer {
		return customerEventOf(e)
	}
	return eventOf(e), true
}

// MCPToolPin is a remote tool's definition as a deploy pinned it.
type MCPToolPin struct {
	Server      string `json:"server"`
	Tool        string `json:"tool"`
	Fingerprint string `json:"fingerprint"`
	Change      string `json:"change,omitempty"`
}

func deploymentOf(d store.Deployment) Deployment {
	agents := d.Agents
	if agents == nil {
		agents = []string{}
	}
	out := Deployment{
		Version: d.Version, Digest: d.Digest, BundleSize: d.BundleSize, Agents: agents,
		CreatedBy: d.CreatedBy, CreatedAt: d.CreatedAt,
	}
	for _, p := range d.MCPTools {
		out.MCPTools = append(out.MCPTools, MCPToolPin{Server: p.Server, Tool: p.Tool, Fingerprint: p.Fingerprint, Change: p.Change})
	}
	return out
}

func agentOf(a *agent.Agent) Agent {
	out := Agent{
		Name: a.Name, Description: a.Description, Input: a.InputSchema,
		ApprovalTimeout: a.ApprovalTimeout.String(),
		Tools:           []Tool{}, Steps: []Step{},
	}
	for _, name := range a.ToolNames() {
		t := a.Tools[name]
		out.Tools = append(out.Tools, Tool{
			Name: t.Name, Description: t.Description, Effect: string(t.Effect), Source: string(t.Source),
			RequiresApproval: t.RequiresApproval, TimeoutMs: t.Timeout.Milliseconds(),
			ApprovalTimeout: t.ApprovalTimeout.String(), Input: t.InputSchema, Output: t.OutputSchema,
		})
	}
	for _, st := range a.Steps {
		out.Steps = append(out.Steps, stepOf(st))
	}
	for _, r := range a.Policy {
		out.Policy = append(out.Policy, PolicyRule{Tool: r.Tool, Decision: string(r.Outcome), Reason: r.Reason, When: r.When})
	}
	return out
}

func stepOf(st *agent.Step) Step {
	out := Step{ID: st.ID, Kind: string(st.Kind), Tool: st.Tool, Input: st.Input, Output: st.OutputSchema}
	text := func(t *agent.Template) string {
		if t == nil {
			return ""
		}
		return t.String()
	}
	if st.Kind == agent.ModelStep {
		out.Model, out.System, out.Prompt = st.Model, text(st.System), text(st.Prompt)
	}
	if l := st.Loop; l != nil {
		out.Agent = &LoopSettings{
			Model: l.Model, Instructions: text(l.Instructions), Prompt: text(l.Prompt),
			Tools: l.Tools, MaxTurns: l.MaxTurns, OnDecline: string(l.OnDecline),
		}
	}
	return out
}

func modelOf(m *agent.Model) Model {
	out := Model{
		Name: m.Name, Provider: string(m.Provider), BaseURL: m.BaseURL, Model: m.Model,
		ModelID: m.ModelID, Region: m.Region, APIKeyEnv: m.APIKeyEnv, TimeoutMs: m.Timeout.Milliseconds(),
	}
	if m.Prices != nil {
		out.Prices = &ModelPrice{Input: m.Prices.Input, Output: m.Prices.Output}
	}
	return out
}

func keyOf(k store.APIKey) APIKey {
	k = k.WithMember()
	return APIKey{
		ID: k.ID, Name: k.Name, MemberID: k.MemberID, MemberName: k.MemberName, Role: string(k.Role),
		Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt,
	}
}

func mcpKeyOf(k store.MCPKey) MCPKey {
	return MCPKey{
		ID: k.ID, Name: k.Name, Agent: k.Agent, EndUserID: k.EndUserID, Prefix: k.Prefix,
		CreatedBy: k.CreatedBy, CreatedByName: k.CreatedByName, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt,
	}
}

func brokerOf(r store.BrokerRecord) BrokerRecord {
	return BrokerRecord{EndUserID: r.EndUserID, Collection: r.Collection, Key: r.Key, Value: r.Value, UpdatedAt: r.UpdatedAt}
}
