package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

func projectPK(id string) string { return "P#" + id }

const (
	projectSK = "P"
	keySK     = "K"
	// aKeyHash is the hash a key guard points to; aRevoked a key's revocation.
	aKeyHash = "h"
	aRevoked = "ra"
)

// CreateProject stores a new project; store.ErrExists if the id is taken.
func (s *Store) CreateProject(ctx context.Context, p store.Project) error {
	if p.ID == "" {
		return errors.New("create project: empty id")
	}
	body, err := s.encode(ctx, "project "+p.ID, p)
	if err != nil {
		return fmt.Errorf("create project %s: %w", p.ID, err)
	}
	it := key(projectPK(p.ID), projectSK)
	it[aBody] = avB(body)
	if err := s.putNew(ctx, it); err != nil {
		return fmt.Errorf("create project %s: %w", p.ID, err)
	}
	return nil
}

// GetProject returns a project or store.ErrNotFound.
func (s *Store) GetProject(ctx context.Context, id string) (store.Project, error) {
	var p store.Project
	it, err := s.getItem(ctx, key(projectPK(id), projectSK))
	if err == nil && it == nil {
		err = store.ErrNotFound
	}
	if err == nil {
		err = s.decode(ctx, getB(it, aBody), &p)
	}
	if err != nil {
		return store.Project{}, fmt.Errorf("get project %s: %w", id, err)
	}
	return p, nil
}

func apiKeyKey(hash string) item { return key("KEY#"+hash, keySK) }

func keyGuardKey(projectID, id string) item { return key(projectPK(projectID), "KEY#"+id) }

// CreateAPIKey stores a key; store.ErrExists if its id (in its project) or
// its hash is taken. The key item (by hash, the auth path's one read) and
// its guard (by project and id) are two uniqueness constraints: they are
// written in one transaction, with the project's owner count for an active
// owner key (see RevokeAPIKey), and with its member: a key with MemberID
// is added to its member's item (conditional on the member as read, which
// is read again when another write came between); a key without one is an
// older kind of key, and its own member's id must be free.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	if k.ID == "" || k.ProjectID == "" || k.Hash == "" {
		return errors.New("create api key: id, projectId and hash are required")
	}
	var err error
	if k.Legacy() {
		err = s.createLegacyKey(ctx, k)
	} else {
		err = s.createMemberKey(ctx, k)
	}
	if err != nil {
		// The hash is a secret's digest: keep it out of the message.
		return fmt.Errorf("create api key %s: %w", k.ID, err)
	}
	return nil
}

// createLegacyKey writes a key without a member: the key is its own
// member's, which counts as an owner member if the key is an active owner
// key.
func (s *Store) createLegacyKey(ctx context.Context, k store.APIKey) error {
	var tx txn
	if err := s.addNewKey(ctx, &tx, k); err != nil {
		return err
	}
	tx.add(types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: &s.table, Key: memberItemKey(k.ProjectID, store.LegacyMemberID(k.ID)), ConditionExpression: notExists,
	}}, exists)
	owner := countOf(k.ActiveOwner())
	s.addOwners(&tx, k.ProjectID, owner, owner)
	return s.ownerTransaction(ctx, k.ProjectID, tx.writes, tx.judges...)
}

// createMemberKey writes a key of a member, with the member's item.
func (s *Store) createMemberKey(ctx context.Context, k store.APIKey) error {
	return s.retryMoved(ctx, func() error {
		st, err := s.loadMember(ctx, k.ProjectID, k.MemberID, false)
		if err == nil && st.m.Removed() {
			err = store.ErrNotFound
		}
		if err != nil {
			return err
		}
		bound, err := st.m.Bind(k)
		if err != nil {
			return err
		}
		var tx txn
		if err := s.addMemberPut(ctx, &tx, st, st.m, append(st.hashes(), bound.Hash)); err != nil {
			return err
		}
		if st.legacy {
			// The older key's member gets its item; the key is bound to it.
			old := st.keys[0]
			nk := old.APIKey
			nk.MemberID, nk.MemberName = st.m.ID, st.m.Name
			if err := s.addKeyUpdate(ctx, &tx, old, nk); err != nil {
				return err
			}
		}
		if err := s.addNewKey(ctx, &tx, bound); err != nil {
			return err
		}
		s.addOwners(&tx, k.ProjectID, countOf(bound.ActiveOwner()), 0)
		return s.ownerTransaction(ctx, k.ProjectID, tx.writes, tx.judges...)
	})
}

