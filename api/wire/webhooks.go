package wire

import (
	"encoding/json"
	"time"
)

// Webhook is a webhook endpoint of the project, as the API shows it: where
// its events are POSTed, signed per the Standard Webhooks spec (package
// notify). Its secret is in the answers to POST /v1/webhooks and POST
// /v1/webhooks/{id}/rotate only.
type Webhook struct {
	// ID is "whe_…".
	ID string `json:"id"`
	// URL is where deliveries are POSTed.
	URL string `json:"url"`
	// Events are the event types it receives; none: every type.
	Events []string `json:"events,omitempty"`
	// Agents are the agents whose events it receives; none: every agent.
	Agents []string `json:"agents,omitempty"`
	// IncludeInput: approval events carry the tool's input.
	IncludeInput bool `json:"includeInput"`
	// State is WebhookEnabled or WebhookDisabled; a disabled endpoint has
	// DisabledAt and DisabledReason (a 410, failing for 5 days, or by
	// hand).
	State          string    `json:"state"`
	DisabledAt     time.Time `json:"disabledAt,omitzero"`
	DisabledReason string    `json:"disabledReason,omitempty"`
	// FailingSince is when the first of the deliveries that have failed
	// since its last success failed; the endpoint is disabled once that is
	// notify.FailingLimit ago.
	FailingSince time.Time `json:"failingSince,omitzero"`
	// PreviousSecretUntil is when the secret a rotation replaced stops
	// signing deliveries beside the current one; absent when none does.
	PreviousSecretUntil time.Time `json:"previousSecretUntil,omitzero"`
	CreatedAt           time.Time `json:"createdAt"`
	UpdatedAt           time.Time `json:"updatedAt"`
	// Secret ("whsec_…") signs its deliveries: shown when the endpoint is
	// created or its secret rotated, never again.
	Secret string `json:"secret,omitempty"`
}

// WebhookList is GET /v1/webhooks.
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks"`
}

// WebhookDelivery is one event on its way to an endpoint, with its
// attempts.
type WebhookDelivery struct {
	// ID is the webhook-id header of every attempt: the receiver's dedupe
	// key, the same for every retry and replay.
	ID        string `json:"id"`
	WebhookID string `json:"webhookId"`
	Type      string `json:"type"`
	// RunID and Seq name the trace event it reports (none for a ping).
	RunID string `json:"runId,omitempty"`
	Seq   int64  `json:"seq,omitempty"`
	// Status is pending, delivered or failed.
	Status string `json:"status"`
	// Tries counts every attempt; Attempts keeps the first and the latest.
	Tries    int              `json:"tries"`
	NextAt   time.Time        `json:"nextAt,omitzero"`
	Attempts []WebhookAttempt `json:"attempts"`
	// Body is the payload as signed and sent, in GET
	// /v1/webhooks/{id}/deliveries/{deliveryId} only.
	Body      json.RawMessage `json:"body,omitempty"`
	CreatedAt time.Time       `json:"createdAt"`
	UpdatedAt time.Time       `json:"updatedAt"`
}

// WebhookAttempt is one try of a delivery.
type WebhookAttempt struct {
	At time.Time `json:"at"`
	// Status is the receiver's HTTP status; 0 when there was no response
	// (Error says why).
	Status    int    `json:"status"`
	LatencyMs int64  `json:"latencyMs"`
	Error     string `json:"error,omitempty"`
	// Response is the start of the response body (at most 1 KiB).
	Response string `json:"response,omitempty"`
}

// WebhookDeliveryList is GET /v1/webhooks/{id}/deliveries.
type WebhookDeliveryList struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

// WebhookRetry is the answer to POST /v1/webhooks/{id}/retry.
type WebhookRetry struct {
	// Retried is how many deliveries are due again now.
	Retried int `json:"retried"`
}
