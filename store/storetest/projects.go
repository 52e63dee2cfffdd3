package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"stead/approvals"
	"stead/store"
)

var projectTests = []test{
	{"Project/CreateGet", testProjectCreateGet},
	{"APIKey/CreateGetList", testAPIKeyCreateGetList},
	{"APIKey/Revoke", testAPIKeyRevoke},
	{"APIKey/LastOwner", testAPIKeyLastOwner},
}

func testProjectCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := createProject(t, s, "p1")
	got, err := s.GetProject(ctx, "p1")
	noErr(t, err, "get project")
	same(t, got, p, "stored project")

	dup := p
	dup.Name = "Impostor"
	wantErr(t, s.CreateProject(ctx, dup), store.ErrExists, "create project with a taken id")
	got, err = s.GetProject(ctx, "p1")
	noErr(t, err, "get project after duplicate")
	eq(t, got.Name, p.Name, "name after a refused duplicate")

	_, err = s.GetProject(ctx, "p2")
	wantErr(t, err, store.ErrNotFound, "get unknown project")
}

func apiKey(p, id string, created time.Time) store.APIKey {
	return store.APIKey{
		ID: id, ProjectID: p, Name: "key " + id, Role: approvals.RoleDeveloper,
		Hash: "sha256-" + p + "-" + id, Prefix: "sk_" + id, CreatedAt: created,
	}
}

func testAPIKeyCreateGetList(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Created out of order: the list is by creation time, not insertion.
	keys := []store.APIKey{apiKey("p1", "k3", at(3*time.Minute)), apiKey("p1", "k1", at(time.Minute)), apiKey("p1", "k2", at(2*time.Minute))}
	for _, k := range keys {
		noErr(t, s.CreateAPIKey(ctx, k), "create key "+k.ID)
	}
	noErr(t, s.CreateAPIKey(ctx, apiKey("p2", "k9", t0)), "create key of p2")

	got, err := s.GetAPIKeyByHash(ctx, keys[0].Hash)
	noErr(t, err, "get key by hash")
	// A key without a member is an older kind of key: it reads as its own
	// member's.
	same(t, got, keys[0].WithMember(), "key by hash")
	eq(t, got.MemberID, store.LegacyMemberID(keys[0].ID), "member of a key without one")
	_, err = s.GetAPIKeyByHash(ctx, "sha256-unknown")
	wantErr(t, err, store.ErrNotFound, "get key by unknown hash")

	list, err := s.ListAPIKeys(ctx, "p1")
	noErr(t, err, "list keys")
	var ids []string
	for _, k := range list {
		ids = append(ids, k.ID)
	}
	sameIDs(t, ids, []string{"k1", "k2", "k3"}, "keys of p1, oldest first")
	same(t, list[0], keys[1].WithMember(), "listed key")

	list, err = s.ListAPIKeys(ctx, "p3")
	noErr(t, err, "list keys of a project without keys")
	eq(t, len(list), 0, "keys of p3")

	// A key needs its id, project and hash.
	for name, change := range map[string]func(*store.APIKey){
		"no id":      func(k *store.APIKey) { k.ID = "" },
		"no project": func(k *store.APIKey) { k.ProjectID = "" },
		"no hash":    func(k *store.APIKey) { k.Hash = "" },
	} {
		bad := apiKey("p3", "k8", t0)
		change(&bad)
		if err := s.CreateAPIKey(ctx, bad); err == nil {
			t.Errorf("create a key with %s: no error", name)
		}
	}
	list, err = s.ListAPIKeys(ctx, "p3")
	noErr(t, err, "list keys of p3 after invalid creates")
	eq(t, len(list), 0, "keys of p3 after invalid creates")

	dupID := apiKey("p1", "k1", t0)
	dupID.Hash = "sha256-other"
	wantErr(t, s.CreateAPIKey(ctx, dupID), store.ErrExists, "create key with a taken id")
	dupHash := apiKey("p1", "k4", t0)
	dupHash.Hash = keys[0].Hash
	wantErr(t, s.CreateAPIKey(ctx, dupHash), store.ErrExists, "create key with a taken hash")
	_, err = s.GetAPIKeyByHash(ctx, "sha256-other")
	wantErr(t, err, store.ErrNotFound, "hash of a refused key")
	list, err = s.ListAPIKeys(ctx, "p1")
	noErr(t, err, "list keys after refused creates")
	eq(t, len(list), 3, "keys of p1 after refused creates")
}

