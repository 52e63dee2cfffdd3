package boltstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"stead/store"
)

// CreateProject stores a new project; store.ErrExists if the id is taken.
func (s *Store) CreateProject(ctx context.Context, p store.Project) error {
	if p.ID == "" {
		return errors.New("create project: empty id")
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		k := []byte(p.ID)
		if exists(tx, bProjects, k) {
			return store.ErrExists
		}
		return put(tx, bProjects, k, p)
	})
	if err != nil {
		return fmt.Errorf("create project %s: %w", p.ID, interpretError(err))
	}
	return nil
}

// GetProject returns a project or store.ErrNotFound.
func (s *Store) GetProject(ctx context.Context, id string) (store.Project, error) {
	var p store.Project
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return must(get(tx, bProjects, []byte(id), &p))
	})
	if err != nil {
		return store.Project{}, fmt.Errorf("get project %s: %w", id, interpretError(err))
	}
	return p, nil
}

// must turns a lookup that found nothing into store.ErrNotFound.
func must(ok bool, err error) error {
	if err == nil && !ok {
		return store.ErrNotFound
	}
	return err
}

// CreateAPIKey stores a key; store.ErrExists if its id (in its project) or
// its hash is taken. A key with MemberID is bound to that member
// (store.ErrNotFound if it is not an active member of the key's project);
// a key without one is its own member's, whose id must be free.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	if k.ID == "" || k.ProjectID == "" || k.Hash == "" {
		return errors.New("create api key: id, projectId and hash are required")
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if k.Legacy() {
			if exists(tx, bMembers, memberKey(k.ProjectID, store.LegacyMemberID(k.ID))) {
				return store.ErrExists
			}
			return putNewKey(tx, k)
		}
		m, legacy, err := getMember(tx, k.ProjectID, k.MemberID)
		if err == nil && m.Removed() {
			err = store.ErrNotFound
		}
		if err != nil {
			return err
		}
		bound, err := m.Bind(k)
		if err != nil {
			return err
		}
		if legacy != nil {
			// The older key's member is stored, and its key bound to it.
			if err := put(tx, bMembers, memberKey(m.ProjectID, m.ID), m); err != nil {
				return err
			}
			legacy.MemberID, legacy.MemberName = m.ID, m.Name
			if err := put(tx, bAPIKeys, key([]byte(legacy.ID), legacy.ProjectID), *legacy); err != nil {
				return err
			}
		}
		return putNewKey(tx, bound)
	})
	if err != nil {
		return fmt.Errorf("create api key %s: %w", k.ID, interpretError(err))
	}
	return nil
}

// putNewKey stores a key whose id and hash must be free (store.ErrExists).
func putNewKey(tx *bolt.Tx, k store.APIKey) error {
	ik := key([]byte(k.ID), k.ProjectID)
	if exists(tx, bAPIKeys, ik) || exists(tx, xAPIKeyHash, []byte(k.Hash)) {
		return store.ErrExists
	}
	if err := put(tx, bAPIKeys, ik, k); err != nil {
		return err
	}
	return bucket(tx, xAPIKeyHash).Put([]byte(k.Hash), ik)
}

// GetAPIKeyByHash finds a key, revoked ones too, or store.ErrNotFound.
func (s *Store) GetAPIKeyByHash(ctx context.Context, hash string) (store.APIKey, error) {
	var k store.APIKey
	err := s.view(ctx, func(tx *bolt.Tx) error {
		ik := bucket(tx, xAPIKeyHash).Get([]byte(hash))
		if ik == nil {
			return store.ErrNotFound
		}
		return must(get(tx, bAPIKeys, ik, &k))
	})
	if err != nil {
		// The hash is a secret's digest: keep it out of the message.
		return store.APIKey{}, fmt.Errorf("get api key by hash: %w", interpretError(err))
	}
	return k.WithMember(), nil
}

