package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

const (
	// aMemberKeys is the string set of the hashes of a member's keys,
	// revoked ones too: a member's write rewrites its keys from it, and is
	// conditional on its size, which every new key of the member raises.
	aMemberKeys = "kh"
	// aRemovedAt is when a member was removed.
	aRemovedAt = "rm"
)

// MaxMemberKeys is how many active keys a member may have and still be
// updated or removed: one transaction (at most 100 items) rewrites them
// with the member's item and its project's owner count. Past it, those
// writes are refused with ErrTooManyKeys; revoke some keys first.
const MaxMemberKeys = 98

func memberItemKey(projectID, id string) item { return key(projectPK(projectID), "M#"+id) }

// memberState is a member as read, with what its writes are conditional
// on.
type memberState struct {
	m store.Member
	// legacy: m is the member of keys[0], an older key, and has no item.
	legacy bool
	// kh are the hashes of its keys, keys the keys (when asked for).
	kh   []string
	keys []storedKey
}

func (st memberState) hashes() []string { return slices.Clone(st.kh) }

// loadMember reads a member and, withKeys, its keys: its item, or the
// member of an older key; store.ErrNotFound if neither.
func (s *Store) loadMember(ctx context.Context, projectID, id string, withKeys bool) (memberState, error) {
	it, err := s.getItem(ctx, memberItemKey(projectID, id))
	if err != nil {
		return memberState{}, err
	}
	if it != nil {
		st := memberState{kh: getSS(it, aMemberKeys)}
		if err := s.decode(ctx, getB(it, aBody), &st.m); err != nil {
			return memberState{}, err
		}
		if withKeys {
			if st.keys, err = s.keysByHash(ctx, st.kh); err != nil {
				return memberState{}, err
			}
		}
		return st, nil
	}
	keyID, ok := store.LegacyKeyID(id)
	if !ok {
		return memberState{}, store.ErrNotFound
	}
	k, err := s.keyByID(ctx, projectID, keyID)
	if err == nil && !k.Legacy() {
		err = store.ErrNotFound
	}
	if err != nil {
		return memberState{}, err
	}
	return memberState{m: store.LegacyMember(k.APIKey), legacy: true, kh: []string{k.Hash}, keys: []storedKey{k}}, nil
}

// memberItem is the item of member m whose keys have hashes kh.
func (s *Store) memberItem(ctx context.Context, m store.Member, kh []string) (item, error) {
	body, err := s.encode(ctx, "member "+m.ID, m)
	if err != nil {
		return nil, err
	}
	it := memberItemKey(m.ProjectID, m.ID)
	it[aBody] = avB(body)
	it[aVersion] = avN(m.Version)
	if m.Removed() {
		it[aRemovedAt] = avT(m.RemovedAt)
	}
	if len(kh) > 0 {
		it[aMemberKeys] = &types.AttributeValueMemberSS{Value: kh}
	}
	return it, nil
}

// addNewMember adds to tx the put of a new member whose keys have hashes
// kh, conditional on its id being free: no item, and no key whose member
// it is (LegacyMemberID) unless that key is the one named keyID, created
// in the same transaction.
func (s *Store) addNewMember(ctx context.Context, tx *txn, m store.Member, kh []string, keyID string) error {
	it, err := s.memberItem(ctx, m, kh)
	if err != nil {
		return err
	}
	tx.add(types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: it, ConditionExpression: notExists}}, exists)
	if id, ok := store.LegacyKeyID(m.ID); ok && id != keyID {
		tx.add(types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: &s.table, Key: keyGuardKey(m.ProjectID, id), ConditionExpression: notExists,
		}}, exists)
	}
	return nil
}

// addMemberPut adds to tx the put of member st as next with keys kh,
// conditional on the member being as read: its version and its number of
// keys, or, for the member of an older key, on it still having no item.
// Its judge is moved.
func (s *Store) addMemberPut(ctx context.Context, tx *txn, st memberState, next store.Member, kh []string) error {
	it, err := s.memberItem(ctx, next, kh)
	if err != nil {
		return err
	}
	e := newExpr()
	switch {
	case st.legacy:
		e.Cond("attribute_not_exists(" + e.n(AttrPK) + ")")
	case len(st.kh) == 0:
		e.Cond(e.n(aVersion) + " = " + e.v(avN(st.m.Version)))
		e.Cond("attribute_not_exists(" + e.n(aMemberKeys) + ")")
	default:
		e.Cond(e.n(aVersion) + " = " + e.v(avN(st.m.Version)))
		e.Cond("size(" + e.n(aMemberKeys) + ") = " + e.v(avN(int64(len(st.kh)))))
	}
	tx.add(types.TransactWriteItem{Put: e.txPut(s.table, it)}, moved)
	return nil
}

