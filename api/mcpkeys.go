package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"stead/api/wire"
	"stead/runtime/engine"
	"stead/store"
)

// MCP keys
//
// An MCP key (stm_…) is the credential of one MCP client: an owner creates
// it for one agent of the project and one end user, and the client may
// call that agent's tools for that end user and nothing else
// (approvals.RoleMCP: CallTools only). It is stored as a hash, shown once,
// and stops working the moment it is revoked. A client that needs two
// agents holds two keys. No route takes it yet; POST /mcp will.

type createMCPKeyRequest struct {
	Agent     string `json:"agent"`
	EndUserID string `json:"endUserId"`
	Name      string `json:"name"`
}

// createMCPKey: POST /v1/mcp-keys {agent, endUserId, name?} → 201 with the
// key, its secret in "key": shown this once, stored only as a hash. The
// agent must be in the latest deployment.
func (s *Server) createMCPKey(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req createMCPKeyRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	var problems []wire.FieldProblem
	if p := textProblem(req.Agent, true, maxIDLen); p != "" {
		problems = append(problems, wire.FieldProblem{Field: "agent", Message: p})
	}
	if p := textProblem(req.EndUserID, true, maxIDLen); p != "" {
		problems = append(problems, wire.FieldProblem{Field: "endUserId", Message: p})
	}
	if p := textProblem(req.Name, false, 100); p != "" {
		problems = append(problems, wire.FieldProblem{Field: "name", Message: p})
	}
	if len(problems) > 0 {
		return invalid(problems...)
	}
	d, cfg, err := s.engine.Agents(r.Context(), c.actor)
	if errors.Is(err, engine.ErrNoDeployment) {
		return invalidField("agent", "no agent %q: the project has no deployment yet (deploy with stead deploy)", req.Agent)
	}
	if err != nil {
		return err
	}
	if _, ok := cfg.Agent(req.Agent); !ok {
		return invalidField("agent", "agent %q is not in the latest deployment (%d); list the deployed agents with stead agents (GET /v1/agents)", req.Agent, d.Version)
	}
	k, secret, err := newMCPKey(lockedEntropy{s}, c, req, s.now())
	if err != nil {
		return err
	}
	if err := s.store.CreateMCPKey(r.Context(), k); err != nil {
		return err
	}
	out := mcpKeyOf(k)
	out.Key = secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// listMCPKeys: GET /v1/mcp-keys → the project's MCP keys, oldest first,
// revoked ones too; never their secrets or hashes.
func (s *Server) listMCPKeys(w http.ResponseWriter, r *http.Request, c *caller) error {
	keys, err := s.store.ListMCPKeys(r.Context(), c.actor.ProjectID)
	if err != nil {
		return err
	}
	out := wire.MCPKeyList{Keys: make([]wire.MCPKey, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, mcpKeyOf(k))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// revokeMCPKey: DELETE /v1/mcp-keys/{id} → 200 with the revoked key. It
// stops working at once; revoking twice keeps the first time.
func (s *Server) revokeMCPKey(w http.ResponseWriter, r *http.Request, c *caller) error {
	id := r.PathValue("id")
	k, err := s.store.RevokeMCPKey(r.Context(), c.actor.ProjectID, id, s.now())
	if errors.Is(err, store.ErrNotFound) {
		return notFound("MCP key %s not found (list them with stead mcp-keys list, or GET /v1/mcp-keys)", id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, mcpKeyOf(k))
	return nil
}

// newMCPKey makes an MCP key record and its secret, which is shown once
// and never stored.
func newMCPKey(entropy io.Reader, c *caller, req createMCPKeyRequest, now time.Time) (store.MCPKey, string, error) {
	var secret [32]byte
	var id [10]byte
	if _, err := io.ReadFull(entropy, secret[:]); err != nil {
		return store.MCPKey{}, "", fmt.Errorf("make MCP key: %w", err)
	}
	if _, err := io.ReadFull(entropy, id[:]); err != nil {
		return store.MCPKey{}, "", fmt.Errorf("make MCP key: %w", err)
	}
	plain := MCPKeyPrefix + b32.EncodeToString(secret[:])
	return store.MCPKey{
		ID:            "mck_" + b32.EncodeToString(id[:]),
		ProjectID:     c.actor.ProjectID,
		Agent:         req.Agent,
		EndUserID:     req.EndUserID,
		Name:          req.Name,
		Hash:          hashKey(plain),
		Prefix:        plain[:keyPrefixLen],
		CreatedBy:     c.actor.ID,
		CreatedByName: c.actor.Name,
		CreatedAt:     now.UTC(),
	}, plain, nil
}
