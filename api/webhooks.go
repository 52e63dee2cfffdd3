package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"stead/api/wire"
	"stead/notify"
	"stead/store"
)

// The states of a Webhook.
const (
	WebhookEnabled  = "enabled"
	WebhookDisabled = "disabled"
)

// Limits of the webhook routes.
const (
	// MaxWebhookFilter bounds an endpoint's events and agents lists.
	MaxWebhookFilter = 20
	// MaxWebhookURL bounds an endpoint's URL, in characters.
	MaxWebhookURL = 2000
	// MaxWebhookRetry bounds the deliveries one retry makes due again.
	MaxWebhookRetry = 1000
)

func webhookOf(e store.Endpoint, now time.Time) wire.Webhook {
	out := wire.Webhook{
		ID: e.ID, URL: e.URL, Events: e.Events, Agents: e.Agents, IncludeInput: e.IncludeInput,
		State: WebhookEnabled, DisabledAt: e.DisabledAt, DisabledReason: e.DisabledReason,
		FailingSince: e.FailingSince, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
	if e.Disabled() {
		out.State = WebhookDisabled
	}
	for _, s := range e.Secrets {
		if s.Until.After(now) && s.Until.After(out.PreviousSecretUntil) {
			out.PreviousSecretUntil = s.Until
		}
	}
	return out
}

func deliveryOf(d store.Delivery, body bool) wire.WebhookDelivery {
	out := wire.WebhookDelivery{
		ID: d.ID, WebhookID: d.EndpointID, Type: d.Type, RunID: d.RunID, Seq: d.Seq,
		Status: string(d.Status), Tries: d.Tries, NextAt: d.NextAt,
		Attempts: make([]wire.WebhookAttempt, len(d.Attempts)), CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
	}
	for i, a := range d.Attempts {
		out.Attempts[i] = wire.WebhookAttempt{At: a.At, Status: a.Status, LatencyMs: a.LatencyMs, Error: a.Error, Response: a.Response}
	}
	if body {
		out.Body = d.Body
	}
	return out
}

// webhookRequest is the body of POST /v1/webhooks and PATCH
// /v1/webhooks/{id}: a field that is absent is left as it is.
type webhookRequest struct {
	URL          *string   `json:"url"`
	Events       *[]string `json:"events"`
	Agents       *[]string `json:"agents"`
	IncludeInput *bool     `json:"includeInput"`
	// Enabled, on PATCH only: true enables the endpoint again (and starts
	// its failing mark over), false stops its deliveries by hand.
	Enabled *bool `json:"enabled"`
}

func (req webhookRequest) empty() bool {
	return req.URL == nil && req.Events == nil && req.Agents == nil && req.IncludeInput == nil && req.Enabled == nil
}

// check names every field of the request that cannot be; create needs a
// URL and takes no enabled.
func (req webhookRequest) check(create bool) []wire.FieldProblem {
	var problems []wire.FieldProblem
	switch {
	case req.URL != nil:
		if p := webhookURLProblem(*req.URL); p != "" {
			problems = append(problems, wire.FieldProblem{Field: "url", Message: p})
		}
	case create:
		problems = append(problems, wire.FieldProblem{Field: "url", Message: "is required: the absolute http or https URL deliveries are POSTed to, such as https://hooks.example.com/stead"})
	}
	if req.Events != nil {
		problems = append(problems, filterProblems("events", *req.Events, "event types", func(t string) string {
			if err := notify.CheckTypes([]string{t}); err != nil {
				return err.Error()
			}
			return ""
		})...)
	}
	if req.Agents != nil {
		problems = append(problems, filterProblems("agents", *req.Agents, "agents", func(a string) string {
			return textProblem(a, true, 64)
		})...)
	}
	if create && req.Enabled != nil {
		problems = append(problems, wire.FieldProblem{Field: "enabled", Message: "a new endpoint is enabled; enabled is for one that was disabled (stead webhooks enable ID, or PATCH /v1/webhooks/{id})"})
	}
	return problems
}

// webhookURLProblem says why raw cannot be an endpoint's URL; "" if it
// can. Its host is not resolved here: where deliveries may go is the
// egress policy's, checked on the address dialled for every delivery.
func webhookURLProblem(raw string) string {
	const example = "such as https://hooks.example.com/stead"
	if p := textProblem(raw, true, MaxWebhookURL); p != "" {
		return p
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Sprintf("is not a URL (%s); write an absolute http or https URL %s", strings.TrimPrefix(err.Error(), "parse "), example)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.Opaque != "":
		return fmt.Sprintf("must be an absolute http or https URL %s (got %q)", example, raw)
	case u.Hostname() == "":
		return fmt.Sprintf("names no host; write an absolute http or https URL %s (got %q)", example, raw)
	case u.User != nil:
		return "must not carry a user name or password (the URL is shown in lists); the receiver authenticates deliveries by their webhook-signature"
	}
	return ""
}

// filterProblems checks an events or agents list: at most
// MaxWebhookFilter items, each good by bad ("" when it is).
func filterProblems(field string, items []string, what string, bad func(string) string) []wire.FieldProblem {
	if len(items) > MaxWebhookFilter {
		return []wire.FieldProblem{{Field: field, Message: fmt.Sprintf("may name at most %d %s (got %d); leave it out to get every one", MaxWebhookFilter, what, len(items))}}
	}
	var problems []wire.FieldProblem
	for i, it := range items {
		if p := bad(it); p != "" {
			problems = append(problems, wire.FieldProblem{Field: fmt.Sprintf("%s[%d]", field, i), Message: p})
		}
	}
	return problems
}

// apply sets the fields the request has on e (checked already).
func (req webhookRequest) apply(e *store.Endpoint) {
	if req.URL != nil {
		e.URL = *req.URL
	}
	if req.Events != nil {
		e.Events = unique(*req.Events)
	}
	if req.Agents != nil {
		e.Agents = unique(*req.Agents)
	}
	if req.IncludeInput != nil {
		e.IncludeInput = *req.IncludeInput
	}
}

// unique is items without repeats, in order; nil for none.
func unique(items []string) []string {
	var out []string
	for _, it := range items {
		if !slices.Contains(out, it) {
			out = append(out, it)
		}
	}
	return out
}

// forget tells the notifier that the project's endpoints changed, so that
// events written from now on reach them at once.
func (s *Server) forget(projectID string) {
	if s.cfg.Notifications != nil {
		s.cfg.Notifications.Forget(projectID)
	}
}

// createWebhook: POST /v1/webhooks {url, events?, agents?, includeInput?}
// → 201 with the endpoint and its secret, shown this once.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req webhookRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	if problems := req.check(true); len(problems) > 0 {
		return invalid(problems...)
	}
	var raw [10]byte
	if _, err := io.ReadFull(lockedEntropy{s}, raw[:]); err != nil {
		return fmt.Errorf("make webhook id: %w", err)
	}
	secret, err := notify.NewSecret(lockedEntropy{s})
	if err != nil {
		return err
	}
	now := s.now()
	e := store.Endpoint{
		ID: "whe_" + b32.EncodeToString(raw[:]), ProjectID: c.actor.ProjectID,
		Secrets:   []store.EndpointSecret{{Secret: secret, CreatedAt: now}},
		CreatedAt: now, UpdatedAt: now,
	}
	req.apply(&e)
	if err := s.store.CreateEndpoint(r.Context(), e); err != nil {
		return err
	}
	s.forget(c.actor.ProjectID)
	out := webhookOf(e, now)
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// listWebhooks: GET /v1/webhooks → the project's endpoints, oldest first,
// without secrets.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, c *caller) error {
	es, err := s.store.ListEndpoints(r.Context(), c.actor.ProjectID)
	if err != nil {
		return err
	}
	now := s.now()
	out := wire.WebhookList{Webhooks: make([]wire.Webhook, 0, len(es))}
	for _, e := range es {
		out.Webhooks = append(out.Webhooks, webhookOf(e, now))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getWebhook: GET /v1/webhooks/{id} → the endpoint and its state, without
// its secret.
func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request, c *caller) error {
	e, err := s.webhook(r, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, webhookOf(e, s.now()))
	return nil
}