// namesRead are a project's current members as a write that gives one a
// name or an email read them, to check it with (store.Member.Taken), and
// the count of such writes (aNames) read before them.
type namesRead struct {
	version int64
	members []store.Member
}

// readNames reads what a write that gives member m of was a name or an
// email is checked against, and checks it: a *store.MemberTakenError if it
// is another member's. The write is then conditional on the count read
// (addOwnersNamed), which every such write raises: a member named after
// the read was made by a write that raised it.
func (s *Store) readNames(ctx context.Context, m, was store.Member) (*namesRead, error) {
	it, err := s.getItem(ctx, key(projectPK(m.ProjectID), ownersSK))
	if err != nil {
		return nil, err
	}
	names := &namesRead{version: getN(it, aNames)}
	if names.members, err = s.ListMembers(ctx, m.ProjectID, false); err != nil {
		return nil, err
	}
	return names, m.Taken(was, names.members)
}

// CreateMember stores a new member at Version 1, in one transaction with
// the check that no key's member has its id and with its project's owner
// count (its owners, and the names its members were read with);
// store.ErrExists if the id is taken, a *store.MemberTakenError if its name
// or email is.
func (s *Store) CreateMember(ctx context.Context, m store.Member) error {
	m, err := store.NewMember(m)
	if err != nil {
		return fmt.Errorf("create member: %w", err)
	}
	err = s.retryMoved(ctx, func() error {
		names, err := s.readNames(ctx, m, store.Member{})
		if err != nil {
			return err
		}
		var tx txn
		if err := s.addNewMember(ctx, &tx, m, nil, ""); err != nil {
			return err
		}
		s.addOwnersNamed(&tx, m.ProjectID, 0, countOf(m.ActiveOwner()), names)
		return s.ownerTransaction(ctx, m.ProjectID, tx.writes, tx.judges...)
	})
	if err != nil {
		return fmt.Errorf("create member %s: %w", m.ID, err)
	}
	return nil
}

// CreateMemberWithKey stores a new member and its first key in one
// transaction; store.ErrExists if the member's id or the key's id or hash
// is taken, a *store.MemberTakenError as CreateMember's.
func (s *Store) CreateMemberWithKey(ctx context.Context, m store.Member, k store.APIKey) error {
	m, k, err := store.NewMemberWithKey(m, k)
	if err != nil {
		return fmt.Errorf("create member with key: %w", err)
	}
	err = s.retryMoved(ctx, func() error {
		names, err := s.readNames(ctx, m, store.Member{})
		if err != nil {
			return err
		}
		var tx txn
		err = s.addNewMember(ctx, &tx, m, []string{k.Hash}, k.ID)
		if err == nil {
			err = s.addNewKey(ctx, &tx, k)
		}
		if err != nil {
			return err
		}
		s.addOwnersNamed(&tx, m.ProjectID, countOf(k.ActiveOwner()), countOf(m.ActiveOwner()), names)
		return s.ownerTransaction(ctx, m.ProjectID, tx.writes, tx.judges...)
	})
	if err != nil {
		// The hash is a secret's digest: keep it out of the message.
		return fmt.Errorf("create member %s with key %s: %w", m.ID, k.ID, err)
	}
	return nil
}

// GetMember returns a member of the project, a removed one too, or
// store.ErrNotFound.
func (s *Store) GetMember(ctx context.Context, projectID, id string) (store.Member, error) {
	st, err := s.loadMember(ctx, projectID, id, false)
	if err != nil {
		return store.Member{}, fmt.Errorf("get member %s: %w", id, err)
	}
	return st.m, nil
}

// ListMembers lists a project's members, oldest first; removed ones only
// with includeRemoved. It reads the project's keys, then its member items:
// a member of an older key stored in between is read twice and listed
// once.
func (s *Store) ListMembers(ctx context.Context, projectID string, includeRemoved bool) ([]store.Member, error) {
	keys, err := s.projectKeys(ctx, projectID)
	if err != nil {
		return nil, fmt.Errorf("list members of %s: %w", projectID, err)
	}
	items, err := s.memberItems(ctx, projectID)
	if err != nil {
		return nil, fmt.Errorf("list members of %s: %w", projectID, err)
	}
	byID := map[string]store.Member{}
	for _, k := range keys {
		if k.Legacy() {
			m := store.LegacyMember(k.APIKey)
			byID[m.ID] = m
		}
	}
	for _, m := range items {
		byID[m.ID] = m
	}
	out := make([]store.Member, 0, len(byID))
	for _, m := range byID {
		if includeRemoved || !m.Removed() {
			out = append(out, m)
		}
	}
	store.SortMembers(out)
	return out, nil
}

