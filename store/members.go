package store

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"stead/approvals"
)

// Member is a person (or a service) of a project: who approvals, traces and
// lists name. Every API key belongs to one member and carries a copy of its
// role and name (APIKey.Role, APIKey.MemberName), which the store keeps in
// step with the member, so that the auth path stays one read.
//
// Members are soft-removed: RemovedAt is set and the member's active keys
// are revoked in the same write, so that traces can still name them and
// they can no longer authenticate or vote.
//
// No two current members of a project share a name or an email: a write
// that would give a member one another has is refused (MemberTakenError),
// in the write, so two at the same moment cannot both get it. Keys are
// named freely, so a key written without a member (an older key's member,
// below) may still share its name.
//
// # Older keys
//
// A key stored without MemberID (written before members existed) belongs
// to a member of its own, LegacyMember: its id is LegacyMemberID of the
// key's id, its name the key's, its role the key's, and it counts as
// removed from when the key was revoked. The store makes it up on every
// read rather than migrating records, so that stores written by older
// versions — or by one still running beside a newer one — need no step to
// keep working, on either backend. The first write that changes such a
// member (UpdateMember, RemoveMember, or a new key for it) stores it as a
// member like any other and binds the key to it, in the same write.
type Member struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	// Name is the display name: "Ana Diaz". Required.
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
	// Role is one a key may have (approvals.KeyRoles); the member's keys
	// have it too.
	Role approvals.Role `json:"role"`
	// Chat are the member's chat identities, for notifications.
	Chat []ChatIdentity `json:"chat,omitempty"`
	// Notify are the member's notification settings.
	Notify MemberNotify `json:"notify,omitzero"`
	// Version is 1 for a new member and increments with every write;
	// UpdateMember is conditional on it.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// RemovedAt is zero while the member is one.
	RemovedAt time.Time `json:"removedAt,omitzero"`
}

// ChatIdentity links a member to a chat account by the ids the chat
// service gives the workspace and the user, never by an editable handle.
type ChatIdentity struct {
	// Kind is the chat service: "slack".
	Kind string `json:"kind"`
	Team string `json:"team"`
	User string `json:"user"`
}

// MemberNotify are a member's notification settings. They are about what
// is sent to the member: a channel that posts to a shared place (a Slack
// channel) does not read them.
type MemberNotify struct {
	// Email is which mail the member gets about approvals they may decide:
	// one of EmailLevels; empty is EmailAll.
	Email EmailLevel `json:"email,omitempty"`
}

// EmailLevel is how much mail a member gets (MemberNotify.Email).
type EmailLevel string

// The email levels.
const (
	// EmailAll: every approval the member may decide, with its reminders,
	// escalations and expiry warnings. The default.
	EmailAll EmailLevel = "all"
	// EmailRequests: the request of each approval only.
	EmailRequests EmailLevel = "requests"
	// EmailNone: no mail.
	EmailNone EmailLevel = "none"
)

// EmailLevels are the levels MemberNotify.Email may have (or be empty).
var EmailLevels = []EmailLevel{EmailAll, EmailRequests, EmailNone}

// Valid reports whether l is one of EmailLevels, or empty (EmailAll).
func (l EmailLevel) Valid() bool { return l == "" || slices.Contains(EmailLevels, l) }

// EmailSetting is n.Email, or EmailAll when it is empty.
func (n MemberNotify) EmailSetting() EmailLevel { return cmp.Or(n.Email, EmailAll) }

// Removed reports whether the member was removed from its project.
func (m Member) Removed() bool { return !m.RemovedAt.IsZero() }

// Validate refuses a member no backend may write: without id, project or
// name, with a role no key may have, with an incomplete chat identity, or
// with an email level not one of EmailLevels.
func (m Member) Validate() error {
	switch {
	case m.ID == "" || m.ProjectID == "":
		return errors.New("member: id and projectId are required")
	case strings.TrimSpace(m.Name) == "":
		return fmt.Errorf("member %s: a name is required", m.ID)
	case !m.Role.IsKeyRole():
		return fmt.Errorf("member %s: role %q is not one of %v", m.ID, m.Role, approvals.KeyRoles)
	case !m.Notify.Email.Valid():
		return fmt.Errorf("member %s: email notifications %q are not one of %v", m.ID, m.Notify.Email, EmailLevels)
	}
	for i, c := range m.Chat {
		if c.Kind == "" || c.Team == "" || c.User == "" {
			return fmt.Errorf("member %s: chat identity %d needs kind, team and user", m.ID, i)
		}
	}
	return nil
}

