package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"stead/approvals"
	"stead/store"
)

var groupTests = []test{
	{"Group/CreateGetList", testGroupCreateGetList},
	{"Group/Duplicate", testGroupDuplicate},
	{"Group/Invalid", testGroupInvalid},
	{"Group/UnknownMember", testGroupUnknownMember},
	{"Group/Update", testGroupUpdate},
	{"Group/ConcurrentUpdates", testGroupConcurrentUpdates},
	{"Group/Delete", testGroupDelete},
	{"Group/Cap", testGroupCap},
}

// newGroup is a group of project p named name with members ids, created at
// t0.
func newGroup(p, name string, ids ...string) store.Group {
	return store.Group{ProjectID: p, Name: name, Members: ids, Version: 1, CreatedAt: t0, UpdatedAt: t0}
}

func getGroup(t testing.TB, s store.Store, p, name string) store.Group {
	t.Helper()
	g, err := s.GetGroup(t.Context(), p, name)
	noErr(t, err, "get group "+name)
	return g
}

func groupNames(t testing.TB, s store.Store, p string) []string {
	t.Helper()
	gs, err := s.ListGroups(t.Context(), p)
	noErr(t, err, "list groups of "+p)
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.Name
	}
	return out
}

// addMembers creates approver members of project p with ids ids.
func addMembers(t testing.TB, s store.Store, p string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		createMember(t, s, member(p, id, approvals.RoleApprover, t0))
	}
}

// wantMemberErr fails the test now unless err is a *store.GroupMemberError
// naming member id (removed or not), which matches store.ErrNotFound.
func wantMemberErr(t testing.TB, err error, id string, removed bool, what string) {
	t.Helper()
	var me *store.GroupMemberError
	if !errors.As(err, &me) || !errors.Is(err, store.ErrNotFound) || me.Member != id || me.Removed != removed {
		t.Fatalf("%s: got error %v, want a GroupMemberError for %s (removed %v) that is ErrNotFound", what, err, id, removed)
	}
	if !strings.Contains(err.Error(), id) {
		t.Fatalf("%s: the error %q does not name member %s", what, err, id)
	}
}

// testGroupCreateGetList: groups are stored at Version 1 with their
// members sorted and each once, listed by name, and invisible from
// another project, where the same name is free.
func testGroupCreateGetList(t *testing.T, s store.Store) {
	ctx := t.Context()
	addMembers(t, s, "p1", "mem_ana", "mem_bo", "mem_cy")
	addMembers(t, s, "p2", "mem_dee")
	fin := newGroup("p1", "finance", "mem_cy", "mem_ana", "mem_cy")
	fin.Description = "Refunds over 1,000 EUR"
	fin.Version = 7 // the store starts every group at 1
	for _, g := range []store.Group{fin, newGroup("p1", "approvers"), newGroup("p1", "legal-eu", "mem_bo"), newGroup("p2", "finance", "mem_dee")} {
		noErr(t, s.CreateGroup(ctx, g), "create group "+g.ProjectID+"/"+g.Name)
	}
	want := fin
	want.Members, want.Version = []string{"mem_ana", "mem_cy"}, 1
	same(t, getGroup(t, s, "p1", "finance"), want, "stored group")
	same(t, getGroup(t, s, "p1", "approvers"), newGroup("p1", "approvers"), "stored group without members")
	sameIDs(t, groupNames(t, s, "p1"), []string{"approvers", "finance", "legal-eu"}, "groups of p1, by name")
	same(t, getGroup(t, s, "p2", "finance"), newGroup("p2", "finance", "mem_dee"), "p2's group of the same name")
	sameIDs(t, groupNames(t, s, "p3"), nil, "groups of a project without any")
	_, err := s.GetGroup(ctx, "p2", "legal-eu")
	wantErr(t, err, store.ErrNotFound, "get another project's group")
	_, err = s.GetGroup(ctx, "p1", "nobody")
	wantErr(t, err, store.ErrNotFound, "get an unknown group")
	// A name no group can have is not found, however long (longer than a
	// DynamoDB sort key may be).
	for _, name := range []string{"Finance", strings.Repeat("a", 2000)} {
		_, err = s.GetGroup(ctx, "p1", name)
		wantErr(t, err, store.ErrNotFound, "get a group named like no group can be")
		wantErr(t, s.DeleteGroup(ctx, "p1", name), store.ErrNotFound, "delete a group named like no group can be")
	}
}