func testAPIKeyRevoke(t *testing.T, s store.Store) {
	ctx := t.Context()
	k := apiKey("p1", "k1", t0)
	noErr(t, s.CreateAPIKey(ctx, k), "create key")

	_, err := s.RevokeAPIKey(ctx, "p2", "k1", at(time.Minute))
	wantErr(t, err, store.ErrNotFound, "revoke another project's key")
	_, err = s.RevokeAPIKey(ctx, "p1", "k404", at(time.Minute))
	wantErr(t, err, store.ErrNotFound, "revoke an unknown key")
	got, err := s.GetAPIKeyByHash(ctx, k.Hash)
	noErr(t, err, "get key")
	if !got.RevokedAt.IsZero() {
		t.Fatalf("refused revokes revoked the key at %v", got.RevokedAt)
	}

	rev, err := s.RevokeAPIKey(ctx, "p1", "k1", at(time.Minute))
	noErr(t, err, "revoke key")
	eq(t, rev.RevokedAt.Equal(at(time.Minute)), true, "revokedAt returned")
	rev, err = s.RevokeAPIKey(ctx, "p1", "k1", at(time.Hour))
	noErr(t, err, "revoke key again")
	eq(t, rev.RevokedAt.Equal(at(time.Minute)), true, "revokedAt after a second revoke")

	got, err = s.GetAPIKeyByHash(ctx, k.Hash)
	noErr(t, err, "get revoked key by hash")
	eq(t, got.RevokedAt.Equal(at(time.Minute)), true, "stored revokedAt")
	list, err := s.ListAPIKeys(ctx, "p1")
	noErr(t, err, "list keys")
	eq(t, len(list), 1, "revoked key stays listed")
	eq(t, list[0].RevokedAt.Equal(at(time.Minute)), true, "listed revokedAt")
}

var deploymentTests = []test{
	{"Deployment/Numbered", testDeploymentNumbered},
	{"Deployment/Concurrent", testDeploymentConcurrent},
	{"Deployment/List", testDeploymentList},
}

func deployment(p string, n int) store.Deployment {
	d := store.Deployment{
		ProjectID: p, Digest: fmt.Sprintf("%064x", n), BundleSize: int64(1000 + n),
		Config: json.RawMessage(`{"agents":{"support":{}}}`), Agents: []string{"support"},
		CreatedBy: "key_owner", CreatedAt: at(time.Duration(n) * time.Minute),
	}
	if n%2 == 0 {
		// Pinned MCP-backed tools are kept with the deployment, as written.
		d.MCPTools = []store.MCPToolPin{{
			Server: "tracker", Tool: "create_issue", Fingerprint: fmt.Sprintf("sha256:%064x", n), Description: "File an issue.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}}}`), Change: "new",
		}}
	}
	return d
}

func testDeploymentNumbered(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.LatestDeployment(ctx, "p1")
	wantErr(t, err, store.ErrNotFound, "latest deployment of a project without any")

	// Interleaved: each project counts on its own.
	var want []store.Deployment
	for i, p := range []string{"p1", "p2", "p1", "p1", "p2"} {
		d, err := s.CreateDeployment(ctx, deployment(p, i))
		noErr(t, err, "create deployment")
		want = append(want, d)
	}
	for i, v := range []int{1, 1, 2, 3, 2} {
		eq(t, want[i].Version, v, fmt.Sprintf("version of deployment %d (%s)", i, want[i].ProjectID))
		exp := deployment(want[i].ProjectID, i)
		exp.Version = v
		same(t, want[i], exp, "returned deployment")
	}

	got, err := s.GetDeployment(ctx, "p1", 1)
	noErr(t, err, "get deployment p1 v1")
	same(t, got, want[0], "p1 v1")
	got, err = s.GetDeployment(ctx, "p1", 2)
	noErr(t, err, "get deployment p1 v2")
	same(t, got, want[2], "p1 v2")
	got, err = s.LatestDeployment(ctx, "p1")
	noErr(t, err, "latest p1")
	same(t, got, want[3], "latest p1")
	got, err = s.LatestDeployment(ctx, "p2")
	noErr(t, err, "latest p2")
	same(t, got, want[4], "latest p2")

	_, err = s.GetDeployment(ctx, "p1", 4)
	wantErr(t, err, store.ErrNotFound, "get unknown version")
	_, err = s.GetDeployment(ctx, "p3", 1)
	wantErr(t, err, store.ErrNotFound, "get version of another project")
	_, err = s.GetDeployment(ctx, "p1", 0)
	wantErr(t, err, store.ErrNotFound, "get version 0")
}

func testDeploymentConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 10
	versions := make([]int, n)
	errs := race(n, func(i int) error {
		d, err := s.CreateDeployment(ctx, deployment("p1", i))
		versions[i] = d.Version
		return err
	})
	eq(t, len(winners(t, errs)), n, "deployments created")
	seen := map[int]bool{}
	for _, v := range versions {
		if v < 1 || v > n || seen[v] {
			t.Fatalf("versions %v are not 1..%d each once", versions, n)
		}
		seen[v] = true
	}
	latest, err := s.LatestDeployment(ctx, "p1")
	noErr(t, err, "latest")
	eq(t, latest.Version, n, "latest version")
}

