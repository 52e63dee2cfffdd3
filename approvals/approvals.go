// Package approvals is the approval domain: one pending decision about one
// exact tool call, who may decide it, and the rules that make a decision
// count exactly once.
//
// An Approval is created pending when a run reaches a gated tool call. It
// leaves pending exactly once: approved or denied by a member of the run's
// project who may decide, while unexpired — or, for an approval with
// requirements, approved by the vote that completes its quorum or denied by
// one of its voters (quorum.go) —, expired by the sweeper once its deadline
// has passed, or cancelled with its run. Backends enforce the transition with
// one conditional write and report the losers with the sentinel errors below.
package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is where an approval stands.
type Status string

// The statuses. Expired is not denied: it has its own status, trace reason
// and wording everywhere.
const (
	Pending   Status = "pending"
	Approved  Status = "approved"
	Denied    Status = "denied"
	Expired   Status = "expired"
	Cancelled Status = "cancelled"
)

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Statuses are the statuses, in the order lists show them: adding one is
// adding it here (store's filters take this list).
var Statuses = []Status{Pending, Approved, Denied, Expired, Cancelled}

// DefaultTimeout is how long an approval stays pending when neither the tool
// nor the agent sets a timeout: long enough for someone watching the
// queue, short enough that a forgotten call does not wait for days.
const DefaultTimeout = 15 * time.Minute

