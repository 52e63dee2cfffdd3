package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"stead/api"
	"stead/api/wire"
	"stead/store"
)

// addMember adds a member of project A with the role and returns its id.
func (w *world) addMember(name, role string) string {
	w.t.Helper()
	var m wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": name, "role": role, "email": strings.ToLower(strings.ReplaceAll(name, " ", ".")) + "@example.com"}), 201).decode(&m)
	return m.ID
}

// asGroup decodes a group, into a fresh value: fields left out of the
// JSON (an empty description) stay empty.
func asGroup(r *response) wire.Group {
	r.t.Helper()
	var g wire.Group
	r.decode(&g)
	return g
}

// names lists a group's members as "Name (role)", "removed" marked.
func names(g wire.Group) string {
	var out []string
	for _, m := range g.Members {
		s := m.Name + " (" + m.Role + ")"
		if m.Removed {
			s += " removed"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// Owners create, change and delete groups; every key-holding role reads
// them; members show by name and role, never by email; a member removed
// from the project stays in the group, marked removed.
func TestGroups(t *testing.T) {
	t.Parallel()
	w := setup(t)
	ana, bo, cy := w.addMember("Ana Diaz", "approver"), w.addMember("Bo Li", "owner"), w.addMember("Cy Ng", "developer")

	var g wire.Group
	resp := w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance", "description": "Refunds over 1,000 EUR", "members": []string{bo, ana, ana}}), 201)
	resp.decode(&g)
	if g.Name != "finance" || g.Description != "Refunds over 1,000 EUR" || g.Version != 1 || names(g) != "Ana Diaz (approver), Bo Li (owner)" {
		t.Fatalf("created group %+v", g)
	}
	if g.Members[0].ID != ana || strings.Contains(string(resp.body), "example.com") || strings.Contains(string(resp.body), "email") {
		t.Errorf("a group shows its members as {id, name, role}: %s", resp.body)
	}
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "approvers"}), 201)

	w.approver, w.viewer = w.newKey("approver").Key, w.newKey("viewer").Key
	for _, key := range []string{w.owner, w.developer, w.approver, w.viewer} {
		var list wire.GroupList
		w.must(w.do("GET", "/v1/groups", key, nil), 200).decode(&list)
		if len(list.Groups) != 2 || list.Groups[0].Name != "approvers" || list.Groups[1].Name != "finance" || names(list.Groups[1]) != names(g) {
			t.Errorf("GET /v1/groups = %+v, want approvers, then finance", list.Groups)
		}
		var one wire.Group
		w.must(w.do("GET", "/v1/groups/finance", key, nil), 200).decode(&one)
		if names(one) != names(g) || one.Version != 1 {
			t.Errorf("GET /v1/groups/finance = %+v", one)
		}
	}
	var other wire.GroupList
	w.must(w.do("GET", "/v1/groups", w.other, nil), 200).decode(&other)
	if len(other.Groups) != 0 {
		t.Errorf("another project lists %+v", other.Groups)
	}

	g = asGroup(w.must(w.do("PATCH", "/v1/groups/finance", w.owner, map[string]any{"add": []string{cy}, "remove": []string{bo}}), 200))
	if names(g) != "Ana Diaz (approver), Cy Ng (developer)" || g.Version != 2 || g.Description != "Refunds over 1,000 EUR" {
		t.Errorf("after add and remove: %+v", g)
	}
	g = asGroup(w.must(w.do("PATCH", "/v1/groups/finance", w.owner, map[string]any{"description": ""}), 200))
	if g.Description != "" || g.Version != 3 || len(g.Members) != 2 {
		t.Errorf("after clearing the description: %+v", g)
	}
	// Adding a member the group has changes nothing, and writes nothing;
	// removing one it has not is refused, naming them and the command
	// that lists the group's members.
	g = asGroup(w.must(w.do("PATCH", "/v1/groups/finance", w.owner, map[string]any{"add": []string{ana}}), 200))
	if g.Version != 3 || len(g.Members) != 2 {
		t.Errorf("after a change that changes nothing: %+v", g)
	}
	if e := w.must(w.do("PATCH", "/v1/groups/finance", w.owner, map[string]any{"add": []string{ana}, "remove": []string{bo}}), 409).apiErr(); e.Code != api.CodeConflict ||
		e.Message != "Bo Li ("+bo+") is not in group finance, so it cannot be taken out of it; list the group's members with stead groups show finance (GET /v1/groups/finance)" {
		t.Errorf("remove a member the group has not: %s %s", e.Code, e.Message)
	}
	if g = asGroup(w.must(w.do("GET", "/v1/groups/finance", w.owner, nil), 200)); g.Version != 3 {
		t.Errorf("a refused remove changed the group: %+v", g)
	}

	// Removed from the project: still in the group, marked; cannot join
	// another.
	w.must(w.do("DELETE", "/v1/members/"+cy, w.owner, nil), 200)
	g = asGroup(w.must(w.do("GET", "/v1/groups/finance", w.developer, nil), 200))
	if names(g) != "Ana Diaz (approver), Cy Ng (developer) removed" {
		t.Errorf("a removed member in the group: %s", names(g))
	}
	refused(t, w.do("PATCH", "/v1/groups/approvers", w.owner, map[string]any{"add": []string{ana, cy}}), "add[1]", "was removed from the project")
	g = asGroup(w.must(w.do("PATCH", "/v1/groups/finance", w.owner, map[string]any{"description": "still here"}), 200))
	if g.Version != 4 || len(g.Members) != 2 {
		t.Errorf("an update that keeps a removed member: %+v", g)
	}

	if g = asGroup(w.must(w.do("DELETE", "/v1/groups/finance", w.owner, nil), 200)); g.Name != "finance" || len(g.Members) != 2 {
		t.Errorf("DELETE answers with the group as it was: %+v", g)
	}
	w.must(w.do("GET", "/v1/groups/finance", w.owner, nil), 404)
	if e := w.must(w.do("DELETE", "/v1/groups/finance", w.owner, nil), 404).apiErr(); !strings.Contains(e.Message, `group "finance" not found`) {
		t.Errorf("delete twice: %s", e.Message)
	}
	g = asGroup(w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance"}), 201))
	if g.Version != 1 || len(g.Members) != 0 || g.Members == nil {
		t.Errorf("a group made again with a deleted group's name: %+v (members shown as [], not null)", g)
	}
}

// Bad requests name the field and say what to do, and change nothing.
func TestGroupsRules(t *testing.T) {
	t.Parallel()
	w := setup(t)
	ana, vic := w.addMember("Ana Diaz", "approver"), w.addMember("Vic Ng", "viewer")
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance", "members": []string{ana}}), 201)
	before := w.snapshot()

	for _, c := range []struct {
		name, method, path string
		body               any
		field, says        string
	}{
		{"capitals", "POST", "/v1/groups", map[string]any{"name": "Finance"}, "name", `must start with a lowercase letter and hold only lowercase letters, digits and hyphens, at most 40 characters, like "finance" or "refunds-eu" (got "Finance")`},
		{"no name", "POST", "/v1/groups", map[string]any{"members": []string{ana}}, "name", `(got "")`},
		{"too long a name", "POST", "/v1/groups", map[string]any{"name": strings.Repeat("a", 41)}, "name", "at most 40 characters"},
		{"unknown member", "POST", "/v1/groups", map[string]any{"name": "legal", "members": []string{ana, "mem_nope"}}, "members[1]", "mem_nope is no member of this project; name each member by their id (mem_…), listed by stead members list (GET /v1/members)"},
		{"a viewer", "POST", "/v1/groups", map[string]any{"name": "legal", "members": []string{ana, vic}}, "members[1]",
			"Vic Ng (" + vic + ") is a viewer, who cannot decide approvals, so no group may ask them; make them an approver first (stead members set-role " + vic + " --role approver, or PATCH /v1/members/" + vic + ` {"role": "approver"}), then add them`},
		{"add a viewer", "PATCH", "/v1/groups/finance", map[string]any{"add": []string{vic}}, "add[0]", "Vic Ng (" + vic + ") is a viewer"},
		{"empty member", "POST", "/v1/groups", map[string]any{"name": "legal", "members": []string{""}}, "members[0]", "is required"},
		{"long description", "POST", "/v1/groups", map[string]any{"name": "legal", "description": strings.Repeat("d", 201)}, "description", "shorten it to at most 200"},
		{"two-line description", "PATCH", "/v1/groups/finance", map[string]any{"description": "a\nb"}, "description", "one line"},
		{"add unknown", "PATCH", "/v1/groups/finance", map[string]any{"add": []string{"mem_nope"}}, "add[0]", "no member of this project"},
		{"add and remove", "PATCH", "/v1/groups/finance", map[string]any{"add": []string{ana}, "remove": []string{ana}}, "add[0]", "in both add and remove"},
		{"bad remove", "PATCH", "/v1/groups/finance", map[string]any{"remove": []string{"mem\x01"}}, "remove[0]", "control characters"},
		{"members on PATCH", "PATCH", "/v1/groups/finance", `{"members":[]}`, "members", "not a known field"},
		{"name on PATCH", "PATCH", "/v1/groups/finance", `{"name":"legal"}`, "name", "not a known field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			refused(t, w.do(c.method, c.path, w.owner, c.body), c.field, c.says)
		})
	}
	if e := w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance"}), 409).apiErr(); !strings.Contains(e.Message, "group finance already exists; change its members with stead groups add or rm (PATCH /v1/groups/finance), or choose another name") {
		t.Errorf("a taken name: %s", e.Message)
	}
	w.must(w.do("PATCH", "/v1/groups/legal", w.owner, map[string]any{"description": "x"}), 404)
	w.must(w.do("GET", "/v1/groups/Fin%20ance", w.owner, nil), 404)
	w.must(w.do("DELETE", "/v1/groups/"+strings.Repeat("a", 2000), w.owner, nil), 404)
	w.must(w.do("POST", "/v1/groups", w.developer, map[string]any{"name": "legal"}), 403)
	if after := w.snapshot(); after != before {
		t.Errorf("refused requests changed state:\nbefore %s\nafter  %s", before, after)
	}

	// At most 100 members: the 101st is refused on create and on update.
	ids := []string{ana}
	for i := range 100 {
		ids = append(ids, w.addMember(fmt.Sprintf("Member %03d", i), "approver"))
	}
	refused(t, w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "everyone", "members": ids}), "members", "has 101 members, and a group has at most 100; split it into smaller groups")
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "everyone", "members": ids[:100]}), 201)
	refused(t, w.do("PATCH", "/v1/groups/everyone", w.owner, map[string]any{"add": ids[100:]}), "add", "at most 100")
	g := asGroup(w.must(w.do("PATCH", "/v1/groups/everyone", w.owner, map[string]any{"add": ids[100:], "remove": ids[:1]}), 200))
	if len(g.Members) != 100 {
		t.Errorf("a full group with one member swapped has %d members", len(g.Members))
	}
}

