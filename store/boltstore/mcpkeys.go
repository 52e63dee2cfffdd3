package boltstore

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"stead/store"
)

var _ store.MCPKeys = (*Store)(nil)

// MCP keys: the mcpkeys bucket holds each key under its project and id, as
// the DynamoDB item in the project's partition does; idx-mcpkey-hash maps
// a key's hash to that bucket key, as the DynamoDB hash guard does.
var (
	bMCPKeys    = []byte("mcpkeys")
	xMCPKeyHash = []byte("idx-mcpkey-hash")
)

func mcpKeyKey(projectID, id string) []byte { return key([]byte(id), projectID) }

// CreateMCPKey stores a new key; store.ErrExists if its id (in its project)
// or its hash is taken.
func (s *Store) CreateMCPKey(ctx context.Context, k store.MCPKey) error {
	if err := k.Validate(); err != nil {
		return fmt.Errorf("create mcp key: %w", err)
	}
	k.RevokedAt = time.Time{}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		ik := mcpKeyKey(k.ProjectID, k.ID)
		if exists(tx, bMCPKeys, ik) || exists(tx, xMCPKeyHash, []byte(k.Hash)) {
			return store.ErrExists
		}
		if err := put(tx, bMCPKeys, ik, k); err != nil {
			return err
		}
		return bucket(tx, xMCPKeyHash).Put([]byte(k.Hash), ik)
	})
	if err != nil {
		return fmt.Errorf("create mcp key %s: %w", k.ID, interpretError(err))
	}
	return nil
}

// GetMCPKeyByHash finds a key, revoked ones too, or store.ErrNotFound.
func (s *Store) GetMCPKeyByHash(ctx context.Context, hash string) (store.MCPKey, error) {
	var k store.MCPKey
	err := s.view(ctx, func(tx *bolt.Tx) error {
		ik := bucket(tx, xMCPKeyHash).Get([]byte(hash))
		if ik == nil {
			return store.ErrNotFound
		}
		return must(get(tx, bMCPKeys, ik, &k))
	})
	if err != nil {
		// The hash is a secret's digest: keep it out of the message.
		return store.MCPKey{}, fmt.Errorf("get mcp key by hash: %w", interpretError(err))
	}
	return k, nil
}

// ListMCPKeys lists a project's keys, oldest first.
func (s *Store) ListMCPKeys(ctx context.Context, projectID string) ([]store.MCPKey, error) {
	var keys []store.MCPKey
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		keys, err = values[store.MCPKey](tx, bMCPKeys, prefix(projectID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list mcp keys of %s: %w", projectID, interpretError(err))
	}
	store.SortMCPKeys(keys)
	return keys, nil
}

// RevokeMCPKey marks a key revoked at at; revoking twice keeps the first
// time. store.ErrNotFound if the project has no such key.
func (s *Store) RevokeMCPKey(ctx context.Context, projectID, id string, at time.Time) (store.MCPKey, error) {
	if at.IsZero() {
		return store.MCPKey{}, fmt.Errorf("revoke mcp key %s: the revocation time is required", id)
	}
	var out store.MCPKey
	err := s.update(ctx, func(tx *bolt.Tx) error {
		ik := mcpKeyKey(projectID, id)
		var k store.MCPKey
		if err := must(get(tx, bMCPKeys, ik, &k)); err != nil {
			return err
		}
		out = k
		if !k.RevokedAt.IsZero() {
			return nil
		}
		k.RevokedAt = at
		out = k
		return put(tx, bMCPKeys, ik, k)
	})
	if err != nil {
		return store.MCPKey{}, fmt.Errorf("revoke mcp key %s: %w", id, interpretError(err))
	}
	return out, nil
}
