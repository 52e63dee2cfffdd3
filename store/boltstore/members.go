package boltstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"stead/store"
)

// CreateMember stores a new member at Version 1; store.ErrExists if its id
// is taken in its project, also by the member of an older key, or its name
// or email (a *store.MemberTakenError).
func (s *Store) CreateMember(ctx context.Context, m store.Member) error {
	m, err := store.NewMember(m)
	if err != nil {
		return fmt.Errorf("create member: %w", err)
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		if err := memberFree(tx, m); err != nil {
			return err
		}
		if err := namesFree(tx, m, store.Member{}); err != nil {
			return err
		}
		return put(tx, bMembers, memberKey(m.ProjectID, m.ID), m)
	})
	if err != nil {
		return fmt.Errorf("create member %s: %w", m.ID, interpretError(err))
	}
	return nil
}

// CreateMemberWithKey stores a new member and its first key in one
// transaction; store.ErrExists if the member's id or the key's id or hash
// is taken, or the member's name or email.
func (s *Store) CreateMemberWithKey(ctx context.Context, m store.Member, k store.APIKey) error {
	m, k, err := store.NewMemberWithKey(m, k)
	if err != nil {
		return fmt.Errorf("create member with key: %w", err)
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		if err := memberFree(tx, m); err != nil {
			return err
		}
		if err := namesFree(tx, m, store.Member{}); err != nil {
			return err
		}
		if err := put(tx, bMembers, memberKey(m.ProjectID, m.ID), m); err != nil {
			return err
		}
		return putNewKey(tx, k)
	})
	if err != nil {
		return fmt.Errorf("create member %s with key %s: %w", m.ID, k.ID, interpretError(err))
	}
	return nil
}

// memberFree returns store.ErrExists if m's id is taken: by a stored
// member, or as the member of an older key (a key whose id LegacyMemberID
// turns into it).
func memberFree(tx *bolt.Tx, m store.Member) error {
	if exists(tx, bMembers, memberKey(m.ProjectID, m.ID)) {
		return store.ErrExists
	}
	if keyID, ok := store.LegacyKeyID(m.ID); ok && exists(tx, bAPIKeys, key([]byte(keyID), m.ProjectID)) {
		return store.ErrExists
	}
	return nil
}

// namesFree returns a *store.MemberTakenError if m, a write of member
// was, gives it a name or an email another current member of its project
// has (store.Member.Taken): bbolt's one writer makes the read and the
// write one step.
func namesFree(tx *bolt.Tx, m, was store.Member) error {
	if !m.NamesChange(was) {
		return nil
	}
	ms, err := members(tx, m.ProjectID)
	if err != nil {
		return err
	}
	return m.Taken(was, ms)
}

func memberKey(projectID, id string) []byte { return key([]byte(id), projectID) }

// GetMember returns a member of the project, a removed one too, or
// store.ErrNotFound.
func (s *Store) GetMember(ctx context.Context, projectID, id string) (store.Member, error) {
	var m store.Member
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		m, _, err = getMember(tx, projectID, id)
		return err
	})
	if err != nil {
		return store.Member{}, fmt.Errorf("get member %s: %w", id, interpretError(err))
	}
	return m, nil
}

// getMember reads a member: the stored one, or the member of an older key
// (legacy is then that key, as stored); store.ErrNotFound if neither.
func getMember(tx *bolt.Tx, projectID, id string) (m store.Member, legacy *store.APIKey, err error) {
	ok, err := get(tx, bMembers, memberKey(projectID, id), &m)
	if err != nil || ok {
		return m, nil, err
	}
	if keyID, isLegacy := store.LegacyKeyID(id); isLegacy {
		var k store.APIKey
		ok, err := get(tx, bAPIKeys, key([]byte(keyID), projectID), &k)
		if err != nil {
			return store.Member{}, nil, err
		}
		if ok && k.Legacy() {
			return store.LegacyMember(k), &k, nil
		}
	}
	return store.Member{}, nil, store.ErrNotFound
}

// ListMembers lists a project's members, oldest first; removed ones only
// with includeRemoved.
func (s *Store) ListMembers(ctx context.Context, projectID string, includeRemoved bool) ([]store.Member, error) {
	var out []store.Member
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		out, err = members(tx, projectID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list members of %s: %w", projectID, interpretError(err))
	}
	if !includeRemoved {
		out = slices.DeleteFunc(out, store.Member.Removed)
	}
	return out, nil
}

// members reads every member of a project, removed ones and those of older
// keys too, oldest first.
func members(tx *bolt.Tx, projectID string) ([]store.Member, error) {
	out, err := values[store.Member](tx, bMembers, prefix(projectID))
	if err != nil {
		return nil, err
	}
	keys, err := projectKeys(tx, projectID)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.Legacy() {
			out = append(out, store.LegacyMember(k))
		}
	}
	store.SortMembers(out)
	return out, nil
}

