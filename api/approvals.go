package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"stead/api/wire"
	"stead/approvals"
	"stead/runtime/engine"
	"stead/store"
)

// maxNoteLen bounds a decision's note.
const maxNoteLen = 2000

// listApprovals: GET /v1/approvals?status=&order=&runId=&cursor=&limit=:
// status and order as package store parses them (ParseApprovalStatus,
// ParseApprovalOrder; by default pending, newest first).
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := newQuery(r)
	f := store.ApprovalFilter{RunID: q.str("runId"), Cursor: q.str("cursor"), Limit: q.limit()}
	var err error
	f.Status, err = store.ParseApprovalStatus(q.str("status"))
	q.check(err)
	f.Order, err = store.ParseApprovalOrder(q.str("order"))
	q.check(err)
	if err := q.err(); err != nil {
		return err
	}
	page, err := s.engine.ListApprovals(r.Context(), c.actor, f)
	if err != nil {
		return err
	}
	out := wire.ApprovalList{Approvals: make([]wire.Approval, 0, len(page.Items)), NextCursor: page.NextCursor}
	for _, a := range page.Items {
		out.Approvals = append(out.Approvals, approvalOf(a))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getApproval: GET /v1/approvals/{id}.
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, c *caller) error {
	id := r.PathValue("id")
	a, err := s.engine.GetApproval(r.Context(), c.actor, id)
	if err != nil {
		return approvalError(id, err, approvals.Approval{}, s.now(), "read")
	}
	writeJSON(w, http.StatusOK, approvalOf(a))
	return nil
}

type approveRequest struct {
	Note string `json:"note"`
	// Input, when set, replaces the call's input; it is checked against the
	// tool's input schema first. Like the whole body it has been read
	// strictly (no name twice, valid UTF-8, bounded depth); its names are
	// the tool's, so any are allowed.
	Input json.RawMessage `json:"input"`
	// InputDigest, when set, is the approval's inputDigest as the decider
	// saw it: the decision is refused (approval_changed) if the input has
	// changed since (another approver's edit).
	InputDigest string `json:"inputDigest"`
	// Remember, when set, also remembers the decision (a rule that lets
	// matching calls through for a while, /v1/rules).
	Remember *rememberRequest `json:"remember"`
}

// rememberRequest is approve's "remember": {"for": "24h"}, and optionally
// "exact": true (the approved input only) or "when" (a JSON Schema later
// inputs must satisfy).
type rememberRequest struct {
	For   string          `json:"for"`
	Exact bool            `json:"exact"`
	When  json.RawMessage `json:"when"`
}

// approveResponse is the approved approval and, with remember, the rule.
type approveResponse struct {
	wire.Approval
	RememberedRule *wire.Rule `json:"rememberedRule,omitempty"`
	// NotRemembered says why an approval that went through remembered
	// nothing (rare: the rule failed after the decision).
	NotRemembered string `json:"notRemembered,omitempty"`
}

type denyRequest struct {
	Note        string `json:"note"`
	InputDigest string `json:"inputDigest"`
}

// approve: POST /v1/approvals/{id}/approve {note?, input?} → 200 with the
// approved approval; its run is queued to resume with exactly that input.
func (s *Server) approve(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req approveRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	if p := textNoteProblem(req.Note); p != "" {
		return invalidField("note", "%s", p)
	}
	if isNull(req.Input) {
		req.Input = nil
	}
	p := engine.DecideParams{ApprovalID: r.PathValue("id"), Approve: true, Note: req.Note, Input: req.Input, Seen: req.InputDigest}
	if req.Remember == nil {
		return s.decide(w, r, c, p)
	}
	rp := engine.RememberParams{Exact: req.Remember.Exact, When: req.Remember.When}
	if isNull(rp.When) {
		rp.When = nil
	}
	d, err := time.ParseDuration(req.Remember.For)
	if err != nil || d <= 0 {
		return invalidField("remember.for", `must be a duration longer than 0, like "1h" or "24h" (got %q)`, req.Remember.For)
	}
	rp.For = d
	a, rule, err := s.engine.ApproveAndRemember(r.Context(), c.actor, p, rp)
	var notRemembered *engine.NotRememberedError
	if errors.As(err, &notRemembered) {
		// The decision went through: say so, and why nothing is remembered.
		writeJSON(w, http.StatusOK, approveResponse{Approval: approvalOf(a), NotRemembered: notRemembered.Error()})
		return nil
	}
	if err != nil {
		var re *engine.RememberError
		if errors.As(err, &re) {
			return err // the API's words for it, naming remember.<field>
		}
		return approvalError(p.ApprovalID, err, a, s.now(), "approved")
	}
	info, err := s.engine.GetRule(r.Context(), c.actor, rule.ID)
	if err != nil {
		return err
	}
	out := ruleOf(info)
	writeJSON(w, http.StatusOK, approveResponse{Approval: approvalOf(a), RememberedRule: &out})
	return nil
}

