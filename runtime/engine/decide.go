package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/store"
)

// DecideParams is a person's decision on an approval.
type DecideParams struct {
	ApprovalID string
	Approve    bool
	Note       string
	// Input, on approve, replaces the call's input. It is validated against
	// the tool's schema and the agent's deny rules first; a refused edit
	// decides nothing.
	Input json.RawMessage
	// Seen, when set, is the digest of the input the decider saw
	// (approvals.Approval.InputDigest): the decision is refused with
	// approvals.ErrChanged if the input is no longer that one.
	Seen string
}

// maxVoteRetries bounds how often Decide reads an approval again after its
// vote lost a race to another vote on the same input.
const maxVoteRetries = 20

// EditError is an edited input the tool's schema or a deny rule refuses.
type EditError struct{ Err error }

func (e *EditError) Error() string { return e.Err.Error() }
func (e *EditError) Unwrap() error { return e.Err }

// Decide approves or denies a pending approval. Approve queues the run to
// resume with exactly the approved input and dispatches it; deny fails the
// run with approval-denied — unless the call was proposed by an agent step
// with onDecline "tell-model": then the run is queued and resumes by telling
// the model the call was declined (with the note).
//
// On an approval with requirements an approve is a vote: it is recorded
// (with an approval.vote event) and the approval stays pending until the
// vote that completes its quorum, which settles it as above. A vote that
// loses a race to another vote on the same input is cast again on the
// approval as it is then; one that finds the input changed is refused
// (approvals.ErrChanged): its voter approved another input.
//
// Errors: store.ErrNotFound (missing or another project's), ErrForbidden
// (customers never decide), approvals.ErrNotPending (with the approval as
// it stands), approvals.ErrExpired (with the approval; the run is failed
// approval-expired on the spot), approvals.ErrSeparated, ErrNotEligible,
// ErrAlreadyVoted, ErrChanged (with the approval), *EditError.
func (e *Engine) Decide(ctx context.Context, actor approvals.Actor, p DecideParams) (approvals.Approval, error) {
	for try := 0; ; try++ {
		a, seen, err := e.decide(ctx, actor, p)
		if !errors.Is(err, approvals.ErrChanged) || seen != a.InputDigest {
			// Decided, refused for another reason, or refused because the
			// input is no longer the one the decider saw — or, without
			// Seen, the one this decision first read: a vote is never
			// cast again on an input its voter did not see.
			return a, err
		}
		if try == maxVoteRetries {
			return a, fmt.Errorf("approval %s: %d other votes came first each time; try again: %w", a.ID, try+1, store.ErrConflict)
		}
		// Another vote on the same input came first: vote again on the
		// approval as it is now, still on that input.
		p.Seen = seen
	}
}

// decide makes one attempt at a decision, on the input the decider saw
// (p.Seen) or else on the input it reads; it returns that input's digest.
func (e *Engine) decide(ctx context.Context, actor approvals.Actor, p DecideParams) (approvals.Approval, string, error) {
	a, err := e.store.GetApproval(ctx, p.ApprovalID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && a.ProjectID != actor.ProjectID) {
		return approvals.Approval{}, "", fmt.Errorf("approval %s: %w", p.ApprovalID, store.ErrNotFound)
	}
	if err != nil {
		return approvals.Approval{}, "", fmt.Errorf("get approval %s: %w", p.ApprovalID, err)
	}
	seen := cmp.Or(p.Seen, a.InputDigest)
	if !actor.May(approvals.Decide, a.ProjectID) {
		return a, seen, ErrForbidden
	}
	now := e.now()
	dec := approvals.Decision{
		ProjectID: actor.ProjectID, ApprovalID: a.ID, Status: approvals.Denied, By: actor.ID, ByName: actor.Name, ByMember: actor.MemberID, Note: p.Note,
		Seen: seen, VoteVersion: a.VoteVersion, At: now,
	}
	if p.Approve {
		dec.Status = approvals.Approved
	}
	if p.Approve && len(p.Input) > 0 {
		if err := e.validateEdit(ctx, a, p.Input); err != nil {
			return a, seen, err
		}
		dec.Input = compactJSON(p.Input)
		if dec.InputDigest, err = approvals.Digest(dec.Input); err != nil {
			return a, seen, &EditError{err}
		}
	}
	params := store.DecideParams{Decision: dec, Read: &a}
	data := byActor(actor, map[string]any{"approvalId": a.ID, "tool": a.Tool, "note": p.Note})
	if !p.Approve && a.NoteToCustomer && p.Note != "" {
		// The one copy of a deny note that a customer may read.
		data["customerNote"] = p.Note
	}
	if p.Approve {
		if dec.Input != nil && dec.InputDigest != a.InputDigest {
			data["input"] = dec.Input
			data["originalInput"] = a.Input
			data["edited"] = true
		}
		params.RunStatus = store.RunQueued
		params.LeaseUntil = now.Add(e.cfg.DispatchGrace)
		typ := "approval.approved"
		if a.HasQuorum() {
			after := dec.Apply(a)
			data["progress"] = after.ProgressText()
			data["votes"] = len(after.Votes)
			if after.Status == approvals.Pending {
				typ = "approval.vote"
			}
		}
		params.Events = []store.Event{event(typ, now, a.StepID, data)}
	} else if tell, err := e.tellsModel(ctx, a); err != nil {
		return a, seen, err
	} else if tell {
		data["onDecline"] = string(agent.DeclineTellModel)
		params.RunStatus = store.RunQueued
		params.LeaseUntil = now.Add(e.cfg.DispatchGrace)
		params.Events = []store.Event{event("approval.denied", now, a.StepID, data)}
	} else {
		msg := fmt.Sprintf("%s was denied by %s", a.Tool, actor.Who())
		if p.Note != "" {
			msg += ": " + p.Note
		}
		params.RunStatus = store.RunFailed
		params.RunError = &store.RunError{Code: CodeApprovalDenied, Message: msg, Step: a.StepID}
		params.Events = []store.Event{
			event("approval.denied", now, a.StepID, data),
			event("run.failed", now, "", map[string]any{"code": CodeApprovalDenied, "message": msg, "step": a.StepID}),
		}
	}
	decided, run, err := e.store.DecideApproval(ctx, params)
	if errors.Is(err, approvals.ErrExpired) {
		// Past its deadline: settle it as expired now rather than at the next
		// sweep, and refuse the decision.
		if _, xerr := e.expire(ctx, a); xerr != nil && !errors.Is(xerr, approvals.ErrNotPending) {
			return a, seen, errors.Join(err, xerr)
		}
		return a, seen, err
	}
	if err != nil {
		return decided, seen, err
	}
	e.decided(ctx, run)
	return decided, seen, nil
}

