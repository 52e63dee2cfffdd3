package dynamostore_test

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"stead/approvals"
	"stead/store"
	"stead/store/dynamostore"
)

// beforeTransact is a client option that runs the function set with
// set, once, just before the next TransactWriteItems is sent.
type beforeTransact struct {
	mu sync.Mutex
	fn func()
	// ran counts the functions run.
	ran int
}

func (b *beforeTransact) set(fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fn = fn
}

func (b *beforeTransact) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("before-transact", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if _, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput); ok {
				b.mu.Lock()
				fn := b.fn
				b.fn = nil
				if fn != nil {
					b.ran++
				}
				b.mu.Unlock()
				if fn != nil {
					fn()
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	})
}

// TestGroupMemberCheckIsInTheWrite: a member removed after a group write
// read them and before it wrote cannot slip in: the check of the member
// is part of the write's transaction, so the write fails, reads again and
// refuses the member. So for a create, for an update that adds the
// member, and for an older key's member, whose key is revoked.
func TestGroupMemberCheckIsInTheWrite(t *testing.T) {
	t.Parallel()
	plain := fresh(t, dynamostore.Options{})
	var hook beforeTransact
	s, err := dynamostore.New(aws.Get(t).DynamoDB(hook.Option), dynamostore.Options{Table: plain.Table()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, id := range []string{"mem_ana", "mem_bo", "mem_cy"} {
		if err := plain.CreateMember(ctx, newMember("p1", id, approvals.RoleApprover)); err != nil {
			t.Fatal(err)
		}
	}
	if err := plain.CreateAPIKey(ctx, store.APIKey{ID: "key_ci", ProjectID: "p1", Role: approvals.RoleApprover, Hash: "sha256-ci", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	remove := func(id string) func() {
		return func() {
			if _, err := plain.RemoveMember(ctx, "p1", id, t0.Add(time.Minute)); err != nil {
				t.Errorf("remove %s before the write: %v", id, err)
			}
		}
	}
	refused := func(err error, id, what string) {
		t.Helper()
		var me *store.GroupMemberError
		if !errors.As(err, &me) || me.Member != id || !me.Removed {
			t.Fatalf("%s: %v, want a GroupMemberError for the removed %s", what, err, id)
		}
	}

	hook.set(remove("mem_bo"))
	err = s.CreateGroup(ctx, store.Group{ProjectID: "p1", Name: "finance", Members: []string{"mem_ana", "mem_bo"}, CreatedAt: t0, UpdatedAt: t0})
	refused(err, "mem_bo", "create a group whose member is removed before the write")
	if _, err := plain.GetGroup(ctx, "p1", "finance"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("group of the refused create: %v, want ErrNotFound", err)
	}

	g := store.Group{ProjectID: "p1", Name: "finance", Members: []string{"mem_ana"}, CreatedAt: t0, UpdatedAt: t0}
	if err := plain.CreateGroup(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.Version, g.Members, g.UpdatedAt = 1, []string{"mem_ana", "mem_cy"}, t0.Add(time.Minute)
	hook.set(remove("mem_cy"))
	_, err = s.UpdateGroup(ctx, g)
	refused(err, "mem_cy", "add a member removed before the write")

	legacy := store.LegacyMemberID("key_ci")
	g.Members = []string{"mem_ana", legacy}
	hook.set(func() {
		if _, err := plain.RevokeAPIKey(ctx, "p1", "key_ci", t0.Add(time.Minute)); err != nil {
			t.Errorf("revoke the older key before the write: %v", err)
		}
	})
	_, err = s.UpdateGroup(ctx, g)
	refused(err, legacy, "add an older key's member whose key is revoked before the write")

	if got, _ := plain.GetGroup(ctx, "p1", "finance"); got.Version != 1 || len(got.Members) != 1 {
		t.Errorf("group after the refused updates: %+v, want version 1 with mem_ana alone", got)
	}
	if hook.ran != 3 {
		t.Errorf("%d removals ran before a transaction, want 3", hook.ran)
	}
}

// TestGroupMemberStoredMidWriteIsReadAgain: an older key's member whose
// item is stored after a group write read the members (so that the read
// missed the item) and before it read the member alone is read again, not
// checked through its key, and the write then takes it.
func TestGroupMemberStoredMidWriteIsReadAgain(t *testing.T) {
	t.Parallel()
	f := &faults{}
	s := fresh(t, dynamostore.Options{}, f.client)
	plain := sameTable(t, s)
	ctx := t.Context()
	if err := s.CreateAPIKey(ctx, store.APIKey{ID: "key_ci", ProjectID: "p1", Role: approvals.RoleApprover, Hash: "sha256-ci", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	legacy := store.LegacyMemberID("key_ci")
	member, err := s.GetMember(ctx, "p1", legacy)
	if err != nil {
		t.Fatal(err)
	}
	member.Name, member.UpdatedAt = "Ci", t0.Add(time.Minute)
	var batchRead, stored bool
	f.set(func(op string) *http.Response {
		switch {
		case op == "BatchGetItem":
			batchRead = true
		case op == "GetItem" && batchRead && !stored:
			// Between the batch read and the read of the member alone.
			stored = true
			if _, err := plain.UpdateMember(ctx, member); err != nil {
				t.Errorf("store the older key's member before its read: %v", err)
			}
		}
		return nil
	})
	before := f.count("BatchGetItem")
	g := store.Group{ProjectID: "p1", Name: "finance", Members: []string{legacy}, CreatedAt: t0, UpdatedAt: t0}
	if err := s.CreateGroup(ctx, g); err != nil {
		t.Fatalf("create a group whose member is stored while it is read: %v", err)
	}
	f.set(nil)
	if !stored {
		t.Fatal("the member was not stored between the reads")
	}
	if n := f.count("BatchGetItem") - before; n != 2 {
		t.Errorf("members read %d times, want 2 (read again after the item appeared)", n)
	}
	got, err := plain.GetGroup(ctx, "p1", "finance")
	if err != nil || len(got.Members) != 1 || got.Members[0] != legacy {
		t.Fatalf("group = %+v, %v; want %s its member", got, err, legacy)
	}
}

// TestGroupDeletedMidUpdateIsNotFound: an update of a group deleted after
// the update read it and before it wrote is store.ErrNotFound (the group
// is gone), not store.ErrConflict (a stale version), and writes nothing.
func TestGroupDeletedMidUpdateIsNotFound(t *testing.T) {
	t.Parallel()
	f := &faults{}
	s := fresh(t, dynamostore.Options{}, f.client)
	plain := sameTable(t, s)
	ctx := t.Context()
	g := store.Group{ProjectID: "p1", Name: "finance", Description: "before", CreatedAt: t0, UpdatedAt: t0}
	if err := s.CreateGroup(ctx, g); err != nil {
		t.Fatal(err)
	}
	deleted := false
	f.set(func(op string) *http.Response {
		if op == "PutItem" && !deleted {
			deleted = true
			if err := plain.DeleteGroup(ctx, "p1", "finance"); err != nil {
				t.Errorf("delete the group before the update's write: %v", err)
			}
		}
		return nil
	})
	g.Version, g.Description, g.UpdatedAt = 1, "after", t0.Add(time.Minute)
	_, err := s.UpdateGroup(ctx, g)
	f.set(nil)
	if !deleted {
		t.Fatal("the group was not deleted before the update's write")
	}
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update a group deleted before its write: %v, want ErrNotFound", err)
	}
	if _, err := plain.GetGroup(ctx, "p1", "finance"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("group after the refused update: %v, want ErrNotFound", err)
	}
}

// TestGroupWriteChecksNinetyNineMembers: a group write that adds 99
// members checks each of them in its transaction (the group item's put is
// the 100th action), the last one too: a removal of it before the write
// refuses the write.
func TestGroupWriteChecksNinetyNineMembers(t *testing.T) {
	t.Parallel()
	plain := fresh(t, dynamostore.Options{})
	var hook beforeTransact
	s, err := dynamostore.New(aws.Get(t).DynamoDB(hook.Option), dynamostore.Options{Table: plain.Table()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ids := make([]string, 99)
	for i := range ids {
		ids[i] = fmt.Sprintf("mem_%03d", i)
		if err := plain.CreateMember(ctx, newMember("p1", ids[i], approvals.RoleApprover)); err != nil {
			t.Fatal(err)
		}
	}
	last := ids[len(ids)-1]
	hook.set(func() {
		if _, err := plain.RemoveMember(ctx, "p1", last, t0.Add(time.Minute)); err != nil {
			t.Errorf("remove %s before the write: %v", last, err)
		}
	})
	err = s.CreateGroup(ctx, store.Group{ProjectID: "p1", Name: "finance", Members: ids, CreatedAt: t0, UpdatedAt: t0})
	var me *store.GroupMemberError
	if !errors.As(err, &me) || me.Member != last || !me.Removed {
		t.Fatalf("create a group of 99 whose last member is removed before the write: %v, want a GroupMemberError for %s", err, last)
	}
	if hook.ran != 1 {
		t.Errorf("%d removals ran before a transaction, want 1", hook.ran)
	}
	if _, err := plain.GetGroup(ctx, "p1", "finance"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("group of the refused create: %v, want ErrNotFound", err)
	}
}

// memberID is a member id as the API makes them.
func memberID() string {
	var raw [10]byte
	_, _ = rand.Read(raw[:])
	return "mem_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw[:]))
}

// TestGroupWriteRequests: what each group write sends, and that a full
// group's item stays under 2 KB (the package documentation's costs rest
// on it).
func TestGroupWriteRequests(t *testing.T) {
	t.Parallel()
	plain := fresh(t, dynamostore.Options{})
	m := newMeter(aws.Get(t).DynamoDB(), plain.Table())
	s, err := dynamostore.New(aws.Get(t).DynamoDB(m.Option), dynamostore.Options{Table: plain.Table()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ids := make([]string, store.MaxGroupMembers)
	for i := range ids {
		ids[i] = memberID()
		mem := newMember("p1", ids[i], approvals.RoleApprover)
		mem.Name, mem.Email = fmt.Sprintf("Ana Maria Diaz Fernandez %03d", i), fmt.Sprintf("ana.maria.diaz.%03d@example.com", i)
		if err := plain.CreateMember(ctx, mem); err != nil {
			t.Fatal(err)
		}
	}
	desc := strings.Repeat("x", store.MaxGroupDescription)
	g := store.Group{ProjectID: "p1", Name: "finance", Description: desc, CreatedAt: t0, UpdatedAt: t0}
	next := func(members []string) store.Group {
		g.Version++
		g.Members, g.UpdatedAt = members, g.UpdatedAt.Add(time.Minute)
		return g
	}
	for _, c := range []struct {
		name  string
		write func() error
		want  map[string]int
	}{
		{"create, no members", func() error { return s.CreateGroup(ctx, g) }, map[string]int{"PutItem": 1}},
		{"new description", func() error { _, err := s.UpdateGroup(ctx, next(nil)); return err }, map[string]int{"GetItem": 1, "PutItem": 1}},
		{"add 99", func() error { _, err := s.UpdateGroup(ctx, next(ids[:99])); return err }, map[string]int{"GetItem": 1, "BatchGetItem": 1, "TransactWriteItems": 1}},
		{"add the 100th", func() error { _, err := s.UpdateGroup(ctx, next(ids)); return err }, map[string]int{"GetItem": 1, "BatchGetItem": 1, "TransactWriteItems": 1}},
		{"remove one", func() error { _, err := s.UpdateGroup(ctx, next(ids[1:])); return err }, map[string]int{"GetItem": 1, "PutItem": 1}},
		{"delete", func() error { return s.DeleteGroup(ctx, "p1", "finance") }, map[string]int{"DeleteItem": 1}},
		{"get or delete a name no group can have", func() error {
			// Real DynamoDB refuses a sort key over 1 KB (moto does not).
			long := strings.Repeat("a", 2000)
			if _, err := s.GetGroup(ctx, "p1", long); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("get: %w, want ErrNotFound", err)
			}
			if err := s.DeleteGroup(ctx, "p1", long); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("delete: %w, want ErrNotFound", err)
			}
			return nil
		}, map[string]int{}},
		{"create, 100 members", func() error {
			return s.CreateGroup(ctx, store.Group{ProjectID: "p1", Name: "finance", Description: desc, Members: ids, CreatedAt: t0, UpdatedAt: t0})
		}, map[string]int{"BatchGetItem": 1, "TransactWriteItems": 1}},
	} {
		m.Reset()
		if err := c.write(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		m.mu.Lock()
		got := maps.Clone(m.requests)
		m.mu.Unlock()
		if !maps.Equal(got, c.want) {
			t.Errorf("%s: requests %v, want %v", c.name, got, c.want)
		}
	}
	raw := newRawTable(t, plain)
	if size := itemSize(raw.get("P#p1", "G#finance")); size > 2048 {
		t.Errorf("a full group's item is %d bytes, want at most 2 KB", size)
	}
	if size := itemSize(raw.get("P#p1", "M#"+ids[0])); size > 1024 {
		t.Errorf("a member's item is %d bytes, want at most 1 KB (each check in a group write is billed by it)", size)
	}
}
