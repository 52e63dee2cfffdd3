package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"stead/api/wire"
	"stead/approvals"
	"stead/store"
)

type createKeyRequest struct {
	Name string `json:"name"`
	// Role is owner, developer, approver or viewer (default developer; with
	// Member, the member's).
	Role string `json:"role"`
	// Member, if set, is the member the key is for; without it the key is
	// a member of its own, named after the key.
	Member string `json:"member"`
}

// createKey: POST /v1/keys {name?, role?, member?} → 201 with the key, its
// secret in "key": shown this once, stored only as a hash.
func (s *Server) createKey(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req createKeyRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	var problems []wire.FieldProblem
	if p := textProblem(req.Name, false, 100); p != "" {
		problems = append(problems, wire.FieldProblem{Field: "name", Message: p})
	}
	role := approvals.Role(req.Role)
	switch {
	case role == "" && req.Member != "":
		// the member's
	case role == "":
		role = approvals.RoleDeveloper
	case !role.IsKeyRole():
		problems = append(problems, wire.FieldProblem{Field: "role", Message: fmt.Sprintf("must be %s (got %q)", quotedRoles(approvals.KeyRoles), req.Role)})
	}
	if len(problems) > 0 {
		return invalid(problems...)
	}
	k, secret, err := newAPIKey(lockedEntropy{s}, c.actor.ProjectID, req.Name, role, s.now())
	if err != nil {
		return err
	}
	if req.Member != "" {
		m, err := s.store.GetMember(r.Context(), c.actor.ProjectID, req.Member)
		if errors.Is(err, store.ErrNotFound) || (err == nil && m.Removed()) {
			return invalid(wire.FieldProblem{Field: "member", Message: fmt.Sprintf("no member %s in this project (list them with stead members list, or GET /v1/members)", req.Member)})
		}
		if err != nil {
			return err
		}
		k.MemberID = m.ID
		if k, err = m.Bind(k); err != nil {
			return invalid(wire.FieldProblem{Field: "role", Message: fmt.Sprintf("a key has its member's role (%s); leave role out, or change the member's role first (got %q)", m.Role, req.Role)})
		}
	}
	// The store checks the member again, in the write.
	if err := s.store.CreateAPIKey(r.Context(), k); err != nil {
		return memberError(err, req.Member, "")
	}
	out := keyOf(k)
	out.Key = secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// listKeys: GET /v1/keys → the project's keys, oldest first, revoked ones
// too; never their secrets or hashes.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, c *caller) error {
	keys, err := s.store.ListAPIKeys(r.Context(), c.actor.ProjectID)
	if err != nil {
		return err
	}
	out := wire.KeyList{Keys: make([]wire.APIKey, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, keyOf(k))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// revokeKey: DELETE /v1/keys/{id} → 200 with the revoked key. The last
// active owner key cannot be revoked (409): the project would have no one
// left to manage keys.
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, c *caller) error {
	id := r.PathValue("id")
	k, err := s.store.RevokeAPIKey(r.Context(), c.actor.ProjectID, id, s.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("API key %s not found", id)
	case errors.Is(err, store.ErrLastOwner):
		return conflict("key %s is the project's last owner key; create another owner key before revoking it", id)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, keyOf(k))
	return nil
}

type customerTokenRequest struct {
	EndUserID  string `json:"endUserId"`
	TTLSeconds *int64 `json:"ttlSeconds"`
}

// createCustomerToken: POST /v1/customer-tokens {endUserId, ttlSeconds?} →
// 201 {token, tokenId, endUserId, expiresAt}. The token reads that end
// user's runs and their events and nothing else, until it expires (default
// 1h, at most 24h) or is revoked.
func (s *Server) createCustomerToken(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req customerTokenRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	var problems []wire.FieldProblem
	if p := textProblem(req.EndUserID, true, maxIDLen); p != "" {
		problems = append(problems, wire.FieldProblem{Field: "endUserId", Message: p})
	}
	ttl := DefaultCustomerTokenTTL
	if req.TTLSeconds != nil {
		n := *req.TTLSeconds
		if n < 1 || n > int64(MaxCustomerTokenTTL/time.Second) {
			problems = append(problems, wire.FieldProblem{Field: "ttlSeconds", Message: "must be from 1 to 86400 (24h)"})
		}
		ttl = time.Duration(n) * time.Second
	}
	if len(problems) > 0 {
		return invalid(problems...)
	}
	tok, err := s.issueCustomerToken(r.Context(), c.actor.ProjectID, req.EndUserID, s.now(), ttl)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, wire.CustomerToken{Token: tok.token, TokenID: tok.id, EndUserID: req.EndUserID, ExpiresAt: tok.expires.UTC()})
	return nil
}

// lockedEntropy reads the server's entropy under its lock.
type lockedEntropy struct{ s *Server }

func (l lockedEntropy) Read(p []byte) (int, error) {
	if err := l.s.random(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// quotedRoles words a list of roles: "owner" or "developer".
func quotedRoles(roles []approvals.Role) string {
	q := make([]string, len(roles))
	for i, r := range roles {
		q[i] = strconv.Quote(string(r))
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
