package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"stead/api/wire"
	"stead/approvals"
	"stead/notify/slack"
	"stead/store"
)

func notificationsOf(n store.MemberNotify) *wire.NotifySettings {
	return &wire.NotifySettings{Email: string(n.EmailSetting())}
}

// notificationsRequest changes notification settings: the fields it sets.
type notificationsRequest struct {
	Email *string `json:"email"`
}

// apply sets onto n what the request sets; field prefixes the
// names in its problems ("notify." in PATCH /v1/members/{id}).
func (req notificationsRequest) apply(n store.MemberNotify, field string) (store.MemberNotify, []wire.FieldProblem) {
	if req.Email != nil {
		l := store.EmailLevel(*req.Email)
		if *req.Email == "" || !l.Valid() {
			return n, []wire.FieldProblem{{Field: field + "email", Message: fmt.Sprintf("must be %s (got %q)", quotedLevels(), *req.Email)}}
		}
		n.Email = l
	}
	return n, nil
}

func quotedLevels() string {
	q := make([]string, len(store.EmailLevels))
	for i, l := range store.EmailLevels {
		q[i] = fmt.Sprintf("%q", l)
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func memberOf(m store.Member) wire.Member {
	out := wire.Member{
		ID: m.ID, Name: m.Name, Email: m.Email, Role: string(m.Role),
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, RemovedAt: m.RemovedAt,
	}
	for _, c := range m.Chat {
		out.Chat = append(out.Chat, wire.ChatIdentity(c))
	}
	out.Notify = notificationsOf(m.Notify)
	return out
}

// memberFor is m as the caller may see it: names and roles to whoever may
// read members, emails, chat accounts and notification settings only to
// those who manage them.
func memberFor(c *caller, m store.Member) wire.Member {
	out := memberOf(m)
	if !c.actor.Role.May(approvals.ManageKeys) {
		out.Email, out.Chat, out.Notify = "", nil, nil
	}
	return out
}

type memberRequest struct {
	Name  *string `json:"name"`
	Email *string `json:"email"`
	Role  *string `json:"role"`
	// Chat, when set, replaces the member's chat accounts ([] unlinks
	// them all).
	Chat *[]wire.ChatIdentity `json:"chat"`
	// Notify, when set, changes the member's notification settings: the
	// fields it names.
	Notify *notificationsRequest `json:"notify"`
	// Key, on create, also creates a key for the member; KeyName names it.
	Key     bool   `json:"key"`
	KeyName string `json:"keyName"`
}

// check reads the fields a request sets; create needs name and role.
func (req memberRequest) check(create bool) (name, email string, role approvals.Role, problems []wire.FieldProblem) {
	if req.Name != nil || create {
		name = strings.TrimSpace(deref(req.Name))
		if p := textProblem(name, true, 100); p != "" {
			problems = append(problems, wire.FieldProblem{Field: "name", Message: p})
		}
	}
	if req.Email != nil {
		email = strings.TrimSpace(*req.Email)
		if email != "" && (len(email) > 254 || !strings.Contains(email, "@") || strings.ContainsAny(email, " \t\r\n<>")) {
			problems = append(problems, wire.FieldProblem{Field: "email", Message: fmt.Sprintf("must be an email address like ana@example.com (got %q)", email)})
		}
	}
	if req.Role != nil || create {
		role = approvals.Role(deref(req.Role))
		if !role.IsKeyRole() {
			problems = append(problems, wire.FieldProblem{Field: "role", Message: fmt.Sprintf("must be %s (got %q)", quotedRoles(approvals.KeyRoles), deref(req.Role))})
		}
	}
	if !create && (req.Key || req.KeyName != "") {
		problems = append(problems, wire.FieldProblem{Field: "key", Message: "keys are created with the member (stead members add NAME --key; POST /v1/members {\"key\": true}) or for one with POST /v1/keys {\"member\": ID}"})
	}
	if p := textProblem(req.KeyName, false, 100); p != "" {
		problems = append(problems, wire.FieldProblem{Field: "keyName", Message: p})
	}
	if req.Chat != nil {
		problems = append(problems, chatProblems(*req.Chat)...)
	}
	return name, email, role, problems
}

// maxChat bounds a member's chat accounts.
const maxChat = 10

// chatProblems checks chat accounts to link: Slack's, by team and user
// id, at most one per workspace.
func chatProblems(ids []wire.ChatIdentity) []wire.FieldProblem {
	var problems []wire.FieldProblem
	if len(ids) > maxChat {
		return []wire.FieldProblem{{Field: "chat", Message: fmt.Sprintf("links at most %d chat accounts (got %d)", maxChat, len(ids))}}
	}
	teams := map[string]bool{}
	for i, c := range ids {
		at := fmt.Sprintf("chat[%d]", i)
		if c.Kind != slack.Name {
			problems = append(problems, wire.FieldProblem{Field: at + ".kind", Message: fmt.Sprintf("must be %q, the one chat service Stead links (got %q)", slack.Name, c.Kind)})
			continue
		}
		if err := slack.CheckTeam(c.Team); err != nil {
			problems = append(problems, wire.FieldProblem{Field: at + ".team", Message: err.Error()})
		}
		if err := slack.CheckUser(c.User); err != nil {
			problems = append(problems, wire.FieldProblem{Field: at + ".user", Message: err.Error()})
		}
		if teams[c.Team] {
			problems = append(problems, wire.FieldProblem{Field: at + ".team", Message: fmt.Sprintf("a member links one Slack account per workspace; %s is linked twice", c.Team)})
		}
		teams[c.Team] = true
	}
	return problems
}

// chatOf is the chat accounts of a request as the store keeps them.
func chatOf(ids []wire.ChatIdentity) []store.ChatIdentity {
	out := make([]store.ChatIdentity, 0, len(ids))
	for _, c := range ids {
		out = append(out, store.ChatIdentity(c))
	}
	return out
}

// chatTaken refuses chat accounts already linked to another member of the
// project than memberID: a Slack user decides as one member only.
func (s *Server) chatTaken(r *http.Request, projectID, memberID string, ids []store.ChatIdentity) error {
	if len(ids) == 0 {
		return nil
	}
	ms, err := s.store.ListMembers(r.Context(), projectID, false)
	if err != nil {
		return err
	}
	for i, c := range ids {
		if other := linkedTo(ms, c, memberID); len(other) > 0 {
			return &Error{Status: http.StatusConflict, Code: CodeConflict,
				Message: fmt.Sprintf("chat[%d]: Slack user %s of team %s is already linked to member %s (%s); unlink it there first (stead members unlink-slack %s)",
					i, c.User, c.Team, other[0].Name, other[0].ID, other[0].ID)}
		}
	}
	return nil
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
	if req.Chat != nil {
		m.Chat = chatOf(*req.Chat)
		if err := s.chatTaken(r, m.ProjectID, m.ID, m.Chat); err != nil {
			return err
		}
	}
	out := memberOf(m)
	if !req.Key {
		if err := memberError(s.store.CreateMember(r.Context(), m), m.ID, ""); err != nil {
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
	if err := memberError(s.store.CreateMemberWithKey(r.Context(), m, k), m.ID, ""); err != nil {
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
		return invalid(wire.FieldProblem{Field: "removed", Message: fmt.Sprintf("must be true or false (got %q)", v)})
	}
	ms, err := s.store.ListMembers(r.Context(), c.actor.ProjectID, removed)
	if err != nil {
		return err
	}
	out := wire.MemberList{Members: make([]wire.Member, 0, len(ms))}
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

// updateMember: PATCH /v1/members/{id} {name?, email?, role?, chat?,
// notify?} → the member. A new name or role reaches the member's keys at once. chat
// replaces the member's linked chat accounts: [{"kind": "slack", "team":
// "T…", "user": "U…"}] links a Slack user, whose clicks then decide as the
// member; [] unlinks. A Slack user already linked to another member is a
// 409.
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
	if req.Chat != nil {
		m.Chat = chatOf(*req.Chat)
		if err := s.chatTaken(r, m.ProjectID, m.ID, m.Chat); err != nil {
			return err
		}
	}
	if req.Notify != nil {
		var problems []wire.FieldProblem
		if m.Notify, problems = req.Notify.apply(m.Notify, "notify."); len(problems) > 0 {
			return invalid(problems...)
		}
	}
	m.UpdatedAt = s.now()
	m, err = s.store.UpdateMember(r.Context(), m)
	if err := memberError(err, m.ID, "change its role"); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, memberOf(m))
	return nil
}

// updateMyNotifications: PATCH /v1/me/notifications {email?} → the
// caller's notification settings. Any key's: each belongs to a member,
// whose settings these are.
func (s *Server) updateMyNotifications(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req notificationsRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	if _, problems := req.apply(store.MemberNotify{}, ""); len(problems) > 0 {
		return invalid(problems...)
	}
	m, err := s.myMember(r, c)
	if err != nil {
		return err
	}
	if m.Notify, _ = req.apply(m.Notify, ""); req.Email != nil {
		m.UpdatedAt = s.now()
		m, err = s.store.UpdateMember(r.Context(), m)
		if err := memberError(err, m.ID, ""); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, notificationsOf(m.Notify))
	return nil
}

// myMember is the member the caller's key belongs to; a 409 for a credential
// that is no member's.
func (s *Server) myMember(r *http.Request, c *caller) (store.Member, error) {
	if c.kind != keyCred || c.key.MemberID == "" {
		return store.Member{}, conflict("this credential belongs to no member, so it has no notification settings; use a member's API key (stead members add NAME --role ROLE --key makes a member with one; POST /v1/keys {\"member\": ID} gives a member another)")
	}
	m, err := s.store.GetMember(r.Context(), c.actor.ProjectID, c.key.MemberID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && m.Removed()) {
		return store.Member{}, conflict("member %s of this key is no longer in the project; use another member's key", c.key.MemberID)
	}
	return m, err
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
	var taken *store.MemberTakenError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &taken):
		return memberExists(taken)
	case errors.Is(err, store.ErrNotFound):
		return notFound("member %s not found (list them with stead members list, or GET /v1/members)", id)
	case errors.Is(err, store.ErrLastOwner):
		return conflict("member %s is the project's last owner; make another member an owner (stead members set-role NAME --role owner) before you %s", id, what)
	case errors.Is(err, store.ErrConflict):
		return conflict("member %s was changed at the same time; read it again and retry", id)
	}
	return err
}

// memberExists is the 409 of a write that would give a member the name or
// email another member has: it names that member and what to do.
func memberExists(e *store.MemberTakenError) *Error {
	o := e.Existing
	has := fmt.Sprintf("is already named %q", e.Value)
	if e.Field == "email" {
		has = fmt.Sprintf("(%s) already has the email %s", o.Name, e.Value)
	}
	return &Error{
		Status: http.StatusConflict, Code: CodeMemberExists,
		Message: fmt.Sprintf("member %s %s, and a name or an email names one member of a project; "+
			"change that member instead (stead members set-role %s --role ROLE, or PATCH /v1/members/%s), or choose another %s",
			o.ID, has, o.ID, o.ID, e.Field),
		Details: map[string]any{"field": e.Field, "memberId": o.ID},
	}
}
