// Package api is Stead's HTTP API: one http.Handler that serves every route
// in every shape (`stead dev` on loopback now, API Gateway → Lambda later).
//
// JSON in, JSON out. Every failure is
//
//	{"error": {"code": "invalid_argument", "message": "…", "details": {…}}}
//
// with a stable code and the status it implies (see errors.go). Callers
// authenticate with `Authorization: Bearer <credential>`: a project API key
// (stk_…, with a role: owner, developer, approver or viewer; approvals/access.go says what each may do), a customer token (stc_…, one end user's
// runs, read only), a run's broker token (brk_…, the broker routes of its
// own scope while the run is active) or an MCP key (stm_…, one agent's tools
// for one end user, over POST /mcp only: no REST route takes it). Failed authentication is
// rate-limited per source address and per credential prefix, in memory
// per process: on AWS each API Lambda instance limits separately (see
// authlimit.go). Authority is checked here; what a
// credential may see of a record is checked again by the engine, which gets
// the caller as an approvals.Actor.
//
// openapi.json is the published contract of these routes (OpenAPI 3.1,
// served at GET /v1/openapi.json). It is written by hand and checked
// against the handlers, not generated from them: the package's tests
// validate every request and response they make against it and fail on an
// undocumented route, field, status or header, and on a documented
// operation no test exercised (contract_test.go says why). A route added
// here needs its operation there, and a test.
//
// Routes (all JSON unless said otherwise):
//
//	GET    /healthz                               no credential
//	GET    /v1/openapi.json                       no credential (this API's OpenAPI 3.1 document; openapi.go)
//	GET    /v1/me                                 owner, developer, approver, viewer, customer (who the credential is)
//	PATCH  /v1/me/notifications                   owner, developer, approver, viewer (their own member's)
//	POST   /v1/deployments                        owner, developer
//	GET    /v1/deployments                        owner, developer
//	GET    /v1/agents                             owner, developer
//	POST   /v1/agents/{agent}/runs                owner, developer
//	GET    /v1/runs                               owner, developer, customer
//	GET    /v1/runs/{id}                          owner, developer, customer
//	GET    /v1/runs/{id}/events                   owner, developer, customer (JSON pages or SSE)
//	POST   /v1/runs/{id}/cancel                   owner, developer
//	GET    /v1/approvals                          owner, developer
//	GET    /v1/approvals/{id}                     owner, developer
//	POST   /v1/approvals/{id}/approve             owner, developer
//	POST   /v1/approvals/{id}/check-input         owner, developer, approver (an edited input checked; nothing decided)
//	POST   /v1/approvals/{id}/deny                owner, developer
//	GET    /v1/rules                              owner, developer, approver, viewer (remembered decisions)
//	GET    /v1/rules/{id}                         owner, developer, approver, viewer
//	DELETE /v1/rules/{id}                         owner, developer, approver (revoke)
//	POST   /v1/customer-tokens                    owner, developer
//	POST   /v1/customer-tokens/revoke             owner, developer
//	GET    /v1/broker/{collection}                owner, developer (?endUserId=), broker token
//	GET    /v1/broker/{collection}/{key}          owner, developer (?endUserId=), broker token
//	PUT    /v1/broker/{collection}/{key}          owner, developer (?endUserId=), broker token
//	DELETE /v1/broker/{collection}/{key}          owner, developer (?endUserId=), broker token
//	POST   /v1/members                            owner (a key shown once with --key)
//	GET    /v1/members                            owner, developer, approver, viewer
//	GET    /v1/members/{id}                       owner, developer, approver, viewer
//	PATCH  /v1/members/{id}                       owner
//	DELETE /v1/members/{id}                       owner
//	POST   /v1/groups                             owner
//	GET    /v1/groups                             owner, developer, approver, viewer
//	GET    /v1/groups/{name}                      owner, developer, approver, viewer
//	PATCH  /v1/groups/{name}                      owner
//	DELETE /v1/groups/{name}                      owner
//	POST   /v1/keys                               owner
//	GET    /v1/keys                               owner
//	DELETE /v1/keys/{id}                          owner
//	POST   /v1/mcp-keys                           owner (an MCP key for one agent and end user; shown once)
//	GET    /v1/mcp-keys                           owner
//	DELETE /v1/mcp-keys/{id}                      owner
//	POST   /v1/webhooks                           owner (the secret is shown once)
//	GET    /v1/webhooks                           owner
//	GET    /v1/webhooks/{id}                      owner
//	PATCH  /v1/webhooks/{id}                      owner
//	DELETE /v1/webhooks/{id}                      owner
//	POST   /v1/webhooks/{id}/rotate               owner (the new secret is shown once)
//	POST   /v1/webhooks/{id}/ping                 owner (503 without Config.Notifications)
//	GET    /v1/webhooks/{id}/deliveries           owner
//	GET    /v1/webhooks/{id}/deliveries/{did}     owner
//	POST   /v1/webhooks/{id}/retry                owner
//	POST   /mcp                                   MCP key (Streamable HTTP, stateless; see mcp.go)
//	POST   /slack/interactivity                   no credential: signed by Slack, decided as the linked member (see slack.go)
//	GET    /console/, /status/{runId}, /embed.js  no credential (static pages; see console.go)
//	GET    /review/{token}                        the token of an approval's mail (HTML page; never decides; review.go)
//	POST   /review/{token}                        the token of an approval's mail (form: decides as its member)
package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"stead/api/wire"
	"stead/approvals"
	"stead/runtime/engine"
	"stead/store"
)