// testGroupDuplicate: a name is taken once per project; a refused create
// changes nothing.
func testGroupDuplicate(t *testing.T, s store.Store) {
	ctx := t.Context()
	addMembers(t, s, "p1", "mem_ana", "mem_bo")
	noErr(t, s.CreateGroup(ctx, newGroup("p1", "finance", "mem_ana")), "create group")
	dup := newGroup("p1", "finance", "mem_bo")
	dup.Description = "impostor"
	wantErr(t, s.CreateGroup(ctx, dup), store.ErrExists, "create a group with a taken name")
	wantErr(t, s.CreateGroup(ctx, newGroup("p1", "finance")), store.ErrExists, "create an empty group with a taken name")
	same(t, getGroup(t, s, "p1", "finance"), newGroup("p1", "finance", "mem_ana"), "group after refused duplicates")
}

// testGroupInvalid: names people could not type in stead.json, long or
// multi-line descriptions, empty member ids and a missing project are
// refused with an error naming the field; nothing is written.
func testGroupInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	addMembers(t, s, "p1", "mem_ana")
	for _, name := range []string{"", "Finance", "1st", "-ops", "fin_ance", "fin ance", "finance!", "café", strings.Repeat("a", 41)} {
		err := s.CreateGroup(ctx, newGroup("p1", name, "mem_ana"))
		var ge *store.GroupError
		if !errors.As(err, &ge) || ge.Field != "name" {
			t.Fatalf("create a group named %q: got %v, want a GroupError for its name", name, err)
		}
	}
	for field, bad := range map[string]func(g *store.Group){
		"description": func(g *store.Group) { g.Description = strings.Repeat("é", store.MaxGroupDescription+1) },
		"members":     func(g *store.Group) { g.Members = []string{"mem_ana", ""} },
	} {
		g := newGroup("p1", "finance", "mem_ana")
		bad(&g)
		var ge *store.GroupError
		if err := s.CreateGroup(ctx, g); !errors.As(err, &ge) || ge.Field != field {
			t.Fatalf("create a group with a bad %s: got %v, want a GroupError for it", field, err)
		}
	}
	multiLine := newGroup("p1", "finance")
	multiLine.Description = "two\nlines"
	if err := s.CreateGroup(ctx, multiLine); err == nil {
		t.Fatal("create a group with a two-line description: no error")
	}
	if err := s.CreateGroup(ctx, newGroup("", "finance")); err == nil {
		t.Fatal("create a group without a project: no error")
	}
	sameIDs(t, groupNames(t, s, "p1"), nil, "groups after refused creates")

	// The edges of the rule are names.
	long := strings.Repeat("a", 40)
	for _, name := range []string{"a", "a-1", "refunds-eu-2", long} {
		noErr(t, s.CreateGroup(ctx, newGroup("p1", name)), "create a group named "+name)
	}
	sameIDs(t, groupNames(t, s, "p1"), []string{"a", "a-1", long, "refunds-eu-2"}, "groups with names at the edges of the rule")
}

// testGroupUnknownMember: a group takes current members of its project
// only: an unknown id, another project's member or a removed member is
// refused, naming the member, and nothing is written. An older key's
// member is a member like any other.
func testGroupUnknownMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	addMembers(t, s, "p1", "mem_ana", "mem_gone")
	addMembers(t, s, "p2", "mem_dee")
	_, err := s.RemoveMember(ctx, "p1", "mem_gone", at(time.Minute))
	noErr(t, err, "remove member")
	noErr(t, s.CreateAPIKey(ctx, apiKey("p1", "key_ci", t0)), "create an older key")
	revoked := apiKey("p1", "key_old", t0)
	revoked.RevokedAt = at(time.Minute)
	noErr(t, s.CreateAPIKey(ctx, revoked), "create a revoked older key")

	for _, c := range []struct {
		id      string
		removed bool
	}{{"mem_nope", false}, {"mem_dee", false}, {"mem_gone", true}, {store.LegacyMemberID("key_old"), true}, {store.LegacyMemberID("key_nope"), false}} {
		err := s.CreateGroup(ctx, newGroup("p1", "finance", "mem_ana", c.id))
		wantMemberErr(t, err, c.id, c.removed, "create a group with member "+c.id)
		_, err = s.GetGroup(ctx, "p1", "finance")
		wantErr(t, err, store.ErrNotFound, "group of a create refused for "+c.id)
	}
	ci := store.LegacyMemberID("key_ci")
	noErr(t, s.CreateGroup(ctx, newGroup("p1", "finance", ci, "mem_ana")), "create a group with an older key's member")
	sameIDs(t, getGroup(t, s, "p1", "finance").Members, []string{"mem_ana", ci}, "members with an older key's member")
}

