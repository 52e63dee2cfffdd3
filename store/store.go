// Package store is Stead's storage seam: the records every shape keeps
// (projects, members, keys, deployments, runs, their trace, approvals,
// broker records) and the one Store interface that the embedded bbolt
// backend and the DynamoDB backend implement. Both pass the same
// conformance suite, store/storetest.
//
// Members and their keys: see Member. Keys stored before members existed
// keep working: each presents as a member of its own (Member, "Older
// keys"), made up on read, so no migration runs.
//
// Every write that moves a run is conditional: on the run's Version (and, for
// claims, its lease). A stale write returns ErrConflict and changes nothing.
// Backends translate their own failures into the sentinel errors of this
// package and of package approvals, in one place each.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"stead/approvals"
)

// Sentinel errors. Methods wrap them with %w; test with errors.Is.
var (
	// ErrNotFound: no such record (or it belongs to another project).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a conditional write lost: stale version, lease held by
	// another worker, step already recorded.
	ErrConflict = errors.New("conflict")
	// ErrExists: a record with that identity already exists.
	ErrExists = errors.New("already exists")
	// ErrInvalidCursor: a list cursor that this list did not hand out.
	ErrInvalidCursor = errors.New("invalid cursor")
	// ErrLastOwner: the write would leave its project without an active
	// owner key or without an active owner member: revoking the last owner
	// key, removing or demoting the last owner member (or the member
	// holding the last owner keys).
	ErrLastOwner = errors.New("last active owner")
	// ErrTooManyRevocations: the end user already has MaxRevokedTokens
	// revoked customer tokens that have not expired.
	ErrTooManyRevocations = errors.New("too many revoked customer tokens")
)

// RunStatus is where a run stands.
type RunStatus string

// Run statuses: queued → running → (awaiting-approval → queued → running)* →
// succeeded | failed | cancelled.
const (
	RunQueued           RunStatus = "queued"
	RunRunning          RunStatus = "running"
	RunAwaitingApproval RunStatus = "awaiting-approval"
	RunSucceeded        RunStatus = "succeeded"
	RunFailed           RunStatus = "failed"
	RunCancelled        RunStatus = "cancelled"
)

// Terminal reports whether a run in status s will never change again.
func (s RunStatus) Terminal() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled
}

// RunStatuses are every run status, in the order they are offered to users.
var RunStatuses = []RunStatus{RunQueued, RunRunning, RunAwaitingApproval, RunSucceeded, RunFailed, RunCancelled}

// Valid reports whether s is one of RunStatuses.
func (s RunStatus) Valid() bool { return slices.Contains(RunStatuses, s) }

// Trust is a run's trust level. It only ever goes down.
type Trust string

// Trust levels.
const (
	Trusted   Trust = "trusted"
	Untrusted Trust = "untrusted"
)

// Costs are measured usage, summed per step and per run.
type Costs struct {
	TokensInput  int64   `json:"tokensInput"`
	TokensOutput int64   `json:"tokensOutput"`
	CostUSD      float64 `json:"costUsd"`
}

// Add returns the sum of c and o.
func (c Costs) Add(o Costs) Costs {
	return Costs{c.TokensInput + o.TokensInput, c.TokensOutput + o.TokensOutput, c.CostUSD + o.CostUSD}
}

// IsZero reports whether nothing was recorded.
func (c Costs) IsZero() bool { return c == Costs{} }

// RunError is why a run failed or was cancelled. Code is stable and
// machine-readable: approval-denied, approval-expired, policy-denied,
// invalid-input, handler-error, cancelled, …
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Step names the step that failed, when one did.
	Step string `json:"step,omitempty"`
	// Stack is a failed handler's JS stack; File, Line and Column are where
	// it threw, in the developer's sources when the bundle carries their
	// map (a bundle stead deploy made). Empty and 0 when unknown.
	Stack  string `json:"stack,omitempty"`
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