// Defaults of Config.
const (
	DefaultMaxBody   = 1 << 20
	DefaultMaxBundle = 5 << 20
	// DefaultHeartbeat is how often an idle event stream sends a comment
	// line, so proxies keep it open and clients notice a dead connection.
	DefaultHeartbeat = 15 * time.Second
	// DefaultRecheck is how often an event stream checks its credential
	// again: a revoked customer token ends its streams within it.
	DefaultRecheck = 2 * time.Second
	// MaxWait bounds a long-poll (?wait=).
	MaxWait = 60 * time.Second
)

// Config wires a Server.
type Config struct {
	Engine *engine.Engine
	Store  store.Store
	// Now is the clock (customer token expiry, key creation and revocation,
	// decision messages); time.Now when nil. Give it the engine's clock.
	Now func() time.Time
	// Logger hears one line per request and every internal error; nothing
	// is logged when nil.
	Logger *slog.Logger
	// MaxBody bounds a request body; DefaultMaxBody (1 MiB) when zero.
	MaxBody int64
	// MaxBundle bounds a deployed bundle; DefaultMaxBundle (5 MiB) when zero.
	MaxBundle int64
	// Entropy feeds key secrets, ids and request ids; crypto/rand when nil.
	Entropy io.Reader
	// Heartbeat is the idle interval of event streams; DefaultHeartbeat
	// when zero.
	Heartbeat time.Duration
	// Recheck is how often an open event stream checks its credential
	// again, so that a revoked or expired one ends it within that time;
	// DefaultRecheck when zero.
	Recheck time.Duration
	// AuthLimit bounds failed authentication; the defaults when zero.
	AuthLimit AuthLimit
	// Notifications sends pings and hears of endpoint changes (the
	// webhook routes); without it the ping route answers 503 and the
	// others work (a notifier elsewhere delivers).
	Notifications Notifications
	// MCPWait is how long POST /mcp's tools/call and stead_call_result wait
	// for a call to settle; DefaultMCPWait (20 s) when zero.
	MCPWait time.Duration
	// Slack, when set, serves POST /slack/interactivity (package
	// notify/slack's App); without it the route answers 404 saying how to
	// configure Slack.
	Slack Slack
}

// Notifications is what the webhook routes need of the notifier (package
// notify's Notifier).
type Notifications interface {
	// Ping sends an endpoint a webhook.ping now and returns the delivery.
	Ping(ctx context.Context, ep store.Endpoint, id string) (store.Delivery, error)
	// Forget drops what the notifier cached of a project's endpoints.
	Forget(projectID string)
	// Kick asks for due deliveries to go out now.
	Kick()
}

