package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"stead/api/wire"
	"stead/approvals"
	"stead/store"
)

// groupRetries is how often PATCH /v1/groups/{name} reads and writes
// again when another change of the group came between.
const groupRetries = 5

// groupsOf shows gs with their members named from the project's members
// (removed ones too), read once.
func (s *Server) groupsOf(ctx context.Context, projectID string, gs ...store.Group) ([]wire.Group, error) {
	ms, err := s.store.ListMembers(ctx, projectID, true)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]store.Member, len(ms))
	for _, m := range ms {
		byID[m.ID] = m
	}
	out := make([]wire.Group, len(gs))
	for i, g := range gs {
		out[i] = wire.Group{Name: g.Name, Description: g.Description, Members: make([]wire.GroupMember, 0, len(g.Members)), Version: g.Version, CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt}
		for _, id := range g.Members {
			m, ok := byID[id]
			if !ok {
				// Members are never deleted, only removed; shown by id
				// should one be missing all the same.
				m = store.Member{ID: id, Name: id, RemovedAt: g.UpdatedAt}
			}
			out[i].Members = append(out[i].Members, wire.GroupMember{ID: m.ID, Name: m.Name, Role: string(m.Role), Removed: m.Removed()})
		}
		slices.SortFunc(out[i].Members, func(a, b wire.GroupMember) int {
			return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
		})
	}
	return out, nil
}

func (s *Server) writeGroup(w http.ResponseWriter, r *http.Request, c *caller, status int, g store.Group) error {
	out, err := s.groupsOf(r.Context(), c.actor.ProjectID, g)
	if err != nil {
		return err
	}
	writeJSON(w, status, out[0])
	return nil
}

type createGroupRequest struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Members     []string `json:"members"`
}

// createGroup: POST /v1/groups {name, description?, members?} → 201 with
// the group. Each member is a current member's id.
func (s *Server) createGroup(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req createGroupRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	if err := checkMemberIDs("members", req.Members); err != nil {
		return err
	}
	if err := s.checkDeciders(r.Context(), c.actor.ProjectID, "members", req.Members); err != nil {
		return err
	}
	now := s.now()
	g := store.Group{ProjectID: c.actor.ProjectID, Name: req.Name, Description: req.Description, Members: req.Members, CreatedAt: now, UpdatedAt: now}
	if err := g.Validate(); err != nil {
		return groupError(err, g.Name, "members", req.Members)
	}
	if err := s.store.CreateGroup(r.Context(), g); err != nil {
		return groupError(err, g.Name, "members", req.Members)
	}
	stored, err := store.NewGroup(g) // the group as the store keeps it
	if err != nil {
		return err
	}
	return s.writeGroup(w, r, c, http.StatusCreated, stored)
}

// listGroups: GET /v1/groups → the project's groups, by name.
func (s *Server) listGroups(w http.ResponseWriter, r *http.Request, c *caller) error {
	gs, err := s.store.ListGroups(r.Context(), c.actor.ProjectID)
	if err != nil {
		return err
	}
	out, err := s.groupsOf(r.Context(), c.actor.ProjectID, gs...)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.GroupList{Groups: out})
	return nil
}

// getGroup: GET /v1/groups/{name} → the group.
func (s *Server) getGroup(w http.ResponseWriter, r *http.Request, c *caller) error {
	g, err := s.group(r, c)
	if err != nil {
		return err
	}
	return s.writeGroup(w, r, c, http.StatusOK, g)
}

type updateGroupRequest struct {
	Description *string  `json:"description"`
	Add         []string `json:"add"`
	Remove      []string `json:"remove"`
}

// updateGroup: PATCH /v1/groups/{name} {description?, add?, remove?} → the
// group. The server reads the group, applies the change and writes it
// conditional on the version it read, reading again when another change
// came between. Adding a member the group has changes nothing; removing
// one it has not is a 409 that says who it has. A member added must be one
// who may decide approvals (checkDeciders).
func (s *Server) updateGroup(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req updateGroupRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	if err := checkMemberIDs("add", req.Add); err != nil {
		return err
	}
	if err := checkMemberIDs("remove", req.Remove); err != nil {
		return err
	}
	for i, id := range req.Add {
		if slices.Contains(req.Remove, id) {
			return invalidField(fmt.Sprintf("add[%d]", i), "%s is in both add and remove; name it in one of them", id)
		}
	}
	if err := s.checkDeciders(r.Context(), c.actor.ProjectID, "add", req.Add); err != nil {
		return err
	}
	for range groupRetries {
		cur, err := s.group(r, c)
		if err != nil {
			return err
		}
		if err := s.notInGroup(r.Context(), cur, req.Remove); err != nil {
			return err
		}
		next := cur
		if req.Description != nil {
			next.Description = *req.Description
		}
		next.Members = slices.DeleteFunc(slices.Concat(cur.Members, req.Add), func(id string) bool { return slices.Contains(req.Remove, id) })
		slices.Sort(next.Members)
		next.Members = slices.Compact(next.Members)
		if next.Description == cur.Description && slices.Equal(next.Members, cur.Members) {
			return s.writeGroup(w, r, c, http.StatusOK, cur) // nothing to change
		}
		next.UpdatedAt = s.now()
		if err := next.Validate(); err != nil {
			return groupError(err, cur.Name, "add", req.Add)
		}
		stored, err := s.store.UpdateGroup(r.Context(), next)
		if errors.Is(err, store.ErrConflict) {
			continue // changed since read: apply the change to what it is now
		}
		if err != nil {
			return groupError(err, cur.Name, "add", req.Add)
		}
		return s.writeGroup(w, r, c, http.StatusOK, stored)
	}
	return conflict("group %s was changed by others %d times while this change was applied; try again", r.PathValue("name"), groupRetries)
}

