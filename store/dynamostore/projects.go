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

	"stead/approvals"
	"stead/store"
)

func projectPK(id string) string { return "P#" + id }

const (
	projectSK = "P"
	keySK     = "K"
	// ownersSK is the item counting a project's active owner keys (aOwners):
	// an owner key's create adds one, its revoke takes one away on the
	// condition that one stays.
	ownersSK = "OWNERS"
	aOwners  = "n"
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
// owner key (see RevokeAPIKey).
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	if k.ID == "" || k.ProjectID == "" || k.Hash == "" {
		return errors.New("create api key: id, projectId and hash are required")
	}
	stored := k
	stored.RevokedAt = time.Time{}
	body, err := s.encode(ctx, "api key "+k.ID, stored)
	if err != nil {
		return fmt.Errorf("create api key %s: %w", k.ID, err)
	}
	it := apiKeyKey(k.Hash)
	it[aBody] = avB(body)
	it[aProject] = avS(k.ProjectID)
	if !k.RevokedAt.IsZero() {
		it[aRevoked] = avT(k.RevokedAt)
	}
	guard := keyGuardKey(k.ProjectID, k.ID)
	guard[aKeyHash] = avS(k.Hash)
	notExists := aws.String("attribute_not_exists(" + AttrPK + ")")
	writes := []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.table, Item: it, ConditionExpression: notExists}},
		{Put: &types.Put{TableName: &s.table, Item: guard, ConditionExpression: notExists}},
	}
	if k.Role == approvals.RoleOwner && k.RevokedAt.IsZero() {
		writes = append(writes, types.TransactWriteItem{Update: s.countOwners(k.ProjectID, 1)})
	}
	err = s.ownerTransaction(ctx, k.ProjectID, writes, exists, exists, ownerCountJudge(store.ErrConflict))
	if err != nil {
		// The hash is a secret's digest: keep it out of the message.
		return fmt.Errorf("create api key %s: %w", k.ID, err)
	}
	return nil
}

func (s *Store) apiKeyFromItem(ctx context.Context, it item) (store.APIKey, error) {
	var k store.APIKey
	if err := s.decode(ctx, getB(it, aBody), &k); err != nil {
		return store.APIKey{}, err
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
	if err != nil {
		return store.APIKey{}, fmt.Errorf("get api key by hash: %w", err)
	}
	return s.apiKeyFromItem(ctx, it)
}

// ListAPIKeys lists a project's keys, oldest first.
func (s *Store) ListAPIKeys(ctx context.Context, projectID string) ([]store.APIKey, error) {
	guards, err := s.queryAll(ctx, projectPK(projectID), "KEY#")
	if err != nil {
		return nil, fmt.Errorf("list api keys of %s: %w", projectID, err)
	}
	keys := make([]item, len(guards))
	for i, g := range guards {
		keys[i] = apiKeyKey(getS(g, aKeyHash))
	}
	its, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("list api keys of %s: %w", projectID, err)
	}
	out := make([]store.APIKey, 0, len(its))
	for _, it := range its {
		k, err := s.apiKeyFromItem(ctx, it)
		if err != nil {
			return nil, fmt.Errorf("list api keys of %s: %w", projectID, err)
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b store.APIKey) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// countOwners is the update that adds delta to a project's count of active
// owner keys, on the condition that the count exists (see seedOwners) and,
// when it goes down, that it stays positive.
func (s *Store) countOwners(projectID string, delta int64) *types.Update {
	e := newExpr()
	if delta < 0 {
		e.Cond(e.n(aOwners) + " > " + e.v(avN(-delta)))
	} else {
		e.Cond("attribute_exists(" + e.n(aOwners) + ")")
	}
	e.Add(aOwners, avN(delta))
	return e.txUpdate(s.table, key(projectPK(projectID), ownersSK))
}

// errNoOwnerCount: the project's owner count does not exist yet.
var errNoOwnerCount = errors.New("no owner count")

// ownerCountJudge judges a failed owner count condition: errNoOwnerCount if
// the count is missing, else failed (what the condition guards).
func ownerCountJudge(failed error) judge {
	return func(old item) error {
		if old == nil {
			return errNoOwnerCount
		}
		return failed
	}
}

// ownerTransaction writes a transaction that changes a project's owner
// count, judged by judges. A transaction cancelled by a concurrent one is
// tried again after a pause; one that finds no count first counts the
// project's active owner keys (seedOwners).
func (s *Store) ownerTransaction(ctx context.Context, projectID string, writes []types.TransactWriteItem, judges ...judge) error {
	for try := 1; ; try++ {
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: writes}, s.callOpts...)
		if try > maxTxConflicts {
			return interpretError(err, judges...)
		}
		if transactionConflict(err) {
			if err := conflictPause(ctx, try); err != nil {
				return err
			}
			continue
		}
		err = interpretError(err, judges...)
		if !errors.Is(err, errNoOwnerCount) {
			return err
		}
		if err := s.seedOwners(ctx, projectID); err != nil {
			return err
		}
	}
}