func (c *Config) validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("api config: Engine is required")
	case c.Store == nil:
		return errors.New("api config: Store is required")
	case c.MaxBody < 0, c.MaxBundle < 0, c.Heartbeat < 0, c.Recheck < 0, c.MCPWait < 0:
		return errors.New("api config: MaxBody, MaxBundle, Heartbeat, Recheck and MCPWait must not be negative")
	}
	if err := c.AuthLimit.validate(); err != nil {
		return err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.MaxBundle == 0 {
		c.MaxBundle = DefaultMaxBundle
	}
	if c.Entropy == nil {
		c.Entropy = rand.Reader
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Recheck == 0 {
		c.Recheck = DefaultRecheck
	}
	if c.MCPWait == 0 {
		c.MCPWait = DefaultMCPWait
	}
	return nil
}

// Server is the API. It is safe for concurrent use.
type Server struct {
	cfg    Config
	engine *engine.Engine
	store  store.Store
	log    *slog.Logger
	mux    *http.ServeMux

	entropyMu sync.Mutex
	limiter   *authLimiter

	// mcpHTTP serves POST /mcp; mcpServers are its servers, one per agent
	// and deployment (mcp.go).
	mcpHTTP    http.Handler
	mcpServers *lru.Cache[mcpServerKey, *mcp.Server]

	// closing ends event streams and long-polls (CloseStreams).
	closing     context.Context
	stopStreams context.CancelFunc
}

var _ http.Handler = (*Server)(nil)

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, engine: cfg.Engine, store: cfg.Store, log: cfg.Logger, mux: http.NewServeMux(), limiter: newAuthLimiter(cfg.AuthLimit)}
	s.closing, s.stopStreams = context.WithCancel(context.Background())
	if err := s.initMCP(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// CloseStreams ends every open event stream and long-poll now (a
// long-poll answers with the run as it stands) and every later one at once.
// http.Server.Shutdown waits for responses to finish, and a stream only
// finishes with its run: register CloseStreams with
// http.Server.RegisterOnShutdown. Clients resume from Last-Event-ID.
func (s *Server) CloseStreams() { s.stopStreams() }

// untilClosing returns ctx, also cancelled by CloseStreams.
func (s *Server) untilClosing(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.closing, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /v1/openapi.json", s.openAPI)
	s.handle("GET /v1/me", anyOf(approvals.ReadOwnRuns, approvals.ReadApprovals), s.me)
	s.handle("PATCH /v1/me/notifications", anyOf(approvals.ManageOwnSettings), s.updateMyNotifications)

	s.handle("POST /v1/deployments", anyOf(approvals.Deploy), s.createDeployment)
	s.handle("GET /v1/deployments", anyOf(approvals.ReadDeployments), s.listDeployments)
	s.handle("GET /v1/agents", anyOf(approvals.ReadDeployments), s.listAgents)
	s.handle("POST /v1/agents/{agent}/runs", anyOf(approvals.RunAgents), s.startRun)

	s.handle("GET /v1/runs", anyOf(approvals.ReadOwnRuns), s.listRuns)
	s.handle("GET /v1/runs/{id}", anyOf(approvals.ReadOwnRuns, approvals.ReadApprovalRuns), s.getRun)
	s.handle("GET /v1/runs/{id}/events", anyOf(approvals.ReadOwnRuns, approvals.ReadApprovalRuns), s.runEvents)
	s.handle("POST /v1/runs/{id}/cancel", anyOf(approvals.RunAgents), s.cancelRun)

	s.handle("GET /v1/approvals", anyOf(approvals.ReadApprovals), s.listApprovals)
	s.handle("GET /v1/approvals/{id}", anyOf(approvals.ReadApprovals), s.getApproval)
	s.handle("POST /v1/approvals/{id}/approve", anyOf(approvals.Decide), s.approve)
	s.handle("POST /v1/approvals/{id}/deny", anyOf(approvals.Decide), s.deny)
	s.handle("POST /v1/approvals/{id}/check-input", anyOf(approvals.Decide), s.checkInput)

	s.handle("GET /v1/rules", anyOf(approvals.ReadApprovals), s.listRules)
	s.handle("GET /v1/rules/{id}", anyOf(approvals.ReadApprovals), s.getRule)
	s.handle("DELETE /v1/rules/{id}", anyOf(approvals.Decide), s.revokeRule)

	s.handle("POST /v1/customer-tokens", anyOf(approvals.RunAgents), s.createCustomerToken)
	s.handle("POST /v1/customer-tokens/revoke", anyOf(approvals.RunAgents), s.revokeCustomerTokens)

	s.handle("GET /v1/broker/{collection}", anyOf(approvals.UseBroker), s.listBroker)
	s.handle("GET /v1/broker/{collection}/{key}", anyOf(approvals.UseBroker), s.getBroker)
	s.handle("PUT /v1/broker/{collection}/{key}", anyOf(approvals.UseBroker), s.putBroker)
	s.handle("DELETE /v1/broker/{collection}/{key}", anyOf(approvals.UseBroker), s.deleteBroker)

	s.handle("POST /v1/members", anyOf(approvals.ManageKeys), s.createMember)
	s.handle("GET /v1/members", anyOf(approvals.ReadMembers), s.listMembers)
	s.handle("GET /v1/members/{id}", anyOf(approvals.ReadMembers), s.getMember)
	s.handle("PATCH /v1/members/{id}", anyOf(approvals.ManageKeys), s.updateMember)
	s.handle("DELETE /v1/members/{id}", anyOf(approvals.ManageKeys), s.removeMember)

	s.handle("POST /v1/groups", anyOf(approvals.ManageKeys), s.createGroup)
	s.handle("GET /v1/groups", anyOf(approvals.ReadMembers), s.listGroups)
	s.handle("GET /v1/groups/{name}", anyOf(approvals.ReadMembers), s.getGroup)
	s.handle("PATCH /v1/groups/{name}", anyOf(approvals.ManageKeys), s.updateGroup)
	s.handle("DELETE /v1/groups/{name}", anyOf(approvals.ManageKeys), s.deleteGroup)

	s.handle("POST /v1/keys", anyOf(approvals.ManageKeys), s.createKey)
	s.handle("GET /v1/keys", anyOf(approvals.ManageKeys), s.listKeys)
	s.handle("DELETE /v1/keys/{id}", anyOf(approvals.ManageKeys), s.revokeKey)
	s.handle("POST /v1/mcp-keys", anyOf(approvals.ManageKeys), s.createMCPKey)
	s.handle("GET /v1/mcp-keys", anyOf(approvals.ManageKeys), s.listMCPKeys)
	s.handle("DELETE /v1/mcp-keys/{id}", anyOf(approvals.ManageKeys), s.revokeMCPKey)
	s.handle("POST /mcp", anyOf(approvals.CallTools), s.serveMCP)

	s.handle("POST /v1/webhooks", anyOf(approvals.ManageWebhooks), s.createWebhook)
	s.handle("GET /v1/webhooks", anyOf(approvals.ManageWebhooks), s.listWebhooks)
	s.handle("GET /v1/webhooks/{id}", anyOf(approvals.ManageWebhooks), s.getWebhook)
	s.handle("PATCH /v1/webhooks/{id}", anyOf(approvals.ManageWebhooks), s.updateWebhook)
	s.handle("DELETE /v1/webhooks/{id}", anyOf(approvals.ManageWebhooks), s.deleteWebhook)
	s.handle("POST /v1/webhooks/{id}/rotate", anyOf(approvals.ManageWebhooks), s.rotateWebhook)
	s.handle("POST /v1/webhooks/{id}/ping", anyOf(approvals.ManageWebhooks), s.pingWebhook)
	s.handle("GET /v1/webhooks/{id}/deliveries", anyOf(approvals.ManageWebhooks), s.listWebhookDeliveries)
	s.handle("GET /v1/webhooks/{id}/deliveries/{deliveryId}", anyOf(approvals.ManageWebhooks), s.getWebhookDelivery)
	s.handle("POST /v1/webhooks/{id}/retry", anyOf(approvals.ManageWebhooks), s.retryWebhook)

	s.slackRoutes()
	s.consoleRoutes()
	s.reviewRoutes()
}

// anyOf is what a route needs: a role that grants one of ps.
func anyOf(ps ...approvals.Permission) []approvals.Permission { return ps }

// handlerFunc serves one route for an authenticated caller. An error is
// written as the JSON error it translates to.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *caller) error

func (s *Server) handle(pattern string, need []approvals.Permission, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, err := s.authenticate(r, need)
		if info := infoOf(r.Context()); info != nil && c != nil {
			info.actor = c.actor.ID
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := h(w, r, c); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// requestInfo is what the request log line needs from inside a handler.
type requestInfo struct {
	id    string
	actor string
}

type infoKey struct{}

func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(infoKey{}).(*requestInfo)
	return info
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &requestInfo{id: "req_" + s.randomHex(8)}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
	sw := &statusWriter{ResponseWriter: w}

	h := sw.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Request-Id", info.id)
	if r.Header.Get("Origin") != "" {
		// Credentials are bearer tokens, never cookies, so a page of any
		// origin can do no more than the token it holds allows. This lets a
		// customer UI read its runs with a customer token.
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", "X-Request-Id, Idempotent-Replayed")
	}

	switch {
	case r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "":
		h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Last-Event-ID")
		h.Set("Access-Control-Max-Age", "600")
		sw.WriteHeader(http.StatusNoContent)
	default:
		if _, pattern := s.mux.Handler(r); pattern == "" {
			s.noRoute(sw, r)
		} else {
			s.mux.ServeHTTP(sw, r)
		}
	}

	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", logPath(r.URL.Path)),
		slog.Int("status", status),
		slog.Duration("duration", time.Since(start)),
		slog.String("request", info.id),
	}
	if info.actor != "" {
		attrs = append(attrs, slog.String("actor", info.actor))
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

// noRoute answers a request no route matches: 405 with the Allow header
// the mux computed when the path exists with other methods, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	h, _ := s.mux.Handler(r)
	rec := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		s.writeError(w, r, &Error{
			Status:  http.StatusMethodNotAllowed,
			Code:    CodeMethodNotAllowed,
			Message: r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + allow,
		})
		return
	}
	s.writeError(w, r, &Error{
		Status:  http.StatusNotFound,
		Code:    CodeNotFound,
		Message: "no such route: " + r.Method + " " + r.URL.Path,
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// me says who the credential is: its project, role and key (or end user),
// and, for a key, its member's notification settings.
func (s *Server) me(w http.ResponseWriter, r *http.Request, c *caller) error {
	out := meResponse{
		ProjectID: c.actor.ProjectID, Role: string(c.actor.Role), ID: c.actor.ID,
		KeyName: c.key.Name, MemberID: c.key.MemberID, MemberName: c.key.MemberName, EndUserID: c.actor.EndUserID,
	}
	if c.actor.Role.May(approvals.ManageOwnSettings) {
		m, err := s.myMember(r, c)
		var e *Error
		switch {
		case errors.As(err, &e) && e.Status == http.StatusConflict:
			// No member's: who the credential is still answers.
		case err != nil:
			return err
		default:
			out.Notify = notificationsOf(m.Notify)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type meResponse struct {
	ProjectID string `json:"projectId"`
	Role      string `json:"role"`
	ID        string `json:"id"`
	KeyName   string `json:"keyName,omitempty"`
	// MemberID and MemberName: the member a key belongs to.
	MemberID   string `json:"memberId,omitempty"`
	MemberName string `json:"memberName,omitempty"`
	EndUserID  string `json:"endUserId,omitempty"`
	// Notify are the member's notification settings (PATCH
	// /v1/me/notifications changes them).
	Notify *wire.NotifySettings `json:"notify,omitempty"`
}

func (s *Server) now() time.Time { return s.cfg.Now().UTC() }

// random fills p from the configured entropy.
func (s *Server) random(p []byte) error {
	s.entropyMu.Lock()
	defer s.entropyMu.Unlock()
	_, err := io.ReadFull(s.cfg.Entropy, p)
	return err
}

func (s *Server) randomHex(n int) string {
	b := make([]byte, n)
	if err := s.random(b); err != nil {
		return "unknown"
	}
	return hex.EncodeToString(b)
}

// statusWriter remembers the status for the request log. Unwrap lets
// http.ResponseController reach the connection (flush, deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// headerRecorder captures what the mux's own 404/405 handler would write.
type headerRecorder struct {
	header http.Header
	status int
}

func (r *headerRecorder) Header() http.Header { return r.header }
func (r *headerRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *headerRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