// updateWebhook: PATCH /v1/webhooks/{id} {url?, events?, agents?,
// includeInput?, enabled?} → the endpoint. enabled: true enables it again
// and clears its failing mark; false disables it by hand.
func (s *Server) updateWebhook(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req webhookRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	if problems := req.check(false); len(problems) > 0 {
		return invalid(problems...)
	}
	e, err := s.webhook(r, c)
	if err != nil {
		return err
	}
	now := s.now()
	if req.empty() {
		writeJSON(w, http.StatusOK, webhookOf(e, now))
		return nil
	}
	e, err = s.changeWebhook(r.Context(), c, e.ID, func(e *store.Endpoint) {
		req.apply(e)
		switch {
		case req.Enabled == nil:
		case *req.Enabled:
			e.DisabledAt, e.DisabledReason, e.FailingSince = time.Time{}, "", time.Time{}
		case !e.Disabled():
			e.DisabledAt, e.DisabledReason = now, "disabled by "+c.who()
		}
		e.UpdatedAt = now
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, webhookOf(e, now))
	return nil
}

// who names the caller as a disable reason does: "Ana Diaz (key_…)".
func (c *caller) who() string {
	if c.key.MemberName != "" {
		return c.key.MemberName + " (" + c.actor.ID + ")"
	}
	return c.actor.ID
}

// deleteWebhook: DELETE /v1/webhooks/{id} → the endpoint as it was; its
// delivery log goes with it.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request, c *caller) error {
	e, err := s.webhook(r, c)
	if err != nil {
		return err
	}
	if err := s.store.DeleteEndpoint(r.Context(), c.actor.ProjectID, e.ID); err != nil {
		return webhookError(err, e.ID)
	}
	s.forget(c.actor.ProjectID)
	writeJSON(w, http.StatusOK, webhookOf(e, s.now()))
	return nil
}

