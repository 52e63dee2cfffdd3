package api

import (
	"context"
	"encoding/json"
	"errors"

	"stead/api/wire"
	"stead/approvals"
	"stead/runtime/agent"
	"stead/store"
)

// The converters from the store's records to the API's JSON shapes
// (package wire), and what a customer token is shown of them.

func runOf(r store.Run, a *approvals.Approval) wire.Run {
	out := wire.Run{
		ID: r.ID, Agent: r.Agent, EndUserID: r.EndUserID, Tool: r.Tool, Via: r.Via, Status: string(r.Status),
		Deployment: r.Deployment, Trust: string(r.Trust), TrustOrigin: r.TrustOrigin,
		Costs:     &wire.Costs{TokensInput: r.Costs.TokensInput, TokensOutput: r.Costs.TokensOutput, CostUSD: r.Costs.CostUSD},
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
		out.Error = &wire.RunError{Code: e.Code, Message: e.Message, Step: e.Step, Stack: e.Stack, File: e.File, Line: e.Line, Column: e.Column}
	}
	if a != nil && r.Status == store.RunAwaitingApproval {
		out.Approval = &wire.RunApproval{ID: a.ID, Tool: a.Tool, Reason: a.Reason, RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt}
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
func forCustomer(r wire.Run) wire.Run {
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
		r.Error = &wire.RunError{Code: r.Error.Code, Message: msg}
	}
	return r
}

// showRun renders a run as the caller may see it (a customer token sees
// less, and the project's branding and the tool's label). The caller has
// already been allowed to see the run.
func (s *Server) showRun(ctx context.Context, c *caller, r store.Run) (wire.Run, error) {
	out, err := s.runView(ctx, r)
	if err != nil || c.actor.Role != approvals.RoleCustomer {
		return out, err
	}
	out = forCustomer(out)
	p, err := s.engine.Presentation(ctx, r)
	if err != nil {
		return wire.Run{}, err
	}
	if b := p.Branding; b != nil {
		out.Branding = &wire.Branding{Name: b.Name, LogoURL: b.LogoURL, AccentColor: b.AccentColor}
	}
	if out.Approval != nil {
		out.Approval.Label = p.Labels[out.Approval.Tool]
	}
	return out, nil
}

// runView is the run with its pending approval while it awaits one.
func (s *Server) runView(ctx context.Context, r store.Run) (wire.Run, error) {
	if r.Status != store.RunAwaitingApproval || r.ApprovalID == "" {
		return runOf(r, nil), nil
	}
	a, err := s.store.GetApproval(ctx, r.ApprovalID)
	if errors.Is(err, store.ErrNotFound) {
		return runOf(r, nil), nil
	}
	if err != nil {
		return wire.Run{}, err
	}
	if a.ProjectID != r.ProjectID || a.RunID != r.ID {
		return runOf(r, nil), nil
	}
	return runOf(r, &a), nil
}

func approvalOf(a approvals.Approval) wire.Approval {
	out := wire.Approval{
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

func eventOf(e store.Event) wire.Event {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return wire.Event{Version: wire.EventVersion, Seq: e.Seq, Type: e.Type, At: e.At, Step: e.Step, Data: data}
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
func customerEventOf(e store.Event) (wire.Event, bool) {
	fields, ok := customerFields[e.Type]
	if !ok {
		return wire.Event{}, false
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
		return wire.Event{}, false
	}
	return wire.Event{Version: wire.EventVersion, Seq: e.Seq, Type: e.Type, At: e.At, Step: e.Step, Data: data}, true
}

// eventFor is e as the caller may see it.
func eventFor(c *caller, e store.Event) (wire.Event, bool) {
	if c.actor.Role == approvals.RoleCustomer {
		return customerEventOf(e)
	}
	return eventOf(e), true
}

func deploymentOf(d store.Deployment) wire.Deployment {
	agents := d.Agents
	if agents == nil {
		agents = []string{}
	}
	out := wire.Deployment{
		Version: d.Version, Digest: d.Digest, BundleSize: d.BundleSize, Agents: agents,
		CreatedBy: d.CreatedBy, CreatedAt: d.CreatedAt,
	}
	for _, p := range d.MCPTools {
		out.MCPTools = append(out.MCPTools, wire.MCPToolPin{Server: p.Server, Tool: p.Tool, Fingerprint: p.Fingerprint, Change: p.Change})
	}
	return out
}

func agentOf(a *agent.Agent) wire.Agent {
	out := wire.Agent{
		Name: a.Name, Description: a.Description, Input: a.InputSchema,
		ApprovalTimeout: a.ApprovalTimeout.String(),
		Tools:           []wire.Tool{}, Steps: []wire.Step{},
	}
	for _, name := range a.ToolNames() {
		t := a.Tools[name]
		out.Tools = append(out.Tools, wire.Tool{
			Name: t.Name, Description: t.Description, Effect: string(t.Effect), Source: string(t.Source),
			RequiresApproval: t.RequiresApproval, TimeoutMs: t.Timeout.Milliseconds(),
			ApprovalTimeout: t.ApprovalTimeout.String(), Input: t.InputSchema, Output: t.OutputSchema,
		})
	}
	for _, st := range a.Steps {
		out.Steps = append(out.Steps, stepOf(st))
	}
	for _, r := range a.Policy {
		out.Policy = append(out.Policy, wire.PolicyRule{Tool: r.Tool, Decision: string(r.Outcome), Reason: r.Reason, When: r.When})
	}
	return out
}

func stepOf(st *agent.Step) wire.Step {
	out := wire.Step{ID: st.ID, Kind: string(st.Kind), Tool: st.Tool, Input: st.Input, Output: st.OutputSchema}
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
		out.Agent = &wire.LoopSettings{
			Model: l.Model, Instructions: text(l.Instructions), Prompt: text(l.Prompt),
			Tools: l.Tools, MaxTurns: l.MaxTurns, OnDecline: string(l.OnDecline),
		}
	}
	return out
}

func modelOf(m *agent.Model) wire.Model {
	out := wire.Model{
		Name: m.Name, Provider: string(m.Provider), BaseURL: m.BaseURL, Model: m.Model,
		ModelID: m.ModelID, Region: m.Region, APIKeyEnv: m.APIKeyEnv, TimeoutMs: m.Timeout.Milliseconds(),
	}
	if m.Prices != nil {
		out.Prices = &wire.ModelPrice{Input: m.Prices.Input, Output: m.Prices.Output}
	}
	return out
}

func keyOf(k store.APIKey) wire.APIKey {
	k = k.WithMember()
	return wire.APIKey{
		ID: k.ID, Name: k.Name, MemberID: k.MemberID, MemberName: k.MemberName, Role: string(k.Role),
		Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt,
	}
}

func mcpKeyOf(k store.MCPKey) wire.MCPKey {
	return wire.MCPKey{
		ID: k.ID, Name: k.Name, Agent: k.Agent, EndUserID: k.EndUserID, Prefix: k.Prefix,
		CreatedBy: k.CreatedBy, CreatedByName: k.CreatedByName, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt,
	}
}

func brokerOf(r store.BrokerRecord) wire.BrokerRecord {
	return wire.BrokerRecord{EndUserID: r.EndUserID, Collection: r.Collection, Key: r.Key, Value: r.Value, UpdatedAt: r.UpdatedAt}
}