// testGroupUpdate: an update is conditional on the version, keeps the
// group's name and CreatedAt, and checks the members it adds; members the
// group had stay, removed ones too.
func testGroupUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	addMembers(t, s, "p1", "mem_ana", "mem_bo", "mem_cy", "mem_gone")
	addMembers(t, s, "p2", "mem_dee")
	noErr(t, s.CreateGroup(ctx, newGroup("p1", "finance", "mem_ana", "mem_bo")), "create group")

	up := newGroup("p1", "finance", "mem_cy", "mem_ana", "mem_cy")
	up.Description = "Refunds over 1,000 EUR"
	up.CreatedAt, up.UpdatedAt = at(time.Hour), at(time.Minute) // CreatedAt is kept as stored
	got, err := s.UpdateGroup(ctx, up)
	noErr(t, err, "update group")
	want := up
	want.Members, want.CreatedAt, want.Version = []string{"mem_ana", "mem_cy"}, t0, 2
	same(t, got, want, "updated group")
	same(t, getGroup(t, s, "p1", "finance"), want, "stored group after the update")

	_, err = s.UpdateGroup(ctx, up)
	wantErr(t, err, store.ErrConflict, "update with a stale version")
	same(t, getGroup(t, s, "p1", "finance"), want, "group after a stale update")

	// A new member that is none, or was removed, is refused; nothing changes.
	_, err = s.RemoveMember(ctx, "p1", "mem_gone", at(2*time.Minute))
	noErr(t, err, "remove member")
	for _, c := range []struct {
		id      string
		removed bool
	}{{"mem_nope", false}, {"mem_dee", false}, {"mem_gone", true}} {
		bad := want
		bad.Members = []string{"mem_ana", c.id}
		bad.UpdatedAt = at(3 * time.Minute)
		_, err := s.UpdateGroup(ctx, bad)
		wantMemberErr(t, err, c.id, c.removed, "update adding member "+c.id)
		same(t, getGroup(t, s, "p1", "finance"), want, "group after a refused update adding "+c.id)
	}

	// A member removed after joining stays through updates that keep them.
	_, err = s.RemoveMember(ctx, "p1", "mem_cy", at(4*time.Minute))
	noErr(t, err, "remove a member of the group")
	keep := want
	keep.Description, keep.Members, keep.UpdatedAt = "", []string{"mem_ana", "mem_bo", "mem_cy"}, at(5*time.Minute)
	got, err = s.UpdateGroup(ctx, keep)
	noErr(t, err, "update keeping a removed member and adding a current one")
	want = keep
	want.Version = 3
	same(t, got, want, "group keeping a removed member")
	same(t, getGroup(t, s, "p1", "finance"), want, "stored group keeping a removed member")

	// Every member can go.
	empty := want
	empty.Members, empty.UpdatedAt = nil, at(6*time.Minute)
	got, err = s.UpdateGroup(ctx, empty)
	noErr(t, err, "update removing every member")
	eq(t, len(got.Members), 0, "members after removing every one")
	eq(t, len(getGroup(t, s, "p1", "finance").Members), 0, "stored members after removing every one")

	missing := newGroup("p1", "legal")
	missing.UpdatedAt = at(time.Minute)
	_, err = s.UpdateGroup(ctx, missing)
	wantErr(t, err, store.ErrNotFound, "update an unknown group")
	foreign := got
	foreign.ProjectID = "p2"
	_, err = s.UpdateGroup(ctx, foreign)
	wantErr(t, err, store.ErrNotFound, "update a group of another project")
	sameIDs(t, groupNames(t, s, "p2"), nil, "groups of p2 after a refused update")
	noUpdatedAt := got
	noUpdatedAt.UpdatedAt = time.Time{}
	if _, err := s.UpdateGroup(ctx, noUpdatedAt); err == nil {
		t.Fatal("an update without updatedAt: no error")
	}
}

