package storetest

import (
	"testing"
	"time"

	"stead/store"
)

var mcpKeyTests = []test{
	{"MCPKey/Lifecycle", testMCPKeyLifecycle},
	{"MCPKey/Unique", testMCPKeyUnique},
	{"MCPKey/Projects", testMCPKeyProjects},
	{"MCPKey/Invalid", testMCPKeyInvalid},
}

func mcpKey(p, id string, created time.Time) store.MCPKey {
	return store.MCPKey{
		ID: id, ProjectID: p, Agent: "support", EndUserID: "alice", Name: "claude desktop",
		Hash: "hash-" + p + "-" + id, Prefix: "stm_abcdefgh", CreatedBy: "key_owner", CreatedByName: "Ana Diaz",
		CreatedAt: created,
	}
}

func mcpKeyIDs(keys []store.MCPKey) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return ids
}

func testMCPKeyLifecycle(t *testing.T, s store.Store) {
	ctx := t.Context()
	k := mcpKey("p1", "mck_1", t0)
	noErr(t, s.CreateMCPKey(ctx, k), "create mck_1")
	got, err := s.GetMCPKeyByHash(ctx, k.Hash)
	noErr(t, err, "get mck_1 by hash")
	same(t, got, k, "mck_1 by hash")

	_, err = s.GetMCPKeyByHash(ctx, "hash-nope")
	wantErr(t, err, store.ErrNotFound, "get by an unknown hash")

	revoked, err := s.RevokeMCPKey(ctx, "p1", "mck_1", at(time.Minute))
	noErr(t, err, "revoke mck_1")
	want := k
	want.RevokedAt = at(time.Minute)
	same(t, revoked, want, "revoked mck_1")
	got, err = s.GetMCPKeyByHash(ctx, k.Hash)
	noErr(t, err, "get revoked mck_1 by hash")
	same(t, got, want, "revoked mck_1 by hash")

	// Revoking twice keeps the first time.
	again, err := s.RevokeMCPKey(ctx, "p1", "mck_1", at(time.Hour))
	noErr(t, err, "revoke mck_1 again")
	same(t, again, want, "mck_1 revoked twice")
	list, err := s.ListMCPKeys(ctx, "p1")
	noErr(t, err, "list p1's mcp keys")
	same(t, list, []store.MCPKey{want}, "p1's mcp keys")

	_, err = s.RevokeMCPKey(ctx, "p1", "mck_nope", at(time.Minute))
	wantErr(t, err, store.ErrNotFound, "revoke a missing key")
}

func testMCPKeyUnique(t *testing.T, s store.Store) {
	ctx := t.Context()
	k := mcpKey("p1", "mck_1", t0)
	noErr(t, s.CreateMCPKey(ctx, k), "create mck_1")
	sameID := mcpKey("p1", "mck_1", at(time.Minute))
	sameID.Hash = "another-hash"
	wantErr(t, s.CreateMCPKey(ctx, sameID), store.ErrExists, "create mck_1 again with another hash")
	sameHash := mcpKey("p2", "mck_2", at(time.Minute))
	sameHash.Hash = k.Hash
	wantErr(t, s.CreateMCPKey(ctx, sameHash), store.ErrExists, "create a key with mck_1's hash in another project")
	// Nothing of the refused writes was kept.
	_, err := s.GetMCPKeyByHash(ctx, "another-hash")
	wantErr(t, err, store.ErrNotFound, "get the refused key's hash")
	got, err := s.GetMCPKeyByHash(ctx, k.Hash)
	noErr(t, err, "get mck_1 by hash")
	same(t, got, k, "mck_1 after refused creates")
	list, err := s.ListMCPKeys(ctx, "p2")
	noErr(t, err, "list p2's mcp keys")
	eq(t, len(list), 0, "p2's mcp keys")
}

func testMCPKeyProjects(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Oldest first, then by id; "p1" is not "p10".
	for _, k := range []store.MCPKey{
		mcpKey("p1", "mck_b", at(2*time.Minute)),
		mcpKey("p1", "mck_c", at(time.Minute)),
		mcpKey("p1", "mck_a", at(2*time.Minute)),
		mcpKey("p10", "mck_d", t0),
	} {
		noErr(t, s.CreateMCPKey(ctx, k), "create "+k.ProjectID+"/"+k.ID)
	}
	list, err := s.ListMCPKeys(ctx, "p1")
	noErr(t, err, "list p1's mcp keys")
	sameIDs(t, mcpKeyIDs(list), []string{"mck_c", "mck_a", "mck_b"}, "p1's mcp keys")
	list, err = s.ListMCPKeys(ctx, "p10")
	noErr(t, err, "list p10's mcp keys")
	sameIDs(t, mcpKeyIDs(list), []string{"mck_d"}, "p10's mcp keys")

	// Another project's key is not found by id.
	_, err = s.RevokeMCPKey(ctx, "p10", "mck_a", at(time.Hour))
	wantErr(t, err, store.ErrNotFound, "revoke p1's key as p10")
	got, err := s.GetMCPKeyByHash(ctx, mcpKey("p1", "mck_a", t0).Hash)
	noErr(t, err, "get mck_a")
	eq(t, got.RevokedAt.IsZero(), true, "mck_a is active after another project's revoke")
}

func testMCPKeyInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	for name, change := range map[string]func(*store.MCPKey){
		"no id":        func(k *store.MCPKey) { k.ID = "" },
		"no project":   func(k *store.MCPKey) { k.ProjectID = "" },
		"no agent":     func(k *store.MCPKey) { k.Agent = "" },
		"no end user":  func(k *store.MCPKey) { k.EndUserID = "" },
		"no hash":      func(k *store.MCPKey) { k.Hash = "" },
		"no createdAt": func(k *store.MCPKey) { k.CreatedAt = time.Time{} },
	} {
		k := mcpKey("p1", "mck_1", t0)
		change(&k)
		if err := s.CreateMCPKey(ctx, k); err == nil {
			t.Errorf("create a key with %s: no error", name)
		}
	}
	list, err := s.ListMCPKeys(ctx, "p1")
	noErr(t, err, "list p1's mcp keys")
	eq(t, len(list), 0, "p1's mcp keys after invalid creates")
	_, err = s.RevokeMCPKey(ctx, "p1", "mck_1", time.Time{})
	if err == nil {
		t.Error("revoke without a time: no error")
	}
}
