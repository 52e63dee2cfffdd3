package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"stead/approvals"
	"stead/store"
)

var memberTests = []test{
	{"Member/CreateGetList", testMemberCreateGetList},
	{"Member/Keys", testMemberKeys},
	{"Member/Update", testMemberUpdate},
	{"Member/ConcurrentUpdates", testMemberConcurrentUpdates},
	{"Member/UpdateRacesNewKey", testMemberUpdateRacesNewKey},
	{"Member/Remove", testMemberRemove},
	{"Member/LastOwner", testMemberLastOwner},
	{"Member/LastOwnerRace", testMemberLastOwnerRace},
	{"Member/CreateWithKey", testMemberCreateWithKey},
	{"Member/OlderKeys", testMemberOlderKeys},
	{"Member/OlderKeysRace", testMemberOlderKeysRace},
	{"Member/NamesTaken", testMemberNamesTaken},
	{"Member/NamesTakenRace", testMemberNamesTakenRace},
}

// member is a member of project p with role r, created at created.
func member(p, id string, r approvals.Role, created time.Time) store.Member {
	return store.Member{
		ID: id, ProjectID: p, Name: "Member " + id, Email: id + "@example.com", Role: r,
		Chat:    []store.ChatIdentity{{Kind: "slack", Team: "T0" + p, User: "U0" + id}},
		Version: 1, CreatedAt: created, UpdatedAt: created,
	}
}

func createMember(t testing.TB, s store.Store, m store.Member) store.Member {
	t.Helper()
	noErr(t, s.CreateMember(t.Context(), m), "create member "+m.ID)
	m.Version = 1
	return m
}

func getMember(t testing.TB, s store.Store, p, id string) store.Member {
	t.Helper()
	m, err := s.GetMember(t.Context(), p, id)
	noErr(t, err, "get member "+id)
	return m
}

// memberKey is a key of member m, Role and MemberName left to the store.
func memberKey(m store.Member, id string) store.APIKey {
	k := apiKey(m.ProjectID, id, m.CreatedAt)
	k.MemberID, k.Role = m.ID, ""
	return k
}

func keyByHash(t testing.TB, s store.Store, k store.APIKey) store.APIKey {
	t.Helper()
	got, err := s.GetAPIKeyByHash(t.Context(), k.Hash)
	noErr(t, err, "get key "+k.ID+" by hash")
	return got
}

