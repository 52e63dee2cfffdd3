package wire

import (
	"encoding/json"
	"time"
)

// Run is a run as the API shows it.
type Run struct {
	ID        string `json:"id"`
	Agent     string `json:"agent"`
	EndUserID string `json:"endUserId"`
	// Tool is set on a one-call run (an MCP client's tools/call): the tool
	// it calls with Input.
	Tool string `json:"tool,omitempty"`
	// Via says where the run came from when not this API: "mcp:<MCP key
	// id>" for a call through POST /mcp.
	Via string `json:"via,omitempty"`
	// Status is queued, running, awaiting-approval, succeeded, failed or
	// cancelled.
	Status     string `json:"status"`
	Deployment int    `json:"deployment"`
	// Trust, TrustOrigin and Costs are not shown to customer tokens.
	Trust       string          `json:"trust,omitempty"`
	TrustOrigin string          `json:"trustOrigin,omitempty"`
	Costs       *Costs          `json:"costs,omitempty"`
	CreatedAt   time.Time       `json:"createdAt"`
	UpdatedAt   time.Time       `json:"updatedAt"`
	FinishedAt  time.Time       `json:"finishedAt,omitzero"`
	Input       json.RawMessage `json:"input"`
	// Output is set when the run succeeded.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is set when the run failed or was cancelled.
	Error *RunError `json:"error,omitempty"`
	// Approval is set while the run is awaiting approval.
	Approval *RunApproval `json:"approval,omitempty"`
	// Branding is the project's stead.json "branding", shown to customer
	// tokens only (the status page and embed.js present it).
	Branding *Branding `json:"branding,omitempty"`
}

// Branding is how the project presents itself to its customers.
type Branding struct {
	Name        string `json:"name,omitempty"`
	LogoURL     string `json:"logoUrl,omitempty"`
	AccentColor string `json:"accentColor,omitempty"`
}

// Costs is measured usage.
type Costs struct {
	TokensInput  int64   `json:"tokensInput"`
	TokensOutput int64   `json:"tokensOutput"`
	CostUSD      float64 `json:"costUsd"`
}

// RunError says why a run failed: code approval-denied, approval-expired,
// policy-denied, invalid-input, handler-error, timeout, cancelled, ….
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Step    string `json:"step,omitempty"`
	// Stack, File, Line and Column: where a failed handler threw, in the
	// developer's sources (a bundle stead deploy made carries their map);
	// absent when unknown, and never shown to customer tokens.
	Stack  string `json:"stack,omitempty"`
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

// RunApproval is the pending approval a run waits for.
type RunApproval struct {
	ID          string    `json:"id"`
	Tool        string    `json:"tool"`
	Reason      string    `json:"reason"`
	RequestedAt time.Time `json:"requestedAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// Label is the tool's customer-facing label (its "label" in
	// stead.json), shown to customer tokens only; "" when it has none.
	Label string `json:"label,omitempty"`
}

// EventVersion is the version of the event schemas (the Event kinds of
// openapi.json) every Event carries; it changes with any change to them a
// reader could trip on.
const EventVersion = 1

// Event is one line of a run's trace: as JSON pages, as the data of each
// message of the SSE stream, and as stead trace --json prints it.
type Event struct {
	// Version is EventVersion.
	Version int             `json:"version"`
	Seq     int64           `json:"seq"`
	Type    string          `json:"type"`
	At      time.Time       `json:"at"`
	Step    string          `json:"step,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// RunList is a page of runs.
type RunList struct {
	Runs       []Run  `json:"runs"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// EventList is a page of events; pass NextAfter as ?after= for the next.
type EventList struct {
	Events    []Event `json:"events"`
	NextAfter int64   `json:"nextAfter"`
}
