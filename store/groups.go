package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Group is a named set of a project's members: whom stead.json's approvers
// ask for by name ("approvers": {"group": "finance", "min": 2}). Owners
// manage groups; a group holds member ids, never copies of the members,
// so a renamed member is named anew wherever the group is shown.
//
// A member added to a group must be a member of its project and not
// removed, checked in the same write. A member removed later stays in the
// groups that had them (removing a member touches no group): a removed
// member simply cannot vote, and whoever counts votes filters them out.
type Group struct {
	ProjectID string `json:"projectId"`
	// Name identifies the group in its project and in stead.json; see
	// GroupNamePattern. It never changes.
	Name string `json:"name"`
	// Description says what the group is for; optional, at most
	// MaxGroupDescription characters.
	Description string `json:"description,omitempty"`
	// Members are member ids (Member.ID), sorted, each once, at most
	// MaxGroupMembers of them. The store sorts them and drops repeats.
	Members []string `json:"members,omitempty"`
	// Version is 1 for a new group and increments with every write;
	// UpdateGroup is conditional on it.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Limits of a group.
const (
	// MaxGroupMembers is how many members one group may have.
	MaxGroupMembers = 100
	// MaxGroupDescription is how many characters a description may have.
	MaxGroupDescription = 200
)

// GroupNamePattern is what a group's name looks like: a lowercase letter,
// then up to 39 lowercase letters, digits and hyphens ("finance",
// "refunds-eu"). People type it in stead.json, so it is short and has one
// spelling.
const GroupNamePattern = `^[a-z][a-z0-9-]{0,39}$`

var groupName = regexp.MustCompile(GroupNamePattern)

// CheckGroupName says why name cannot name a group (a *GroupError), nil if
// it can: the one rule for group names, for whatever else reads one
// (stead.json's approvers) to call.
func CheckGroupName(name string) error {
	if groupName.MatchString(name) {
		return nil
	}
	return &GroupError{Group: name, Field: "name", Problem: fmt.Sprintf(
		"must start with a lowercase letter and hold only lowercase letters, digits and hyphens, at most 40 characters, like \"finance\" or \"refunds-eu\" (got %q)", name)}
}

// GroupError refuses one field of a group (Group.Validate).
type GroupError struct {
	// Group is the group's name as given.
	Group string
	// Field is the field as the API names it: name, description, members.
	Field string
	// Problem says what is wrong and what to do, without the field:
	// "has 101 members, and a group has at most 100; split it".
	Problem string
}

func (e *GroupError) Error() string {
	if e.Field == "name" {
		return "group name " + e.Problem
	}
	return fmt.Sprintf("group %s: %s %s", e.Group, e.Field, e.Problem)
}

// Validate refuses a group no backend may write with a *GroupError naming
// the field and the fix: a name CheckGroupName refuses, a description too
// long or with control characters, an empty member id, or more than
// MaxGroupMembers members (each counted once). A group without a project
// is refused with a plain error: that is the caller's bug.
func (g Group) Validate() error {
	if g.ProjectID == "" {
		return fmt.Errorf("group %s: projectId is required", g.Name)
	}
	if err := CheckGroupName(g.Name); err != nil {
		return err
	}
	bad := func(field, format string, args ...any) error {
		return &GroupError{Group: g.Name, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	switch d := g.Description; {
	case !utf8.ValidString(d):
		return bad("description", "must be valid UTF-8")
	case utf8.RuneCountInString(d) > MaxGroupDescription:
		return bad("description", "has %d characters; shorten it to at most %d", utf8.RuneCountInString(d), MaxGroupDescription)
	case strings.IndexFunc(d, unicode.IsControl) >= 0:
		return bad("description", "must be one line of text, without control characters")
	}
	if slices.Contains(g.Members, "") {
		return bad("members", "has an empty member id; name each member by its id (mem_…)")
	}
	if n := len(sortedIDs(g.Members)); n > MaxGroupMembers {
		return bad("members", "has %d members, and a group has at most %d; split it into smaller groups", n, MaxGroupMembers)
	}
	return nil
}

// sortedIDs returns ids sorted, each once, nil for none.
func sortedIDs(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// NewGroup returns g as backends store a new group: its members sorted and
// each once, at Version 1. It refuses a group Validate refuses.
func NewGroup(g Group) (Group, error) {
	if err := g.Validate(); err != nil {
		return Group{}, err
	}
	g.Members = sortedIDs(g.Members)
	g.Version = 1
	return g, nil
}

// ValidateUpdate refuses an update no backend may write (UpdateGroup): a
// group Validate refuses, or one without UpdatedAt.
func (g Group) ValidateUpdate() error {
	if err := g.Validate(); err != nil {
		return err
	}
	if g.UpdatedAt.IsZero() {
		return fmt.Errorf("group %s: updatedAt is required", g.Name)
	}
	return nil
}

// Updated returns cur, a group as stored, changed by the update g
// (UpdateGroup): g's description, members (sorted, each once) and
// UpdatedAt, at the next version; and added, the member ids g has and cur
// has not, which the write must check as CreateGroup checks every member.
// Ids cur has stay without a check, removed members too. ErrConflict if
// g.Version is not cur's.
func (cur Group) Updated(g Group) (next Group, added []string, err error) {
	if cur.Version != g.Version {
		return Group{}, nil, fmt.Errorf("group %s: %w: version %d is not the stored %d", cur.Name, ErrConflict, g.Version, cur.Version)
	}
	next = cur
	next.Description, next.Members, next.UpdatedAt = g.Description, sortedIDs(g.Members), g.UpdatedAt
	next.Version++
	for _, id := range next.Members {
		if !slices.Contains(cur.Members, id) {
			added = append(added, id)
		}
	}
	return next, added, nil
}

// GroupMemberError is a group write refused because it adds Member, which
// is no member of the group's project (or was removed). It wraps
// ErrNotFound.
type GroupMemberError struct {
	Group  string
	Member string
	// Removed: the member was removed from the project.
	Removed bool
}

func (e *GroupMemberError) Error() string {
	if e.Removed {
		return fmt.Sprintf("group %s: member %s was removed from the project; a group takes current members only", e.Group, e.Member)
	}
	return fmt.Sprintf("group %s: %s is no member of the project; name members by their id (mem_…)", e.Group, e.Member)
}

// Unwrap makes the error match ErrNotFound.
func (e *GroupMemberError) Unwrap() error { return ErrNotFound }

// CheckGroupMember is what a group write that adds member id makes of
// reading that member (GetMember's answer, m and err): nil for a current
// member, a *GroupMemberError for a missing or removed one, err for any
// other failure.
func CheckGroupMember(group, id string, m Member, err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return &GroupMemberError{Group: group, Member: id}
	case err != nil:
		return err
	case m.Removed():
		return &GroupMemberError{Group: group, Member: id, Removed: true}
	}
	return nil
}

// Groups keeps a project's groups of members (see Group). Store has it.
type Groups interface {
	// CreateGroup stores a new group at Version 1, its members sorted and
	// each once; g must be valid (Group.Validate). Each member must be a
	// member of the project and not removed, checked in the same write.
	// Errors: ErrExists if the name is taken in the project; a
	// *GroupMemberError (which matches ErrNotFound) naming the first
	// member that is not. Nothing is written then.
	CreateGroup(ctx context.Context, g Group) error
	// GetGroup returns a group of the project; ErrNotFound if the project
	// has none of that name (a name CheckGroupName refuses included).
	GetGroup(ctx context.Context, projectID, name string) (Group, error)
	// ListGroups lists a project's groups by name.
	ListGroups(ctx context.Context, projectID string) ([]Group, error)
	// UpdateGroup stores g's Description, Members and UpdatedAt,
	// conditional on g.Version being the stored version, and returns the
	// stored group (Version incremented; name and CreatedAt kept). Members
	// the group did not have are checked as on create, in the same write;
	// those it had stay, removed ones too. Errors: ErrNotFound for a
	// missing group; ErrConflict if g.Version is stale; a
	// *GroupMemberError (which matches ErrNotFound) for a new member that
	// is no member of the project. Nothing is written then.
	UpdateGroup(ctx context.Context, g Group) (Group, error)
	// DeleteGroup deletes a group; ErrNotFound if the project has none of
	// that name (a name CheckGroupName refuses included).
	DeleteGroup(ctx context.Context, projectID, name string) error
}