func memberIDs(t testing.TB, s store.Store, p string, includeRemoved bool) []string {
	t.Helper()
	ms, err := s.ListMembers(t.Context(), p, includeRemoved)
	noErr(t, err, "list members of "+p)
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// testMemberCreateGetList: members are stored at Version 1 as given, listed
// oldest first, unique in their project and invisible from another one.
func testMemberCreateGetList(t *testing.T, s store.Store) {
	ctx := t.Context()
	m3 := member("p1", "mem_3", approvals.RoleOwner, at(3*time.Minute))
	m1 := member("p1", "mem_1", approvals.RoleApprover, at(time.Minute))
	m1.Version = 7 // the store starts every member at 1
	m1.Notify = store.MemberNotify{Email: store.EmailNone}
	m2 := member("p1", "mem_2", approvals.RoleViewer, at(2*time.Minute))
	m2.Email, m2.Chat = "", nil
	for _, m := range []store.Member{m3, m1, m2, member("p2", "mem_9", approvals.RoleOwner, t0)} {
		createMember(t, s, m)
	}
	m1.Version = 1
	same(t, getMember(t, s, "p1", "mem_1"), m1, "stored member")
	same(t, getMember(t, s, "p1", "mem_2"), m2, "stored member without email or chat")
	sameIDs(t, memberIDs(t, s, "p1", false), []string{"mem_1", "mem_2", "mem_3"}, "members of p1, oldest first")
	sameIDs(t, memberIDs(t, s, "p3", true), nil, "members of a project without any")

	dup := member("p1", "mem_1", approvals.RoleOwner, t0)
	dup.Name = "Impostor"
	wantErr(t, s.CreateMember(ctx, dup), store.ErrExists, "create member with a taken id")
	eq(t, getMember(t, s, "p1", "mem_1").Name, m1.Name, "name after a refused duplicate")
	noErr(t, s.CreateMember(ctx, member("p2", "mem_1", approvals.RoleDeveloper, t0)), "create a member of p2 with an id p1 uses")

	_, err := s.GetMember(ctx, "p2", "mem_3")
	wantErr(t, err, store.ErrNotFound, "get another project's member")
	_, err = s.GetMember(ctx, "p1", "mem_404")
	wantErr(t, err, store.ErrNotFound, "get an unknown member")

	for name, bad := range map[string]func(m *store.Member){
		"without a name":         func(m *store.Member) { m.Name = " " },
		"with a bad role":        func(m *store.Member) { m.Role = approvals.RoleCustomer },
		"without a role":         func(m *store.Member) { m.Role = "" },
		"removed":                func(m *store.Member) { m.RemovedAt = t0 },
		"with a half chat":       func(m *store.Member) { m.Chat = []store.ChatIdentity{{Kind: "slack", User: "U1"}} },
		"with a bad email level": func(m *store.Member) { m.Notify.Email = "weekly" },
	} {
		m := member("p1", "mem_bad", approvals.RoleDeveloper, t0)
		bad(&m)
		if err := s.CreateMember(ctx, m); err == nil {
			t.Fatalf("create a member %s: no error", name)
		}
	}
	sameIDs(t, memberIDs(t, s, "p1", true), []string{"mem_1", "mem_2", "mem_3"}, "members of p1 after refused creates")
}

// testMemberKeys: a key of a member takes its role and name; a key naming a
// missing, foreign or removed member, or another role, is refused.
func testMemberKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	ana := createMember(t, s, member("p1", "mem_ana", approvals.RoleApprover, t0))
	createMember(t, s, member("p2", "mem_bo", approvals.RoleOwner, t0))

	k := memberKey(ana, "k1")
	noErr(t, s.CreateAPIKey(ctx, k), "create a key of a member")
	want := k
	want.Role, want.MemberName = approvals.RoleApprover, ana.Name
	same(t, keyByHash(t, s, k), want, "key of a member")
	list, err := s.ListAPIKeys(ctx, "p1")
	noErr(t, err, "list keys")
	eq(t, len(list), 1, "keys of p1")
	same(t, list[0], want, "listed key of a member")
	// A member's key has no member of its own, as an older key has.
	_, err = s.GetMember(ctx, "p1", store.LegacyMemberID(k.ID))
	wantErr(t, err, store.ErrNotFound, "get the older-key member of a member's key")
	ids := memberIDs(t, s, "p1", true)
	sameIDs(t, ids, []string{"mem_ana"}, "members of p1 with a member's key")

	explicit := memberKey(ana, "k2")
	explicit.Role = approvals.RoleApprover
	noErr(t, s.CreateAPIKey(ctx, explicit), "create a key with its member's role")

	other := memberKey(ana, "k3")
	other.Role = approvals.RoleOwner
	wantErr(t, s.CreateAPIKey(ctx, other), store.ErrConflict, "create a key with another role than its member's")
	missing := memberKey(ana, "k4")
	missing.MemberID = "mem_404"
	wantErr(t, s.CreateAPIKey(ctx, missing), store.ErrNotFound, "create a key of an unknown member")
	foreign := memberKey(ana, "k5")
	foreign.MemberID = "mem_bo"
	wantErr(t, s.CreateAPIKey(ctx, foreign), store.ErrNotFound, "create a key of another project's member")
	for _, k := range []store.APIKey{other, missing, foreign} {
		_, err := s.GetAPIKeyByHash(ctx, k.Hash)
		wantErr(t, err, store.ErrNotFound, "hash of refused key "+k.ID)
	}

	_, err = s.RemoveMember(ctx, "p1", "mem_ana", at(time.Minute))
	noErr(t, err, "remove member")
	wantErr(t, s.CreateAPIKey(ctx, memberKey(ana, "k6")), store.ErrNotFound, "create a key of a removed member")
}

// testMemberUpdate: an update is conditional on the version, keeps the
// member's identity, and gives its active keys its new role and name; a
// revoked key keeps what it had.
func testMemberUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	createMember(t, s, member("p1", "mem_boss", approvals.RoleOwner, t0))
	noErr(t, s.CreateAPIKey(ctx, memberKey(member("p1", "mem_boss", "", t0), "kb")), "create owner key")
	ana := createMember(t, s, member("p1", "mem_ana", approvals.RoleDeveloper, t0))
	k1, k2, old := memberKey(ana, "k1"), memberKey(ana, "k2"), memberKey(ana, "k0")
	for _, k := range []store.APIKey{old, k1, k2} {
		noErr(t, s.CreateAPIKey(ctx, k), "create key "+k.ID)
	}
	_, err := s.RevokeAPIKey(ctx, "p1", "k0", at(time.Minute))
	noErr(t, err, "revoke k0")

	up := ana
	up.Name, up.Email, up.Role = "Ana Diaz", "", approvals.RoleOwner
	up.Notify = store.MemberNotify{Email: store.EmailRequests}
	up.Chat = []store.ChatIdentity{{Kind: "slack", Team: "T1", User: "U1"}, {Kind: "slack", Team: "T2", User: "U9"}}
	up.ID, up.ProjectID = "mem_ana", "p1"
	up.CreatedAt, up.UpdatedAt = at(time.Hour), at(2*time.Minute) // CreatedAt is kept as stored
	got, err := s.UpdateMember(ctx, up)
	noErr(t, err, "update member")
	want := up
	want.CreatedAt, want.Version = t0, 2
	same(t, got, want, "updated member")
	same(t, getMember(t, s, "p1", "mem_ana"), want, "stored member after the update")
	for _, k := range []store.APIKey{k1, k2} {
		got := keyByHash(t, s, k)
		eq(t, got.Role, approvals.RoleOwner, "role of active key "+k.ID)
		eq(t, got.MemberName, "Ana Diaz", "member name on active key "+k.ID)
		eq(t, got.MemberID, "mem_ana", "member of active key "+k.ID)
	}
	rev := keyByHash(t, s, old)
	eq(t, rev.Role, approvals.RoleDeveloper, "role of the key revoked before the update")
	eq(t, rev.MemberName, "Member mem_ana", "member name on the key revoked before the update")

	_, err = s.UpdateMember(ctx, up)
	wantErr(t, err, store.ErrConflict, "update with a stale version")
	up.Version = 2
	up.Role = approvals.RoleViewer
	got, err = s.UpdateMember(ctx, up)
	noErr(t, err, "update with the current version")
	eq(t, got.Version, int64(3), "version after a second update")
	eq(t, got.Notify.Email, store.EmailRequests, "email notifications kept by an update that sends them again")
	eq(t, keyByHash(t, s, k1).Role, approvals.RoleViewer, "role of k1 after the second update")

	foreign := up
	foreign.ProjectID, foreign.Version = "p2", 3
	_, err = s.UpdateMember(ctx, foreign)
	wantErr(t, err, store.ErrNotFound, "update a member through another project")
	unknown := up
	unknown.ID = "mem_404"
	_, err = s.UpdateMember(ctx, unknown)
	wantErr(t, err, store.ErrNotFound, "update an unknown member")
	bad := up
	bad.Version, bad.Name = 3, ""
	if _, err := s.UpdateMember(ctx, bad); err == nil {
		t.Fatal("update a member to no name: no error")
	}
	bad.Name, bad.Notify.Email = "Ana Diaz", "weekly"
	if _, err := s.UpdateMember(ctx, bad); err == nil {
		t.Fatal("update a member to email notifications \"weekly\": no error")
	}
	eq(t, getMember(t, s, "p1", "mem_ana").Notify.Email, store.EmailRequests, "email notifications after a refused update")
	eq(t, getMember(t, s, "p1", "mem_ana").Version, int64(3), "version after refused updates")

	_, err = s.RemoveMember(ctx, "p1", "mem_ana", at(time.Hour))
	noErr(t, err, "remove member")
	up.Version = 4
	_, err = s.UpdateMember(ctx, up)
	wantErr(t, err, store.ErrNotFound, "update a removed member")
}

