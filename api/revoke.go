package api

import (
	"errors"
	"net/http"

	"stead/api/wire"
	"stead/store"
)

type revokeCustomerTokensRequest struct {
	Token     string `json:"token"`
	EndUserID string `json:"endUserId"`
}

// revokeCustomerTokens: POST /v1/customer-tokens/revoke with {token} (that
// one token) or {endUserId} (every token of that end user issued until now)
// → 200 CustomerTokenRevocation. A revoked token is refused from the next
// request on, and an event stream it opened ends within Config.Recheck.
// Tokens issued after an end user's revocation work.
func (s *Server) revokeCustomerTokens(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req revokeCustomerTokensRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	now := s.now()
	switch {
	case req.Token == "" && req.EndUserID == "":
		return invalidField("token", "is required: send token (revoke that customer token) or endUserId (revoke every token of that end user)")
	case req.Token != "" && req.EndUserID != "":
		return invalidField("endUserId", "cannot be sent with token: send token to revoke one customer token, or endUserId alone to revoke every token of that end user")
	case req.EndUserID != "":
		if p := textProblem(req.EndUserID, true, maxIDLen); p != "" {
			return invalidField("endUserId", "%s", p)
		}
		rev := store.CustomerRevocation{
			ProjectID: c.actor.ProjectID, EndUserID: req.EndUserID,
			IssuedBefore: now, Until: now.Add(MaxCustomerTokenTTL), Now: now,
		}
		if err := s.store.RevokeCustomerTokens(r.Context(), rev); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, wire.CustomerTokenRevocation{EndUserID: req.EndUserID, IssuedBefore: now})
		return nil
	}
	cl, id, err := s.verifyCustomerToken(r.Context(), req.Token)
	if errors.Is(err, errBadCustomerToken) || (err == nil && cl.ProjectID != c.actor.ProjectID) {
		return invalidField("token", "is not a customer token of this project (stc_…, as stead token END_USER or POST /v1/customer-tokens issued it)")
	}
	if err != nil {
		return err
	}
	rev := store.CustomerRevocation{
		ProjectID: cl.ProjectID, EndUserID: cl.EndUserID, TokenID: id,
		Until: cl.expires(), Now: now,
	}
	err = s.store.RevokeCustomerTokens(r.Context(), rev)
	if errors.Is(err, store.ErrTooManyRevocations) {
		return conflict("end user %s has %d revoked customer tokens that have not expired; revoke all of the end user's tokens instead ({\"endUserId\": …})", cl.EndUserID, store.MaxRevokedTokens)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.CustomerTokenRevocation{EndUserID: cl.EndUserID, TokenID: id, ExpiresAt: cl.expires()})
	return nil
}
