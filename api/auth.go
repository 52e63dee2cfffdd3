package api

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"stead/approvals"
	"stead/runtime/engine"
	"stead/store"
)

// Credential prefixes. A credential says what it is by its prefix, so a
// pasted secret is recognisable and each kind is checked only its own way.
const (
	// KeyPrefix starts a project API key: "stk_" and 52 base32 characters
	// (32 random bytes). Only its sha256 is stored.
	KeyPrefix = "stk_"
	// CustomerTokenPrefix starts a customer token (see customerClaims).
	CustomerTokenPrefix = "stc_"
	// BrokerTokenPrefix starts a run's broker token (issued by the engine).
	BrokerTokenPrefix = "brk_"
	// MCPKeyPrefix starts an MCP key: "stm_" and 52 base32 characters (32
	// random bytes), for one agent and one end user (see mcpkeys.go). Only
	// its sha256 is stored.
	MCPKeyPrefix = "stm_"
)

// Customer token lifetimes.
const (
	DefaultCustomerTokenTTL = time.Hour
	MaxCustomerTokenTTL     = 24 * time.Hour
)

// keyPrefixLen is how much of a key is kept in clear to recognise it in
// lists: "stk_" and 8 characters.
const keyPrefixLen = 12

// credKind is the kind of credential a caller presented.
type credKind int

const (
	keyCred credKind = iota + 1
	customerCred
	brokerCred
	mcpCred
)

// caller is an authenticated request's principal.
type caller struct {
	actor approvals.Actor
	kind  credKind
	// key is the API key (keyCred).
	key store.APIKey
	// scope is what a broker token grants (brokerCred).
	scope store.BrokerScope
	// mcpKey is the MCP key (mcpCred).
	mcpKey store.MCPKey
}

// authenticate checks the request's credential and that its role grants
// what the route needs (approvals.Permission: the matrix is there). It returns 401 for a missing,
// malformed, unknown, revoked or expired credential, and 403 for a valid
// one that may not use the route. Failed checks count against the source
// address and the credential's prefix (see authlimit.go); past the limit
// it returns 429 without checking the credential.
func (s *Server) authenticate(r *http.Request, need []approvals.Permission) (*caller, error) {
	token, err := credential(r)
	if err != nil {
		return nil, err
	}
	now := s.now()
	who := s.limiter.subject(r, token)
	if wait, by := s.limiter.retryAfter(who, now); wait > 0 {
		return nil, rateLimited(wait, by)
	}
	c, err := s.check(r.Context(), token)
	if e := (*Error)(nil); errors.As(err, &e) && e.Status == http.StatusUnauthorized {
		s.limiter.failed(who, now)
	}
	if err != nil {
		return nil, err
	}
	return c, c.authorize(need)
}

// recheck is authenticate without the failure counts, for a stream that
// checks its credential again as it goes.
func (s *Server) recheck(r *http.Request, need []approvals.Permission) error {
	token, err := credential(r)
	if err != nil {
		return err
	}
	c, err := s.check(r.Context(), token)
	if err != nil {
		return err
	}
	return c.authorize(need)
}

// check finds the principal of a credential.
func (s *Server) check(ctx context.Context, token string) (*caller, error) {
	switch {
	case strings.HasPrefix(token, KeyPrefix):
		return s.checkKey(ctx, token)
	case strings.HasPrefix(token, CustomerTokenPrefix):
		return s.checkCustomerToken(ctx, token)
	case strings.HasPrefix(token, BrokerTokenPrefix):
		return s.checkBrokerToken(ctx, token)
	case strings.HasPrefix(token, MCPKeyPrefix):
		return s.checkMCPKey(ctx, token)
	}
	return nil, unauthenticated("the credential is not a Stead API key (stk_…), customer token (stc_…), broker token (brk_…) or MCP key (stm_…)")
}

// credential returns the bearer token of the request. A customer token may
// also come as ?access_token= on a GET, for browsers' EventSource, which
// cannot set headers.
func credential(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if t := r.URL.Query().Get("access_token"); t != "" && r.Method == http.MethodGet {
			if !strings.HasPrefix(t, CustomerTokenPrefix) {
				return "", unauthenticated("only a customer token (stc_…) may be passed as access_token; send API keys in the Authorization header")
			}
			return t, nil
		}
		return "", unauthenticated("missing credential: send Authorization: Bearer <API key or token>")
	}
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", unauthenticated("the Authorization header must be \"Bearer <API key or token>\"")
	}
	return token, nil
}