// testMemberConcurrentUpdates: of two updates from the same version, one
// wins and the other is refused with ErrConflict, also for the member of
// an older key, whose first update stores it.
func testMemberConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	createMember(t, s, member("p1", "mem_ana", approvals.RoleDeveloper, t0))
	noErr(t, s.CreateAPIKey(ctx, memberKey(member("p1", "mem_ana", "", t0), "k1")), "create key")
	noErr(t, s.CreateAPIKey(ctx, apiKey("p1", "old", t0)), "create an older key")
	for _, id := range []string{"mem_ana", store.LegacyMemberID("old")} {
		for round := range 3 {
			cur := getMember(t, s, "p1", id)
			names := []string{fmt.Sprintf("%s A%d", id, round), fmt.Sprintf("%s B%d", id, round)}
			errs := race(2, func(i int) error {
				m := cur
				m.Name, m.UpdatedAt = names[i], at(time.Duration(round+1)*time.Minute)
				_, err := s.UpdateMember(ctx, m)
				return err
			})
			won := winners(t, errs, store.ErrConflict)
			eq(t, len(won), 1, id+": concurrent updates from one version that succeeded")
			got := getMember(t, s, "p1", id)
			eq(t, got.Name, names[won[0]], id+": name after the race")
			eq(t, got.Version, cur.Version+1, id+": version after the race")
		}
	}
	eq(t, keyByHash(t, s, apiKey("p1", "old", t0)).MemberName, getMember(t, s, "p1", store.LegacyMemberID("old")).Name, "member name on the older key")
	sameIDs(t, memberIDs(t, s, "p1", true), []string{"mem_ana", store.LegacyMemberID("old")}, "members after the races (the older key's once)")
}

// testMemberUpdateRacesNewKey: a role change racing the create of a key of
// the same member leaves every active key with the member's role,
// whichever comes first.
func testMemberUpdateRacesNewKey(t *testing.T, s store.Store) {
	ctx := t.Context()
	createMember(t, s, member("p1", "mem_boss", approvals.RoleOwner, t0))
	noErr(t, s.CreateAPIKey(ctx, memberKey(member("p1", "mem_boss", "", t0), "kb")), "create owner key")
	ana := createMember(t, s, member("p1", "mem_ana", approvals.RoleDeveloper, t0))
	roles := []approvals.Role{approvals.RoleOwner, approvals.RoleViewer, approvals.RoleDeveloper, approvals.RoleApprover}
	for round, role := range roles {
		cur := getMember(t, s, "p1", "mem_ana")
		k := memberKey(ana, fmt.Sprintf("k%d", round))
		errs := race(2, func(i int) error {
			if i == 0 {
				m := cur
				m.Role, m.UpdatedAt = role, at(time.Duration(round+1)*time.Minute)
				_, err := s.UpdateMember(ctx, m)
				return err
			}
			return s.CreateAPIKey(ctx, k)
		})
		eq(t, len(winners(t, errs)), 2, "update and key create that succeeded")
		keys, err := s.ListAPIKeys(ctx, "p1")
		noErr(t, err, "list keys")
		for _, k := range keys {
			if k.MemberID == "mem_ana" {
				eq(t, k.Role, role, fmt.Sprintf("round %d: role of key %s", round, k.ID))
			}
		}
	}
}

