package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

var _ store.MCPKeys = (*Store)(nil)

// MCP keys (store.MCPKeys).
//
// An MCP key is an item of its project's partition (P#<project>,
// MCK#<key>) holding the key (aBody) and its revocation (ra), so that
// ListMCPKeys is one strongly consistent Query of the partition's MCK#
// items. Its hash guard (MCKH#<hash>, K) holds the project (pid) and the
// key's id (kid): the hash is unique across projects, and the auth path
// finds the key by hash with two GetItems (guard, then key), strongly
// consistent, so a revoke is seen at once. CreateMCPKey writes both in one
// transaction, each conditional on being new; RevokeMCPKey is one
// UpdateItem of the key item that sets ra unless it is set. Keys enter no
// index.
const (
	mcpKeyPrefix      = "MCK#"
	mcpKeyGuardPrefix = "MCKH#"
	aMCPKeyID         = "kid"
)

func mcpKeyItemKey(projectID, id string) item { return key(projectPK(projectID), mcpKeyPrefix+id) }

func mcpKeyGuardKey(hash string) item { return key(mcpKeyGuardPrefix+hash, keySK) }

// decodeMCPKey reads a key item: its payload, with the revocation of the
// item's own attribute.
func (s *Store) decodeMCPKey(ctx context.Context, it item) (store.MCPKey, error) {
	var k store.MCPKey
	if err := s.decode(ctx, getB(it, aBody), &k); err != nil {
		return store.MCPKey{}, err
	}
	k.RevokedAt = getT(it, aRevoked)
	return k, nil
}

// CreateMCPKey stores a new key and its hash guard in one transaction;
// store.ErrExists if its id (in its project) or its hash is taken.
func (s *Store) CreateMCPKey(ctx context.Context, k store.MCPKey) error {
	if err := k.Validate(); err != nil {
		return fmt.Errorf("create mcp key: %w", err)
	}
	k.RevokedAt = time.Time{}
	body, err := s.encode(ctx, "mcp key "+k.ID, k)
	if err != nil {
		return fmt.Errorf("create mcp key %s: %w", k.ID, err)
	}
	it := mcpKeyItemKey(k.ProjectID, k.ID)
	it[aBody] = avB(body)
	guard := mcpKeyGuardKey(k.Hash)
	guard[aProject] = avS(k.ProjectID)
	guard[aMCPKeyID] = avS(k.ID)
	var tx txn
	tx.add(types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: it, ConditionExpression: notExists}}, exists)
	tx.add(types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: guard, ConditionExpression: notExists}}, exists)
	// No owner count is part of it: this is a plain transaction, tried
	// again on a TransactionConflict like the others.
	if err := s.ownerTransaction(ctx, k.ProjectID, tx.writes, tx.judges...); err != nil {
		// The hash is a secret's digest: keep it out of the message.
		return fmt.Errorf("create mcp key %s: %w", k.ID, err)
	}
	return nil
}

// GetMCPKeyByHash finds a key, revoked ones too, or store.ErrNotFound: its
// guard, then its item.
func (s *Store) GetMCPKeyByHash(ctx context.Context, hash string) (store.MCPKey, error) {
	k, err := s.mcpKeyByHash(ctx, hash)
	if err != nil {
		return store.MCPKey{}, fmt.Errorf("get mcp key by hash: %w", err)
	}
	return k, nil
}

func (s *Store) mcpKeyByHash(ctx context.Context, hash string) (store.MCPKey, error) {
	guard, err := s.getItem(ctx, mcpKeyGuardKey(hash))
	if err != nil {
		return store.MCPKey{}, err
	}
	if guard == nil {
		return store.MCPKey{}, store.ErrNotFound
	}
	it, err := s.getItem(ctx, mcpKeyItemKey(getS(guard, aProject), getS(guard, aMCPKeyID)))
	if err != nil {
		return store.MCPKey{}, err
	}
	if it == nil {
		return store.MCPKey{}, store.ErrNotFound
	}
	return s.decodeMCPKey(ctx, it)
}

// ListMCPKeys lists a project's keys, oldest first: one Query of its
// partition's key items.
func (s *Store) ListMCPKeys(ctx context.Context, projectID string) ([]store.MCPKey, error) {
	its, err := s.queryAll(ctx, projectPK(projectID), mcpKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("list mcp keys of %s: %w", projectID, err)
	}
	out := make([]store.MCPKey, len(its))
	for i, it := range its {
		if out[i], err = s.decodeMCPKey(ctx, it); err != nil {
			return nil, fmt.Errorf("list mcp keys of %s: %w", projectID, err)
		}
	}
	store.SortMCPKeys(out)
	return out, nil
}

// RevokeMCPKey marks a key revoked at at: one UpdateItem, conditional on
// the key existing, that keeps an earlier revocation.
func (s *Store) RevokeMCPKey(ctx context.Context, projectID, id string, at time.Time) (store.MCPKey, error) {
	if at.IsZero() {
		return store.MCPKey{}, fmt.Errorf("revoke mcp key %s: the revocation time is required", id)
	}
	e := newExpr()
	e.Cond("attribute_exists(" + e.n(AttrPK) + ")")
	e.SetIfAbsent(aRevoked, avT(at))
	res, err := s.db.UpdateItem(ctx, e.update(s.table, mcpKeyItemKey(projectID, id)), s.callOpts...)
	var k store.MCPKey
	if err = interpretError(err); err == nil {
		k, err = s.decodeMCPKey(ctx, res.Attributes)
	}
	if err != nil {
		return store.MCPKey{}, fmt.Errorf("revoke mcp key %s: %w", id, err)
	}
	return k, nil
}
