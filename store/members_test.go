package store_test

import (
	"errors"
	"testing"
	"time"

	"stead/approvals"
	"stead/store"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestBind(t *testing.T) {
	t.Parallel()
	m := store.Member{ID: "mem_ana", ProjectID: "p1", Name: "Ana Diaz", Role: approvals.RoleApprover}
	for _, c := range []struct {
		name string
		key  store.APIKey
		want error // nil: bound
	}{
		{"fields left empty", store.APIKey{ID: "k", ProjectID: "p1"}, nil},
		{"fields as the member's", store.APIKey{ID: "k", ProjectID: "p1", MemberID: "mem_ana", Role: approvals.RoleApprover}, nil},
		{"a stale member name", store.APIKey{ID: "k", ProjectID: "p1", MemberName: "Ana"}, nil},
		{"another role", store.APIKey{ID: "k", ProjectID: "p1", Role: approvals.RoleOwner}, store.ErrConflict},
		{"another member", store.APIKey{ID: "k", ProjectID: "p1", MemberID: "mem_bo"}, errors.New("any")},
		{"another project", store.APIKey{ID: "k", ProjectID: "p2"}, errors.New("any")},
	} {
		got, err := m.Bind(c.key)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want == nil && (got.MemberID != m.ID || got.Role != m.Role || got.MemberName != m.Name):
			t.Errorf("%s: bound as %+v", c.name, got)
		case c.want == store.ErrConflict && !errors.Is(err, store.ErrConflict):
			t.Errorf("%s: %v, want ErrConflict", c.name, err)
		case c.want != nil && err == nil:
			t.Errorf("%s: bound, want an error", c.name)
		}
	}
}

func TestLegacyMember(t *testing.T) {
	t.Parallel()
	k := store.APIKey{ID: "key_x", ProjectID: "p1", Role: approvals.RoleOwner, CreatedAt: t0}
	m := store.LegacyMember(k)
	if m.ID != "mem_key_x" || m.Name != "key_x" || m.Role != approvals.RoleOwner || m.Version != 1 || !m.ActiveOwner() {
		t.Errorf("member of a key without a name = %+v", m)
	}
	if id, ok := store.LegacyKeyID(m.ID); !ok || id != k.ID {
		t.Errorf("LegacyKeyID(%s) = %s, %v; want %s", m.ID, id, ok, k.ID)
	}
	if _, ok := store.LegacyKeyID("mem_"); ok {
		t.Error(`LegacyKeyID("mem_") names a key`)
	}
	k.Name, k.RevokedAt = "ci", t0.Add(time.Hour)
	m = store.LegacyMember(k)
	if m.Name != "ci" || !m.RemovedAt.Equal(k.RevokedAt) || !m.UpdatedAt.Equal(k.RevokedAt) || m.ActiveOwner() {
		t.Errorf("member of a revoked key = %+v", m)
	}
	if got := k.WithMember(); got.MemberID != m.ID || got.MemberName != "ci" {
		t.Errorf("key without a member reads as %+v", got)
	}
	bound := store.APIKey{ID: "k2", MemberID: "mem_ana", MemberName: "Ana"}
	if got := bound.WithMember(); got != bound {
		t.Errorf("key of a member reads as %+v", got)
	}
}

func TestMemberUpdated(t *testing.T) {
	t.Parallel()
	cur := store.Member{ID: "mem_ana", ProjectID: "p1", Name: "Ana", Role: approvals.RoleDeveloper, Version: 3, CreatedAt: t0, UpdatedAt: t0}
	up := store.Member{ID: "mem_ana", ProjectID: "p1", Name: "Ana Diaz", Role: approvals.RoleOwner, Version: 3, CreatedAt: t0.Add(time.Hour), UpdatedAt: t0.Add(time.Minute)}
	next, err := cur.Updated(up)
	if err != nil || next.Version != 4 || next.Name != "Ana Diaz" || next.Role != approvals.RoleOwner || !next.CreatedAt.Equal(t0) || !next.UpdatedAt.Equal(up.UpdatedAt) {
		t.Errorf("updated = %+v, %v", next, err)
	}
	up.Version = 2
	if _, err := cur.Updated(up); !errors.Is(err, store.ErrConflict) {
		t.Errorf("update from a stale version: %v, want ErrConflict", err)
	}
	up.Version = 3
	if _, err := cur.Remove(t0.Add(time.Hour)).Updated(up); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a removed member: %v, want ErrNotFound", err)
	}
	if err := up.ValidateUpdate(); err != nil {
		t.Errorf("a valid update refused: %v", err)
	}
	up.UpdatedAt = time.Time{}
	if err := up.ValidateUpdate(); err == nil {
		t.Error("an update without updatedAt accepted")
	}
}