// testMemberRemove: removing a member revokes its active keys in the same
// write; it stays readable, leaves the list unless asked for, and removing
// it again keeps the first time.
func testMemberRemove(t *testing.T, s store.Store) {
	ctx := t.Context()
	createMember(t, s, member("p1", "mem_boss", approvals.RoleOwner, t0))
	ana := createMember(t, s, member("p1", "mem_ana", approvals.RoleDeveloper, at(time.Minute)))
	keys := []store.APIKey{memberKey(ana, "k0"), memberKey(ana, "k1"), memberKey(ana, "k2")}
	for _, k := range keys {
		noErr(t, s.CreateAPIKey(ctx, k), "create key "+k.ID)
	}
	_, err := s.RevokeAPIKey(ctx, "p1", "k0", at(time.Minute))
	noErr(t, err, "revoke k0")

	_, err = s.RemoveMember(ctx, "p2", "mem_ana", at(time.Hour))
	wantErr(t, err, store.ErrNotFound, "remove a member through another project")
	_, err = s.RemoveMember(ctx, "p1", "mem_404", at(time.Hour))
	wantErr(t, err, store.ErrNotFound, "remove an unknown member")

	got, err := s.RemoveMember(ctx, "p1", "mem_ana", at(time.Hour))
	noErr(t, err, "remove member")
	want := ana
	want.RemovedAt, want.UpdatedAt, want.Version = at(time.Hour), at(time.Hour), 2
	same(t, got, want, "removed member")
	same(t, getMember(t, s, "p1", "mem_ana"), want, "stored removed member")
	eq(t, keyByHash(t, s, keys[0]).RevokedAt.Equal(at(time.Minute)), true, "a key revoked before keeps its time")
	for _, k := range keys[1:] {
		eq(t, keyByHash(t, s, k).RevokedAt.Equal(at(time.Hour)), true, "revokedAt of active key "+k.ID)
	}
	sameIDs(t, memberIDs(t, s, "p1", false), []string{"mem_boss"}, "members")
	sameIDs(t, memberIDs(t, s, "p1", true), []string{"mem_boss", "mem_ana"}, "members, removed ones too")

	again, err := s.RemoveMember(ctx, "p1", "mem_ana", at(2*time.Hour))
	noErr(t, err, "remove member again")
	same(t, again, want, "member removed twice")
}

// testMemberLastOwner: a project keeps an active owner member and an
// active owner key: removing or demoting the member that is the last of
// either is refused, and so is revoking the last owner key.
func testMemberLastOwner(t *testing.T, s store.Store) {
	ctx := t.Context()
	ana := createMember(t, s, member("p1", "mem_ana", approvals.RoleOwner, t0))
	noErr(t, s.CreateAPIKey(ctx, memberKey(ana, "ka")), "create ana's key")
	dev := createMember(t, s, member("p1", "mem_dev", approvals.RoleDeveloper, t0))
	noErr(t, s.CreateAPIKey(ctx, memberKey(dev, "kd")), "create dev's key")

	demote := func(m store.Member, r approvals.Role) error {
		m = getMember(t, s, "p1", m.ID)
		m.Role, m.UpdatedAt = r, at(time.Minute)
		_, err := s.UpdateMember(ctx, m)
		return err
	}
	remove := func(m store.Member) error {
		_, err := s.RemoveMember(ctx, "p1", m.ID, at(time.Minute))
		return err
	}
	wantErr(t, remove(ana), store.ErrLastOwner, "remove the last owner member")
	wantErr(t, demote(ana, approvals.RoleDeveloper), store.ErrLastOwner, "demote the last owner member")
	_, err := s.RevokeAPIKey(ctx, "p1", "ka", at(time.Minute))
	wantErr(t, err, store.ErrLastOwner, "revoke the last owner key")

	// Another owner member without a key: ana still holds the last owner key.
	bo := createMember(t, s, member("p1", "mem_bo", approvals.RoleOwner, t0))
	wantErr(t, remove(ana), store.ErrLastOwner, "remove the member holding the last owner key")
	wantErr(t, demote(ana, approvals.RoleViewer), store.ErrLastOwner, "demote the member holding the last owner key")
	eq(t, keyByHash(t, s, memberKey(ana, "ka")).Role, approvals.RoleOwner, "ana's key after refused writes")
	eq(t, keyByHash(t, s, memberKey(ana, "ka")).RevokedAt.IsZero(), true, "ana's key is active after refused writes")

	noErr(t, s.CreateAPIKey(ctx, memberKey(bo, "kb")), "create bo's key")
	noErr(t, demote(ana, approvals.RoleDeveloper), "demote ana once bo holds an owner key")
	eq(t, keyByHash(t, s, memberKey(ana, "ka")).Role, approvals.RoleDeveloper, "ana's key after the demotion")
	wantErr(t, remove(bo), store.ErrLastOwner, "remove the new last owner member")
	wantErr(t, demote(bo, approvals.RoleApprover), store.ErrLastOwner, "demote the new last owner member")
	noErr(t, demote(ana, approvals.RoleOwner), "promote ana again")
	noErr(t, remove(bo), "remove bo once ana is an owner again")
	eq(t, keyByHash(t, s, memberKey(bo, "kb")).RevokedAt.IsZero(), false, "bo's key is revoked")
	wantErr(t, remove(ana), store.ErrLastOwner, "remove ana, the last owner again")
	noErr(t, remove(dev), "remove a developer")

	// Without any owner key, the last owner member is kept all the same.
	lone := createMember(t, s, member("p3", "mem_lone", approvals.RoleOwner, t0))
	d3 := createMember(t, s, member("p3", "mem_dev", approvals.RoleDeveloper, t0))
	noErr(t, s.CreateAPIKey(ctx, memberKey(d3, "kd3")), "create a developer key in p3")
	_, err = s.RemoveMember(ctx, "p3", lone.ID, at(time.Minute))
	wantErr(t, err, store.ErrLastOwner, "remove the last owner member, who has no key")
	lone.Role, lone.UpdatedAt = approvals.RoleDeveloper, at(time.Minute)
	_, err = s.UpdateMember(ctx, lone)
	wantErr(t, err, store.ErrLastOwner, "demote the last owner member, who has no key")

	// A project without owners at all loses no owner by losing a developer.
	d2 := createMember(t, s, member("p2", "mem_d", approvals.RoleDeveloper, t0))
	noErr(t, s.CreateAPIKey(ctx, memberKey(d2, "k")), "create a developer key in p2")
	_, err = s.RemoveMember(ctx, "p2", "mem_d", at(time.Minute))
	noErr(t, err, "remove the only member of a project without owners")
}

