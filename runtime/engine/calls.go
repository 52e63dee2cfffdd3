package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/store"
)

// ViaMCP is the Run.Via of a call made through POST /mcp with the MCP key
// keyID.
func ViaMCP(keyID string) string { return "mcp:" + keyID }

// CallParams starts a one-call run: one tool of the actor's agent.
type CallParams struct {
	Tool  string
	Input json.RawMessage
}

// StartCall starts a one-call run for an MCP key: a run of the actor's
// agent (Actor.Agent) for its end user whose only step calls p.Tool with
// p.Input, through the same validation, policy and approval path as any
// tool step (agent.Agent.Call). The input is checked against the tool's
// schema first, so a call the step would refuse creates no run.
//
// A call identical to one of the same key that still awaits approval (same
// tool, and input of the same approvals.Digest) returns that run, not a
// second approval; the bool is false then. Errors: ErrForbidden,
// ErrNoDeployment, store.ErrNotFound (no such agent or tool), *InputError.
func (e *Engine) StartCall(ctx context.Context, actor approvals.Actor, p CallParams) (store.Run, bool, error) {
	if !actor.Role.May(approvals.CallTools) || actor.Agent == "" || actor.EndUserID == "" {
		return store.Run{}, false, ErrForbidden
	}
	if len(p.Input) == 0 {
		p.Input = json.RawMessage("{}")
	}
	d, ag, err := e.latestAgent(ctx, actor.ProjectID, actor.Agent)
	if err != nil {
		return store.Run{}, false, err
	}
	tool, ok := ag.Tool(p.Tool)
	if !ok {
		return store.Run{}, false, fmt.Errorf("tool %q of agent %q: %w", p.Tool, actor.Agent, store.ErrNotFound)
	}
	input, err := decode(p.Input)
	if err != nil {
		return store.Run{}, false, &InputError{fmt.Errorf("arguments: %w", err)}
	}
	if err := tool.ValidateInput(input); err != nil {
		return store.Run{}, false, &InputError{err}
	}
	via := ViaMCP(actor.ID)
	if ag.Evaluate(p.Tool, input, false).Outcome == agent.Ask {
		// Only a call that asks can be pending: look for it then.
		if pending, ok, err := e.pendingCall(ctx, actor, via, tool.Name, p.Input); err != nil || ok {
			return pending, false, err
		}
	}
	now := e.now()
	run := store.Run{
		ID:         e.newID("run"),
		ProjectID:  actor.ProjectID,
		Agent:      actor.Agent,
		Tool:       p.Tool,
		Via:        via,
		EndUserID:  actor.EndUserID,
		Deployment: d.Version,
		Status:     store.RunQueued,
		Input:      p.Input,
		Trust:      store.Trusted,
		LeaseUntil: now.Add(e.cfg.DispatchGrace),
		CreatedAt:  now,
		UpdatedAt:  now,
	}
	return e.create(ctx, actor, d, run, map[string]any{
		"agent": actor.Agent, "tool": p.Tool, "via": via, "deployment": d.Version, "endUserId": actor.EndUserID, "input": p.Input,
	})
}

// pendingCall finds a call of the key that awaits approval with the same
// tool and input: through the project's pending approvals (the queue, which
// people keep short), not its runs.
func (e *Engine) pendingCall(ctx context.Context, actor approvals.Actor, via, tool string, input json.RawMessage) (store.Run, bool, error) {
	digest, err := approvals.Digest(input)
	if err != nil {
		return store.Run{}, false, &InputError{fmt.Errorf("arguments: %w", err)}
	}
	f := store.ApprovalFilter{ProjectID: actor.ProjectID, Status: approvals.Pending, Limit: store.MaxLimit}
	for {
		page, err := e.store.ListApprovals(ctx, f)
		if err != nil {
			return store.Run{}, false, fmt.Errorf("find a pending call: %w", err)
		}
		for _, a := range page.Items {
			if a.Tool != tool || a.Agent != actor.Agent || a.EndUserID != actor.EndUserID || a.InputDigest != digest {
				continue
			}
			r, err := e.store.GetRun(ctx, a.RunID)
			if err != nil {
				return store.Run{}, false, fmt.Errorf("find a pending call: %w", err)
			}
			if r.Via == via && r.Tool == tool && r.Status == store.RunAwaitingApproval {
				return r, true, nil
			}
		}
		if page.NextCursor == "" {
			return store.Run{}, false, nil
		}
		f.Cursor = page.NextCursor
	}
}

// CallAgent is the agent an MCP key calls, as the latest deployment
// declares it, and that deployment's version. Errors: ErrForbidden,
// ErrNoDeployment, store.ErrNotFound (the agent is no longer deployed).
func (e *Engine) CallAgent(ctx context.Context, actor approvals.Actor) (int, *agent.Agent, error) {
	if !actor.Role.May(approvals.CallTools) || actor.Agent == "" {
		return 0, nil, ErrForbidden
	}
	d, ag, err := e.latestAgent(ctx, actor.ProjectID, actor.Agent)
	if err != nil {
		return 0, nil, err
	}
	return d.Version, ag, nil
}

// CallApproval is the approval a call the actor may see asked for (the
// run's current one). store.ErrNotFound when the run has none.
func (e *Engine) CallApproval(ctx context.Context, actor approvals.Actor, run store.Run) (approvals.Approval, error) {
	if ok, err := e.canSee(ctx, actor, run); err != nil || !ok {
		return approvals.Approval{}, errors.Join(err, fmt.Errorf("run %s: %w", run.ID, store.ErrNotFound))
	}
	if run.ApprovalID == "" {
		return approvals.Approval{}, fmt.Errorf("run %s has no approval: %w", run.ID, store.ErrNotFound)
	}
	return e.store.GetApproval(ctx, run.ApprovalID)
}
