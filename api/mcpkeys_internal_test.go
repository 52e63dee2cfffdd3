package api

import (
	"bytes"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"stead/approvals"
	"stead/store/boltstore"
)

// TestMCPKeyActor: an MCP key authenticates as an actor of role mcp,
// confined to its project, agent and end user, that may call tools and do
// nothing else; revoked, it is refused.
func TestMCPKeyActor(t *testing.T) {
	t.Parallel()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "stead.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s := &Server{store: st}
	owner := &caller{actor: approvals.Actor{ProjectID: "prj_a", Role: approvals.RoleOwner, ID: "key_owner", Name: "Ana Diaz"}}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	k, secret, err := newMCPKey(bytes.NewReader(bytes.Repeat([]byte{7}, 42)), owner, createMCPKeyRequest{Agent: "refunds", EndUserID: "alice"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if k.CreatedBy != "key_owner" || k.CreatedByName != "Ana Diaz" || k.Hash != hashKey(secret) || k.Hash == secret {
		t.Fatalf("key %+v", k)
	}
	if err := st.CreateMCPKey(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	c, err := s.check(t.Context(), secret)
	if err != nil {
		t.Fatal(err)
	}
	want := approvals.Actor{ProjectID: "prj_a", Role: approvals.RoleMCP, ID: k.ID, EndUserID: "alice", Agent: "refunds"}
	if c.actor != want {
		t.Errorf("actor %+v, want %+v", c.actor, want)
	}
	if err := c.authorize([]approvals.Permission{approvals.CallTools}); err != nil {
		t.Errorf("an MCP key may not call tools: %v", err)
	}
	for _, p := range []approvals.Permission{approvals.Decide, approvals.Deploy, approvals.ManageKeys, approvals.ReadOwnRuns, approvals.RunAgents} {
		var e *Error
		if err := c.authorize([]approvals.Permission{p}); !errors.As(err, &e) || e.Status != http.StatusForbidden {
			t.Errorf("an MCP key asking for %s: %v, want 403", p, err)
		}
	}

	if _, err := st.RevokeMCPKey(t.Context(), "prj_a", k.ID, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if _, err := s.check(t.Context(), secret); !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		t.Errorf("a revoked MCP key: %v, want 401", err)
	}
}