// authorize asks the matrix whether the caller's role grants one of need,
// and words a refusal for the kind of credential.
func (c *caller) authorize(need []approvals.Permission) error {
	if c.actor.Role.MayAny(need...) {
		return nil
	}
	switch c.kind {
	case keyCred:
		if slices.Contains(need, approvals.ManageKeys) {
			return forbidden("managing members and API keys needs an owner key; this key (%s…) is a %s key", c.key.Prefix, c.key.Role)
		}
		return forbidden("a %s key may not do this (it needs %s); ask an owner for a key with a role that may", c.key.Role, need[0])
	case customerCred:
		if slices.Contains(need, approvals.Decide) {
			return forbidden("Customers cannot approve their own actions: deciding an approval needs an owner, developer or approver key of the project")
		}
		return forbidden("a customer token can only read its end user's runs and their events")
	case brokerCred:
		return forbidden("a broker token can only use the broker routes (/v1/broker/…) of its run's end user")
	case mcpCred:
		return forbidden("an MCP key (%s…) can only call agent %s's tools for end user %s over MCP; it may not use the REST API", c.mcpKey.Prefix, c.mcpKey.Agent, c.mcpKey.EndUserID)
	}
	return forbidden("this credential may not do that")
}

func (s *Server) checkKey(ctx context.Context, token string) (*caller, error) {
	k, err := s.store.GetAPIKeyByHash(ctx, hashKey(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, unauthenticated("the API key is not valid; check STEAD_KEY, or ask an owner for a key (stead keys create)")
	}
	if err != nil {
		return nil, fmt.Errorf("look up API key: %w", err)
	}
	if !k.RevokedAt.IsZero() {
		return nil, unauthenticated("API key %s… was revoked at %s; use another key", k.Prefix, k.RevokedAt.UTC().Format(time.RFC3339))
	}
	if !k.Role.IsKeyRole() {
		return nil, unauthenticated("API key %s… has no usable role", k.Prefix)
	}
	return &caller{
		actor: approvals.Actor{ProjectID: k.ProjectID, Role: k.Role, ID: k.ID, Name: k.MemberName, MemberID: k.MemberID},
		kind:  keyCred,
		key:   k,
	}, nil
}

// checkMCPKey finds an MCP key by its hash: an actor of role mcp, confined
// to the key's agent and end user.
func (s *Server) checkMCPKey(ctx context.Context, token string) (*caller, error) {
	k, err := s.store.GetMCPKeyByHash(ctx, hashKey(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, unauthenticated("the MCP key is not valid; ask an owner for one (stead mcp-keys create)")
	}
	if err != nil {
		return nil, fmt.Errorf("look up MCP key: %w", err)
	}
	if !k.RevokedAt.IsZero() {
		return nil, unauthenticated("MCP key %s… was revoked at %s; ask an owner for a new one (stead mcp-keys create)", k.Prefix, k.RevokedAt.UTC().Format(time.RFC3339))
	}
	return &caller{
		actor:  approvals.Actor{ProjectID: k.ProjectID, Role: approvals.RoleMCP, ID: k.ID, Name: k.Name, EndUserID: k.EndUserID, Agent: k.Agent},
		kind:   mcpCred,
		mcpKey: k,
	}, nil
}

func (s *Server) checkBrokerToken(ctx context.Context, token string) (*caller, error) {
	scope, err := s.engine.BrokerScopeOf(ctx, token)
	if errors.Is(err, engine.ErrBrokerToken) {
		return nil, unauthenticated("%s", engine.ErrBrokerToken.Error())
	}
	if err != nil {
		return nil, fmt.Errorf("check broker token: %w", err)
	}
	runID, _, _ := strings.Cut(strings.TrimPrefix(token, BrokerTokenPrefix), ".")
	return &caller{
		actor: approvals.Actor{ProjectID: scope.ProjectID, Role: approvals.RoleRun, ID: "run:" + runID, EndUserID: scope.EndUserID},
		kind:  brokerCred,
		scope: scope,
	}, nil
}

// Customer tokens
//
// A customer token is "stc_" + base64url(claims JSON) + "." +
// base64url(HMAC-SHA256(project signing key, "stead/customer-token\x00" +
// the encoded claims)). The claims name the project (so the verifier finds
// the key), the end user, the token's id and its issue and expiry times.
//
// It is not a JWT on purpose: there is exactly one algorithm and one issuer,
// so there is no "alg" header to confuse (alg=none, RS/HS swaps), no library
// to keep current, and the "stead/customer-token" domain separation keeps a
// MAC made with the same project key for another purpose (broker tokens) from
// ever verifying as a customer token. Customer UIs never need to read a
// token; they pass it back.
//
// A token is stateless until it is revoked: POST /v1/customer-tokens/revoke
// revokes one token (by its id, until it expires) or every token of an end
// user issued before now (see revoke.go). Every request with a customer
// token reads its end user's revocations: one point read.

// customerClaims is what a customer token asserts.
type customerClaims struct {
	Version   int    `json:"v"`
	ProjectID string `json:"prj"`
	EndUserID string `json:"sub"`
	// TokenID names the token for revocation. Tokens issued before tokens
	// had ids have none; their id is made from their claims (tokenID).
	TokenID  string `json:"jti,omitempty"`
	IssuedAt int64  `json:"iat"`
	// IssuedAtMs is the issue time in milliseconds, so that revoking an end
	// user's tokens issued before a time tells apart tokens issued in the
	// same second.
	IssuedAtMs int64 `json:"iatMs,omitempty"`
	ExpiresAt  int64 `json:"exp"`
}

// issued is when the token was issued: to the millisecond, or for older
// tokens at the start of their second (so a revocation in that second
// covers them).
func (cl customerClaims) issued() time.Time {
	if cl.IssuedAtMs > 0 {
		return time.UnixMilli(cl.IssuedAtMs).UTC()
	}
	return time.Unix(cl.IssuedAt, 0).UTC()
}

func (cl customerClaims) expires() time.Time { return time.Unix(cl.ExpiresAt, 0).UTC() }

// tokenID is the token's id: its jti, or for a token without one a digest
// of its claims.
func (cl customerClaims) tokenID(payload string) string {
	if cl.TokenID != "" {
		return cl.TokenID
	}
	sum := sha256.Sum256([]byte(payload))
	return customerTokenIDPrefix + "c" + b32.EncodeToString(sum[:10])
}

// customerTokenIDPrefix starts a customer token's id.
const customerTokenIDPrefix = "ctk_"

const customerTokenDomain = "stead/customer-token\x00"

func customerMAC(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(customerTokenDomain))
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issuedToken is a customer token as issued.
type issuedToken struct {
	token, id string
	expires   time.Time
}

// issueCustomerToken signs a token for one end user of a project.
func (s *Server) issueCustomerToken(ctx context.Context, projectID, endUserID string, now time.Time, ttl time.Duration) (issuedToken, error) {
	key, err := s.engine.SigningKey(ctx, projectID)
	if err != nil {
		return issuedToken{}, err
	}
	var rnd [10]byte
	if err := s.random(rnd[:]); err != nil {
		return issuedToken{}, fmt.Errorf("make customer token id: %w", err)
	}
	id := customerTokenIDPrefix + b32.EncodeToString(rnd[:])
	exp := now.Add(ttl).Truncate(time.Second)
	b, err := json.Marshal(customerClaims{
		Version: 1, ProjectID: projectID, EndUserID: endUserID, TokenID: id,
		IssuedAt: now.Unix(), IssuedAtMs: now.UnixMilli(), ExpiresAt: exp.Unix(),
	})
	if err != nil {
		return issuedToken{}, fmt.Errorf("encode customer token: %w", err)
	}
	payload := base64.RawURLEncoding.EncodeToString(b)
	return issuedToken{token: CustomerTokenPrefix + payload + "." + customerMAC(key, payload), id: id, expires: exp}, nil
}

// parseCustomerToken splits a customer token and reads its claims, without
// checking its MAC; ok is false if it is not shaped like one.
func parseCustomerToken(token string) (payload, mac string, cl customerClaims, ok bool) {
	payload, mac, ok = strings.Cut(strings.TrimPrefix(token, CustomerTokenPrefix), ".")
	if !ok || !strings.HasPrefix(token, CustomerTokenPrefix) {
		return "", "", customerClaims{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", "", customerClaims{}, false
	}
	if err := json.Unmarshal(raw, &cl); err != nil || cl.Version != 1 || cl.ProjectID == "" || cl.EndUserID == "" {
		return "", "", customerClaims{}, false
	}
	return payload, mac, cl, true
}

// verifyCustomerToken checks a customer token's shape and MAC and returns
// its claims and id; errBadCustomerToken if it is not one of its project's.
// It does not look at expiry or revocation.
func (s *Server) verifyCustomerToken(ctx context.Context, token string) (customerClaims, string, error) {
	payload, mac, cl, ok := parseCustomerToken(token)
	if !ok {
		return customerClaims{}, "", errBadCustomerToken
	}
	key, err := s.engine.SigningKey(ctx, cl.ProjectID)
	if errors.Is(err, store.ErrNotFound) {
		return customerClaims{}, "", errBadCustomerToken
	}
	if err != nil {
		return customerClaims{}, "", err
	}
	if !hmac.Equal([]byte(mac), []byte(customerMAC(key, payload))) {
		return customerClaims{}, "", errBadCustomerToken
	}
	return cl, cl.tokenID(payload), nil
}

var errBadCustomerToken = errors.New("not a valid customer token")

func (s *Server) checkCustomerToken(ctx context.Context, token string) (*caller, error) {
	cl, id, err := s.verifyCustomerToken(ctx, token)
	if errors.Is(err, errBadCustomerToken) {
		return nil, unauthenticated("the customer token is not valid; ask the application for a new one")
	}
	if err != nil {
		return nil, err
	}
	now := s.now()
	if exp := cl.expires(); !now.Before(exp) {
		return nil, unauthenticated("the customer token expired at %s; ask the application for a new one", exp.Format(time.RFC3339))
	}
	revs, err := s.store.GetCustomerRevocations(ctx, cl.ProjectID, cl.EndUserID, now)
	if err != nil {
		return nil, fmt.Errorf("check customer token revocations: %w", err)
	}
	if revs.Revoked(id, cl.issued()) {
		return nil, unauthenticated("the customer token %s was revoked; ask the application for a new one", id)
	}
	return &caller{
		actor: approvals.Actor{ProjectID: cl.ProjectID, Role: approvals.RoleCustomer, ID: "customer:" + cl.EndUserID, EndUserID: cl.EndUserID},
		kind:  customerCred,
	}, nil
}

// API keys and projects

// b32 writes random bytes as lower-case base32 without padding.
var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func hashKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// newAPIKey makes a key record and its secret, which is shown once and
// never stored.
func newAPIKey(entropy io.Reader, projectID, name string, role approvals.Role, now time.Time) (store.APIKey, string, error) {
	var secret [32]byte
	var id [10]byte
	if _, err := io.ReadFull(entropy, secret[:]); err != nil {
		return store.APIKey{}, "", fmt.Errorf("make API key: %w", err)
	}
	if _, err := io.ReadFull(entropy, id[:]); err != nil {
		return store.APIKey{}, "", fmt.Errorf("make API key: %w", err)
	}
	plain := KeyPrefix + b32.EncodeToString(secret[:])
	return store.APIKey{
		ID:        "key_" + b32.EncodeToString(id[:]),
		ProjectID: projectID,
		Name:      name,
		Role:      role,
		Hash:      hashKey(plain),
		Prefix:    plain[:keyPrefixLen],
		CreatedAt: now.UTC(),
	}, plain, nil
}

// Bootstrap creates a project, with a random 32-byte signing key, and its
// first owner key, whose secret it returns: the only time it is shown.
// `stead dev` calls it on first start.
func Bootstrap(ctx context.Context, st store.Store, name string, now time.Time) (store.Project, string, error) {
	if p := textProblem(name, true, 100); p != "" {
		return store.Project{}, "", fmt.Errorf("bootstrap project: name %s", p)
	}
	var id [10]byte
	signing := make([]byte, 32)
	if _, err := rand.Read(id[:]); err != nil {
		return store.Project{}, "", fmt.Errorf("bootstrap project: %w", err)
	}
	if _, err := rand.Read(signing); err != nil {
		return store.Project{}, "", fmt.Errorf("bootstrap project: %w", err)
	}
	p := store.Project{ID: "prj_" + b32.EncodeToString(id[:]), Name: name, SigningKey: signing, CreatedAt: now.UTC()}
	if err := st.CreateProject(ctx, p); err != nil {
		return store.Project{}, "", fmt.Errorf("create project: %w", err)
	}
	k, secret, err := newAPIKey(rand.Reader, p.ID, "owner", approvals.RoleOwner, now)
	if err != nil {
		return store.Project{}, "", err
	}
	if err := st.CreateAPIKey(ctx, k); err != nil {
		return store.Project{}, "", fmt.Errorf("create owner key: %w", err)
	}
	return p, secret, nil
}