func testDeploymentList(t *testing.T, s store.Store) {
	ctx := t.Context()
	// The project's other records are not deployments.
	createProject(t, s, "p1")
	noErr(t, s.CreateAPIKey(ctx, ownerKey("p1", "k1")), "create an owner key of p1")
	createMember(t, s, member("p1", "mem_ana", approvals.RoleApprover, t0))
	noErr(t, s.CreateGroup(ctx, store.Group{ProjectID: "p1", Name: "finance", Members: []string{"mem_ana"}, CreatedAt: t0, UpdatedAt: t0}), "create a group of p1")
	for i := range 7 {
		_, err := s.CreateDeployment(ctx, deployment("p1", i))
		noErr(t, err, "create deployment")
	}
	_, err := s.CreateDeployment(ctx, deployment("p2", 0))
	noErr(t, err, "create deployment of p2")

	got := collect(t, 3, func(d store.Deployment) string { return fmt.Sprint(d.Version) },
		func(c string) (store.Page[store.Deployment], error) { return s.ListDeployments(ctx, "p1", c, 3) })
	sameIDs(t, got, []string{"7", "6", "5", "4", "3", "2", "1"}, "versions of p1, newest first")

	first, err := s.ListDeployments(ctx, "p1", "", 3)
	noErr(t, err, "first page")
	for _, d := range first.Items {
		eq(t, d.ProjectID, "p1", "project of a listed deployment")
	}
	if first.NextCursor == "" {
		t.Fatal("first page of 7 versions by 3 has no cursor")
	}
	_, err = s.ListDeployments(ctx, "p1", "not a cursor %%", 3)
	wantErr(t, err, store.ErrInvalidCursor, "list deployments with a bad cursor")

	none, err := s.ListDeployments(ctx, "p3", "", 3)
	noErr(t, err, "list deployments of a project without any")
	eq(t, len(none.Items), 0, "deployments of p3")
	eq(t, none.NextCursor, "", "cursor of an empty list")
}

func ownerKey(p, id string) store.APIKey {
	k := apiKey(p, id, t0)
	k.Role = approvals.RoleOwner
	return k
}

// testAPIKeyLastOwner: a project keeps an active owner key. Revoking the
// last one is refused (ErrLastOwner), also when two revokes of its last two
// owner keys run at the same moment: one wins, the other is refused.
// Developer keys and other projects' keys do not count.
func testAPIKeyLastOwner(t *testing.T, s store.Store) {
	ctx := t.Context()
	for round := range 4 {
		p := fmt.Sprintf("p%d", round)
		for _, k := range []store.APIKey{ownerKey(p, "o1"), ownerKey(p, "o2"), apiKey(p, "d1", t0)} {
			noErr(t, s.CreateAPIKey(ctx, k), "create key "+k.ID+" of "+p)
		}
		var (
			wg   sync.WaitGroup
			errs [2]error
		)
		start := make(chan struct{})
		for i, id := range []string{"o1", "o2"} {
			wg.Go(func() {
				<-start
				_, errs[i] = s.RevokeAPIKey(ctx, p, id, at(time.Minute))
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrLastOwner):
				t.Fatalf("%s: concurrent revoke of an owner key: %v", p, err)
			}
		}
		eq(t, won, 1, p+": concurrent revokes of the last two owner keys that succeeded")
		list, err := s.ListAPIKeys(ctx, p)
		noErr(t, err, "list keys")
		active := 0
		for _, k := range list {
			if k.Role == approvals.RoleOwner && k.RevokedAt.IsZero() {
				active++
			}
		}
		eq(t, active, 1, p+": active owner keys after the race")
	}

	// p0 has one owner key left.
	list, err := s.ListAPIKeys(ctx, "p0")
	noErr(t, err, "list keys")
	var left, gone string
	for _, k := range list {
		if k.Role == approvals.RoleOwner && k.RevokedAt.IsZero() {
			left = k.ID
		} else if k.Role == approvals.RoleOwner {
			gone = k.ID
		}
	}
	_, err = s.RevokeAPIKey(ctx, "p0", left, at(time.Hour))
	wantErr(t, err, store.ErrLastOwner, "revoke the last owner key")
	rev, err := s.RevokeAPIKey(ctx, "p0", gone, at(time.Hour))
	noErr(t, err, "revoke a revoked owner key again")
	eq(t, rev.RevokedAt.Equal(at(time.Minute)), true, "revokedAt after a second revoke")
	_, err = s.RevokeAPIKey(ctx, "p0", "d1", at(time.Hour))
	noErr(t, err, "revoke a developer key")

	noErr(t, s.CreateAPIKey(ctx, ownerKey("p0", "o3")), "create another owner key")
	_, err = s.RevokeAPIKey(ctx, "p0", left, at(time.Hour))
	noErr(t, err, "revoke an owner key once another exists")
	_, err = s.RevokeAPIKey(ctx, "p0", "o3", at(time.Hour))
	wantErr(t, err, store.ErrLastOwner, "revoke the new last owner key")

	// An owner key created revoked is not an active owner.
	revoked := ownerKey("p9", "r1")
	revoked.RevokedAt = t0
	noErr(t, s.CreateAPIKey(ctx, revoked), "create a revoked owner key")
	noErr(t, s.CreateAPIKey(ctx, ownerKey("p9", "a1")), "create an owner key")
	_, err = s.RevokeAPIKey(ctx, "p9", "a1", at(time.Hour))
	wantErr(t, err, store.ErrLastOwner, "revoke the one active owner key beside a revoked one")
}