// projectKeys reads a project's keys as stored, in id order.
func projectKeys(tx *bolt.Tx, projectID string) ([]store.APIKey, error) {
	return values[store.APIKey](tx, bAPIKeys, prefix(projectID))
}

// memberKeys reads the keys of member m as stored: legacy alone if m is
// its member, else the project's keys that name m.
func memberKeys(tx *bolt.Tx, m store.Member, legacy *store.APIKey) ([]store.APIKey, error) {
	if legacy != nil {
		return []store.APIKey{*legacy}, nil
	}
	keys, err := projectKeys(tx, m.ProjectID)
	return slices.DeleteFunc(keys, func(k store.APIKey) bool { return k.MemberID != m.ID }), err
}

// UpdateMember stores m's name, email, role, chat and UpdatedAt if
// m.Version is the stored version, and gives the member's active keys its
// new role and name, in one transaction; a *store.MemberTakenError if the
// new name or email is another member's.
func (s *Store) UpdateMember(ctx context.Context, m store.Member) (store.Member, error) {
	if err := m.ValidateUpdate(); err != nil {
		return store.Member{}, fmt.Errorf("update member: %w", err)
	}
	var out store.Member
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = store.Member{}
		cur, legacy, err := getMember(tx, m.ProjectID, m.ID)
		if err != nil {
			return err
		}
		next, err := cur.Updated(m)
		if err != nil {
			return err
		}
		if err := namesFree(tx, next, cur); err != nil {
			return err
		}
		if err := writeMember(tx, next, legacy, func(k *store.APIKey) {
			k.MemberID, k.Role, k.MemberName = next.ID, next.Role, next.Name
		}); err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		return store.Member{}, fmt.Errorf("update member %s: %w", m.ID, interpretError(err))
	}
	return out, nil
}

// RemoveMember marks a member removed at the given time and revokes its
// active keys, in one transaction; removing twice keeps the first time.
// The member of an older key is removed by revoking the key.
func (s *Store) RemoveMember(ctx context.Context, projectID, id string, at time.Time) (store.Member, error) {
	if at.IsZero() {
		return store.Member{}, fmt.Errorf("remove member %s: the removal time is required", id)
	}
	var out store.Member
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = store.Member{}
		cur, legacy, err := getMember(tx, projectID, id)
		if err != nil {
			return err
		}
		if cur.Removed() {
			out = cur
			return nil
		}
		next := cur.Remove(at)
		if legacy != nil {
			// The member of an older key is removed by revoking the key.
			k := *legacy
			k.RevokedAt = at
			next = store.LegacyMember(k)
		}
		if err := writeMember(tx, next, legacy, func(k *store.APIKey) { k.RevokedAt = at }); err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		return store.Member{}, fmt.Errorf("remove member %s: %w", id, interpretError(err))
	}
	return out, nil
}

// writeMember stores next, a write to a member read with getMember (legacy
// is what that returned), with each of the member's active keys as change
// changes it, keeping the project's owners (keepOwners). The member of an
// older key is stored unless next removes it: a removal only revokes its
// key.
func writeMember(tx *bolt.Tx, next store.Member, legacy *store.APIKey, change func(k *store.APIKey)) error {
	keys, err := memberKeys(tx, next, legacy)
	if err != nil {
		return err
	}
	return keepOwners(tx, next.ProjectID, func() error {
		if legacy == nil || !next.Removed() {
			if err := put(tx, bMembers, memberKey(next.ProjectID, next.ID), next); err != nil {
				return err
			}
		}
		for _, k := range keys {
			if !k.RevokedAt.IsZero() {
				continue
			}
			change(&k)
			if err := put(tx, bAPIKeys, key([]byte(k.ID), k.ProjectID), k); err != nil {
				return err
			}
		}
		return nil
	})
}

// owners counts a project's active owner keys and active owner members.
type owners struct{ keys, members int }

func countOwners(tx *bolt.Tx, projectID string) (owners, error) {
	var o owners
	keys, err := projectKeys(tx, projectID)
	if err != nil {
		return o, err
	}
	for _, k := range keys {
		if k.ActiveOwner() {
			o.keys++
		}
	}
	ms, err := members(tx, projectID)
	if err != nil {
		return o, err
	}
	for _, m := range ms {
		if m.ActiveOwner() {
			o.members++
		}
	}
	return o, nil
}

// keepOwners runs write in tx and returns store.ErrLastOwner (the caller's
// transaction then rolls back) if it left the project without an active
// owner key or an active owner member where it had one: bbolt's one writer
// makes the count and the write one step.
func keepOwners(tx *bolt.Tx, projectID string, write func() error) error {
	before, err := countOwners(tx, projectID)
	if err != nil {
		return err
	}
	if err := write(); err != nil {
		return err
	}
	after, err := countOwners(tx, projectID)
	if err != nil {
		return err
	}
	if (before.keys > 0 && after.keys == 0) || (before.members > 0 && after.members == 0) {
		return store.ErrLastOwner
	}
	return nil
}