func TestMemberTaken(t *testing.T) {
	t.Parallel()
	ana := store.Member{ID: "mem_ana", Name: "Ana", Email: "ana@example.com"}
	bo := store.Member{ID: "mem_bo", Name: "Bo", Email: "Bo@Example.com"}
	gone := store.Member{ID: "mem_cy", Name: "Cy", Email: "cy@example.com", RemovedAt: t0}
	// Two current members named alike and without email, stored before
	// the rule: each can still be changed otherwise.
	ana2 := store.Member{ID: "mem_ana2", Name: "Ana"}
	ms := []store.Member{ana, bo, gone, ana2}
	for _, c := range []struct {
		name      string
		m, was    store.Member
		wantField string // "" when not taken
	}{
		{"a new member with another's email in other case", store.Member{ID: "mem_new", Name: "New", Email: "bo@example.com"}, store.Member{}, "email"},
		{"a new member with a removed member's name", store.Member{ID: "mem_new", Name: "Cy"}, store.Member{}, ""},
		{"a member keeping its own name and email", ana, ana, ""},
		{"a member keeping a name another has", store.Member{ID: "mem_ana2", Name: "Ana", Email: "ana2@example.com"}, ana2, ""},
		{"a member changing only its email's case", store.Member{ID: "mem_bo", Name: "Bo", Email: "bo@example.com"}, bo, ""},
		{"a member renamed to another's name", store.Member{ID: "mem_ana", Name: "Bo", Email: ana.Email}, ana, "name"},
		{"a member dropping its email", store.Member{ID: "mem_ana", Name: "Ana"}, ana, ""},
	} {
		err := c.m.Taken(c.was, ms)
		var te *store.MemberTakenError
		switch {
		case c.wantField == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantField != "" && (!errors.As(err, &te) || te.Field != c.wantField || !errors.Is(err, store.ErrExists)):
			t.Errorf("%s: %v, want the %s taken", c.name, err, c.wantField)
		}
	}
	for _, c := range []struct {
		name string
		m    store.Member
		want bool
	}{
		{"the same", ana, false},
		{"its email in other case", store.Member{Name: "Ana", Email: "ANA@example.com"}, false},
		{"its email dropped", store.Member{Name: "Ana"}, false},
		{"a new email", store.Member{Name: "Ana", Email: "ana@example.org"}, true},
		{"a new name", store.Member{Name: "Ana Diaz", Email: ana.Email}, true},
	} {
		if got := c.m.NamesChange(ana); got != c.want {
			t.Errorf("NamesChange with %s = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMemberValidate(t *testing.T) {
	t.Parallel()
	ok := store.Member{ID: "mem_ana", ProjectID: "p1", Name: "Ana", Role: approvals.RoleApprover,
		Chat: []store.ChatIdentity{{Kind: "slack", Team: "T1", User: "U1"}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid member refused: %v", err)
	}
	m := ok
	m.Chat = []store.ChatIdentity{{Kind: "slack", Team: "T1"}}
	if err := m.Validate(); err == nil {
		t.Error("a chat identity without user accepted")
	}
	if got := (store.MemberNotify{}).EmailSetting(); got != store.EmailAll {
		t.Errorf("no email setting reads as %q, want %q", got, store.EmailAll)
	}
	if _, _, err := store.NewMemberWithKey(ok, store.APIKey{ID: "key_1", ProjectID: "p1"}); err == nil {
		t.Error("a member's first key without a hash accepted")
	}
	if store.LegacyMember(store.APIKey{ID: "key_x", Name: "  "}).Name != "key_x" {
		t.Error("the member of a key with a blank name is not named after the key's id")
	}
}

func TestSortMembersByIDWhenCreatedTogether(t *testing.T) {
	t.Parallel()
	ms := []store.Member{{ID: "mem_b", CreatedAt: t0}, {ID: "mem_a", CreatedAt: t0}}
	store.SortMembers(ms)
	keys := []store.MCPKey{{ID: "mck_b", CreatedAt: t0}, {ID: "mck_a", CreatedAt: t0}}
	store.SortMCPKeys(keys)
	if ms[0].ID != "mem_a" || keys[0].ID != "mck_a" {
		t.Errorf("members sorted %s, %s; keys %s, %s", ms[0].ID, ms[1].ID, keys[0].ID, keys[1].ID)
	}
	k := store.MCPKey{ID: "mck_1", ProjectID: "p1", Agent: "support", EndUserID: "u1", CreatedAt: t0}
	if err := k.Validate(); err == nil {
		t.Error("an MCP key without a hash accepted")
	}
}