// Run is one execution of an agent for one end user.
type Run struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	Agent     string `json:"agent"`
	EndUserID string `json:"endUserId"`
	// Deployment is the version the run is pinned to.
	Deployment int             `json:"deployment"`
	Status     RunStatus       `json:"status"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *RunError       `json:"error,omitempty"`
	Trust      Trust           `json:"trust"`
	// TrustOrigin says what lowered the trust.
	TrustOrigin string `json:"trustOrigin,omitempty"`
	Costs       Costs  `json:"costs"`
	// Cursor is the index of the next step to execute.
	Cursor int `json:"cursor"`
	// StepState is the engine's opaque progress inside the step at Cursor (an
	// agent loop's conversation). Cleared when the step completes.
	StepState json.RawMessage `json:"stepState,omitempty"`
	// ApprovalID is the approval of the current step's gated call, set while
	// awaiting approval and kept until that step completes.
	ApprovalID string `json:"approvalId,omitempty"`
	// Requester is the member whose key started the run (empty for older
	// runs and for callers that are no member): whom separateFrom
	// "requester" keeps from deciding its approvals.
	Requester string `json:"requester,omitempty"`
	// Tool is set on a one-call run (an MCP client's tools/call): the one
	// tool of Agent the run calls, with Input as its input. Empty on a run
	// of the agent's steps.
	Tool string `json:"tool,omitempty"`
	// Via says where the run came from when not from the REST API:
	// "mcp:<MCP key id>" for a call through POST /mcp.
	Via string `json:"via,omitempty"`
	// IdempotencyKey and RequestDigest come from the create request's
	// Idempotency-Key header and body; a key is unique per project.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	RequestDigest  string `json:"requestDigest,omitempty"`
	// LeaseOwner holds a running run until LeaseUntil. A queued run carries a
	// dispatch deadline in LeaseUntil: past it, the sweeper dispatches again.
	LeaseOwner string    `json:"leaseOwner,omitempty"`
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
	// Attempts counts claims of the step at Cursor (1 on the first claim).
	Attempts int `json:"attempts"`
	// Version increments with every write; updates are conditional on it.
	Version int64 `json:"version"`
	// LastSeq is the sequence number of the run's last event.
	LastSeq    int64     `json:"lastSeq"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

// Event is one line of a run's trace. Seq starts at 1 and has no gaps.
type Event struct {
	RunID string    `json:"runId"`
	Seq   int64     `json:"seq"`
	Type  string    `json:"type"`
	At    time.Time `json:"at"`
	// Step is the id of the step the event belongs to, if any.
	Step string `json:"step,omitempty"`
	// Data is the event's payload, a JSON object.
	Data json.RawMessage `json:"data,omitempty"`
	// Notify, on an event to append, puts its run in the outbox in the same
	// write (see Webhooks): the event is a notification. It is not stored.
	Notify bool `json:"-"`
}

// Step is the record of a completed step: written once, never overwritten.
// Its existence is what makes a completed step never run again.
type Step struct {
	RunID          string          `json:"runId"`
	Index          int             `json:"index"`
	ID             string          `json:"id"`
	Output         json.RawMessage `json:"output"`
	Costs          Costs           `json:"costs"`
	IdempotencyKey string          `json:"idempotencyKey"`
	CompletedAt    time.Time       `json:"completedAt"`
}

// Project is a tenant.
type Project struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// SigningKey signs customer tokens and broker tokens. Secret.
	SigningKey []byte    `json:"signingKey"`
	CreatedAt  time.Time `json:"createdAt"`
}