// checkInput: POST /v1/approvals/{id}/check-input {input} → 200 {"ok":
// true} when an approve with this edited input would pass the tool's input
// schema and policy, else the 400 that approve would give. Nothing is
// decided; the console checks an edit as it is typed.
func (s *Server) checkInput(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req struct {
		Input json.RawMessage `json:"input"`
	}
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	if len(req.Input) == 0 {
		return invalidField("input", "is required: the edited input to check")
	}
	id := r.PathValue("id")
	if err := s.engine.CheckEdit(r.Context(), c.actor, id, req.Input); err != nil {
		return approvalError(id, err, approvals.Approval{}, s.now(), "approved")
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// deny: POST /v1/approvals/{id}/deny {note?} → 200 with the denied
// approval; its run fails with approval-denied and the note.
func (s *Server) deny(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req denyRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	if p := textNoteProblem(req.Note); p != "" {
		return invalidField("note", "%s", p)
	}
	return s.decide(w, r, c, engine.DecideParams{ApprovalID: r.PathValue("id"), Note: req.Note, Seen: req.InputDigest})
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request, c *caller, p engine.DecideParams) error {
	a, err := s.engine.Decide(r.Context(), c.actor, p)
	if err != nil {
		verb := "denied"
		if p.Approve {
			verb = "approved"
		}
		return approvalError(p.ApprovalID, err, a, s.now(), verb)
	}
	writeJSON(w, http.StatusOK, approvalOf(a))
	return nil
}

// approvalError words what refused a read or decision of an approval. a is
// the approval as it stands, when the engine returned it.
// verb is what was attempted ("approved", "denied").
func approvalError(id string, err error, a approvals.Approval, now time.Time, verb string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("approval %s not found", id)
	case errors.Is(err, engine.ErrForbidden):
		return forbidden("deciding an approval needs an owner, developer or approver key of the project")
	case errors.Is(err, approvals.ErrSeparated):
		return forbidden("you started this run, and its approvals may not be %s by its requester (%s); ask another member", verb, a.SeparatedBy)
	case a.ID == "":
		// No approval to describe: the generic words.
	case errors.Is(err, approvals.ErrNotEligible):
		return &Error{Status: http.StatusForbidden, Code: CodeNotAnApprover, Message: approvals.VoteMessage(a, err, verb), Details: approvalState(a)}
	case errors.Is(err, approvals.ErrAlreadyVoted):
		return &Error{Status: http.StatusConflict, Code: CodeAlreadyVoted, Message: approvals.VoteMessage(a, err, verb), Details: approvalState(a)}
	case errors.Is(err, approvals.ErrChanged):
		return &Error{Status: http.StatusConflict, Code: CodeApprovalChanged, Message: approvals.VoteMessage(a, err, verb), Details: approvalState(a)}
	case errors.Is(err, approvals.ErrExpired):
		// The engine settles it as expired on the spot.
		expired := a
		expired.Status = approvals.Expired
		return &Error{
			Status: http.StatusConflict, Code: CodeApprovalExpired,
			Message: approvals.ExpiredMessage(a, now, verb),
			Details: approvalState(expired),
		}
	case errors.Is(err, approvals.ErrNotPending):
		code := CodeApprovalNotPending
		if a.Status == approvals.Expired {
			code = CodeApprovalExpired
		}
		return &Error{
			Status: http.StatusConflict, Code: code,
			Message: approvals.NotPendingMessage(a, now, verb),
			Details: approvalState(a),
		}
	}
	return err
}

func approvalState(a approvals.Approval) map[string]any {
	d := map[string]any{"approvalId": a.ID, "runId": a.RunID, "status": a.Status, "expiresAt": a.ExpiresAt, "inputDigest": a.InputDigest}
	if a.HasQuorum() {
		d["progress"] = a.ProgressText()
	}
	if a.DecidedBy != "" {
		d["decidedBy"] = a.DecidedBy
	}
	if a.DecidedByName != "" {
		d["decidedByName"] = a.DecidedByName
	}
	if !a.DecidedAt.IsZero() {
		d["decidedAt"] = a.DecidedAt
	}
	return d
}

func textNoteProblem(note string) string {
	if len([]rune(note)) > maxNoteLen {
		return "must be at most 2000 characters long"
	}
	return ""
}