// decided tells the run's watchers that a decision moved it, and
// dispatches it when the decision queued it. A lost dispatch is recovered
// by the sweeper after DispatchGrace.
func (e *Engine) decided(ctx context.Context, run store.Run) {
	e.watch.publish(run)
	if run.Status == store.RunQueued {
		_ = e.cfg.Dispatch.Dispatch(ctx, run.ID)
	}
}

// byActor adds who did something to an event's data: "by", the actor's
// id, and "byName", the member's name when there is one.
func byActor(actor approvals.Actor, data map[string]any) map[string]any {
	data["by"] = actor.ID
	if actor.Name != "" {
		data["byName"] = actor.Name
	}
	return data
}

// validateEdit checks an edited input against the tool's schema in the
// deployment the run is pinned to.
func (e *Engine) validateEdit(ctx context.Context, a approvals.Approval, input json.RawMessage) error {
	v, err := decode(input)
	if err != nil {
		return &EditError{fmt.Errorf("input: %w", err)}
	}
	cfg, err := e.deployments.config(ctx, a.ProjectID, a.Deployment)
	if err != nil {
		return err
	}
	ag, ok := cfg.Agent(a.Agent)
	if !ok {
		return fmt.Errorf("agent %q is not in deployment %d", a.Agent, a.Deployment)
	}
	tool, ok := ag.Tool(a.Tool)
	if !ok {
		return fmt.Errorf("tool %q is not in agent %q", a.Tool, a.Agent)
	}
	if err := tool.ValidateInput(v); err != nil {
		return &EditError{err}
	}
	// An edit must not take the call where policy never lets it go: deny
	// rules bind approvers too.
	if d := ag.Evaluate(tool.Name, v, false); d.Outcome == agent.Deny {
		return &EditError{fmt.Errorf("the edited input is refused by policy: %s", d.Reason)}
	}
	return nil
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	v, err := decode(raw)
	if err != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// tellsModel reports whether a refusal of the approval's call goes back to
// the model: the call was proposed by an agent step with onDecline
// "tell-model" (in the deployment the run is pinned to).
func (e *Engine) tellsModel(ctx context.Context, a approvals.Approval) (bool, error) {
	cfg, err := e.deployments.config(ctx, a.ProjectID, a.Deployment)
	if err != nil {
		return false, fmt.Errorf("approval %s: %w", a.ID, err)
	}
	ag, ok := cfg.Agent(a.Agent)
	if !ok || a.StepIndex < 0 || a.StepIndex >= len(ag.Steps) {
		return false, nil
	}
	s := ag.Steps[a.StepIndex]
	return s.Kind == agent.AgentStep && s.Loop != nil && s.Loop.OnDecline == agent.DeclineTellModel, nil
}

// GetApproval returns an approval of the actor's project (owners and
// developers only).
func (e *Engine) GetApproval(ctx context.Context, actor approvals.Actor, id string) (approvals.Approval, error) {
	if !actor.Role.May(approvals.ReadApprovals) {
		return approvals.Approval{}, ErrForbidden
	}
	a, err := e.store.GetApproval(ctx, id)
	if err == nil && a.ProjectID != actor.ProjectID {
		err = store.ErrNotFound
	}
	if err != nil {
		return approvals.Approval{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	return a, nil
}

// ListApprovals lists the actor's project's approvals.
func (e *Engine) ListApprovals(ctx context.Context, actor approvals.Actor, f store.ApprovalFilter) (store.Page[approvals.Approval], error) {
	if !actor.Role.May(approvals.ReadApprovals) {
		return store.Page[approvals.Approval]{}, ErrForbidden
	}
	f.ProjectID = actor.ProjectID
	return e.store.ListApprovals(ctx, f)
}