// ListAPIKeys lists a project's keys, oldest first.
func (s *Store) ListAPIKeys(ctx context.Context, projectID string) ([]store.APIKey, error) {
	var keys []store.APIKey
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		keys, err = projectKeys(tx, projectID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list api keys of %s: %w", projectID, interpretError(err))
	}
	// A project has a handful of keys: sort them here rather than index them.
	slices.SortStableFunc(keys, func(a, b store.APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for i := range keys {
		keys[i] = keys[i].WithMember()
	}
	return keys, nil
}

// RevokeAPIKey marks a key revoked at the given time; store.ErrNotFound if
// the project has no such key, store.ErrLastOwner if it is the project's last
// active owner key (bbolt's one writer makes the count and the revoke one
// step). Revoking twice keeps the first time.
func (s *Store) RevokeAPIKey(ctx context.Context, projectID, id string, at time.Time) (store.APIKey, error) {
	if at.IsZero() {
		return store.APIKey{}, fmt.Errorf("revoke api key %s: the revocation time is required", id)
	}
	var out store.APIKey
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = store.APIKey{}
		ik := key([]byte(id), projectID)
		var k store.APIKey
		if err := must(get(tx, bAPIKeys, ik, &k)); err != nil {
			return err
		}
		if k.RevokedAt.IsZero() {
			k.RevokedAt = at
			if err := keepOwners(tx, projectID, func() error { return put(tx, bAPIKeys, ik, k) }); err != nil {
				return err
			}
		}
		out = k.WithMember()
		return nil
	})
	if err != nil {
		return store.APIKey{}, fmt.Errorf("revoke api key %s: %w", id, interpretError(err))
	}
	return out, nil
}

// CreateDeployment stores d as the project's next version and returns it
// with Version set.
func (s *Store) CreateDeployment(ctx context.Context, d store.Deployment) (store.Deployment, error) {
	if d.ProjectID == "" {
		return store.Deployment{}, errors.New("create deployment: empty projectId")
	}
	var out store.Deployment
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = store.Deployment{}
		p := prefix(d.ProjectID)
		next := 1
		err := scan(bucket(tx, bDeployments), p, nil, true, func(_, v []byte) (bool, error) {
			var last store.Deployment
			if err := decode(v, &last); err != nil {
				return false, err
			}
			next = last.Version + 1
			return false, nil
		})
		if err != nil {
			return err
		}
		nd := d
		nd.Version = next
		if err := put(tx, bDeployments, append(p, u64(uint64(next))...), nd); err != nil {
			return err
		}
		out = nd
		return nil
	})
	if err != nil {
		return store.Deployment{}, fmt.Errorf("create deployment of %s: %w", d.ProjectID, interpretError(err))
	}
	return out, nil
}

// GetDeployment returns one version or store.ErrNotFound.
func (s *Store) GetDeployment(ctx context.Context, projectID string, version int) (store.Deployment, error) {
	var d store.Deployment
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if version < 1 {
			return store.ErrNotFound
		}
		return must(get(tx, bDeployments, key(u64(uint64(version)), projectID), &d))
	})
	if err != nil {
		return store.Deployment{}, fmt.Errorf("get deployment %s v%d: %w", projectID, version, interpretError(err))
	}
	return d, nil
}

// LatestDeployment returns the highest version or store.ErrNotFound.
func (s *Store) LatestDeployment(ctx context.Context, projectID string) (store.Deployment, error) {
	var d store.Deployment
	err := s.view(ctx, func(tx *bolt.Tx) error {
		found := false
		err := scan(bucket(tx, bDeployments), prefix(projectID), nil, true, func(_, v []byte) (bool, error) {
			found = true
			return false, decode(v, &d)
		})
		return must(found, err)
	})
	if err != nil {
		return store.Deployment{}, fmt.Errorf("get latest deployment of %s: %w", projectID, interpretError(err))
	}
	return d, nil
}

// ListDeployments lists versions, newest first.
func (s *Store) ListDeployments(ctx context.Context, projectID string, cursor string, limit int) (store.Page[store.Deployment], error) {
	var out store.Page[store.Deployment]
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		l := list{bucket: bDeployments, prefix: prefix(projectID), cursor: cursor, desc: true, limit: limit}
		out, err = page(tx, l, func(_, v []byte) (store.Deployment, bool, error) {
			var d store.Deployment
			err := decode(v, &d)
			return d, err == nil, err
		})
		return err
	})
	if err != nil {
		return store.Page[store.Deployment]{}, fmt.Errorf("list deployments of %s: %w", projectID, interpretError(err))
	}
	return out, nil
}
