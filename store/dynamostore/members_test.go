package dynamostore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/approvals"
	"stead/store"
	"stead/store/dynamostore"
)

func newMember(p, id string, r approvals.Role) store.Member {
	return store.Member{ID: id, ProjectID: p, Name: "Member " + id, Role: r, Version: 1, CreatedAt: t0, UpdatedAt: t0}
}

// ownerMembers is the project's count of active owner members as stored.
func ownerMembers(t *testing.T, raw rawTable, p string) string {
	t.Helper()
	v, ok := raw.get("P#"+p, "OWNERS")["m"].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("project %s has no count of owner members", p)
	}
	return v.Value
}

// TestOwnerMembersSeeded: a project whose owner count predates members (it
// counts owner keys only) gets its count of owner members — stored members
// and the members of older keys, owners only — at the first write that
// changes it, and the last owner rule holds from there.
func TestOwnerMembersSeeded(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{})
	raw := newRawTable(t, s)
	ctx := t.Context()
	approverKey := store.APIKey{ID: "a1", ProjectID: "p1", Role: approvals.RoleApprover, Hash: "sha256-p1-a1", Prefix: "sk_a1", CreatedAt: t0}
	for _, k := range []store.APIKey{ownerKey("p1", "o1"), ownerKey("p1", "o2"), approverKey} {
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []store.Member{newMember("p1", "mem_ana", approvals.RoleOwner), newMember("p1", "mem_bo", approvals.RoleApprover)} {
		if err := s.CreateMember(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if got := ownerMembers(t, raw, "p1"); got != "3" {
		t.Fatalf("owner members = %s, want 3 (ana and the members of o1 and o2)", got)
	}
	// As written before members existed: the count of owner keys alone.
	if _, err := raw.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: awssdk.String(s.Table()),
		Key:              map[string]types.AttributeValue{dynamostore.AttrPK: avStr("P#p1"), dynamostore.AttrSK: avStr("OWNERS")},
		UpdateExpression: awssdk.String("REMOVE m")}); err != nil {
		t.Fatal(err)
	}

	if _, err := s.RemoveMember(ctx, "p1", "mem_ana", t0.Add(time.Minute)); err != nil {
		t.Fatalf("remove an owner member, count missing: %v", err)
	}
	if got := ownerMembers(t, raw, "p1"); got != "2" {
		t.Fatalf("owner members after the removal = %s, want 2 (the members of o1 and o2; mem_bo and a1's member are no owners)", got)
	}
	if _, err := s.RevokeAPIKey(ctx, "p1", "o1", t0.Add(time.Minute)); err != nil {
		t.Fatalf("revoke an older owner key: %v", err)
	}
	if got, keys := ownerMembers(t, raw, "p1"), ownerCount(t, raw, "p1"); got != "1" || keys != "1" {
		t.Fatalf("owner members, keys after the revoke = %s, %s; want 1, 1 (its member went with it)", got, keys)
	}
	if _, err := s.RemoveMember(ctx, "p1", store.LegacyMemberID("o2"), t0.Add(time.Minute)); !errors.Is(err, store.ErrLastOwner) {
		t.Fatalf("remove the last owner member: %v, want ErrLastOwner", err)
	}
}

// TestMemberKeysInOneTransaction: a member's update rewrites its active
// keys in the transaction that writes the member, so a member with more
// than MaxMemberKeys of them cannot be renamed or removed (ErrTooManyKeys,
// nothing written) until some are revoked; an update that changes no key
// still can be made.
func TestMemberKeysInOneTransaction(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{})
	ctx := t.Context()
	m := newMember("p1", "mem_ci", approvals.RoleDeveloper)
	if err := s.CreateMember(ctx, m); err != nil {
		t.Fatal(err)
	}
	key := func(i int) store.APIKey {
		return store.APIKey{ID: fmt.Sprintf("k%03d", i), ProjectID: "p1", MemberID: m.ID, Hash: fmt.Sprintf("sha256-%03d", i), CreatedAt: t0}
	}
	for i := range dynamostore.MaxMemberKeys {
		if err := s.CreateAPIKey(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
	}
	m.Name, m.UpdatedAt = "CI", t0.Add(time.Minute)
	m, err := s.UpdateMember(ctx, m)
	if err != nil {
		t.Fatalf("rename a member with %d keys: %v", dynamostore.MaxMemberKeys, err)
	}
	if err := s.CreateAPIKey(ctx, key(dynamostore.MaxMemberKeys)); err != nil {
		t.Fatal(err)
	}
	renamed := m
	renamed.Name = "CI bot"
	if _, err := s.UpdateMember(ctx, renamed); !errors.Is(err, dynamostore.ErrTooManyKeys) {
		t.Fatalf("rename a member with %d keys: %v, want ErrTooManyKeys", dynamostore.MaxMemberKeys+1, err)
	}
	if _, err := s.RemoveMember(ctx, "p1", m.ID, t0.Add(time.Hour)); !errors.Is(err, dynamostore.ErrTooManyKeys) {
		t.Fatalf("remove a member with %d keys: %v, want ErrTooManyKeys", dynamostore.MaxMemberKeys+1, err)
	}
	k, err := s.GetAPIKeyByHash(ctx, key(0).Hash)
	if err != nil || k.MemberName != "CI" || !k.RevokedAt.IsZero() {
		t.Fatalf("key after refused writes = %+v, %v; want named CI and active", k, err)
	}
	emailed := m
	emailed.Email = "ci@example.com"
	if _, err := s.UpdateMember(ctx, emailed); err != nil {
		t.Fatalf("change the email of a member with %d keys: %v", dynamostore.MaxMemberKeys+1, err)
	}
	if _, err := s.RevokeAPIKey(ctx, "p1", key(0).ID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemoveMember(ctx, "p1", m.ID, t0.Add(time.Hour)); err != nil {
		t.Fatalf("remove the member once one key is revoked: %v", err)
	}
}