// memberItems reads the member items of a project, in no order.
func (s *Store) memberItems(ctx context.Context, projectID string) ([]store.Member, error) {
	its, err := s.queryAll(ctx, projectPK(projectID), "M#")
	if err != nil {
		return nil, err
	}
	out := make([]store.Member, len(its))
	for i, it := range its {
		if err := s.decode(ctx, getB(it, aBody), &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UpdateMember stores m's name, email, role, chat and UpdatedAt if
// m.Version is the stored version, in one transaction with the member's
// active keys (their role and name) and, when owners change, its project's
// owner count (and the names its members were read with, when the name or
// email changes: a *store.MemberTakenError if another member has it).
// ErrTooManyKeys if the member has more than MaxMemberKeys active keys
// whose role or name changes.
func (s *Store) UpdateMember(ctx context.Context, m store.Member) (store.Member, error) {
	if err := m.ValidateUpdate(); err != nil {
		return store.Member{}, fmt.Errorf("update member: %w", err)
	}
	var out store.Member
	err := s.retryMoved(ctx, func() error {
		st, err := s.loadMember(ctx, m.ProjectID, m.ID, true)
		if err != nil {
			return err
		}
		next, err := st.m.Updated(m)
		if err != nil {
			return err
		}
		var names *namesRead
		if next.NamesChange(st.m) {
			if names, err = s.readNames(ctx, next, st.m); err != nil {
				return err
			}
		}
		var tx txn
		if err := s.addMemberPut(ctx, &tx, st, next, st.hashes()); err != nil {
			return err
		}
		var before, after int64
		for _, k := range st.keys {
			if !k.RevokedAt.IsZero() {
				continue
			}
			nk := k.APIKey
			nk.MemberID, nk.Role, nk.MemberName = next.ID, next.Role, next.Name
			before += countOf(k.ActiveOwner())
			after += countOf(nk.ActiveOwner())
			if nk == k.APIKey {
				continue
			}
			if err := s.addKeyUpdate(ctx, &tx, k, nk); err != nil {
				return err
			}
		}
		if err := tooManyKeys(st, len(tx.writes)-1); err != nil {
			return err
		}
		s.addOwnersNamed(&tx, m.ProjectID, after-before, countOf(next.ActiveOwner())-countOf(st.m.ActiveOwner()), names)
		if err := s.ownerTransaction(ctx, m.ProjectID, tx.writes, tx.judges...); err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		return store.Member{}, fmt.Errorf("update member %s: %w", m.ID, err)
	}
	return out, nil
}

// RemoveMember marks a member removed at the given time and revokes its
// active keys, in one transaction with its project's owner count when
// owners change; removing twice keeps the first time. The member of an
// older key is removed by revoking the key (RevokeAPIKey).
// ErrTooManyKeys if the member has more than MaxMemberKeys active keys.
func (s *Store) RemoveMember(ctx context.Context, projectID, id string, at time.Time) (store.Member, error) {
	if at.IsZero() {
		return store.Member{}, fmt.Errorf("remove member %s: the removal time is required", id)
	}
	var out store.Member
	err := s.retryMoved(ctx, func() error {
		st, err := s.loadMember(ctx, projectID, id, true)
		switch {
		case err != nil:
			return err
		case st.m.Removed():
			out = st.m
			return nil
		case st.legacy:
			k, err := s.revokeKey(ctx, projectID, st.keys[0].ID, at)
			if err == nil && !k.Legacy() {
				return errMoved // its member was stored meanwhile
			}
			out = store.LegacyMember(k)
			return err
		}
		next := st.m.Remove(at)
		var tx txn
		if err := s.addMemberPut(ctx, &tx, st, next, st.hashes()); err != nil {
			return err
		}
		var owners int64
		for _, k := range st.keys {
			if !k.RevokedAt.IsZero() {
				continue
			}
			nk := k.APIKey
			nk.RevokedAt = at
			owners += countOf(k.ActiveOwner())
			if err := s.addKeyUpdate(ctx, &tx, k, nk); err != nil {
				return err
			}
		}
		if err := tooManyKeys(st, len(tx.writes)-1); err != nil {
			return err
		}
		s.addOwners(&tx, projectID, -owners, -countOf(st.m.ActiveOwner()))
		if err := s.ownerTransaction(ctx, projectID, tx.writes, tx.judges...); err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		return store.Member{}, fmt.Errorf("remove member %s: %w", id, err)
	}
	return out, nil
}

// tooManyKeys refuses a write of member st that rewrites more than
// MaxMemberKeys of its keys.
func tooManyKeys(st memberState, rewrites int) error {
	if rewrites <= MaxMemberKeys {
		return nil
	}
	return fmt.Errorf("%w: member %s has %d active keys to rewrite, and one write takes at most %d; revoke some of its keys and try again",
		ErrTooManyKeys, st.m.ID, rewrites, MaxMemberKeys)
}
