package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Endpoint is a project's webhook endpoint: where its events are delivered,
// signed with its secrets (package notify).
type Endpoint struct {
	// ID is "whe_…".
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	// URL is where deliveries are POSTed: http or https, absolute.
	URL string `json:"url"`
	// Events are the event types it receives; none means every type.
	Events []string `json:"events,omitempty"`
	// Agents are the agents whose events it receives; none means every
	// agent.
	Agents []string `json:"agents,omitempty"`
	// IncludeInput: approval events carry the tool's input (inputs can
	// hold personal data, so only where the endpoint opts in).
	IncludeInput bool `json:"includeInput,omitempty"`
	// Secrets sign deliveries: the current one first; after a rotation
	// the one before, until its Until.
	Secrets []EndpointSecret `json:"secrets"`
	// DisabledAt is when deliveries to it stopped (a 410, or failing since
	// FailingSince for too long), and DisabledReason why; zero while it is
	// enabled.
	DisabledAt     time.Time `json:"disabledAt,omitzero"`
	DisabledReason string    `json:"disabledReason,omitempty"`
	// FailingSince is when the first of the deliveries that have failed
	// since its last success failed; zero while it succeeds.
	FailingSince time.Time `json:"failingSince,omitzero"`
	// Version is 1 for a new endpoint and increments with every write;
	// UpdateEndpoint is conditional on it.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// EndpointSecret is one signing secret ("whsec_…"); Until is when a
// secret replaced by a rotation stops signing (zero for the current one).
type EndpointSecret struct {
	Secret    string    `json:"secret"`
	CreatedAt time.Time `json:"createdAt"`
	Until     time.Time `json:"until,omitzero"`
}

// Signing returns the secrets that sign a delivery at now.
func (e Endpoint) Signing(now time.Time) []string {
	var out []string
	for _, s := range e.Secrets {
		if s.Until.IsZero() || s.Until.After(now) {
			out = append(out, s.Secret)
		}
	}
	return out
}

// Wants reports whether the endpoint gets an event of type typ of agent:
// its filters allow both (none allows all) and it is enabled.
func (e Endpoint) Wants(typ, agent string) bool {
	return !e.Disabled() && (len(e.Events) == 0 || slices.Contains(e.Events, typ)) &&
		(len(e.Agents) == 0 || slices.Contains(e.Agents, agent))
}

// SortEndpoints puts endpoints in list order: oldest first, then by id.
func SortEndpoints(es []Endpoint) {
	slices.SortFunc(es, func(a, b Endpoint) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Disabled reports whether deliveries to the endpoint have stopped.
func (e Endpoint) Disabled() bool { return !e.DisabledAt.IsZero() }

// Validate refuses an endpoint no backend may write.
func (e Endpoint) Validate() error {
	switch {
	case e.ID == "" || e.ProjectID == "":
		return errors.New("endpoint: id and projectId are required")
	case len(e.Secrets) == 0:
		return fmt.Errorf("endpoint %s: a secret is required", e.ID)
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("endpoint %s: url %q must be an absolute http or https URL", e.ID, e.URL)
	}
	return nil
}

// Delivery is one event on its way to one endpoint. Its ID is the
// webhook-id the receiver dedupes by (notify.MessageID): the same for every
// attempt.
type Delivery struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	// Channel is how it goes out: "" for a webhook (EndpointID names the
	// endpoint), or a notify.Channel's name ("email", "slack"; EndpointID
	// then names what it goes to, such as "email:mem_…").
	Channel    string `json:"channel,omitempty"`
	EndpointID string `json:"endpointId"`
	// RunID and Seq name the trace event it reports (none for a ping).
	RunID string `json:"runId,omitempty"`
	Seq   int64  `json:"seq,omitempty"`
	Type  string `json:"type"`
	// Body is the payload as signed and sent.
	Body json.RawMessage `json:"body"`
	// Status is pending until a 2xx (delivered), or until the schedule is
	// exhausted or the endpoint disabled (failed).
	Status DeliveryStatus `json:"status"`
	// Attempts are the tries so far, oldest first (at most MaxAttempts
	// kept: the first and the latest).
	Attempts []Attempt `json:"attempts,omitempty"`
	// Tries counts every try, also those Attempts no longer keeps.
	Tries int `json:"tries"`
	// NextAt is when a pending delivery is next tried; a notifier that
	// takes it pushes NextAt out by its lease first.
	NextAt time.Time `json:"nextAt,omitzero"`
	// Version is 1 when created and increments with every write;
	// UpdateDelivery is conditional on it.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

// The delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliveryDelivered DeliveryStatus = "delivered"
	DeliveryFailed    DeliveryStatus = "failed"
	// DeliverySkipped: a notice (a reminder, an escalation, an expiry
	// warning) not sent because its approval was settled first.
	DeliverySkipped DeliveryStatus = "skipped"
)

// MaxAttempts bounds the attempts a delivery keeps.
const MaxAttempts = 10

// Attempt is one try of a delivery.
type Attempt struct {
	At time.Time `json:"at"`
	// Status is the HTTP status (0 when there was no response).
	Status    int   `json:"status"`
	LatencyMs int64 `json:"latencyMs"`
	// Error says why there was no response (a timeout, a refused
	// destination).
	Error string `json:"error,omitempty"`
	// Response is the start of the response body (at most 1 KiB).
	Response string `json:"response,omitempty"`
}

// Record returns d with a appended, keeping the first attempt and the
// latest ones within MaxAttempts.
func (d Delivery) Record(a Attempt) Delivery {
	d.Tries++
	d.Attempts = append(append([]Attempt(nil), d.Attempts...), a)
	if n := len(d.Attempts); n > MaxAttempts {
		d.Attempts = append(d.Attempts[:1:1], d.Attempts[n-MaxAttempts+1:]...)
	}
	return d
}

// OutboxEntry is a run with notifying events not yet turned into
// deliveries: those with Seq >= FromSeq.
type OutboxEntry struct {
	RunID   string `json:"runId"`
	FromSeq int64  `json:"fromSeq"`
}

// Webhooks keeps a project's endpoints and their deliveries. Store has it.
type Webhooks interface {
	// CreateEndpoint stores a new endpoint at Version 1 (e must be valid);
	// ErrExists if its id is taken.
	CreateEndpoint(ctx context.Context, e Endpoint) error
	// GetEndpoint returns an endpoint of the project; ErrNotFound.
	GetEndpoint(ctx context.Context, projectID, id string) (Endpoint, error)
	// ListEndpoints lists a project's endpoints, oldest first.
	ListEndpoints(ctx context.Context, projectID string) ([]Endpoint, error)
	// UpdateEndpoint stores e conditional on e.Version being the stored
	// version and returns it stored (Version incremented, CreatedAt the
	// stored one, whatever e says); ErrConflict if stale, ErrNotFound if
	// missing.
	UpdateEndpoint(ctx context.Context, e Endpoint) (Endpoint, error)
	// DeleteEndpoint deletes an endpoint and its deliveries' log;
	// ErrNotFound if missing.
	DeleteEndpoint(ctx context.Context, projectID, id string) error

	// PutDeliveries stores each delivery that does not exist yet (by id)
	// and leaves the others as they are: making the deliveries of an
	// outbox entry twice makes them once.
	PutDeliveries(ctx context.Context, ds []Delivery) error
	// GetDelivery returns a delivery of the project; ErrNotFound.
	GetDelivery(ctx context.Context, projectID, id string) (Delivery, error)
	// UpdateDelivery stores d conditional on d.Version being the stored
	// version and returns it stored; ErrConflict if stale.
	UpdateDelivery(ctx context.Context, d Delivery) (Delivery, error)
	// ListDueDeliveries lists pending deliveries of any project whose
	// NextAt is at or before now, soonest first.
	ListDueDeliveries(ctx context.Context, now time.Time, limit int) ([]Delivery, error)
	// ListDeliveries lists an endpoint's deliveries, newest first.
	ListDeliveries(ctx context.Context, projectID, endpointID, cursor string, limit int) (Page[Delivery], error)

	// ListOutbox lists runs whose notifying events have not all been
	// turned into deliveries, oldest mark first. A run enters the outbox in
	// the write that appends an event with Notify set.
	ListOutbox(ctx context.Context, limit int) ([]OutboxEntry, error)
	// AckOutbox records that a run's notifying events up to and including
	// throughSeq have their deliveries: the run leaves the outbox, unless
	// it has notifying events after throughSeq (then its entry starts
	// after throughSeq).
	AckOutbox(ctx context.Context, runID string, throughSeq int64) error
}