// deleteGroup: DELETE /v1/groups/{name} → the group as it was just before.
// stead.json may still name the group: approvals that ask for it then
// have no one to ask.
func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request, c *caller) error {
	g, err := s.group(r, c)
	if err != nil {
		return err
	}
	if err := s.store.DeleteGroup(r.Context(), c.actor.ProjectID, g.Name); err != nil {
		return groupError(err, g.Name, "", nil)
	}
	return s.writeGroup(w, r, c, http.StatusOK, g)
}

// group reads the group the path names; a name no group can have is not
// found without a read.
func (s *Server) group(r *http.Request, c *caller) (store.Group, error) {
	name := r.PathValue("name")
	if store.CheckGroupName(name) != nil {
		return store.Group{}, groupNotFound(name)
	}
	g, err := s.store.GetGroup(r.Context(), c.actor.ProjectID, name)
	return g, groupError(err, name, "", nil)
}

// checkDeciders refuses to put in a group (the body's field lists ids) a
// member whose role may not decide approvals: a viewer would never count
// toward what the group is asked for. Ids of no current member are left
// to the store, which refuses them in the write.
func (s *Server) checkDeciders(ctx context.Context, projectID, field string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	ms, err := s.store.ListMembers(ctx, projectID, false)
	if err != nil {
		return err
	}
	for i, id := range ids {
		j := slices.IndexFunc(ms, func(m store.Member) bool { return m.ID == id })
		if j < 0 || ms[j].Role.May(approvals.Decide) {
			continue
		}
		m := ms[j]
		return invalidField(fmt.Sprintf("%s[%d]", field, i),
			"%s (%s) is a %s, who cannot decide approvals, so no group may ask them; make them an approver first (stead members set-role %s --role approver, or PATCH /v1/members/%s {\"role\": \"approver\"}), then add them",
			m.Name, m.ID, m.Role, m.ID, m.ID)
	}
	return nil
}

// notInGroup refuses to take out of group g a member it does not have (of
// ids): naming the member, and where the group's members are listed.
func (s *Server) notInGroup(ctx context.Context, g store.Group, ids []string) error {
	i := slices.IndexFunc(ids, func(id string) bool { return !slices.Contains(g.Members, id) })
	if i < 0 {
		return nil
	}
	who := ids[i]
	if m, err := s.store.GetMember(ctx, g.ProjectID, who); err == nil {
		who = fmt.Sprintf("%s (%s)", m.Name, m.ID)
	}
	return conflict("%s is not in group %s, so it cannot be taken out of it; list the group's members with stead groups show %s (GET /v1/groups/%s)",
		who, g.Name, g.Name, g.Name)
}

// checkMemberIDs refuses a list of member ids (the body's field) that
// holds one no member can have: empty, over 100 characters or with
// control characters.
func checkMemberIDs(field string, ids []string) error {
	for i, id := range ids {
		if p := textProblem(id, true, 100); p != "" {
			return invalidField(fmt.Sprintf("%s[%d]", field, i), "%s; name each member by their id (mem_…), listed by stead members list (GET /v1/members)", p)
		}
	}
	return nil
}

func groupNotFound(name string) *Error {
	return notFound("group %q not found (list them with stead groups list, or GET /v1/groups)", name)
}

// groupError translates the store's refusals of a write of group name
// whose body listed ids under field (members on create, add on update).
func groupError(err error, name, field string, ids []string) error {
	var ge *store.GroupError
	var me *store.GroupMemberError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ge):
		f := ge.Field
		if f == "members" && field != "" {
			f = field
		}
		return invalidField(f, "%s", ge.Problem)
	case errors.As(err, &me):
		f := field
		if i := slices.Index(ids, me.Member); i >= 0 {
			f = fmt.Sprintf("%s[%d]", field, i)
		}
		if me.Removed {
			return invalidField(f, "member %s was removed from the project; a group takes current members only (stead members list, or GET /v1/members, lists them)", me.Member)
		}
		return invalidField(f, "%s is no member of this project; name each member by their id (mem_…), listed by stead members list (GET /v1/members)", me.Member)
	case errors.Is(err, store.ErrNotFound):
		return groupNotFound(name)
	case errors.Is(err, store.ErrExists):
		return conflict("group %s already exists; change its members with stead groups add or rm (PATCH /v1/groups/%s), or choose another name", name, name)
	}
	return err
}
