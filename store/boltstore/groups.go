package boltstore

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"stead/store"
)

func groupKey(projectID, name string) []byte { return key([]byte(name), projectID) }

// CreateGroup stores a new group at Version 1 if its name is free and each
// of its members is a current member of the project, in one transaction.
func (s *Store) CreateGroup(ctx context.Context, g store.Group) error {
	g, err := store.NewGroup(g)
	if err != nil {
		return fmt.Errorf("create group: %w", err)
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		if exists(tx, bGroups, groupKey(g.ProjectID, g.Name)) {
			return store.ErrExists
		}
		if err := checkGroupMembers(tx, g, g.Members); err != nil {
			return err
		}
		return put(tx, bGroups, groupKey(g.ProjectID, g.Name), g)
	})
	if err != nil {
		return fmt.Errorf("create group %s: %w", g.Name, interpretError(err))
	}
	return nil
}

// checkGroupMembers returns a *store.GroupMemberError for the first of ids
// that is not a current member of g's project.
func checkGroupMembers(tx *bolt.Tx, g store.Group, ids []string) error {
	for _, id := range ids {
		m, _, err := getMember(tx, g.ProjectID, id)
		if err := store.CheckGroupMember(g.Name, id, m, err); err != nil {
			return err
		}
	}
	return nil
}

// GetGroup returns a group of the project or store.ErrNotFound.
func (s *Store) GetGroup(ctx context.Context, projectID, name string) (store.Group, error) {
	var g store.Group
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if store.CheckGroupName(name) != nil {
			return store.ErrNotFound
		}
		return must(get(tx, bGroups, groupKey(projectID, name), &g))
	})
	if err != nil {
		return store.Group{}, fmt.Errorf("get group %s: %w", name, interpretError(err))
	}
	return g, nil
}

// ListGroups lists a project's groups by name: the order of their keys.
func (s *Store) ListGroups(ctx context.Context, projectID string) ([]store.Group, error) {
	var out []store.Group
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		out, err = values[store.Group](tx, bGroups, prefix(projectID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list groups of %s: %w", projectID, interpretError(err))
	}
	return out, nil
}

// UpdateGroup stores g's description, members and UpdatedAt if g.Version
// is the stored version and each member it adds is a current member of the
// project, in one transaction.
func (s *Store) UpdateGroup(ctx context.Context, g store.Group) (store.Group, error) {
	if err := g.ValidateUpdate(); err != nil {
		return store.Group{}, fmt.Errorf("update group: %w", err)
	}
	var out store.Group
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = store.Group{}
		var cur store.Group
		if err := must(get(tx, bGroups, groupKey(g.ProjectID, g.Name), &cur)); err != nil {
			return err
		}
		next, added, err := cur.Updated(g)
		if err != nil {
			return err
		}
		if err := checkGroupMembers(tx, next, added); err != nil {
			return err
		}
		if err := put(tx, bGroups, groupKey(next.ProjectID, next.Name), next); err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		return store.Group{}, fmt.Errorf("update group %s: %w", g.Name, interpretError(err))
	}
	return out, nil
}

// DeleteGroup deletes a group; store.ErrNotFound if the project has none
// of that name.
func (s *Store) DeleteGroup(ctx context.Context, projectID, name string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		k := groupKey(projectID, name)
		if store.CheckGroupName(name) != nil || !exists(tx, bGroups, k) {
			return store.ErrNotFound
		}
		return bucket(tx, bGroups).Delete(k)
	})
	if err != nil {
		return fmt.Errorf("delete group %s: %w", name, interpretError(err))
	}
	return nil
}