// rotateWebhook: POST /v1/webhooks/{id}/rotate → the endpoint with its
// new secret, shown this once. The secret it replaces keeps signing beside
// it for notify.RotationOverlap; older ones past their time are dropped.
func (s *Server) rotateWebhook(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req struct{}
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	e, err := s.webhook(r, c)
	if err != nil {
		return err
	}
	secret, err := notify.NewSecret(lockedEntropy{s})
	if err != nil {
		return err
	}
	now := s.now()
	e, err = s.changeWebhook(r.Context(), c, e.ID, func(e *store.Endpoint) {
		kept := []store.EndpointSecret{{Secret: secret, CreatedAt: now}}
		for _, old := range e.Secrets {
			switch {
			case old.Until.IsZero():
				old.Until = now.Add(notify.RotationOverlap)
				kept = append(kept, old)
			case old.Until.After(now):
				kept = append(kept, old)
			}
		}
		e.Secrets, e.UpdatedAt = kept, now
	})
	if err != nil {
		return err
	}
	out := webhookOf(e, now)
	out.Secret = secret
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pingWebhook: POST /v1/webhooks/{id}/ping → the delivery of a
// webhook.ping sent now, once, with its attempt (503 without a notifier).
// A disabled endpoint is pinged too: that is how to check it before
// enabling it again.
func (s *Server) pingWebhook(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req struct{}
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	if s.cfg.Notifications == nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "this server runs no notifier, so it sends no webhooks and cannot ping; endpoints can still be managed here"}
	}
	e, err := s.webhook(r, c)
	if err != nil {
		return err
	}
	var raw [16]byte
	if _, err := io.ReadFull(lockedEntropy{s}, raw[:]); err != nil {
		return fmt.Errorf("make ping id: %w", err)
	}
	d, err := s.cfg.Notifications.Ping(r.Context(), e, "msg_"+b32.EncodeToString(raw[:]))
	if err != nil {
		return fmt.Errorf("ping webhook %s: %w", e.ID, err)
	}
	writeJSON(w, http.StatusOK, deliveryOf(d, false))
	return nil
}

