package wire

import (
	"encoding/json"
	"stead/approvals"
	"time"
)

// Rule is a remembered decision, as the API shows it: an expiring,
// revocable rule a person made from an approval, letting matching calls
// run without asking.
type Rule struct {
	ID        string `json:"id"`
	Agent     string `json:"agent"`
	Tool      string `json:"tool"`
	EndUserID string `json:"endUserId"`
	// Scope is which inputs it lets through: "any", "exact" (the approved
	// input, InputDigest) or "schema" (inputs that satisfy When).
	Scope       string          `json:"scope"`
	InputDigest string          `json:"inputDigest,omitempty"`
	When        json.RawMessage `json:"when,omitempty"`
	// ApprovalID is the approval it was made from, RunID its run,
	// Deployment the deployment that run was pinned to.
	ApprovalID string `json:"approvalId"`
	RunID      string `json:"runId"`
	Deployment int    `json:"deployment"`
	// CreatedBy is the key that made it, CreatedByName its member.
	CreatedBy     string    `json:"createdBy"`
	CreatedByName string    `json:"createdByName,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	ExpiresAt     time.Time `json:"expiresAt"`
	RevokedAt     time.Time `json:"revokedAt,omitzero"`
	RevokedBy     string    `json:"revokedBy,omitempty"`
	RevokedByName string    `json:"revokedByName,omitempty"`
	// State is active, expired, revoked or ended: a deployment since
	// changed the tool's posture or the agent's policy, so it no longer
	// applies to new runs. EndedBy is that deployment when known, Ended
	// why.
	State   string `json:"state"`
	EndedBy int    `json:"endedBy,omitempty"`
	Ended   string `json:"ended,omitempty"`
}

// RuleList is GET /v1/rules.
type RuleList struct {
	Rules      []Rule `json:"rules"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// Approval is an approval as the API shows it.
type Approval struct {
	ID         string `json:"id"`
	RunID      string `json:"runId"`
	Agent      string `json:"agent"`
	EndUserID  string `json:"endUserId"`
	Deployment int    `json:"deployment"`
	StepID     string `json:"stepId"`
	Tool       string `json:"tool"`
	// Input is what the call runs with if approved; after an approval with
	// an edited input it is the edit, and OriginalInput what was asked.
	Input         json.RawMessage `json:"input"`
	OriginalInput json.RawMessage `json:"originalInput,omitempty"`
	Reason        string          `json:"reason"`
	// Status is pending, approved, denied, expired or cancelled.
	Status      string    `json:"status"`
	RequestedAt time.Time `json:"requestedAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// InputDigest binds Input: send it back as approve's or deny's
	// inputDigest to decide only if the input is still the one shown.
	InputDigest string `json:"inputDigest"`
	// SeparatedBy, when set, names the setting that keeps the run's
	// requester from deciding this approval.
	SeparatedBy string `json:"separatedBy,omitempty"`
	// Approvers, for an approval with approvers, is where each requirement
	// stands (its group, min, the votes counted, the members who may still
	// vote, and short when too few may), Progress the same in words ("1 of
	// 2 from finance — waiting on Bo Li, Cy Ng"), Votes the approvals
	// counted so far on the current input.
	Approvers []approvals.Tally `json:"approvers,omitempty"`
	Progress  string            `json:"progress,omitempty"`
	Votes     []approvals.Vote  `json:"votes,omitempty"`
	// NoteToCustomer: a deny note is shown to the customer.
	NoteToCustomer bool `json:"noteToCustomer,omitempty"`
	// DecidedBy is the deciding key's id ("stead" for an expiry),
	// DecidedByName the member it belongs to.
	DecidedBy     string    `json:"decidedBy,omitempty"`
	DecidedByName string    `json:"decidedByName,omitempty"`
	DecidedAt     time.Time `json:"decidedAt,omitzero"`
	Note          string    `json:"note,omitempty"`
}

// ApprovalList is a page of approvals.
type ApprovalList struct {
	Approvals  []Approval `json:"approvals"`
	NextCursor string     `json:"nextCursor,omitempty"`
}