var notExists = aws.String("attribute_not_exists(" + AttrPK + ")")

// addNewKey adds the puts of a new key's item and guard to tx, each
// conditional on being new.
func (s *Store) addNewKey(ctx context.Context, tx *txn, k store.APIKey) error {
	stored := k
	stored.RevokedAt = time.Time{}
	body, err := s.encode(ctx, "api key "+k.ID, stored)
	if err != nil {
		return err
	}
	it := apiKeyKey(k.Hash)
	it[aBody] = avB(body)
	it[aProject] = avS(k.ProjectID)
	if !k.RevokedAt.IsZero() {
		it[aRevoked] = avT(k.RevokedAt)
	}
	guard := keyGuardKey(k.ProjectID, k.ID)
	guard[aKeyHash] = avS(k.Hash)
	tx.add(types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: it, ConditionExpression: notExists}}, exists)
	tx.add(types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: guard, ConditionExpression: notExists}}, exists)
	return nil
}

// addKeyUpdate adds to tx the rewrite of a stored, active key as k (its
// member, role and name, and its revocation if k has one), conditional on
// the key being as read and active. Its judge is moved.
func (s *Store) addKeyUpdate(ctx context.Context, tx *txn, old storedKey, k store.APIKey) error {
	e, err := s.keyUpdate(ctx, old, k)
	if err != nil {
		return err
	}
	tx.add(types.TransactWriteItem{Update: e.txUpdate(s.table, apiKeyKey(k.Hash))}, moved)
	return nil
}

// keyUpdate is the update of addKeyUpdate.
func (s *Store) keyUpdate(ctx context.Context, old storedKey, k store.APIKey) (*expr, error) {
	stored := k
	stored.RevokedAt = time.Time{}
	body, err := s.encode(ctx, "api key "+k.ID, stored)
	if err != nil {
		return nil, err
	}
	e := newExpr()
	e.Cond(e.n(aBody) + " = " + e.v(avB(old.body)))
	e.Cond("attribute_not_exists(" + e.n(aRevoked) + ")")
	e.Set(aBody, avB(body))
	if !k.RevokedAt.IsZero() {
		e.Set(aRevoked, avT(k.RevokedAt))
	}
	return e, nil
}

// storedKey is a key as stored: Legacy when written without a member,
// RevokedAt from the item, and the item's payload, on which writes are
// conditional.
type storedKey struct {
	store.APIKey
	body []byte
}

func (s *Store) storedKeyOf(ctx context.Context, it item) (storedKey, error) {
	k := storedKey{body: getB(it, aBody)}
	if err := s.decode(ctx, k.body, &k.APIKey); err != nil {
		return storedKey{}, err
	}
	k.RevokedAt = getT(it, aRevoked)
	return k, nil
}

// GetAPIKeyByHash finds a key, revoked ones too, or store.ErrNotFound.
func (s *Store) GetAPIKeyByHash(ctx context.Context, hash string) (store.APIKey, error) {
	it, err := s.getItem(ctx, apiKeyKey(hash))
	if err == nil && it == nil {
		err = store.ErrNotFound
	}
	var k storedKey
	if err == nil {
		k, err = s.storedKeyOf(ctx, it)
	}
	if err != nil {
		return store.APIKey{}, fmt.Errorf("get api key by hash: %w", err)
	}
	return k.WithMember(), nil
}