// APIKey is a project key. Only its hash is stored.
type APIKey struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	Name      string `json:"name"`
	// MemberID is the member the key belongs to. Keys read from a store
	// always name one: a key stored without (an older key) names its
	// LegacyMember.
	MemberID string `json:"memberId,omitempty"`
	// Role and MemberName are copies of the member's, kept in step by the
	// store while the key is active (a revoked key keeps those it had when
	// it was revoked).
	Role       approvals.Role `json:"role"`
	MemberName string         `json:"memberName,omitempty"`
	Hash       string         `json:"hash"`
	// Prefix is the first characters of the key, for recognising it in lists.
	Prefix    string    `json:"prefix"`
	CreatedAt time.Time `json:"createdAt"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
}

// MaxRevokedTokens bounds the revoked customer tokens of one end user that
// have not expired yet, so that the record the auth path reads stays one
// small item. Past it, revoke all of the end user's tokens instead.
const MaxRevokedTokens = 100

// CustomerRevocation revokes customer tokens of one end user of a project:
// one token (TokenID) or every token issued before IssuedBefore. Exactly
// one of the two is set.
type CustomerRevocation struct {
	ProjectID string
	EndUserID string
	// TokenID is the id of the one token revoked.
	TokenID string
	// IssuedBefore revokes every token issued before it.
	IssuedBefore time.Time
	// Until is when the revoked tokens expire anyway: the token's expiry,
	// or for IssuedBefore the latest expiry a token issued before it can
	// have. The store keeps the revocation until then, and forgets it after.
	Until time.Time
	// Now is the time of the revocation; what expired by then is dropped.
	Now time.Time
}

// Validate refuses a revocation no backend may write.
func (r CustomerRevocation) Validate() error {
	switch {
	case r.ProjectID == "" || r.EndUserID == "":
		return errors.New("revoke customer tokens: projectId and endUserId are required")
	case (r.TokenID == "") == r.IssuedBefore.IsZero():
		return fmt.Errorf("revoke customer tokens of %s: set exactly one of tokenId and issuedBefore", r.EndUserID)
	case r.Until.IsZero() || r.Now.IsZero():
		return fmt.Errorf("revoke customer tokens of %s: until and now are required", r.EndUserID)
	}
	return nil
}

// CustomerRevocations are the revocations of one end user's customer
// tokens. Backends keep them as one record and change it with Apply, so
// both apply the same rules.
type CustomerRevocations struct {
	// IssuedBefore: every token issued before it is revoked (zero: none),
	// until IssuedBeforeUntil.
	IssuedBefore      time.Time `json:"issuedBefore,omitzero"`
	IssuedBeforeUntil time.Time `json:"issuedBeforeUntil,omitzero"`
	// Tokens maps the id of each revoked token to when it expires (when
	// its revocation ends).
	Tokens map[string]time.Time `json:"tokens,omitempty"`
}

// Revoked reports whether the token with that id, issued at issuedAt, is
// revoked.
func (rs CustomerRevocations) Revoked(tokenID string, issuedAt time.Time) bool {
	if !rs.IssuedBefore.IsZero() && issuedAt.Before(rs.IssuedBefore) {
		return true
	}
	_, ok := rs.Tokens[tokenID]
	return ok && tokenID != ""
}

// At returns the revocations of rs in force at now: those that end after
// it.
func (rs CustomerRevocations) At(now time.Time) CustomerRevocations {
	var out CustomerRevocations
	if rs.IssuedBeforeUntil.After(now) {
		out.IssuedBefore, out.IssuedBeforeUntil = rs.IssuedBefore, rs.IssuedBeforeUntil
	}
	for id, until := range rs.Tokens {
		if until.After(now) {
			if out.Tokens == nil {
				out.Tokens = map[string]time.Time{}
			}
			out.Tokens[id] = until
		}
	}
	return out
}

// Until is when the last revocation of rs ends; zero when there is none.
func (rs CustomerRevocations) Until() time.Time {
	last := rs.IssuedBeforeUntil
	for _, until := range rs.Tokens {
		if until.After(last) {
			last = until
		}
	}
	return last
}

// Apply returns rs as of r.Now with r added: what ended by then dropped, a
// token's later Until kept, the later cutoff kept with the later of their
// Untils. ErrTooManyRevocations if r revokes a new token and MaxRevokedTokens
// are revoked already. r must be valid (Validate).
func (rs CustomerRevocations) Apply(r CustomerRevocation) (CustomerRevocations, error) {
	out := rs.At(r.Now)
	if !r.Until.After(r.Now) {
		return out, nil
	}
	if r.TokenID != "" {
		prev, ok := out.Tokens[r.TokenID]
		if !ok && len(out.Tokens) >= MaxRevokedTokens {
			return rs, fmt.Errorf("revoke customer token %s of end user %s: %w: %d are revoked and not yet expired; revoke all of the end user's tokens instead",
				r.TokenID, r.EndUserID, ErrTooManyRevocations, len(out.Tokens))
		}
		if out.Tokens == nil {
			out.Tokens = map[string]time.Time{}
		}
		if r.Until.After(prev) {
			out.Tokens[r.TokenID] = r.Until
		}
		return out, nil
	}
	if r.IssuedBefore.After(out.IssuedBefore) {
		out.IssuedBefore = r.IssuedBefore
	}
	if r.Until.After(out.IssuedBeforeUntil) {
		out.IssuedBeforeUntil = r.Until
	}
	return out, nil
}

// Deployment is an immutable, numbered version of a project's bundle and
// config.
type Deployment struct {
	ProjectID string `json:"projectId"`
	// Version is assigned by CreateDeployment: 1, 2, 3, … per project.
	Version int `json:"version"`
	// Digest is the sha256 (hex) of the bundle as deployed; the bundle itself
	// lives in the blob store under that digest.
	Digest     string          `json:"digest"`
	BundleSize int64           `json:"bundleSize"`
	Config     json.RawMessage `json:"config"`
	Agents     []string        `json:"agents"`
	CreatedBy  string          `json:"createdBy"`
	CreatedAt  time.Time       `json:"createdAt"`
	// MCPTools are the definitions of the deployment's MCP-backed tools as
	// its deploy fetched them (pinned), one per server and remote tool,
	// sorted by server then tool; none without MCP-backed tools.
	MCPTools []MCPToolPin `json:"mcpTools,omitempty"`
}

// MCPToolPin is a remote MCP tool's definition as a deploy fetched it. A
// call is made only while the server's definition still has Fingerprint.
type MCPToolPin struct {
	// Server is the server's name in stead.json; Tool the remote tool's name.
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Fingerprint is "sha256:<hex>" over name, description and schemas.
	Fingerprint string `json:"fingerprint"`
	Description string `json:"description,omitempty"`
	// InputSchema and OutputSchema are the remote schemas (nil if none).
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Change says how this deploy's definition differs from the previous
	// deployment's: "new", or the parts that changed ("description,
	// inputSchema"); "" when unchanged.
	Change string `json:"change,omitempty"`
}

// BrokerRecord is one value in a handler's scoped data: a collection and key
// inside a project and end user.
type BrokerRecord struct {
	ProjectID  string          `json:"projectId"`
	EndUserID  string          `json:"endUserId"`
	Collection string          `json:"collection"`
	Key        string          `json:"key"`
	Value      json.RawMessage `json:"value"`
	UpdatedAt  time.Time       `json:"updatedAt"`
}

// BrokerScope is the part of the broker a caller may touch.
type BrokerScope struct {
	ProjectID string
	EndUserID string
}

// RunFilter selects runs of one project, newest first. Backends check it
// with Normalize.
type RunFilter struct {
	ProjectID string
	Status    RunStatus // optional
	Agent     string    // optional
	EndUserID string    // optional
	// Cursor is the NextCursor of the previous page; empty for the first.
	Cursor string
	Limit  int
}

// ApprovalFilter selects approvals of one project. Backends check it with
// Normalize.
type ApprovalFilter struct {
	ProjectID string
	// Status is optional; empty means all.
	Status approvals.Status
	RunID  string // optional
	Order  ApprovalOrder
	Cursor string
	Limit  int
}

// Page is a page of results and the cursor to the next one ("" when done).
// Lists take a limit: 0 or less means DefaultLimit, more than MaxLimit means
// MaxLimit (ClampLimit).
type Page[T any] struct {
	Items      []T
	NextCursor string
}

// RunCommit is one conditional write that moves a run.
type RunCommit struct {
	// Run is the new state. Its Version must equal the stored version; the
	// store stores Version+1 and advances LastSeq over Events. The run's
	// identity (ID, ProjectID, Agent, EndUserID, Requester, Deployment,
	// Tool, Via, IdempotencyKey, RequestDigest, CreatedAt) is kept as stored.
	Run Run
	// Events are appended in order after the run's last event; the store
	// assigns their Seq and RunID.
	Events []Event
	// Steps are completed steps to record, in index order: usually none or
	// one; consecutive read steps may share a commit (the engine's
	// "Read steps"). ErrConflict if any of them is already recorded; nothing
	// is written then.
	Steps []Step
	// Approval, if set, is a new pending approval of this run to create with
	// the commit; ErrExists if its id is taken.
	Approval *approvals.Approval
}

// Validate refuses a commit no backend may write: an unknown status, a
// negative step index, an approval that is not a new pending approval of
// this run and project. Backends call it before writing.
func (c RunCommit) Validate() error {
	id := c.Run.ID
	if !c.Run.Status.Valid() {
		return fmt.Errorf("commit run %s: status %q is not a run status", id, c.Run.Status)
	}
	for i, st := range c.Steps {
		if st.Index < 0 {
			return fmt.Errorf("commit run %s: step index %d is negative", id, st.Index)
		}
		if i > 0 && st.Index <= c.Steps[i-1].Index {
			return fmt.Errorf("commit run %s: steps must be in increasing index order (%d after %d)", id, st.Index, c.Steps[i-1].Index)
		}
	}
	if a := c.Approval; a != nil {
		if a.ID == "" || a.RunID != id || a.ProjectID != c.Run.ProjectID || a.Status != approvals.Pending {
			return fmt.Errorf("commit run %s: approval %q must be a pending approval of this run and project", id, a.ID)
		}
	}
	return nil
}

// ClaimParams asks for a run's lease.
type ClaimParams struct {
	RunID string
	Owner string
	Until time.Time
	Now   time.Time
}

// DecideParams settles an approval and moves its run in one conditional
// write.
type DecideParams struct {
	Decision approvals.Decision
	// Read, if set, is the approval as the caller read it just before. A
	// backend that would read it first decides on it instead: the write is
	// conditional on the stored state all the same, so a stale Read makes
	// the decision lose, never win wrongly.
	Read *approvals.Approval
	// RunStatus is the run's new status if the decision settles the
	// approval: queued on approve (with LeaseUntil as its dispatch
	// deadline), failed on deny or expiry, cancelled on cancel. A vote that
	// does not settle leaves the run's status as it is.
	RunStatus RunStatus
	RunError  *RunError
	// LeaseUntil is the queued run's dispatch deadline. The lease owner is
	// cleared, UpdatedAt becomes Decision.At, and a terminal RunStatus sets
	// FinishedAt to Decision.At.
	LeaseUntil time.Time
	// Events are appended to the run's trace with the decision.
	Events []Event
}

// Store keeps everything. Implementations are safe for concurrent use.
type Store interface {
	// CreateProject stores a new project; ErrExists if the id is taken.
	CreateProject(ctx context.Context, p Project) error
	// GetProject returns a project or ErrNotFound.
	GetProject(ctx context.Context, id string) (Project, error)

	// CreateAPIKey stores a key; ErrExists if its id or hash is taken.
	// A key with MemberID belongs to that member, who must be a member of
	// the key's project and not removed (ErrNotFound otherwise); the store
	// fills in the key's Role and MemberName from the member (Member.Bind:
	// a Role that differs is refused with ErrConflict). A key without
	// MemberID is an older kind of key: it belongs to a member of its own
	// (LegacyMember); ErrExists if that member's id is taken.
	CreateAPIKey(ctx context.Context, k APIKey) error
	// GetAPIKeyByHash finds a key (revoked ones too) or ErrNotFound.
	GetAPIKeyByHash(ctx context.Context, hash string) (APIKey, error)
	// ListAPIKeys lists a project's keys, oldest first.
	ListAPIKeys(ctx context.Context, projectID string) ([]APIKey, error)
	// RevokeAPIKey marks a key revoked at the given time; ErrNotFound if the
	// project has no such key. Revoking twice keeps the first time. The
	// project's last active owner key is not revoked (ErrLastOwner), also
	// when revokes of its owner keys run at the same moment. Revoking an
	// older key (one without a member of its own) removes its LegacyMember.
	RevokeAPIKey(ctx context.Context, projectID, id string, at time.Time) (APIKey, error)

	// CreateMember stores a new member at Version 1; m must be valid
	// (Member.Validate) and not removed. ErrExists if its id is taken in
	// its project, also by the member of an older key (LegacyMemberID); a
	// *MemberTakenError (wrapping ErrExists) if another current member has
	// its name or email (Member.Taken), checked in the write.
	CreateMember(ctx context.Context, m Member) error
	// CreateMemberWithKey stores a new member and its first key in one
	// write: both or neither. The key is bound to the member (Member.Bind).
	// ErrExists if the member's id, the key's id or the key's hash is
	// taken, a *MemberTakenError as CreateMember's; nothing is written then.
	CreateMemberWithKey(ctx context.Context, m Member, k APIKey) error
	// GetMember returns a member of the project, a removed one too;
	// ErrNotFound if the project has no member with that id.
	GetMember(ctx context.Context, projectID, id string) (Member, error)
	// ListMembers lists a project's members, oldest first (by CreatedAt,
	// then id); removed ones only with includeRemoved.
	ListMembers(ctx context.Context, projectID string, includeRemoved bool) ([]Member, error)
	// UpdateMember stores m's Name, Email, Role, Chat and UpdatedAt,
	// conditional on m.Version being the stored version, and returns the
	// stored member (Version incremented; identity and CreatedAt kept). The
	// member's active keys get its new role and name in the same write.
	// Errors: ErrNotFound for a missing or removed member; ErrConflict if
	// m.Version is stale; ErrLastOwner if the member is the project's last
	// active owner member, or holds its last active owner keys, and m is
	// not an owner; a *MemberTakenError (wrapping ErrExists) if m gives the
	// member a name or an email another current member has (Member.Taken),
	// checked in the write.
	UpdateMember(ctx context.Context, m Member) (Member, error)
	// RemoveMember marks a member removed at the given time and revokes its
	// active keys at that time, in one write, and returns the member.
	// Removing twice keeps the first time. ErrNotFound if the project has
	// no such member; ErrLastOwner if it is the project's last active owner
	// member, or holds its last active owner keys.
	RemoveMember(ctx context.Context, projectID, id string, at time.Time) (Member, error)
	Groups
	Rules
	Webhooks
	MCPKeys

	// RevokeCustomerTokens records r until r.Until. Revoking a token twice
	// keeps the later Until; of two IssuedBefore, the later one holds.
	// Revocations that ended by r.Now are dropped; one whose Until is not
	// after r.Now is not recorded (CustomerRevocations.Apply). Records
	// whose revocations all ended are deleted, so they never pile up.
	// ErrTooManyRevocations if the end user already has MaxRevokedTokens
	// other revoked tokens in force.
	RevokeCustomerTokens(ctx context.Context, r CustomerRevocation) error
	// GetCustomerRevocations returns the revocations of an end user's
	// tokens in force at now (CustomerRevocations.At): one point read, on
	// the path of every request with a customer token. No revocation is not
	// an error: the zero CustomerRevocations.
	GetCustomerRevocations(ctx context.Context, projectID, endUserID string, now time.Time) (CustomerRevocations, error)

	// CreateDeployment stores d as the project's next version and returns it
	// with Version set.
	CreateDeployment(ctx context.Context, d Deployment) (Deployment, error)
	// GetDeployment returns one version or ErrNotFound.
	GetDeployment(ctx context.Context, projectID string, version int) (Deployment, error)
	// LatestDeployment returns the highest version or ErrNotFound.
	LatestDeployment(ctx context.Context, projectID string) (Deployment, error)
	// ListDeployments lists versions, newest first.
	ListDeployments(ctx context.Context, projectID string, cursor string, limit int) (Page[Deployment], error)

	// Every write below that returns a Run returns it as stored: what
	// GetRun would read right after it (the engine hands it to the run's
	// waiters instead of reading it back). The conformance suite checks it.
	//
	// CreateRun stores a new run (Version 1) with its first events. If the
	// run's IdempotencyKey is already used in the project, it returns the
	// existing run and ErrExists, writing nothing; ErrExists too if the id is
	// taken.
	CreateRun(ctx context.Context, r Run, events []Event) (Run, error)
	// GetRun returns a run or ErrNotFound.
	GetRun(ctx context.Context, id string) (Run, error)
	// ListRuns lists a project's runs, newest first.
	ListRuns(ctx context.Context, f RunFilter) (Page[Run], error)
	// CommitRun applies c in one conditional write and returns the stored
	// run. ErrConflict if the version is stale or the step already recorded;
	// ErrNotFound if there is no such run.
	CommitRun(ctx context.Context, c RunCommit) (Run, error)
	// ClaimRun gives p.Owner the run's lease until p.Until if the run is
	// queued, or running with a lease that ran out before p.Now. The run
	// becomes running, its Version increments, Attempts counts the claim and
	// UpdatedAt becomes p.Now.
	// ErrConflict if the run cannot be claimed, ErrNotFound if missing.
	ClaimRun(ctx context.Context, p ClaimParams) (Run, error)
	// ListStalledRuns lists runs of any project that are queued or running
	// with LeaseUntil before now, oldest lease first.
	ListStalledRuns(ctx context.Context, now time.Time, limit int) ([]Run, error)

	// ListEvents returns a run's events with Seq > afterSeq, in order.
	ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]Event, error)
	// GetStep returns a completed step record or ErrNotFound.
	GetStep(ctx context.Context, runID string, index int) (Step, error)
	// ListSteps returns a run's completed steps in index order.
	ListSteps(ctx context.Context, runID string) ([]Step, error)

	// GetApproval returns an approval or ErrNotFound.
	GetApproval(ctx context.Context, id string) (approvals.Approval, error)
	// ListApprovals lists a project's approvals.
	ListApprovals(ctx context.Context, f ApprovalFilter) (Page[approvals.Approval], error)
	// ListDueApprovals lists pending approvals of any project whose
	// ExpiresAt is at or before now, soonest first. A page may be shorter
	// than limit while more are due (an index entry that lags behind a
	// decision is dropped after the limit is applied): only an empty page
	// says none is left.
	ListDueApprovals(ctx context.Context, now time.Time, limit int) ([]approvals.Approval, error)
	// DecideApproval settles an approval if p.Decision.Check allows it, and
	// moves its run with it (status, error, events), in one conditional
	// write. It returns the settled approval and the run. On an approval
	// with requirements an approve is a vote (approvals.Decision.Apply):
	// the write records it, appends p.Events and moves the run only if the
	// vote settles the approval; the approval it returns is then still
	// pending. Of concurrent votes on one version, one wins and the others
	// get approvals.ErrChanged, so exactly one write settles. Errors:
	// ErrNotFound for a missing or foreign approval; approvals.ErrNotPending
	// (with the approval as it stands) if already settled;
	// approvals.ErrExpired for an approve or deny past the deadline;
	// approvals.ErrNotDue for an expiry before it; approvals.ErrSeparated,
	// ErrNotEligible, ErrAlreadyVoted or ErrChanged (with the approval as
	// it stands) as Check says; ErrConflict if the run is no longer
	// awaiting this approval.
	DecideApproval(ctx context.Context, p DecideParams) (approvals.Approval, Run, error)

	// GetBrokerRecord returns a record or ErrNotFound.
	GetBrokerRecord(ctx context.Context, s BrokerScope, collection, key string) (BrokerRecord, error)
	// PutBrokerRecord creates or replaces a record.
	PutBrokerRecord(ctx context.Context, r BrokerRecord) error
	// DeleteBrokerRecord removes a record; ErrNotFound if absent.
	DeleteBrokerRecord(ctx context.Context, s BrokerScope, collection, key string) error
	// ListBrokerRecords lists a collection in key order.
	ListBrokerRecords(ctx context.Context, s BrokerScope, collection, cursor string, limit int) (Page[BrokerRecord], error)

	// Close releases the store's resources.
	Close() error
}