// testGroupConcurrentUpdates: of updates from the same version at the same
// moment, one wins and the others get ErrConflict; the group is the
// winner's.
func testGroupConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	ids := []string{"mem_0", "mem_1", "mem_2", "mem_3"}
	addMembers(t, s, "p1", ids...)
	noErr(t, s.CreateGroup(ctx, newGroup("p1", "finance")), "create group")
	errs := race(len(ids), func(i int) error {
		g := newGroup("p1", "finance", ids[i])
		g.Description, g.UpdatedAt = fmt.Sprintf("writer %d", i), at(time.Minute)
		_, err := s.UpdateGroup(ctx, g)
		return err
	})
	won := winners(t, errs, store.ErrConflict)
	eq(t, len(won), 1, "concurrent updates that succeeded")
	g := getGroup(t, s, "p1", "finance")
	eq(t, g.Version, 2, "version after the race")
	eq(t, g.Description, fmt.Sprintf("writer %d", won[0]), "description after the race")
	sameIDs(t, g.Members, []string{ids[won[0]]}, "members after the race")
}

// testGroupDelete: a deleted group is gone, its name free again; another
// project's group of the same name stays.
func testGroupDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	addMembers(t, s, "p1", "mem_ana")
	noErr(t, s.CreateGroup(ctx, newGroup("p1", "finance", "mem_ana")), "create group")
	noErr(t, s.CreateGroup(ctx, newGroup("p1", "legal")), "create group")
	noErr(t, s.CreateGroup(ctx, newGroup("p2", "finance")), "create p2's group")

	wantErr(t, s.DeleteGroup(ctx, "p3", "finance"), store.ErrNotFound, "delete from a project without that group")
	noErr(t, s.DeleteGroup(ctx, "p1", "finance"), "delete group")
	_, err := s.GetGroup(ctx, "p1", "finance")
	wantErr(t, err, store.ErrNotFound, "get a deleted group")
	sameIDs(t, groupNames(t, s, "p1"), []string{"legal"}, "groups after the delete")
	wantErr(t, s.DeleteGroup(ctx, "p1", "finance"), store.ErrNotFound, "delete twice")
	same(t, getGroup(t, s, "p2", "finance"), newGroup("p2", "finance"), "p2's group of the same name")

	up := newGroup("p1", "finance")
	up.UpdatedAt = at(time.Minute)
	_, err = s.UpdateGroup(ctx, up)
	wantErr(t, err, store.ErrNotFound, "update a deleted group")
	again := newGroup("p1", "finance")
	again.Description = "again"
	noErr(t, s.CreateGroup(ctx, again), "create a group with a deleted group's name")
	same(t, getGroup(t, s, "p1", "finance"), again, "the new group of that name")
}

// testGroupCap: a group has at most MaxGroupMembers members, counted once
// each; one more is refused on create and on update, and nothing changes.
func testGroupCap(t *testing.T, s store.Store) {
	ctx := t.Context()
	ids := make([]string, store.MaxGroupMembers+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("mem_%03d", i)
	}
	addMembers(t, s, "p1", ids...)
	full := ids[:store.MaxGroupMembers]

	over := newGroup("p1", "finance", ids...)
	var ge *store.GroupError
	if err := s.CreateGroup(ctx, over); !errors.As(err, &ge) || ge.Field != "members" {
		t.Fatalf("create a group of %d members: got %v, want a GroupError for its members", len(ids), err)
	}
	_, err := s.GetGroup(ctx, "p1", "finance")
	wantErr(t, err, store.ErrNotFound, "group of a create over the cap")

	// Repeats count once: a full group with one id twice is full, not over.
	noErr(t, s.CreateGroup(ctx, newGroup("p1", "finance", append([]string{full[0]}, full...)...)), "create a full group")
	g := getGroup(t, s, "p1", "finance")
	sameIDs(t, g.Members, full, "members of a full group")

	up := g
	up.Members, up.UpdatedAt = append(up.Members, ids[store.MaxGroupMembers]), at(time.Minute)
	_, err = s.UpdateGroup(ctx, up)
	if !errors.As(err, &ge) || ge.Field != "members" {
		t.Fatalf("add a member to a full group: got %v, want a GroupError for its members", err)
	}
	same(t, getGroup(t, s, "p1", "finance"), g, "full group after a refused update")

	// A full group swapped for another full one in one write.
	up.Members = ids[1:]
	got, err := s.UpdateGroup(ctx, up)
	noErr(t, err, "swap one member of a full group")
	sameIDs(t, got.Members, ids[1:], "members after the swap")
}