// testMemberLastOwnerRace: of two owner members removed (or demoted) at
// the same moment, one goes and the other stays.
func testMemberLastOwnerRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	for round, op := range []string{"remove", "demote", "remove", "demote"} {
		p := fmt.Sprintf("p%d", round)
		var ms []store.Member
		for _, id := range []string{"mem_a", "mem_b"} {
			m := createMember(t, s, member(p, id, approvals.RoleOwner, t0))
			if round >= 2 { // with keys: both rules are in play
				noErr(t, s.CreateAPIKey(ctx, memberKey(m, "k"+id)), "create key")
			}
			ms = append(ms, m)
		}
		errs := race(2, func(i int) error {
			if op == "remove" {
				_, err := s.RemoveMember(ctx, p, ms[i].ID, at(time.Minute))
				return err
			}
			m := ms[i]
			m.Role, m.UpdatedAt = approvals.RoleDeveloper, at(time.Minute)
			_, err := s.UpdateMember(ctx, m)
			return err
		})
		eq(t, len(winners(t, errs, store.ErrLastOwner)), 1, p+": concurrent "+op+"s of the last two owners that succeeded")
		list, err := s.ListMembers(ctx, p, false)
		noErr(t, err, "list members")
		owners := 0
		for _, m := range list {
			if m.ActiveOwner() {
				owners++
			}
		}
		eq(t, owners, 1, p+": active owner members after the race")
	}
}

// testMemberCreateWithKey: a member and its key are created together or
// not at all.
func testMemberCreateWithKey(t *testing.T, s store.Store) {
	ctx := t.Context()
	ana := member("p1", "mem_ana", approvals.RoleOwner, t0)
	k := memberKey(ana, "k1")
	k.MemberID = ""
	noErr(t, s.CreateMemberWithKey(ctx, ana, k), "create member with key")
	same(t, getMember(t, s, "p1", "mem_ana"), ana, "member created with its key")
	got := keyByHash(t, s, k)
	eq(t, got.MemberID, "mem_ana", "member of the key")
	eq(t, got.Role, approvals.RoleOwner, "role of the key")
	eq(t, got.MemberName, ana.Name, "member name on the key")

	taken := memberKey(member("p1", "mem_bo", approvals.RoleOwner, t0), "k2")
	taken.Hash = k.Hash
	wantErr(t, s.CreateMemberWithKey(ctx, member("p1", "mem_bo", approvals.RoleOwner, t0), taken), store.ErrExists, "create member with a taken key hash")
	_, err := s.GetMember(ctx, "p1", "mem_bo")
	wantErr(t, err, store.ErrNotFound, "member of a refused create")
	sameIDs(t, memberIDs(t, s, "p1", true), []string{"mem_ana"}, "members after a refused create")

	fresh := memberKey(ana, "k3")
	wantErr(t, s.CreateMemberWithKey(ctx, member("p1", "mem_ana", approvals.RoleDeveloper, t0), fresh), store.ErrExists, "create member with a taken id")
	_, err = s.GetAPIKeyByHash(ctx, fresh.Hash)
	wantErr(t, err, store.ErrNotFound, "key of a refused create")
	dupID := memberKey(member("p1", "mem_cy", approvals.RoleOwner, t0), "k1")
	dupID.Hash = "sha256-other"
	wantErr(t, s.CreateMemberWithKey(ctx, member("p1", "mem_cy", approvals.RoleOwner, t0), dupID), store.ErrExists, "create member with a taken key id")
	_, err = s.GetMember(ctx, "p1", "mem_cy")
	wantErr(t, err, store.ErrNotFound, "member of a create with a taken key id")

	wrong := memberKey(member("p1", "mem_dee", approvals.RoleOwner, t0), "k4")
	wrong.Role = approvals.RoleViewer
	if err := s.CreateMemberWithKey(ctx, member("p1", "mem_dee", approvals.RoleOwner, t0), wrong); err == nil {
		t.Fatal("create a member with a key of another role: no error")
	}
	_, err = s.GetMember(ctx, "p1", "mem_dee")
	wantErr(t, err, store.ErrNotFound, "member of a create with a key of another role")

	// The first owner member and key of a project count for the owner rules.
	_, err = s.RemoveMember(ctx, "p1", "mem_ana", at(time.Minute))
	wantErr(t, err, store.ErrLastOwner, "remove the member created with the only owner key")
}