// Approval is a pending or settled decision about one exact tool call.
type Approval struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	RunID     string `json:"runId"`
	Agent     string `json:"agent"`
	EndUserID string `json:"endUserId"`
	// Deployment is the deployment version the run is pinned to; its tool
	// schema validates an edited input.
	Deployment int `json:"deployment"`
	// StepIndex and StepID name the step; CallID names the call inside the
	// step (equal to StepID for a tool step, one per proposed call in an agent
	// loop).
	StepIndex int    `json:"stepIndex"`
	StepID    string `json:"stepId"`
	CallID    string `json:"callId"`
	Tool      string `json:"tool"`
	// Input is the resolved input the call will run with; InputDigest binds
	// it (see Digest). After an approval with an edited input, both hold the
	// edited input and OriginalInput keeps what was asked.
	Input         json.RawMessage `json:"input"`
	InputDigest   string          `json:"inputDigest"`
	OriginalInput json.RawMessage `json:"originalInput,omitempty"`
	Reason        string          `json:"reason"`
	// SeparateFrom is a member who may not decide this approval (the
	// run's requester, under separateFrom "requester"); SeparatedBy names
	// the setting that says so, for the refusal.
	SeparateFrom string `json:"separateFrom,omitempty"`
	SeparatedBy  string `json:"separatedBy,omitempty"`
	// NoteToCustomer: a deny note is shown to the customer (the tool's
	// approvals.noteToCustomer); otherwise it stays among reviewers.
	NoteToCustomer bool `json:"noteToCustomer,omitempty"`
	// Requirements, when set, make the approval collect votes (see
	// quorum.go): approved once every requirement has its votes, denied by
	// one eligible member's deny. Votes are the approvals counted so far, on
	// the current input; VoteVersion counts the votes recorded, and a vote
	// is judged on the version its voter read (Decision.VoteVersion).
	Requirements []Requirement `json:"requirements,omitempty"`
	// Notices are the reminders, escalation and expiry warning due while
	// it is pending, in time order (see Notice).
	Notices     []Notice  `json:"notices,omitempty"`
	Votes       []Vote    `json:"votes,omitempty"`
	VoteVersion int64     `json:"voteVersion,omitempty"`
	Status      Status    `json:"status"`
	RequestedAt time.Time `json:"requestedAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// DecidedBy is the deciding key's id ("stead" for an expiry,
	// "review:<memberId>" for a decision from a mail's review link);
	// DecidedByName the member it belongs to, as named when it decided.
	DecidedBy     string    `json:"decidedBy,omitempty"`
	DecidedByName string    `json:"decidedByName,omitempty"`
	DecidedAt     time.Time `json:"decidedAt,omitzero"`
	Note          string    `json:"note,omitempty"`
}

// Request is a gated call, as the engine knows it when it pauses the run.
type Request struct {
	ProjectID, RunID, Agent, EndUserID string
	Deployment                         int
	StepIndex                          int
	StepID, CallID, Tool               string
	// Input is the call's resolved input, compact JSON.
	Input       json.RawMessage
	Reason      string
	RequestedAt time.Time
	// Timeout is how long the approval stays pending.
	Timeout time.Duration
	// SeparateFrom, SeparatedBy, NoteToCustomer and Requirements: see
	// Approval.
	SeparateFrom, SeparatedBy string
	NoteToCustomer            bool
	Requirements              []Requirement
	// Notices are when to remind, escalate and warn of the expiry, as
	// durations after RequestedAt (see Notice; New places them in time).
	Notices []Notice
}

// New makes the pending approval of a gated call. unique tells it from the
// run's other approvals (the engine passes a fresh random string); the id
// is NewID(r.RunID, unique).
func New(r Request, unique string) (Approval, error) {
	digest, err := Digest(r.Input)
	if err != nil {
		return Approval{}, err
	}
	return Approval{
		ID:             NewID(r.RunID, unique),
		ProjectID:      r.ProjectID,
		RunID:          r.RunID,
		Agent:          r.Agent,
		EndUserID:      r.EndUserID,
		Deployment:     r.Deployment,
		StepIndex:      r.StepIndex,
		StepID:         r.StepID,
		CallID:         r.CallID,
		Tool:           r.Tool,
		Input:          r.Input,
		InputDigest:    digest,
		Reason:         r.Reason,
		SeparateFrom:   r.SeparateFrom,
		SeparatedBy:    r.SeparatedBy,
		NoteToCustomer: r.NoteToCustomer,
		Requirements:   r.Requirements,
		Notices:        placeNotices(r.Notices, r.RequestedAt, r.RequestedAt.Add(r.Timeout)),
		Status:         Pending,
		RequestedAt:    r.RequestedAt,
		ExpiresAt:      r.RequestedAt.Add(r.Timeout),
	}, nil
}

// NewID names an approval of run runID: "apr_", the run id without its
// "run_", "_", unique. Because the id names its run, a backend can read
// the approval and its run in one request (see RunHint).
func NewID(runID, unique string) string {
	return "apr_" + strings.TrimPrefix(runID, "run_") + "_" + unique
}

// RunHint returns the run id an approval id made by NewID names. It is a
// hint, for reading the run along with the approval: ids made before ids
// named their run (apr_<ulid>) give none, and the approval's own RunID is
// what counts.
func RunHint(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "apr_")
	i := strings.LastIndexByte(rest, '_')
	if !ok || i <= 0 {
		return "", false
	}
	return "run_" + rest[:i], true
}

// Sentinel errors. Backends return them (wrapped) from their decide
// operation; the API and CLI translate them into codes and words.
var (
	// ErrNotPending: the approval was already decided, expired or cancelled.
	ErrNotPending = errors.New("approval is not pending")
	// ErrExpired: the approval is still pending but its deadline has passed;
	// it can no longer be approved or denied, only expired.
	ErrExpired = errors.New("approval has expired")
	// ErrNotDue: an expiry was attempted before the deadline.
	ErrNotDue = errors.New("approval is not yet due to expire")
	// ErrSeparated: the decider is the member the approval is separated
	// from (separateFrom "requester": whoever started the run).
	ErrSeparated = errors.New("the requester of a run may not decide its approvals")
)

// Role is what an actor may do in a project.
type Role string

// The roles; what each may do is in access.go. Owners, developers and
// approvers decide approvals; a customer token (an end user acting through a
// customer UI) never can.
const (
	RoleOwner     Role = "owner"
	RoleDeveloper Role = "developer"
	// RoleApprover reads approvals and the runs they belong to, and
	// decides; nothing else.
	RoleApprover Role = "approver"
	// RoleViewer reads: runs, approvals, deployments.
	RoleViewer   Role = "viewer"
	RoleCustomer Role = "customer"
	// RoleSystem is Stead itself: the sweeper expiring approvals.
	RoleSystem Role = "system"
	// RoleRun is a run's broker token: its handlers' access to their end
	// user's broker data.
	RoleRun Role = "run"
	// RoleMCP is an MCP key (stm_…): an MCP client calling the tools of one
	// agent for one end user (CallTools, nothing else).
	RoleMCP Role = "mcp"
)

// Actor is who asks for something: a project key, a customer token or Stead.
type Actor struct {
	ProjectID string
	Role      Role
	// ID names the actor in traces: a key id, "customer:<endUserId>", "system".
	ID string
	// Name is what people read: the member a key belongs to ("Ana Diaz");
	// empty when there is none, and then ID stands for it (see Who).
	Name string
	// MemberID is the member a key belongs to.
	MemberID string
	// EndUserID is set for customer actors, broker tokens and MCP keys:
	// the one end user they act for.
	EndUserID string
	// Agent is set for MCP keys: the one agent whose tools the key may call.
	// Empty for every other actor, which is confined to no agent.
	Agent string
}

// Who is how the actor is named to people: its Name, else its ID.
func (a Actor) Who() string {
	if a.Name != "" {
		return a.Name
	}
	return a.ID
}

// Digest binds an input to an approval: the hex sha256 of its compact JSON.
// Two inputs that differ only in whitespace have the same digest.
func Digest(input json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return "", fmt.Errorf("digest input: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("digest input: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Decision is a request to settle a pending approval.
type Decision struct {
	ProjectID  string
	ApprovalID string
	// Status is Approved, Denied, Expired or Cancelled.
	Status Status
	// By is the deciding actor's ID, ByName its Name, ByMember its
	// MemberID.
	By       string
	ByName   string
	ByMember string
	Note     string
	// Input, when set on an approval, replaces the approval's input; it must
	// already be validated against the tool's schema. InputDigest is its Digest.
	Input       json.RawMessage
	InputDigest string
	// Seen, when set, is the digest of the input the decider saw; the
	// decision is refused (ErrChanged) if the approval's input is no
	// longer that one.
	Seen string
	// VoteVersion is the approval's VoteVersion as the decider read it: a
	// vote on an approval with requirements is judged on it.
	VoteVersion int64
	At          time.Time
}

// Window is when, relative to its approval's deadline, a decision may land.
type Window int

// The windows.
const (
	// Anytime: a cancel.
	Anytime Window = iota
	// BeforeDeadline: approve and deny, while At < ExpiresAt.
	BeforeDeadline
	// FromDeadline: expire, once At >= ExpiresAt.
	FromDeadline
)

// Window returns the window of d's status, or an error for a status that
// is not a decision.
func (d Decision) Window() (Window, error) {
	switch d.Status {
	case Approved, Denied:
		return BeforeDeadline, nil
	case Expired:
		return FromDeadline, nil
	case Cancelled:
		return Anytime, nil
	}
	return 0, fmt.Errorf("decision status %q is not a decision", d.Status)
}

// Check tells whether the decision may settle a (or, on an approval with
// requirements, record its vote) as a stands at d.At: a must be of d's
// project and pending, and d.At inside d.Window. For approve and deny,
// also: the decider is not the member a is separated from (ErrSeparated),
// a's input is still the one the decider saw (Seen, ErrChanged), and on an
// approval with requirements the decider is eligible (ErrNotEligible),
// votes on the version it read (ErrChanged) and at most once per input
// (ErrAlreadyVoted). It is the rule every backend's conditional write
// enforces: bbolt calls it while holding the approval; DynamoDB builds its
// condition from Window and VoteVersion and calls it on the state that
// beat a lost write, to say why it lost.
func (d Decision) Check(a Approval) error {
	if a.ProjectID != d.ProjectID {
		return errForeign
	}
	w, err := d.Window()
	if err != nil {
		return err
	}
	if a.Status != Pending {
		return ErrNotPending
	}
	if w == BeforeDeadline {
		if a.SeparateFrom != "" && d.ByMember == a.SeparateFrom {
			return ErrSeparated
		}
		if d.Seen != "" && d.Seen != a.InputDigest {
			return ErrChanged
		}
		if a.HasQuorum() {
			if err := d.checkVote(a); err != nil {
				return err
			}
		}
	}
	switch {
	case w == BeforeDeadline && !d.At.Before(a.ExpiresAt):
		return ErrExpired
	case w == FromDeadline && d.At.Before(a.ExpiresAt):
		return ErrNotDue
	}
	return nil
}

// errForeign is returned by Check for an approval of another project. Backends
// translate it to their not-found error.
var errForeign = errors.New("approval belongs to another project")

// IsForeign reports whether err came from Check refusing a foreign approval.
func IsForeign(err error) bool { return errors.Is(err, errForeign) }

// Apply returns a settled as the decision says — or, for an approve of an
// approval with requirements, with the vote recorded, settled only if the
// vote meets every requirement (the returned approval is then still
// Pending). It does not check; call Check first.
func (d Decision) Apply(a Approval) Approval {
	if d.Status == Approved && a.HasQuorum() {
		return d.applyVote(a)
	}
	return d.Settle(a)
}

// Settle returns a settled as the decision says — status, decider, note,
// an edited input — and records no vote: Apply's settling part, for a
// backend that keeps the votes apart.
func (d Decision) Settle(a Approval) Approval {
	a.Status = d.Status
	a.DecidedBy = d.By
	a.DecidedByName = d.ByName
	a.DecidedAt = d.At
	a.Note = d.Note
	// An "edit" identical to what was asked is no edit.
	if d.Status == Approved && d.Input != nil && d.InputDigest != a.InputDigest {
		if a.OriginalInput == nil {
			a.OriginalInput = a.Input
		}
		a.Input = d.Input
		a.InputDigest = d.InputDigest
	}
	return a
}

// ExpiredMessage is the words for an approval that can no longer be decided:
// "approval apr_… expired at 12:03:04Z (3m ago); it can no longer be approved".
// verb is what was attempted: "approved" or "denied".
func ExpiredMessage(a Approval, now time.Time, verb string) string {
	return fmt.Sprintf("approval %s expired at %s (%s ago); it can no longer be %s",
		a.ID, a.ExpiresAt.UTC().Format("15:04:05Z"), Ago(now.Sub(a.ExpiresAt)), verb)
}

// NotPendingMessage is the words for an approval already settled; verb is
// what was attempted ("approved", "denied").
func NotPendingMessage(a Approval, now time.Time, verb string) string {
	switch a.Status {
	case Expired:
		return ExpiredMessage(a, now, verb)
	case Cancelled:
		return fmt.Sprintf("approval %s was cancelled with its run at %s; check the run trace",
			a.ID, a.DecidedAt.UTC().Format("15:04:05Z"))
	}
	by := ""
	if w := a.DecidedByWho(); w != "" {
		by = " by " + w
	}
	return fmt.Sprintf("approval %s was already %s%s at %s; check the run trace instead of deciding again",
		a.ID, a.Status, by, a.DecidedAt.UTC().Format("15:04:05Z"))
}

// DecidedByWho is how the decider is named to people: "Ana Diaz (key_…)",
// or the key id alone when no member is known.
func (a Approval) DecidedByWho() string {
	if a.DecidedByName != "" && a.DecidedBy != "" {
		return a.DecidedByName + " (" + a.DecidedBy + ")"
	}
	return a.DecidedBy
}

// Ago renders a duration the way people say it: "45s", "3m", "2h", "4d".
func Ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