// NewMember returns m as backends store a new member: at Version 1. It
// refuses a member Validate refuses, or one already removed.
func NewMember(m Member) (Member, error) {
	if err := m.Validate(); err != nil {
		return Member{}, err
	}
	if m.Removed() {
		return Member{}, fmt.Errorf("member %s: a new member cannot be removed", m.ID)
	}
	m.Version = 1
	return m, nil
}

// NewMemberWithKey returns m and k as backends store a new member with its
// first key: NewMember(m), and k bound to it (Bind), with an id and a hash.
func NewMemberWithKey(m Member, k APIKey) (Member, APIKey, error) {
	m, err := NewMember(m)
	if err != nil {
		return Member{}, APIKey{}, err
	}
	if k, err = m.Bind(k); err != nil {
		return Member{}, APIKey{}, err
	}
	if k.ID == "" || k.Hash == "" {
		return Member{}, APIKey{}, fmt.Errorf("member %s: its key's id and hash are required", m.ID)
	}
	return m, k, nil
}

// ValidateUpdate refuses an update no backend may write (UpdateMember): a
// member Validate refuses, or one without UpdatedAt.
func (m Member) ValidateUpdate() error {
	if err := m.Validate(); err != nil {
		return err
	}
	if m.UpdatedAt.IsZero() {
		return fmt.Errorf("member %s: updatedAt is required", m.ID)
	}
	return nil
}

// MemberTakenError refuses a write (CreateMember, CreateMemberWithKey,
// UpdateMember) that would give a member a name or an email another
// current member of its project has: people name members by either (the
// CLI resolves a NAME by exact name or email), so each must name one.
// Names compare exactly, emails without regard to case; removed members
// hold neither. It wraps ErrExists.
type MemberTakenError struct {
	// Field is what is taken: "name" or "email".
	Field string
	// Value is the name or email as the write gave it.
	Value string
	// Existing is the member that has it.
	Existing Member
}

func (e *MemberTakenError) Error() string {
	return fmt.Sprintf("member %s already has the %s %q", e.Existing.ID, e.Field, e.Value)
}

func (e *MemberTakenError) Unwrap() error { return ErrExists }

// NamesChange reports whether m, a write of the member was (the zero
// Member for a new one), gives it a name or an email it did not have:
// whether the write must be checked with Taken.
func (m Member) NamesChange(was Member) bool {
	return m.Name != was.Name || (m.Email != "" && !strings.EqualFold(m.Email, was.Email))
}

// Taken refuses m, a write of the member was (the zero Member for a new
// one), with a *MemberTakenError if another current member of ms — its
// project's members, as ListMembers lists them — has a name or an email
// the write gives it (NamesChange). What the write keeps is not checked,
// so that members stored before the rule can still be changed otherwise.
func (m Member) Taken(was Member, ms []Member) error {
	other := func(o Member) bool { return o.ID != m.ID && !o.Removed() }
	if m.Name != was.Name {
		for _, o := range ms {
			if other(o) && o.Name == m.Name {
				return &MemberTakenError{Field: "name", Value: m.Name, Existing: o}
			}
		}
	}
	if m.Email != "" && !strings.EqualFold(m.Email, was.Email) {
		for _, o := range ms {
			if other(o) && strings.EqualFold(o.Email, m.Email) {
				return &MemberTakenError{Field: "email", Value: m.Email, Existing: o}
			}
		}
	}
	return nil
}

