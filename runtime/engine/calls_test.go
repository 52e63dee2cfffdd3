package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"stead/approvals"
	"stead/runtime/engine"
	"stead/store"
)

// mcpKey is an MCP key of the refunds agent (rememberConfig) for alice.
var mcpKey = approvals.Actor{ProjectID: "prj_a", Role: approvals.RoleMCP, ID: "key_mcp", Agent: "refunds", EndUserID: "alice"}

// onePerPage answers every ListApprovals with at most one approval a page,
// so that a caller that reads only the first page misses the rest.
type onePerPage struct{ store.Store }

func (s *onePerPage) ListApprovals(ctx context.Context, f store.ApprovalFilter) (store.Page[approvals.Approval], error) {
	f.Limit = 1
	return s.Store.ListApprovals(ctx, f)
}

// call starts a call as key and drains the queue.
func (h *harness) call(key approvals.Actor, tool, input string) (store.Run, bool) {
	h.t.Helper()
	r, created, err := h.eng.StartCall(h.ctx, key, engine.CallParams{Tool: tool, Input: json.RawMessage(input)})
	if err != nil {
		h.t.Fatalf("call %s: %v", tool, err)
	}
	h.drain()
	return h.run(r.ID), created
}

// A call identical to one of the same key still awaiting approval (same
// tool, the same input in any key order) answers with that run; another
// input, or the same call by another key, is a call of its own. The
// pending call is found past the first page of pending approvals.
func TestCallAwaitingApprovalIsNotAskedTwice(t *testing.T) {
	t.Parallel()
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { return &onePerPage{s} } })
	h.deploy(h.owner, rememberHandlers, rememberVariant("", "", "", ""))
	first, created := h.call(mcpKey, "refundOrder", `{"orderId":"o-1","amount":12}`)
	if !created || first.Status != store.RunAwaitingApproval || first.Via != engine.ViaMCP(mcpKey.ID) {
		t.Fatalf("first call: %+v (created %v)", first, created)
	}
	other, created := h.call(mcpKey, "refundOrder", `{"orderId":"o-2","amount":12}`)
	if !created || other.ID == first.ID || other.Status != store.RunAwaitingApproval {
		t.Fatalf("a call of another input: %+v (created %v), want a run of its own", other, created)
	}
	secondKey := mcpKey
	secondKey.ID = "key_mcp2"
	byOther, created := h.call(secondKey, "refundOrder", `{"orderId":"o-1","amount":12}`)
	if !created || byOther.ID == first.ID || byOther.ID == other.ID {
		t.Fatalf("the same call by another key: %+v (created %v), want a run of its own", byOther, created)
	}
	// Three approvals pending, one a page: the first call's is not on the
	// first page (newest first) or the last.
	again, created := h.call(mcpKey, "refundOrder", `{"amount":12, "orderId":"o-1"}`)
	if created || again.ID != first.ID {
		t.Fatalf("the same call again: run %s (created %v), want run %s", again.ID, created, first.ID)
	}
}

// StartCall and CallAgent are for MCP keys of one agent and one end user;
// an input the tool's schema refuses starts no run.
func TestCallRefusals(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	noEndUser, noAgent, notMCP := mcpKey, mcpKey, mcpKey
	noEndUser.EndUserID = ""
	noAgent.Agent = ""
	notMCP.Role = approvals.RoleDeveloper
	for name, key := range map[string]approvals.Actor{"no end user": noEndUser, "no agent": noAgent, "not an MCP key": notMCP} {
		_, _, err := h.eng.StartCall(h.ctx, key, engine.CallParams{Tool: "check", Input: json.RawMessage(`{}`)})
		if !errors.Is(err, engine.ErrForbidden) {
			t.Errorf("%s: StartCall err %v, want ErrForbidden", name, err)
		}
	}
	for name, key := range map[string]approvals.Actor{"no agent": noAgent, "not an MCP key": notMCP} {
		if _, _, err := h.eng.CallAgent(h.ctx, key); !errors.Is(err, engine.ErrForbidden) {
			t.Errorf("%s: CallAgent err %v, want ErrForbidden", name, err)
		}
	}
	if v, ag, err := h.eng.CallAgent(h.ctx, mcpKey); err != nil || ag.Name != "refunds" || v != 2 {
		t.Errorf("CallAgent: deployment %d, agent %v (%v)", v, ag, err)
	}
	_, _, err := h.eng.StartCall(h.ctx, mcpKey, engine.CallParams{Tool: "refundOrder", Input: json.RawMessage(`{"orderId":"o-1"}`)})
	var ie *engine.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("a call without a required field: err %v, want an InputError", err)
	}
	runs, err := h.store.ListRuns(h.ctx, store.RunFilter{ProjectID: "prj_a"})
	if err != nil || len(runs.Items) != 0 {
		t.Fatalf("runs after refused calls: %+v (%v)", runs.Items, err)
	}
}

// CallApproval answers only an actor who may see the run.
func TestCallApprovalOnlyToWhoSeesTheRun(t *testing.T) {
	t.Parallel()
	h := setupRemember(t)
	r, _ := h.call(mcpKey, "refundOrder", `{"orderId":"o-1","amount":12}`)
	a, err := h.eng.CallApproval(h.ctx, mcpKey, r)
	if err != nil || a.ID != r.ApprovalID || a.RunID != r.ID {
		t.Fatalf("CallApproval: %+v (%v), want approval %s", a, err, r.ApprovalID)
	}
	bob := h.customer
	bob.ID, bob.EndUserID = "customer:bob", "bob"
	for _, actor := range []approvals.Actor{bob, h.other} {
		if _, err := h.eng.CallApproval(h.ctx, actor, r); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: CallApproval err %v, want ErrNotFound", actor.ID, err)
		}
	}
}
