package api

import (
	"errors"
	"net/http"

	"stead/api/wire"
	"stead/runtime/engine"
	"stead/store"
)

// Rule scopes, as Rule.Scope names them.
const (
	RuleScopeAny    = "any"
	RuleScopeExact  = "exact"
	RuleScopeSchema = "schema"
)

func ruleOf(r engine.RuleInfo) wire.Rule {
	scope := RuleScopeAny
	switch {
	case r.InputDigest != "":
		scope = RuleScopeExact
	case r.When != nil:
		scope = RuleScopeSchema
	}
	return wire.Rule{
		ID: r.ID, Agent: r.Agent, Tool: r.Tool, EndUserID: r.EndUserID,
		Scope: scope, InputDigest: r.InputDigest, When: r.When,
		ApprovalID: r.ApprovalID, RunID: r.RunID, Deployment: r.Deployment,
		CreatedBy: r.CreatedBy, CreatedByName: r.CreatedByName, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		RevokedAt: r.RevokedAt, RevokedBy: r.RevokedBy, RevokedByName: r.RevokedByName,
		State: string(r.State), EndedBy: r.EndedBy, Ended: r.Ended,
	}
}

// listRules: GET /v1/rules?agent&tool&endUserId&status=active|all&cursor&limit
// → the project's remembered decisions, newest first: those neither
// expired nor revoked (status=active, the default), or all of them.
func (s *Server) listRules(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := newQuery(r)
	f := store.RuleFilter{Agent: q.str("agent"), Tool: q.str("tool"), EndUserID: q.str("endUserId"), Cursor: q.str("cursor"), Limit: q.limit()}
	var err error
	f.All, err = store.ParseRuleStatus(q.str("status"))
	q.check(err)
	if err := q.err(); err != nil {
		return err
	}
	page, err := s.engine.ListRules(r.Context(), c.actor, f)
	if err != nil {
		return err
	}
	out := wire.RuleList{Rules: make([]wire.Rule, 0, len(page.Items)), NextCursor: page.NextCursor}
	for _, rule := range page.Items {
		out.Rules = append(out.Rules, ruleOf(rule))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getRule: GET /v1/rules/{id}.
func (s *Server) getRule(w http.ResponseWriter, r *http.Request, c *caller) error {
	id := r.PathValue("id")
	rule, err := s.engine.GetRule(r.Context(), c.actor, id)
	if err != nil {
		return ruleError(id, err)
	}
	writeJSON(w, http.StatusOK, ruleOf(rule))
	return nil
}

// revokeRule: DELETE /v1/rules/{id} → the revoked rule. Calls it let
// through ask again from now on; revoking twice keeps the first.
func (s *Server) revokeRule(w http.ResponseWriter, r *http.Request, c *caller) error {
	id := r.PathValue("id")
	rule, err := s.engine.RevokeRule(r.Context(), c.actor, id)
	if err != nil {
		return ruleError(id, err)
	}
	writeJSON(w, http.StatusOK, ruleOf(rule))
	return nil
}

// ruleError translates the refusals for rule id.
func ruleError(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound("rule %s not found (list them with stead rules list --all, or GET /v1/rules?status=all)", id)
	}
	return err
}

// rememberInvalid is the response to a decision that cannot be remembered
// (engine.Remember): 400 naming the part of the request's "remember" at
// fault ("remember.for"), or "remember" itself when the approval or the
// tool's settings are (details.code says which); 409 when the approval was
// not approved by the caller.
func rememberInvalid(e *engine.RememberError) *Error {
	field := "remember"
	if e.Field != "" {
		field += "." + e.Field
	}
	out := invalidField(field, "%s", e.Message)
	out.Details["code"] = e.Code()
	if e.Code() == engine.RememberNotDecider {
		out.Status, out.Code = http.StatusConflict, CodeConflict
	}
	return out
}