// testMemberOlderKeys: keys stored without a member (before members
// existed) read as members named after the key, with its role; such a
// member can be updated, given keys and removed, and its key keeps
// authenticating as the member.
func testMemberOlderKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	ci := ownerKey("p1", "key_ci")
	ci.Name, ci.CreatedAt = "ci", at(time.Minute)
	bare := apiKey("p1", "key_bare", at(2*time.Minute))
	bare.Name = ""
	gone := apiKey("p1", "key_gone", at(3*time.Minute))
	gone.RevokedAt = at(4 * time.Minute)
	for _, k := range []store.APIKey{ci, bare, gone} {
		noErr(t, s.CreateAPIKey(ctx, k), "create older key "+k.ID)
	}
	ciID, bareID, goneID := store.LegacyMemberID("key_ci"), store.LegacyMemberID("key_bare"), store.LegacyMemberID("key_gone")

	ms, err := s.ListMembers(ctx, "p1", false)
	noErr(t, err, "list members")
	same(t, ms, []store.Member{
		{ID: ciID, ProjectID: "p1", Name: "ci", Role: approvals.RoleOwner, Version: 1, CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute)},
		{ID: bareID, ProjectID: "p1", Name: "key_bare", Role: approvals.RoleDeveloper, Version: 1, CreatedAt: at(2 * time.Minute), UpdatedAt: at(2 * time.Minute)},
	}, "members of older keys")
	sameIDs(t, memberIDs(t, s, "p1", true), []string{ciID, bareID, goneID}, "members of older keys, removed ones too")
	eq(t, getMember(t, s, "p1", goneID).RemovedAt.Equal(at(4*time.Minute)), true, "the member of a revoked key is removed")
	same(t, getMember(t, s, "p1", ciID), ms[0], "member of an older key")
	_, err = s.GetMember(ctx, "p2", ciID)
	wantErr(t, err, store.ErrNotFound, "member of another project's older key")
	k := keyByHash(t, s, ci)
	eq(t, k.MemberID, ciID, "member of the older key")
	eq(t, k.MemberName, "ci", "member name on the older key")

	// Ids of older keys' members are taken, both ways round.
	wantErr(t, s.CreateMember(ctx, member("p1", ciID, approvals.RoleDeveloper, t0)), store.ErrExists, "create a member with an older key's member's id")
	createMember(t, s, member("p1", store.LegacyMemberID("key_later"), approvals.RoleDeveloper, at(time.Hour)))
	wantErr(t, s.CreateAPIKey(ctx, apiKey("p1", "key_later", t0)), store.ErrExists, "create an older kind of key whose member's id is taken")

	// The owner rules count the older key's member.
	demoted := ms[0]
	demoted.Role, demoted.UpdatedAt = approvals.RoleDeveloper, at(5*time.Minute)
	_, err = s.UpdateMember(ctx, demoted)
	wantErr(t, err, store.ErrLastOwner, "demote the older key's member, the last owner")
	_, err = s.RemoveMember(ctx, "p1", ciID, at(5*time.Minute))
	wantErr(t, err, store.ErrLastOwner, "remove the older key's member, the last owner")

	up := ms[0]
	up.Name, up.Email, up.UpdatedAt = "Ana Diaz", "ana@example.com", at(5*time.Minute)
	got, err := s.UpdateMember(ctx, up)
	noErr(t, err, "update the older key's member")
	want := up
	want.Version = 2
	same(t, got, want, "updated member of the older key")
	same(t, getMember(t, s, "p1", ciID), want, "stored member of the older key")
	k = keyByHash(t, s, ci)
	eq(t, k.MemberID, ciID, "member of the older key after the update")
	eq(t, k.MemberName, "Ana Diaz", "member name on the older key after the update")
	eq(t, k.Role, approvals.RoleOwner, "role of the older key after the update")
	eq(t, k.RevokedAt.IsZero(), true, "the older key still authenticates")
	sameIDs(t, memberIDs(t, s, "p1", false), []string{ciID, bareID, store.LegacyMemberID("key_later")}, "members after the update (each once)")

	// A new key of the bare key's member, then its removal: both keys go.
	nk := memberKey(ms[1], "key_new")
	noErr(t, s.CreateAPIKey(ctx, nk), "create a key of the older key's member")
	eq(t, keyByHash(t, s, nk).Role, approvals.RoleDeveloper, "role of the new key")
	eq(t, keyByHash(t, s, nk).MemberName, "key_bare", "member name on the new key")
	removed, err := s.RemoveMember(ctx, "p1", bareID, at(6*time.Minute))
	noErr(t, err, "remove the older key's member")
	eq(t, removed.RemovedAt.Equal(at(6*time.Minute)), true, "removedAt")
	for _, k := range []store.APIKey{bare, nk} {
		eq(t, keyByHash(t, s, k).RevokedAt.Equal(at(6*time.Minute)), true, "revokedAt of "+k.ID)
	}

	// An older key's member with nothing but its key is removed with it.
	solo := apiKey("p1", "key_solo", at(7*time.Minute))
	noErr(t, s.CreateAPIKey(ctx, solo), "create another older key")
	removed, err = s.RemoveMember(ctx, "p1", store.LegacyMemberID("key_solo"), at(8*time.Minute))
	noErr(t, err, "remove a member of an older key never written to")
	eq(t, removed.RemovedAt.Equal(at(8*time.Minute)), true, "removedAt of the member of an older key")
	eq(t, keyByHash(t, s, solo).RevokedAt.Equal(at(8*time.Minute)), true, "its key is revoked")
	eq(t, getMember(t, s, "p1", store.LegacyMemberID("key_solo")).Removed(), true, "it reads as removed")

	// Revoking an older owner key removes its member, as long as an owner
	// stays.
	noErr(t, s.CreateAPIKey(ctx, ownerKey("p1", "key_o2")), "create a second older owner key")
	_, err = s.RevokeAPIKey(ctx, "p1", "key_o2", at(9*time.Minute))
	noErr(t, err, "revoke the second older owner key")
	eq(t, getMember(t, s, "p1", store.LegacyMemberID("key_o2")).Removed(), true, "the revoked older owner key's member is removed")
	_, err = s.RemoveMember(ctx, "p1", ciID, at(10*time.Minute))
	wantErr(t, err, store.ErrLastOwner, "remove the last owner, once the older key's member is stored")
}

