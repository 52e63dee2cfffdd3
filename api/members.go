package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"stead/approvals"
	"stead/store"
)

// Member is a person of the project, as the API shows them.
type Member struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Email     string    `json:"email,omitempty"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	RemovedAt time.Time `json:"removedAt,omitzero"`
	// Keys are the member's keys (never their secrets), in GET
	// /v1/members/{id}.
	Keys []APIKey `json:"keys,omitempty"`
	// Key is the key created with the member (POST /v1/members with
	// "key": true), its secret shown this once.
	Key *APIKey `json:"key,omitempty"`
}

// MemberList is GET /v1/members.
type MemberList struct {
	Members []Member `json:"members"`
}

func memberOf(m store.Member) Member {
	return Member{
		ID: m.ID, Name: m.Name, Email: m.Email, Role: string(m.Role),
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, RemovedAt: m.RemovedAt,
	}
}

// memberFor is m as the caller may see it: names and roles to whoever may
// read members, emails only to those who manage them.
func memberFor(c *caller, m store.Member) Member {
	out := memberOf(m)
	if !c.actor.Role.May(approvals.ManageKeys) {
		out.Email = ""
	}
	return out
}

type memberRequest struct {
	Name  *string `json:"name"`
	Email *string `json:"email"`
	Role  *string `json:"role"`
	// Key, on create, also creates a key for the member; KeyName names it.
	Key     bool   `json:"key"`
	KeyName string `json:"keyName"`
}

// check reads the fields a request sets; create needs name and role.
func (req memberRequest) check(create bool) (name, email string, role approvals.Role, problems []FieldProblem) {
	if req.Name != nil || create {
		name = strings.TrimSpace(deref(req.Name))
		if p := textProblem(name, true, 100); p != "" {
			problems = append(problems, FieldProblem{Field: "name", Message: p})
		}
	}
	if req.Email != nil {
		email = strings.TrimSpace(*req.Email)
		if email != "" && (len(email) > 254 || !strings.Contains(email, "@") || strings.ContainsAny(email, " \t\r\n<>")) {
			problems = append(problems, FieldProblem{Field: "email", Message: fmt.Sprintf("must be an email address like ana@example.com (got %q)", email)})
		}
	}
	if req.Role != nil || create {
		role = approvals.Role(deref(req.Role))
		if !role.IsKeyRole() {
			problems = append(problems, FieldProblem{Field: "role", Message: fmt.Sprintf("must be %s (got %q)", quotedRoles(approvals.KeyRoles), deref(req.Role))})
		}
	}
	if !create && (req.Key || req.KeyName != "") {
		problems = append(problems, FieldProblem{Field: "key", Message: "keys are created with POST /v1/keys {\"member\": ID} or with the member (POST /v1/members)"})
	}
	if p := textProblem(req.KeyName, false, 100); p != "" {
		problems = append(problems, FieldProblem{Field: "keyName", Message: p})
	}
	return name, email, role, problems
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// createMember: POST /v1/members {name, email?, role, key?, keyName?} → 201
// with the member (and, with "key": true, its first key, secret included).
func (s *Server) createMember(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req memberRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	name, email, role, problems := req.check(true)
	if len(problems) > 0 {
		return invalid(problems...)
	}
	now := s.now()
	var raw [10]byte
	if _, err := io.ReadFull(lockedEntropy{s}, raw[:]); err != nil {
		return fmt.Errorf("make member id: %w", err)
	}
	id := "mem_" + b32.EncodeToString(raw[:])
	m := store.Member{ID: id, ProjectID: c.actor.ProjectID, Name: name, Email: email, Role: role, CreatedAt: now, UpdatedAt: now}
	out := memberOf(m)
	if !req.Key {
		if err := s.store.CreateMember(r.Context(), m); err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, out)
		return nil
	}
	k, secret, err := newAPIKey(lockedEntropy{s}, c.actor.ProjectID, req.KeyName, role, now)
	if err != nil {
		return err
	}
	k.MemberID, k.MemberName = m.ID, m.Name
	if err := s.store.CreateMemberWithKey(r.Context(), m, k); err != nil {
		return err
	}
	key := keyOf(k)
	key.Key = secret
	out.Key = &key
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// listMembers: GET /v1/members[?removed=true] → the project's members,
// oldest first.
func (s *Server) listMembers(w http.ResponseWriter, r *http.Request, c *caller) error {
	var removed bool
	switch v := r.URL.Query().Get("removed"); v {
	case "", "false":
	case "true":
		removed = true
	default:
		return invalid(FieldProblem{Field: "removed", Message: fmt.Sprintf("must be true or false (got %q)", v)})
	}
	ms, err := s.store.ListMembers(r.Context(), c.actor.ProjectID, removed)
	if err != nil {
		return err
	}
	out := MemberList{Members: make([]Member, 0, len(ms))}
	for _, m := range ms {
		out.Members = append(out.Members, memberFor(c, m))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getMember: GET /v1/members/{id} → the member with its keys.
func (s *Server) getMember(w http.ResponseWriter, r *http.Request, c *caller) error {
	m, err := s.member(r, c)
	if err != nil {
		return err
	}
	out := memberFor(c, m)
	if c.actor.Role.May(approvals.ManageKeys) {
		keys, err := s.store.ListAPIKeys(r.Context(), c.actor.ProjectID)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if k.MemberID == m.ID {
				out.Keys = append(out.Keys, keyOf(k))
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// updateMember: PATCH /v1/members/{id} {name?, email?, role?} → the member.
// A new name or role reaches the member's keys at once.
func (s *Server) updateMember(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req memberRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	name, email, role, problems := req.check(false)
	if len(problems) > 0 {
		return invalid(problems...)
	}
	m, err := s.member(r, c)
	if err != nil {
		return err
	}
	if req.Name != nil {
		m.Name = name
	}
	if req.Email != nil {
		m.Email = email
	}
	if req.Role != nil {
		m.Role = role
	}
	m.UpdatedAt = s.now()
	m, err = s.store.UpdateMember(r.Context(), m)
	if err := memberError(err, m.ID, "change its role"); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, memberOf(m))
	return nil
}

// removeMember: DELETE /v1/members/{id} → the removed member. Its keys are
// revoked with it; traces keep its name.
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request, c *caller) error {
	id := r.PathValue("id")
	m, err := s.store.RemoveMember(r.Context(), c.actor.ProjectID, id, s.now())
	if err := memberError(err, id, "remove them"); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, memberOf(m))
	return nil
}

func (s *Server) member(r *http.Request, c *caller) (store.Member, error) {
	id := r.PathValue("id")
	m, err := s.store.GetMember(r.Context(), c.actor.ProjectID, id)
	return m, memberError(err, id, "")
}

// memberError translates the store's refusals for member id.
func memberError(err error, id, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return notFound("member %s not found (list them with GET /v1/members)", id)
	case errors.Is(err, store.ErrLastOwner):
		return conflict("member %s is the project's last owner; make another member an owner before you %s", id, what)
	case errors.Is(err, store.ErrConflict):
		return conflict("member %s was changed at the same time; read it again and retry", id)
	}
	return err
}