// listWebhookDeliveries: GET /v1/webhooks/{id}/deliveries?cursor&limit →
// the endpoint's delivery log, newest first, without bodies.
func (s *Server) listWebhookDeliveries(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := newQuery(r)
	limit, cursor := q.limit(), q.str("cursor")
	if err := q.err(); err != nil {
		return err
	}
	e, err := s.webhook(r, c)
	if err != nil {
		return err
	}
	page, err := s.store.ListDeliveries(r.Context(), c.actor.ProjectID, e.ID, cursor, limit)
	if err != nil {
		return err
	}
	out := wire.WebhookDeliveryList{Deliveries: make([]wire.WebhookDelivery, 0, len(page.Items)), NextCursor: page.NextCursor}
	for _, d := range page.Items {
		out.Deliveries = append(out.Deliveries, deliveryOf(d, false))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getWebhookDelivery: GET /v1/webhooks/{id}/deliveries/{deliveryId} → the
// delivery with its body.
func (s *Server) getWebhookDelivery(w http.ResponseWriter, r *http.Request, c *caller) error {
	e, err := s.webhook(r, c)
	if err != nil {
		return err
	}
	d, err := s.delivery(r.Context(), c, e.ID, r.PathValue("deliveryId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, deliveryOf(d, true))
	return nil
}

// retryRequest is the body of POST /v1/webhooks/{id}/retry: one delivery,
// or those made from since to until (RFC 3339; until defaults to now).
type retryRequest struct {
	DeliveryID *string `json:"deliveryId"`
	Since      *string `json:"since"`
	Until      *string `json:"until"`
}

// window reads since and until; ok is false for one delivery.
func (req retryRequest) window(now time.Time) (since, until time.Time, ok bool, problems []wire.FieldProblem) {
	parse := func(field, v string) time.Time {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			problems = append(problems, wire.FieldProblem{Field: field, Message: fmt.Sprintf("must be an RFC 3339 time such as 2026-11-29T12:00:00Z (got %q)", v)})
		}
		return t
	}
	switch {
	case req.DeliveryID != nil && (req.Since != nil || req.Until != nil):
		problems = append(problems, wire.FieldProblem{Field: "deliveryId", Message: "names one delivery: send deliveryId, or since (and until) for a time range, not both"})
	case req.DeliveryID != nil:
		if p := textProblem(*req.DeliveryID, true, 100); p != "" {
			problems = append(problems, wire.FieldProblem{Field: "deliveryId", Message: p})
		}
	case req.Since == nil && req.Until != nil:
		problems = append(problems, wire.FieldProblem{Field: "since", Message: "is required with until: the range is from since to until"})
	case req.Since == nil:
		problems = append(problems, wire.FieldProblem{Field: "deliveryId", Message: "is required, or since (and until) for a time range: say what to retry"})
	default:
		since, until, ok = parse("since", *req.Since), now, true
		if req.Until != nil {
			until = parse("until", *req.Until)
		}
		if len(problems) == 0 && until.Before(since) {
			problems = append(problems, wire.FieldProblem{Field: "until", Message: fmt.Sprintf("must not be before since (%s)", since.UTC().Format(time.RFC3339))})
		}
	}
	return since, until, ok, problems
}

// retryWebhook: POST /v1/webhooks/{id}/retry {deliveryId} or {since,
// until?} → {retried}: each delivery is pending and due now, under its
// webhook-id (the receiver dedupes by it), and the notifier is kicked.
func (s *Server) retryWebhook(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req retryRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	now := s.now()
	since, until, window, problems := req.window(now)
	if len(problems) > 0 {
		return invalid(problems...)
	}
	e, err := s.webhook(r, c)
	if err != nil {
		return err
	}
	if e.Disabled() {
		return conflict("webhook %s is disabled (%s, %s); enable it first (PATCH /v1/webhooks/%s {\"enabled\": true}, or stead webhooks enable %s), then retry",
			e.ID, e.DisabledReason, e.DisabledAt.UTC().Format(time.RFC3339), e.ID, e.ID)
	}
	var ds []store.Delivery
	if window {
		if ds, err = s.deliveriesBetween(r.Context(), c, e.ID, since, until); err != nil {
			return err
		}
	} else {
		d, err := s.delivery(r.Context(), c, e.ID, *req.DeliveryID)
		if err != nil {
			return err
		}
		ds = []store.Delivery{d}
	}
	retried := 0
	for _, d := range ds {
		if window && notify.InFlight(d, now) {
			continue // being sent right now; a range retries the rest
		}
		if err := s.retryDelivery(r.Context(), d, now); err != nil {
			return err
		}
		retried++
	}
	if retried > 0 && s.cfg.Notifications != nil {
		s.cfg.Notifications.Kick()
	}
	writeJSON(w, http.StatusOK, wire.WebhookRetry{Retried: retried})
	return nil
}

// deliveriesBetween lists an endpoint's deliveries made from since to
// until, both included; more than MaxWebhookRetry is refused.
func (s *Server) deliveriesBetween(ctx context.Context, c *caller, id string, since, until time.Time) ([]store.Delivery, error) {
	var out []store.Delivery
	cursor := ""
	for {
		page, err := s.store.ListDeliveries(ctx, c.actor.ProjectID, id, cursor, store.MaxLimit)
		if err != nil {
			return nil, err
		}
		for _, d := range page.Items { // newest first
			switch {
			case d.CreatedAt.After(until):
				continue
			case d.CreatedAt.Before(since):
				return out, nil
			}
			if out = append(out, d); len(out) > MaxWebhookRetry {
				return nil, invalidField("since", "the range holds more than %d deliveries, the most one retry takes; narrow since and until", MaxWebhookRetry)
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// retryDelivery makes d pending and due at now, over whatever a notifier
// wrote meanwhile.
func (s *Server) retryDelivery(ctx context.Context, d store.Delivery, now time.Time) error {
	for range 5 {
		if notify.InFlight(d, now) {
			// Being sent right now: a second send beside it would race
			// its result. It is tried again anyway if that send fails.
			return conflict("delivery %s is being tried right now; see its result in a moment (stead webhooks deliveries)", d.ID)
		}
		d.Status, d.NextAt, d.UpdatedAt = store.DeliveryPending, now, now
		_, err := s.store.UpdateDelivery(ctx, d)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		if d, err = s.store.GetDelivery(ctx, d.ProjectID, d.ID); err != nil {
			return err
		}
	}
	return conflict("delivery %s kept changing while it was retried (a notifier is trying it); retry", d.ID)
}

// webhook reads the endpoint the path names.
func (s *Server) webhook(r *http.Request, c *caller) (store.Endpoint, error) {
	id := r.PathValue("id")
	e, err := s.store.GetEndpoint(r.Context(), c.actor.ProjectID, id)
	return e, webhookError(err, id)
}

// delivery reads a delivery of endpoint id.
func (s *Server) delivery(ctx context.Context, c *caller, id, deliveryID string) (store.Delivery, error) {
	d, err := s.store.GetDelivery(ctx, c.actor.ProjectID, deliveryID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.EndpointID != id) {
		return store.Delivery{}, notFound("webhook %s has no delivery %s (list them with stead webhooks deliveries %s, or GET /v1/webhooks/%s/deliveries)", id, deliveryID, id, id)
	}
	return d, err
}

// changeWebhook applies change to endpoint id as stored and writes it,
// again on what is stored when a delivery's health update came between.
func (s *Server) changeWebhook(ctx context.Context, c *caller, id string, change func(*store.Endpoint)) (store.Endpoint, error) {
	for range 5 {
		e, err := s.store.GetEndpoint(ctx, c.actor.ProjectID, id)
		if err != nil {
			return e, webhookError(err, id)
		}
		change(&e)
		out, err := s.store.UpdateEndpoint(ctx, e)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return out, webhookError(err, id)
		}
		s.forget(c.actor.ProjectID)
		return out, nil
	}
	return store.Endpoint{}, conflict("webhook %s kept changing while it was written (deliveries update its health); retry", id)
}

// webhookError translates the store's refusals for endpoint id.
func webhookError(err error, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound("webhook %s not found (list them with stead webhooks list, or GET /v1/webhooks)", id)
	}
	return err
}