// testMemberOlderKeysRace: writes racing to store an older key's member
// (an update, a new key, a removal) store it once, and the key ends up
// bound to it.
func testMemberOlderKeysRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	noErr(t, s.CreateAPIKey(ctx, ownerKey("p1", "key_boss")), "create an older owner key")
	for round := range 3 {
		old := apiKey("p1", fmt.Sprintf("key_old%d", round), t0)
		noErr(t, s.CreateAPIKey(ctx, old), "create older key "+old.ID)
		id := store.LegacyMemberID(old.ID)
		cur := getMember(t, s, "p1", id)
		nk := memberKey(cur, fmt.Sprintf("key_new%d", round))
		errs := race(3, func(i int) error {
			switch i {
			case 0:
				m := cur
				m.Name, m.UpdatedAt = fmt.Sprintf("Renamed %d", round), at(time.Minute)
				_, err := s.UpdateMember(ctx, m)
				return err
			case 1:
				return s.CreateAPIKey(ctx, nk)
			}
			if round == 0 {
				return nil
			}
			_, err := s.RemoveMember(ctx, "p1", id, at(2*time.Minute))
			return err
		})
		if round == 0 {
			eq(t, len(winners(t, errs[:2])), 2, "update and key create of an older key's member that succeeded")
		}
		for i, err := range errs {
			// The update and the new key may lose to the removal.
			if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
				t.Fatalf("round %d, writer %d: %v", round, i, err)
			}
		}
		m := getMember(t, s, "p1", id)
		keys, err := s.ListAPIKeys(ctx, "p1")
		noErr(t, err, "list keys")
		for _, k := range keys {
			if k.MemberID != id {
				continue
			}
			if m.Removed() {
				eq(t, k.RevokedAt.IsZero(), false, fmt.Sprintf("round %d: key %s of the removed member is revoked", round, k.ID))
			} else {
				eq(t, k.MemberName, m.Name, fmt.Sprintf("round %d: member name on key %s", round, k.ID))
			}
		}
		n := 0
		for _, got := range memberIDs(t, s, "p1", true) {
			if got == id {
				n++
			}
		}
		eq(t, n, 1, fmt.Sprintf("round %d: times the older key's member is listed", round))
	}
}

// wantTaken fails the test now unless err is a *store.MemberTakenError
// (and store.ErrExists) for field, naming the member existing.
func wantTaken(t testing.TB, err error, field, existing, what string) {
	t.Helper()
	var te *store.MemberTakenError
	if !errors.As(err, &te) || !errors.Is(err, store.ErrExists) || te.Field != field || te.Existing.ID != existing {
		t.Fatalf("%s: got error %v, want a MemberTakenError for the %s of %s that is ErrExists", what, err, field, existing)
	}
}