// interleave runs a function once, just before the next UpdateGroup of the
// store it wraps: another writer's change, landing between the API's read
// and its write.
type interleave struct {
	store.Store
	mu     sync.Mutex
	before func()
}

func (s *interleave) UpdateGroup(ctx context.Context, g store.Group) (store.Group, error) {
	s.mu.Lock()
	f := s.before
	s.before = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
	return s.Store.UpdateGroup(ctx, g)
}

// A PATCH that loses its write to another change reads the group again
// and applies itself to what it is now: both changes are kept.
func TestGroupsPatchRetriesALostRace(t *testing.T) {
	t.Parallel()
	var wrapped *interleave
	w := setup(t, func(c *api.Config) {
		wrapped = &interleave{Store: c.Store}
		c.Store = wrapped
	})
	ana, bo := w.addMember("Ana Diaz", "approver"), w.addMember("Bo Li", "approver")
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance"}), 201)
	wrapped.mu.Lock()
	wrapped.before = func() {
		g, err := w.store.GetGroup(context.Background(), w.project.ID, "finance")
		if err == nil {
			g.Members, g.UpdatedAt = append(g.Members, bo), w.clock.Now()
			_, err = w.store.UpdateGroup(context.Background(), g)
		}
		if err != nil {
			t.Errorf("the other writer's change: %v", err)
		}
	}
	wrapped.mu.Unlock()
	g := asGroup(w.must(w.do("PATCH", "/v1/groups/finance", w.owner, map[string]any{"add": []string{ana}, "description": "both"}), 200))
	if names(g) != "Ana Diaz (approver), Bo Li (approver)" || g.Description != "both" || g.Version != 3 {
		t.Errorf("after a lost race: %+v, want both members at version 3", g)
	}
}