// ListAPIKeys lists a project's keys, oldest first.
func (s *Store) ListAPIKeys(ctx context.Context, projectID string) ([]store.APIKey, error) {
	keys, err := s.projectKeys(ctx, projectID)
	if err != nil {
		return nil, fmt.Errorf("list api keys of %s: %w", projectID, err)
	}
	out := make([]store.APIKey, len(keys))
	for i, k := range keys {
		out[i] = k.WithMember()
	}
	slices.SortFunc(out, func(a, b store.APIKey) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// projectKeys reads a project's keys as stored, in no order: its guards,
// then the keys they point to.
func (s *Store) projectKeys(ctx context.Context, projectID string) ([]storedKey, error) {
	guards, err := s.queryAll(ctx, projectPK(projectID), "KEY#")
	if err != nil {
		return nil, err
	}
	hashes := make([]string, len(guards))
	for i, g := range guards {
		hashes[i] = getS(g, aKeyHash)
	}
	return s.keysByHash(ctx, hashes)
}

// keysByHash reads keys as stored, in no order; missing ones are left out.
func (s *Store) keysByHash(ctx context.Context, hashes []string) ([]storedKey, error) {
	keys := make([]item, len(hashes))
	for i, h := range hashes {
		keys[i] = apiKeyKey(h)
	}
	its, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]storedKey, len(its))
	for i, it := range its {
		if out[i], err = s.storedKeyOf(ctx, it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// keyByID reads a project's key by id, as stored; store.ErrNotFound if the
// project has none.
func (s *Store) keyByID(ctx context.Context, projectID, id string) (storedKey, error) {
	guard, err := s.getItem(ctx, keyGuardKey(projectID, id))
	if err == nil && guard == nil {
		err = store.ErrNotFound
	}
	if err != nil {
		return storedKey{}, err
	}
	it, err := s.getItem(ctx, apiKeyKey(getS(guard, aKeyHash)))
	if err == nil && (it == nil || getS(it, aProject) != projectID) {
		err = store.ErrNotFound
	}
	if err != nil {
		return storedKey{}, err
	}
	return s.storedKeyOf(ctx, it)
}

// RevokeAPIKey marks a key revoked at the given time; store.ErrNotFound if
// the project has no such key. Revoking twice keeps the first time. The
// revoke is conditional on the key as read (read again when another write
// came between); an active owner key is revoked in one transaction with its
// project's owner count, on the condition that another owner key stays
// (store.ErrLastOwner otherwise) — and another owner member, for an older
// key, whose member the revoke removes.
func (s *Store) RevokeAPIKey(ctx context.Context, projectID, id string, at time.Time) (store.APIKey, error) {
	if at.IsZero() {
		return store.APIKey{}, fmt.Errorf("revoke api key %s: the revocation time is required", id)
	}
	k, err := s.revokeKey(ctx, projectID, id, at)
	if err != nil {
		return store.APIKey{}, fmt.Errorf("revoke api key %s: %w", id, err)
	}
	return k.WithMember(), nil
}

// revokeKey revokes a key (RevokeAPIKey) and returns it as stored.
func (s *Store) revokeKey(ctx context.Context, projectID, id string, at time.Time) (store.APIKey, error) {
	var out store.APIKey
	err := s.retryMoved(ctx, func() error {
		k, err := s.keyByID(ctx, projectID, id)
		if err != nil {
			return err
		}
		out = k.APIKey
		if !k.RevokedAt.IsZero() {
			return nil
		}
		revoked := k.APIKey
		revoked.RevokedAt = at
		if !k.ActiveOwner() {
			e, err := s.keyUpdate(ctx, k, revoked)
			if err != nil {
				return err
			}
			_, err = s.db.UpdateItem(ctx, e.update(s.table, apiKeyKey(k.Hash)), s.callOpts...)
			if err := interpretError(err, moved); err != nil {
				return err
			}
			out = revoked
			return nil
		}
		var tx txn
		if err := s.addKeyUpdate(ctx, &tx, k, revoked); err != nil {
			return err
		}
		// An older key's member is removed with it.
		s.addOwners(&tx, projectID, -1, -countOf(k.Legacy()))
		if err := s.ownerTransaction(ctx, projectID, tx.writes, tx.judges...); err != nil {
			return err
		}
		out = revoked
		return nil
	})
	return out, err
}

// queryAll reads a whole partition's items whose sort key starts with
// prefix, in order.
func (s *Store) queryAll(ctx context.Context, pk, prefix string) ([]item, error) {
	var (
		out   []item
		start map[string]types.AttributeValue
	)
	for {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &s.table,
			KeyConditionExpression:    aws.String("#p = :p AND begins_with(#s, :s)"),
			ExpressionAttributeNames:  map[string]string{"#p": AttrPK, "#s": AttrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(pk), ":s": avS(prefix)},
			ConsistentRead:            aws.Bool(true),
			ExclusiveStartKey:         start,
		}, s.callOpts...)
		if err != nil {
			return nil, interpretError(err)
		}
		out = append(out, res.Items...)
		if res.LastEvaluatedKey == nil {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}

func deploymentSK(version int) string { return "D#" + seqKey(int64(version)) }

// CreateDeployment stores d as the project's next version: it reads the
// latest version and puts the next one if it is still free, and reads again
// when another deployment took it.
func (s *Store) CreateDeployment(ctx context.Context, d store.Deployment) (store.Deployment, error) {
	if d.ProjectID == "" {
		return store.Deployment{}, errors.New("create deployment: empty projectId")
	}
	for attempt := 0; ; attempt++ {
		latest, err := s.LatestDeployment(ctx, d.ProjectID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return store.Deployment{}, fmt.Errorf("create deployment of %s: %w", d.ProjectID, err)
		}
		nd := d
		nd.Version = latest.Version + 1
		body, err := s.encode(ctx, fmt.Sprintf("deployment %d of %s", nd.Version, d.ProjectID), nd)
		if err != nil {
			return store.Deployment{}, fmt.Errorf("create deployment of %s: %w", d.ProjectID, err)
		}
		it := key(projectPK(d.ProjectID), deploymentSK(nd.Version))
		it[aBody] = avB(body)
		err = s.putNew(ctx, it)
		if err == nil {
			return nd, nil
		}
		if !errors.Is(err, store.ErrExists) || attempt >= 100 {
			return store.Deployment{}, fmt.Errorf("create deployment of %s: %w", d.ProjectID, err)
		}
	}
}

// GetDeployment returns one version or store.ErrNotFound.
func (s *Store) GetDeployment(ctx context.Context, projectID string, version int) (store.Deployment, error) {
	var (
		it  item
		err error
	)
	if version >= 1 {
		it, err = s.getItem(ctx, key(projectPK(projectID), deploymentSK(version)))
	}
	if err == nil && it == nil {
		err = store.ErrNotFound
	}
	var d store.Deployment
	if err == nil {
		err = s.decode(ctx, getB(it, aBody), &d)
	}
	if err != nil {
		return store.Deployment{}, fmt.Errorf("get deployment %s v%d: %w", projectID, version, err)
	}
	return d, nil
}

// LatestDeployment returns the highest version or store.ErrNotFound.
func (s *Store) LatestDeployment(ctx context.Context, projectID string) (store.Deployment, error) {
	page, err := s.ListDeployments(ctx, projectID, "", 1)
	if err == nil && len(page.Items) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Deployment{}, fmt.Errorf("get latest deployment of %s: %w", projectID, err)
	}
	return page.Items[0], nil
}

// ListDeployments lists versions, newest first.
func (s *Store) ListDeployments(ctx context.Context, projectID string, cursor string, limit int) (store.Page[store.Deployment], error) {
	l := indexList{pkAttr: AttrPK, skAttr: AttrSK, pk: projectPK(projectID), skPrefix: "D#", desc: true, cursor: cursor, limit: limit}
	page, err := indexPage(ctx, s, l, func(its []item) ([]store.Deployment, error) {
		out := make([]store.Deployment, len(its))
		for i, it := range its {
			if err := s.decode(ctx, getB(it, aBody), &out[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}, func(store.Deployment) bool { return true })
	if err != nil {
		return store.Page[store.Deployment]{}, fmt.Errorf("list deployments of %s: %w", projectID, err)
	}
	return page, nil
}
