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