// testMemberNamesTaken: no two current members of a project share a name
// or (in any case) an email: a create or an update that would is refused
// and writes nothing; another project, a removed member and an update that
// keeps the name and email are not refused; keys stay named freely.
func testMemberNamesTaken(t *testing.T, s store.Store) {
	ctx := t.Context()
	ana := member("p1", "mem_ana", approvals.RoleApprover, t0)
	ana.Name, ana.Email = "Ana Diaz", "ana@example.com"
	ana = createMember(t, s, ana)

	twin := member("p1", "mem_twin", approvals.RoleApprover, at(time.Minute))
	twin.Name = ana.Name
	wantTaken(t, s.CreateMember(ctx, twin), "name", ana.ID, "create a second member named Ana Diaz")
	_, err := s.GetMember(ctx, "p1", twin.ID)
	wantErr(t, err, store.ErrNotFound, "member of a refused create")
	twin.Name, twin.Email = "Ana D.", "ANA@Example.com"
	wantTaken(t, s.CreateMember(ctx, twin), "email", ana.ID, "create a member with Ana's email in capitals")
	twin.Name, twin.Email = ana.Name, ""
	k := memberKey(twin, "key_twin")
	wantTaken(t, s.CreateMemberWithKey(ctx, twin, k), "name", ana.ID, "create a second Ana Diaz with a key")
	_, err = s.GetAPIKeyByHash(ctx, k.Hash)
	wantErr(t, err, store.ErrNotFound, "key of a refused create")
	sameIDs(t, memberIDs(t, s, "p1", true), []string{ana.ID}, "members after refused creates")

	elsewhere := ana
	elsewhere.ProjectID = "p2"
	createMember(t, s, elsewhere)
	lower := member("p1", "mem_lower", approvals.RoleViewer, at(time.Minute))
	lower.Name = "ana diaz" // names compare exactly, as the CLI matches them
	lower = createMember(t, s, lower)

	bo := createMember(t, s, member("p1", "mem_bo", approvals.RoleApprover, at(2*time.Minute)))
	renamed := bo
	renamed.Name, renamed.UpdatedAt = ana.Name, at(3*time.Minute)
	_, err = s.UpdateMember(ctx, renamed)
	wantTaken(t, err, "name", ana.ID, "rename Bo to Ana Diaz")
	renamed = bo
	renamed.Email, renamed.UpdatedAt = "Ana@example.com", at(3*time.Minute)
	_, err = s.UpdateMember(ctx, renamed)
	wantTaken(t, err, "email", ana.ID, "give Bo Ana's email")
	same(t, getMember(t, s, "p1", bo.ID), bo, "Bo after refused updates")

	// A key without a member is named freely; its member shares the name
	// then, and an update that keeps the name is not refused for it.
	older := apiKey("p1", "key_bo", at(4*time.Minute))
	older.Name = bo.Name
	noErr(t, s.CreateAPIKey(ctx, older), "create an older key named as Bo")
	promoted := bo
	promoted.Role, promoted.UpdatedAt = approvals.RoleOwner, at(5*time.Minute)
	bo, err = s.UpdateMember(ctx, promoted)
	noErr(t, err, "change the role of Bo, whose name an older key's member has")
	ci := apiKey("p1", "key_ci", at(4*time.Minute))
	ci.Name = "ci"
	noErr(t, s.CreateAPIKey(ctx, ci), "create an older key named ci")
	named := member("p1", "mem_ci", approvals.RoleDeveloper, at(5*time.Minute))
	named.Name = "ci"
	wantTaken(t, s.CreateMember(ctx, named), "name", store.LegacyMemberID(ci.ID), "create a member named as an older key's")

	same := ana
	same.Role, same.UpdatedAt = approvals.RoleDeveloper, at(6*time.Minute)
	ana, err = s.UpdateMember(ctx, same)
	noErr(t, err, "update Ana, keeping her name and email")
	_, err = s.RemoveMember(ctx, "p1", ana.ID, at(7*time.Minute))
	noErr(t, err, "remove Ana")
	again := member("p1", "mem_ana2", approvals.RoleApprover, at(8*time.Minute))
	again.Name, again.Email = ana.Name, ana.Email
	createMember(t, s, again)
	renamed = lower
	renamed.Name, renamed.UpdatedAt = "Ana Diaz", at(9*time.Minute)
	_, err = s.UpdateMember(ctx, renamed)
	wantTaken(t, err, "name", again.ID, "rename a member to the name of the Ana added again")
}

// testMemberNamesTakenRace: of members created, or renamed, to one name at
// the same moment, one gets it.
func testMemberNamesTakenRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 6
	errs := race(n, func(i int) error {
		m := member("p1", fmt.Sprintf("mem_%d", i), approvals.RoleApprover, t0)
		m.Name = "Ana Diaz"
		return s.CreateMember(ctx, m)
	})
	eq(t, len(winners(t, errs, store.ErrExists)), 1, "concurrent creates of members named Ana Diaz that succeeded")

	var ms []store.Member
	for i := range n {
		m := member("p2", fmt.Sprintf("mem_%d", i), approvals.RoleApprover, t0)
		m.Email = ""
		ms = append(ms, createMember(t, s, m))
	}
	errs = race(n, func(i int) error {
		m := ms[i]
		if i%2 == 0 {
			m.Name, m.UpdatedAt = "Bo Li", at(time.Minute)
		} else {
			m.Email, m.UpdatedAt = "bo@example.com", at(time.Minute)
		}
		_, err := s.UpdateMember(ctx, m)
		return err
	})
	names, emails := 0, 0
	for _, i := range winners(t, errs, store.ErrExists) {
		if i%2 == 0 {
			names++
		} else {
			emails++
		}
	}
	eq(t, names, 1, "concurrent renames to Bo Li that succeeded")
	eq(t, emails, 1, "concurrent changes of email to bo@example.com that succeeded")
}
