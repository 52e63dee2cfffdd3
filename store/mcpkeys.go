package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// MCPKey is a credential for one MCP client: it calls the tools of one
// agent of its project, for one end user, and nothing else (see
// approvals.RoleMCP). Only its hash is stored.
type MCPKey struct {
	// ID is "mck_…"; the secret itself starts "stm_".
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	// Agent is the agent whose tools the key may call.
	Agent string `json:"agent"`
	// EndUserID is the end user the key's calls are made for.
	EndUserID string `json:"endUserId"`
	Name      string `json:"name,omitempty"`
	Hash      string `json:"hash"`
	// Prefix is the first characters of the key, for recognising it in lists.
	Prefix string `json:"prefix"`
	// CreatedBy and CreatedByName are the actor (a key id) and the member
	// who created it.
	CreatedBy     string    `json:"createdBy"`
	CreatedByName string    `json:"createdByName,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	RevokedAt     time.Time `json:"revokedAt,omitzero"`
}

// Validate refuses an MCP key no backend may write.
func (k MCPKey) Validate() error {
	if k.ID == "" || k.ProjectID == "" || k.Agent == "" || k.EndUserID == "" || k.Hash == "" || k.CreatedAt.IsZero() {
		return errors.New("mcp key: id, projectId, agent, endUserId, hash and createdAt are required")
	}
	return nil
}

// MCPKeys keeps the project's MCP keys.
type MCPKeys interface {
	// CreateMCPKey stores a new, active key (k must be valid); ErrExists if
	// its id is taken in its project or its hash is taken.
	CreateMCPKey(ctx context.Context, k MCPKey) error
	// GetMCPKeyByHash finds a key, revoked ones too, or ErrNotFound. It is
	// on the path of every request with an MCP key.
	GetMCPKeyByHash(ctx context.Context, hash string) (MCPKey, error)
	// ListMCPKeys lists a project's keys, revoked ones too, oldest first
	// (by CreatedAt, then id).
	ListMCPKeys(ctx context.Context, projectID string) ([]MCPKey, error)
	// RevokeMCPKey marks a key revoked at at and returns it; revoking twice
	// keeps the first time. ErrNotFound if the project has no such key.
	RevokeMCPKey(ctx context.Context, projectID, id string, at time.Time) (MCPKey, error)
}

// SortMCPKeys puts keys in ListMCPKeys' order.
func SortMCPKeys(keys []MCPKey) {
	slices.SortFunc(keys, func(a, b MCPKey) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
}