// seedOwners creates a project's owner count from its active owner keys, if
// it has none: the first owner key's create, or a table written before the
// count existed. No owner key is created or revoked while the count is
// missing (both are conditional on it), so the keys read are the keys.
func (s *Store) seedOwners(ctx context.Context, projectID string) error {
	keys, err := s.ListAPIKeys(ctx, projectID)
	if err != nil {
		return err
	}
	n := int64(0)
	for _, k := range keys {
		if k.Role == approvals.RoleOwner && k.RevokedAt.IsZero() {
			n++
		}
	}
	it := key(projectPK(projectID), ownersSK)
	it[aOwners] = avN(n)
	if err := s.putNew(ctx, it); err != nil && !errors.Is(err, store.ErrExists) {
		return fmt.Errorf("count owner keys of %s: %w", projectID, err)
	}
	return nil
}

// RevokeAPIKey marks a key revoked at the given time; store.ErrNotFound if
// the project has no such key. Revoking twice keeps the first time. An
// active owner key is revoked in one transaction with its project's count
// of active owner keys, on the condition that another stays
// (store.ErrLastOwner otherwise).
func (s *Store) RevokeAPIKey(ctx context.Context, projectID, id string, at time.Time) (store.APIKey, error) {
	if at.IsZero() {
		return store.APIKey{}, fmt.Errorf("revoke api key %s: the revocation time is required", id)
	}
	guard, err := s.getItem(ctx, keyGuardKey(projectID, id))
	if err == nil && guard == nil {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.APIKey{}, fmt.Errorf("revoke api key %s: %w", id, err)
	}
	hash := getS(guard, aKeyHash)
	it, err := s.getItem(ctx, apiKeyKey(hash))
	if err == nil && (it == nil || getS(it, aProject) != projectID) {
		err = store.ErrNotFound
	}
	var k store.APIKey
	if err == nil {
		k, err = s.apiKeyFromItem(ctx, it)
	}
	if err != nil {
		return store.APIKey{}, fmt.Errorf("revoke api key %s: %w", id, err)
	}
	if k.Role == approvals.RoleOwner && k.RevokedAt.IsZero() {
		e := newExpr()
		e.Cond(e.n(aProject) + " = " + e.v(avS(projectID)))
		e.Cond("attribute_not_exists(" + e.n(aRevoked) + ")")
		e.Set(aRevoked, avT(at))
		err := s.ownerTransaction(ctx, projectID, []types.TransactWriteItem{
			{Update: e.txUpdate(s.table, apiKeyKey(hash))},
			{Update: s.countOwners(projectID, -1)},
		}, func(item) error { return errRevokedMeanwhile }, ownerCountJudge(store.ErrLastOwner))
		switch {
		case err == nil:
			k.RevokedAt = at
			return k, nil
		case !errors.Is(err, errRevokedMeanwhile):
			return store.APIKey{}, fmt.Errorf("revoke api key %s: %w", id, err)
		}
		// Revoked by another request meanwhile: answer as a second revoke.
	}
	e := newExpr()
	e.Cond(e.n(aProject) + " = " + e.v(avS(projectID)))
	e.SetIfAbsent(aRevoked, avT(at))
	out, err := s.db.UpdateItem(ctx, e.update(s.table, apiKeyKey(hash)), s.callOpts...)
	if err := interpretError(err, func(item) error { return store.ErrNotFound }); err != nil {
		return store.APIKey{}, fmt.Errorf("revoke api key %s: %w", id, err)
	}
	return s.apiKeyFromItem(ctx, out.Attributes)
}

// errRevokedMeanwhile: a revoke's key was revoked by another request after it
// was read.
var errRevokedMeanwhile = errors.New("revoked meanwhile")

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