// Updated returns cur, a member as stored, changed by the update m
// (UpdateMember): m's name, email, role, chat, notification settings and
// UpdatedAt, at the next
// version. ErrNotFound if cur is removed, ErrConflict if m.Version is not
// cur's.
func (cur Member) Updated(m Member) (Member, error) {
	switch {
	case cur.Removed():
		return Member{}, ErrNotFound
	case cur.Version != m.Version:
		return Member{}, ErrConflict
	}
	next := cur
	next.Name, next.Email, next.Role, next.Chat, next.UpdatedAt = m.Name, m.Email, m.Role, m.Chat, m.UpdatedAt
	next.Notify = m.Notify
	next.Version++
	return next, nil
}

// Remove returns cur, a member as stored, removed at at (RemoveMember): at
// the next version, updated then.
func (cur Member) Remove(at time.Time) Member {
	cur.RemovedAt, cur.UpdatedAt = at, at
	cur.Version++
	return cur
}

// SortMembers puts members in list order: oldest first, by CreatedAt, then
// id.
func SortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
}

// Bind returns k as a key of m: MemberID and Role filled in from m where k
// leaves them empty, MemberName always m's. A role that differs from the
// member's is refused with an error wrapping ErrConflict (the member's
// role changed since the caller read it, or the caller asked for another
// role than the member has): a key never has a role its member lacks.
func (m Member) Bind(k APIKey) (APIKey, error) {
	if k.MemberID == "" {
		k.MemberID = m.ID
	}
	if k.Role == "" {
		k.Role = m.Role
	}
	k.MemberName = m.Name
	switch {
	case k.ProjectID != m.ProjectID || k.MemberID != m.ID:
		return APIKey{}, fmt.Errorf("key %s of member %s: it names member %s of project %s", k.ID, m.ID, k.MemberID, k.ProjectID)
	case k.Role != m.Role:
		return APIKey{}, fmt.Errorf("key %s: %w: its role is %s, its member %s's is %s", k.ID, ErrConflict, k.Role, m.ID, m.Role)
	}
	return k, nil
}

// LegacyMemberID is the id of the member that a key stored without
// MemberID belongs to (see Member, "Older keys"). The key's whole id is in
// it, so that no two keys share one, and the store finds the key from it.
func LegacyMemberID(keyID string) string { return legacyPrefix + keyID }

const legacyPrefix = "mem_"

// LegacyKeyID is the id of the key whose member has id memberID, if
// memberID is of the form LegacyMemberID makes.
func LegacyKeyID(memberID string) (string, bool) {
	id, ok := strings.CutPrefix(memberID, legacyPrefix)
	return id, ok && id != ""
}

// LegacyMember is the member that k, a key stored without MemberID,
// belongs to: named after the key (its id when it has no name), with the
// key's role, at Version 1, removed when the key was revoked.
func LegacyMember(k APIKey) Member {
	name := k.Name
	if strings.TrimSpace(name) == "" {
		name = k.ID
	}
	updated := k.CreatedAt
	if !k.RevokedAt.IsZero() {
		updated = k.RevokedAt
	}
	return Member{
		ID: LegacyMemberID(k.ID), ProjectID: k.ProjectID, Name: name, Role: k.Role, Version: 1,
		CreatedAt: k.CreatedAt, UpdatedAt: updated, RemovedAt: k.RevokedAt,
	}
}

// Legacy reports whether k was stored without MemberID.
func (k APIKey) Legacy() bool { return k.MemberID == "" }

// WithMember returns k as the store hands keys out: a key stored without
// MemberID names its LegacyMember.
func (k APIKey) WithMember() APIKey {
	if k.Legacy() {
		m := LegacyMember(k)
		k.MemberID, k.MemberName = m.ID, m.Name
	}
	return k
}

// ActiveOwner reports whether k is an active owner key: one of those a
// project must keep one of (ErrLastOwner).
func (k APIKey) ActiveOwner() bool {
	return k.Role == approvals.RoleOwner && k.RevokedAt.IsZero()
}

// ActiveOwner reports whether m is an active owner member: one of those a
// project must keep one of (ErrLastOwner).
func (m Member) ActiveOwner() bool {
	return m.Role == approvals.RoleOwner && m.RemovedAt.IsZero()
}
