package notify

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"stead/approvals"
	"stead/store"
)

// Store is what the Notifier needs of the store.
type Store interface {
	ListOutbox(ctx context.Context, limit int) ([]store.OutboxEntry, error)
	AckOutbox(ctx context.Context, runID string, throughSeq int64) error
	GetRun(ctx context.Context, id string) (store.Run, error)
	ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error)
	GetApproval(ctx context.Context, id string) (approvals.Approval, error)
	ListEndpoints(ctx context.Context, projectID string) ([]store.Endpoint, error)
	GetEndpoint(ctx context.Context, projectID, id string) (store.Endpoint, error)
	UpdateEndpoint(ctx context.Context, e store.Endpoint) (store.Endpoint, error)
	PutDeliveries(ctx context.Context, ds []store.Delivery) error
	ListDueDeliveries(ctx context.Context, now time.Time, limit int) ([]store.Delivery, error)
	UpdateDelivery(ctx context.Context, d store.Delivery) (store.Delivery, error)
	GetDelivery(ctx context.Context, projectID, id string) (store.Delivery, error)
}

// Config configures a Notifier.
type Config struct {
	Store Store
	// Client sends deliveries; its transport must dial through the egress
	// policy (egress.Policy.Client). Its timeout is Timeout.
	Client *http.Client
	Now    func() time.Time
	// PublicURL is where people reach Stead ("https://stead.example.com"):
	// the base of console links.
	PublicURL string
	// Interval is how often the Notifier looks without being kicked
	// (default 1 s).
	Interval time.Duration
	Log      *slog.Logger
	// Channels notify beside webhooks (email, Slack).
	Channels []Channel
}

// A Channel is a way of telling people beside webhooks: email, Slack. The
// Notifier fans events out to it as to endpoints, keeps its deliveries in
// the same store with the same retries, and hands it each try.
type Channel interface {
	// Name is the Delivery.Channel of its deliveries.
	Name() string
	// Deliveries are what one event of run sends on this channel (none
	// when it sends nothing), each with its EndpointID naming the
	// recipient and Body set; the Notifier fills in the id (stable across
	// fan-outs: from the EndpointID, the event and the run), Channel,
	// ProjectID, RunID, Seq, Type, Status and times. data is what webhooks
	// get, with the input. ev may be a notice (approval.reminder,
	// approval.expiring, approval.escalated — data.EscalatedTo names the
	// group an escalation tells), fanned out with the request and sent at
	// ev.At unless the approval is settled by then.
	Deliveries(ctx context.Context, run store.Run, ev store.Event, data Data) ([]store.Delivery, error)
	// Send tries one delivery once. A Status of 2xx is delivered; any
	// other is tried again on the Schedule, unless final says the failure
	// will not change.
	Send(ctx context.Context, d store.Delivery) (a store.Attempt, final bool)
}

// Notifier turns outbox entries into deliveries and delivers them. Any
// number may run at once, in one process or many: fan-out is idempotent
// and a delivery is taken with a conditional write before it is sent.
type Notifier struct {
	cfg  Config
	kick chan struct{}
	// busy serializes this Notifier's passes.
	busy sync.Mutex

	mu sync.Mutex
	// projects caches, per project, whether it has endpoints and when
	// that was read.
	projects map[string]projectState
}

type projectState struct {
	notifies bool
	at       time.Time
}

// notifiesTTL is how long Notifies trusts what it read.
const notifiesTTL = 2 * time.Second

// Notifies reports whether a project's events notify anyone: always with
// a channel configured (its recipients are the project's members, read at
// fan-out), else when the project has webhook endpoints, from a cache at
// most notifiesTTL old (Forget drops a project's); so an endpoint created
// in another process gets events written from then on within notifiesTTL.
// A store error answers true: a notification is never lost to one.
func (n *Notifier) Notifies(ctx context.Context, projectID string) bool {
	if len(n.cfg.Channels) > 0 {
		return true
	}
	now := time.Now()
	n.mu.Lock()
	st, ok := n.projects[projectID]
	n.mu.Unlock()
	if ok && now.Sub(st.at) < notifiesTTL {
		return st.notifies
	}
	eps, err := n.cfg.Store.ListEndpoints(ctx, projectID)
	if err != nil {
		return true
	}
	st = projectState{notifies: len(eps) > 0, at: now}
	n.mu.Lock()
	n.projects[projectID] = st
	n.mu.Unlock()
	return st.notifies
}

// Forget drops what Notifies knows of a project: call it when the
// project's endpoints change in this process.
func (n *Notifier) Forget(projectID string) {
	n.mu.Lock()
	delete(n.projects, projectID)
	n.mu.Unlock()
}

// New makes a Notifier.
func New(cfg Config) *Notifier {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	// A delivery follows no redirect: Go would turn the POST into a GET
	// without the body (a 301 would read as delivered) or carry the signed
	// body elsewhere (a 307). A 3xx is a failed attempt naming where it
	// pointed; register that URL instead.
	c := *cfg.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.Client = &c
	return &Notifier{cfg: cfg, kick: make(chan struct{}, 1), projects: map[string]projectState{}}
}

// Kick asks for a pass now: the engine calls it after a write that
// notifies, so that deliveries go out without waiting for the interval.
func (n *Notifier) Kick() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Run makes passes until ctx ends: on every Kick and every Interval.
func (n *Notifier) Run(ctx context.Context) {
	t := time.NewTicker(n.cfg.Interval)
	defer t.Stop()
	for {
		if err := n.Pass(ctx); err != nil && ctx.Err() == nil {
			n.cfg.Log.Warn("notifier pass", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		case <-t.C:
		}
	}
}

// batch bounds what one pass reads of each list.
const batch = 100

// lease is how long a taken delivery is someone's: past it, another
// notifier tries it again.
const lease = Timeout + 15*time.Second

// InFlight reports whether a notifier has taken d and may be sending it
// now (until its lease runs out): a retry must not send it beside that.
func InFlight(d store.Delivery, now time.Time) bool {
	return d.Status == store.DeliveryPending && d.NextAt.After(now) && d.NextAt.Sub(d.UpdatedAt) == lease
}

// Pass fans out what is in the outbox and makes the tries that are due.
func (n *Notifier) Pass(ctx context.Context) error {
	n.busy.Lock()
	defer n.busy.Unlock()
	return errors.Join(n.fanOut(ctx), n.deliverDue(ctx))
}

// fanOut turns each outbox entry's events into deliveries, then acks it.
func (n *Notifier) fanOut(ctx context.Context) error {
	entries, err := n.cfg.Store.ListOutbox(ctx, batch)
	if err != nil {
		return fmt.Errorf("list outbox: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if err := n.fanOutRun(ctx, e); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", e.RunID, err))
		}
	}
	return errors.Join(errs...)
}

func (n *Notifier) fanOutRun(ctx context.Context, e store.OutboxEntry) error {
	run, err := n.cfg.Store.GetRun(ctx, e.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return n.cfg.Store.AckOutbox(ctx, e.RunID, 1<<62) // gone with its events
	}
	if err != nil {
		return err
	}
	eps, err := n.cfg.Store.ListEndpoints(ctx, run.ProjectID)
	if err != nil {
		return err
	}
	through := e.FromSeq - 1
	for {
		events, err := n.cfg.Store.ListEvents(ctx, run.ID, through, batch)
		if err != nil {
			return err
		}
		var ds []store.Delivery
		for _, ev := range events {
			if !Notifies(ev.Type) {
				continue
			}
			evs, err := n.withNotices(ctx, ev)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				more, err := n.deliveries(ctx, eps, run, ev)
				if err != nil {
					return err
				}
				ds = append(ds, more...)
			}
		}
		if len(ds) > 0 {
			if err := n.cfg.Store.PutDeliveries(ctx, ds); err != nil {
				return err
			}
		}
		if len(events) > 0 {
			through = events[len(events)-1].Seq
		}
		if len(events) < batch {
			break
		}
	}
	if err := n.cfg.Store.AckOutbox(ctx, run.ID, through); err != nil {
		return err
	}
	n.Kick() // deliver them now
	return nil
}

// scheduled is a notice as an event: the approval.requested it belongs to,
// retyped and timed; its deliveries are due at its time. Index tells the
// approval's notices apart (two reminders).
type scheduled struct {
	store.Event
	index int // -1 for the trace event itself
	group string
}

// withNotices is ev and, for an approval.requested, the approval's notices.
func (n *Notifier) withNotices(ctx context.Context, ev store.Event) ([]scheduled, error) {
	out := []scheduled{{Event: ev, index: -1}}
	if ev.Type != "approval.requested" {
		return out, nil
	}
	a, err := n.approvalOf(ctx, ev)
	if err != nil {
		return nil, err
	}
	for i, nt := range a.Notices {
		e := ev
		e.Type, e.At = nt.Kind.EventType(), nt.At
		out = append(out, scheduled{Event: e, index: i, group: nt.Group})
	}
	return out, nil
}

// deliveries are the deliveries of one event (or notice) to every endpoint
// that wants it and on every channel, due now or at the notice's time.
func (n *Notifier) deliveries(ctx context.Context, eps []store.Endpoint, run store.Run, ev scheduled) ([]store.Delivery, error) {
	now := n.cfg.Now()
	due := now
	if ev.index >= 0 {
		due = ev.At
	}
	id := func(endpointID string) string {
		if ev.index < 0 {
			return MessageID(endpointID, run.ID, ev.Seq)
		}
		return MessageID(endpointID+"/"+ev.Type+"/"+strconv.Itoa(ev.index), run.ID, ev.Seq)
	}
	var out []store.Delivery
	for _, ep := range eps {
		if !ep.Wants(ev.Type, run.Agent) {
			continue
		}
		data, err := n.data(ctx, ep, run, ev.Event)
		if err != nil {
			return nil, err
		}
		data.EscalatedTo = ev.group
		body, err := json.Marshal(Payload{Version: PayloadVersion, Type: ev.Type, Timestamp: ev.At.UTC(), Data: data})
		if err != nil {
			return nil, err
		}
		out = append(out, store.Delivery{
			ID: id(ep.ID), ProjectID: run.ProjectID, EndpointID: ep.ID, RunID: run.ID, Seq: ev.Seq, Type: ev.Type, Body: body,
			Status: store.DeliveryPending, NextAt: due, Version: 1, CreatedAt: now, UpdatedAt: now,
		})
	}
	if len(n.cfg.Channels) == 0 {
		return out, nil
	}
	data, err := n.data(ctx, store.Endpoint{IncludeInput: true}, run, ev.Event)
	if err != nil {
		return nil, err
	}
	data.EscalatedTo = ev.group
	for _, c := range n.cfg.Channels {
		ds, err := c.Deliveries(ctx, run, ev.Event, data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name(), err)
		}
		for _, d := range ds {
			d.ID, d.Channel, d.ProjectID, d.RunID, d.Seq, d.Type = id(d.EndpointID), c.Name(), run.ProjectID, run.ID, ev.Seq, ev.Type
			d.Status, d.NextAt, d.Version, d.CreatedAt, d.UpdatedAt = store.DeliveryPending, due, 1, now, now
			out = append(out, d)
		}
	}
	return out, nil
}

// Payload is the body of every delivery.
type Payload struct {
	// Version is the payload's shape, PayloadVersion; a change a receiver
	// could trip on comes with a new version.
	Version   int       `json:"version"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// PayloadVersion is the version of Payload's shape, in every payload; the
// HTTP API's OpenAPI document (api/openapi.json, "webhooks") describes it.
const PayloadVersion = 1

// Data is what an event says: ids, the agent, the tool, the reason, the
// deadline, who decided, and a console link; the tool's input only for
// an endpoint that includes it.
type Data struct {
	RunID      string `json:"runId,omitempty"`
	Agent      string `json:"agent,omitempty"`
	EndUserID  string `json:"endUserId,omitempty"`
	RunStatus  string `json:"runStatus,omitempty"`
	ApprovalID string `json:"approvalId,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// ExpiresAt is the approval's deadline.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Status is the approval's.
	Status string `json:"status,omitempty"`
	// Progress is a quorum's, in words.
	Progress string `json:"progress,omitempty"`
	// DecidedBy is the deciding key, DecidedByName its member.
	DecidedBy     string `json:"decidedBy,omitempty"`
	DecidedByName string `json:"decidedByName,omitempty"`
	Note          string `json:"note,omitempty"`
	// Error is a failed or cancelled run's.
	Error *store.RunError `json:"error,omitempty"`
	// Input is the call's input, for an endpoint with includeInput.
	Input json.RawMessage `json:"input,omitempty"`
	// WebhookID and WebhookURL name the endpoint a webhook.disabled is
	// about.
	WebhookID  string `json:"webhookId,omitempty"`
	WebhookURL string `json:"webhookUrl,omitempty"`
	// EscalatedTo is the group an approval.escalated tells.
	EscalatedTo string `json:"escalatedTo,omitempty"`
	// ConsoleURL shows the approval or the run.
	ConsoleURL string `json:"consoleUrl,omitempty"`
	Message    string `json:"message,omitempty"`
}

func (n *Notifier) data(ctx context.Context, ep store.Endpoint, run store.Run, ev store.Event) (Data, error) {
	d := Data{RunID: run.ID, Agent: run.Agent, EndUserID: run.EndUserID, RunStatus: string(run.Status)}
	base := strings.TrimSuffix(n.cfg.PublicURL, "/") + "/console/#/"
	if !strings.HasPrefix(ev.Type, "approval.") {
		d.ConsoleURL = base + "runs/" + run.ID
		if run.Status.Terminal() {
			d.Error = run.Error
		}
		return d, nil
	}
	a, err := n.approvalOf(ctx, ev)
	if err != nil {
		return d, err
	}
	d.ApprovalID, d.Tool, d.Reason, d.ExpiresAt, d.Status = a.ID, a.Tool, a.Reason, a.ExpiresAt, string(a.Status)
	d.DecidedBy, d.DecidedByName, d.Note = a.DecidedBy, a.DecidedByName, a.Note
	if a.HasQuorum() {
		d.Progress = a.ProgressText()
	}
	if ep.IncludeInput {
		d.Input = a.Input
	}
	d.ConsoleURL = base + "approvals/" + a.ID
	return d, nil
}

// Ping sends ep a webhook.ping now, once, and returns the delivery with
// its attempt; it stays in the endpoint's log like any delivery (and is
// not tried again: a ping is a check, not an event).
func (n *Notifier) Ping(ctx context.Context, ep store.Endpoint, id string) (store.Delivery, error) {
	now := n.cfg.Now()
	body, err := json.Marshal(Payload{Version: PayloadVersion, Type: Ping, Timestamp: now.UTC(), Data: Data{Message: "ping from Stead: this endpoint receives its project's events"}})
	if err != nil {
		return store.Delivery{}, err
	}
	d := store.Delivery{
		ID: id, ProjectID: ep.ProjectID, EndpointID: ep.ID, Type: Ping, Body: body,
		Status: store.DeliveryPending, Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	if err := n.cfg.Store.PutDeliveries(ctx, []store.Delivery{d}); err != nil {
		return store.Delivery{}, err
	}
	a, _ := n.send(ctx, ep, d)
	d = d.Record(a)
	d.Status = store.DeliveryFailed
	if a.Status >= 200 && a.Status < 300 {
		d.Status = store.DeliveryDelivered
	}
	d.UpdatedAt = n.cfg.Now()
	return n.cfg.Store.UpdateDelivery(ctx, d)
}

// approvalOf reads the approval an approval event names.
func (n *Notifier) approvalOf(ctx context.Context, ev store.Event) (approvals.Approval, error) {
	id := approvalID(ev.Data)
	if id == "" {
		return approvals.Approval{}, fmt.Errorf("event %d (%s) names no approval", ev.Seq, ev.Type)
	}
	a, err := n.cfg.Store.GetApproval(ctx, id)
	if err != nil {
		return approvals.Approval{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	return a, nil
}

// approvalID is the approvalId of an event's data or a payload's data.
func approvalID(data json.RawMessage) string {
	var ref struct {
		ApprovalID string `json:"approvalId"`
		Data       struct {
			ApprovalID string `json:"approvalId"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &ref) != nil {
		return ""
	}
	return cmp.Or(ref.ApprovalID, ref.Data.ApprovalID)
}

// settledFirst reports, for a notice, whether its approval was settled
// before its time came: then it is not sent.
func (n *Notifier) settledFirst(ctx context.Context, d store.Delivery) (approvals.Approval, bool, error) {
	if !notice(d.Type) || !strings.HasPrefix(d.Type, "approval.") {
		return approvals.Approval{}, false, nil
	}
	id := approvalID(d.Body)
	a, err := n.cfg.Store.GetApproval(ctx, id)
	if err != nil {
		return a, false, fmt.Errorf("get approval %s: %w", id, err)
	}
	return a, a.Status != approvals.Pending, nil
}

// deliverDue makes the tries that are due.
func (n *Notifier) deliverDue(ctx context.Context) error {
	due, err := n.cfg.Store.ListDueDeliveries(ctx, n.cfg.Now(), batch)
	if err != nil {
		return fmt.Errorf("list due deliveries: %w", err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, 8)
	for _, d := range due {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := n.try(ctx, d); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("delivery %s: %w", d.ID, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// try takes a due delivery, sends it once, and records what happened.
func (n *Notifier) try(ctx context.Context, d store.Delivery) error {
	now := n.cfg.Now()
	d.NextAt = now.Add(lease)
	d.UpdatedAt = now
	d, err := n.cfg.Store.UpdateDelivery(ctx, d)
	if errors.Is(err, store.ErrConflict) {
		return nil // another notifier took it
	}
	if err != nil {
		return err
	}
	if a, settled, err := n.settledFirst(ctx, d); err != nil {
		return err
	} else if settled {
		d.Status, d.NextAt = store.DeliverySkipped, time.Time{}
		_, err = n.cfg.Store.UpdateDelivery(ctx, d.Record(store.Attempt{At: now, Error: fmt.Sprintf("not sent: the approval was %s first", a.Status)}))
		return err
	}
	if d.Channel != "" {
		return n.tryChannel(ctx, d)
	}
	ep, err := n.cfg.Store.GetEndpoint(ctx, d.ProjectID, d.EndpointID)
	if errors.Is(err, store.ErrNotFound) {
		d.Status, d.NextAt = store.DeliveryFailed, time.Time{}
		_, err = n.cfg.Store.UpdateDelivery(ctx, d.Record(store.Attempt{At: now, Error: "the endpoint was deleted"}))
		return err
	}
	if err != nil {
		return err
	}
	if ep.Disabled() {
		d.Status, d.NextAt = store.DeliveryFailed, time.Time{}
		_, err = n.cfg.Store.UpdateDelivery(ctx, d.Record(store.Attempt{At: now, Error: "the endpoint is disabled: " + ep.DisabledReason}))
		return err
	}
	a, retryAfter := n.send(ctx, ep, d)
	ok := a.Status >= 200 && a.Status < 300
	if err := n.record(ctx, d, a, func(d store.Delivery) store.Delivery {
		switch wait, more := Next(d.Tries, retryAfter); {
		case ok:
			d.Status, d.NextAt = store.DeliveryDelivered, time.Time{}
		case a.Status == http.StatusGone || !more:
			d.Status, d.NextAt = store.DeliveryFailed, time.Time{}
		default:
			d.NextAt = a.At.Add(wait)
		}
		return d
	}); err != nil {
		return err
	}
	return n.endpointAfter(ctx, ep, a, ok)
}

// record writes attempt a onto the delivery it was made for, settled by
// next. Usually d is as stored; when the write loses (the send outlived
// its lease and another notifier took it, or a retry came), the attempt is
// added to the delivery as it stands rather than dropped — unless that one
// is delivered already, which stays.
func (n *Notifier) record(ctx context.Context, d store.Delivery, a store.Attempt, next func(store.Delivery) store.Delivery) error {
	for range 5 {
		if d.Status == store.DeliveryDelivered {
			return nil
		}
		d = next(d.Record(a))
		d.UpdatedAt = n.cfg.Now()
		_, err := n.cfg.Store.UpdateDelivery(ctx, d)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		if d, err = n.cfg.Store.GetDelivery(ctx, d.ProjectID, d.ID); err != nil {
			return err
		}
	}
	return fmt.Errorf("delivery %s kept changing while its attempt was recorded", d.ID)
}

// tryChannel sends a taken delivery of a channel once and records it.
func (n *Notifier) tryChannel(ctx context.Context, d store.Delivery) error {
	var (
		a     store.Attempt
		final bool
	)
	if i := slices.IndexFunc(n.cfg.Channels, func(c Channel) bool { return c.Name() == d.Channel }); i >= 0 {
		a, final = n.cfg.Channels[i].Send(ctx, d)
	} else {
		a = store.Attempt{At: n.cfg.Now(), Error: "this process has no " + d.Channel + " channel configured"}
	}
	return n.record(ctx, d, a, func(d store.Delivery) store.Delivery {
		wait, more := Next(d.Tries, 0)
		switch {
		case a.Status >= 200 && a.Status < 300:
			d.Status, d.NextAt = store.DeliveryDelivered, time.Time{}
		case final || !more:
			d.Status, d.NextAt = store.DeliveryFailed, time.Time{}
		default:
			d.NextAt = a.At.Add(wait)
		}
		return d
	})
}

// send POSTs a delivery once; the attempt, and the receiver's Retry-After.
func (n *Notifier) send(ctx context.Context, ep store.Endpoint, d store.Delivery) (store.Attempt, time.Duration) {
	start := n.cfg.Now()
	a := store.Attempt{At: start}
	headers, err := Headers(ep.Signing(start), d.ID, start, d.Body)
	if err != nil {
		a.Error = err.Error()
		return a, 0
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(d.Body))
	if err != nil {
		a.Error = err.Error()
		return a, 0
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", "Stead-Webhooks/1")
	t := time.Now()
	resp, err := n.cfg.Client.Do(req)
	a.LatencyMs = time.Since(t).Milliseconds()
	if err != nil {
		a.Error = err.Error()
		return a, 0
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	a.Status = resp.StatusCode
	a.Response = strings.ToValidUTF8(string(head), "\uFFFD")
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		a.Error = fmt.Sprintf("the endpoint redirected to %q; webhooks follow no redirect: register the URL it points to", resp.Header.Get("Location"))
	}
	return a, retryAfter(resp.Header.Get("Retry-After"), start)
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// tellDisabled tells the project's other endpoints that ep was disabled
// (a webhook.disabled, for the owners' systems; the console shows it too).
func (n *Notifier) tellDisabled(ctx context.Context, ep store.Endpoint) error {
	eps, err := n.cfg.Store.ListEndpoints(ctx, ep.ProjectID)
	if err != nil {
		return err
	}
	body, err := json.Marshal(Payload{Version: PayloadVersion, Type: Disabled, Timestamp: ep.DisabledAt.UTC(), Data: Data{
		WebhookID: ep.ID, WebhookURL: ep.URL,
		Message: fmt.Sprintf("webhook %s (%s) was disabled: %s; enable it with stead webhooks enable %s", ep.ID, ep.URL, ep.DisabledReason, ep.ID),
	}})
	if err != nil {
		return err
	}
	now := n.cfg.Now()
	var ds []store.Delivery
	for _, other := range eps {
		if other.ID == ep.ID || other.Disabled() || (len(other.Events) > 0 && !slices.Contains(other.Events, Disabled)) {
			continue
		}
		ds = append(ds, store.Delivery{
			ID: MessageID(other.ID+"/"+Disabled, ep.ID, ep.DisabledAt.UnixNano()), ProjectID: ep.ProjectID, EndpointID: other.ID,
			Type: Disabled, Body: body, Status: store.DeliveryPending, NextAt: now, Version: 1, CreatedAt: now, UpdatedAt: now,
		})
	}
	if len(ds) == 0 {
		return nil
	}
	return n.cfg.Store.PutDeliveries(ctx, ds)
}

// endpointAfter keeps an endpoint's health: a success clears its failing
// mark; a 410 disables it; a failure starts the mark, or disables the
// endpoint once it has failed for FailingLimit.
func (n *Notifier) endpointAfter(ctx context.Context, ep store.Endpoint, a store.Attempt, ok bool) error {
	for range 5 {
		next := ep
		switch {
		case ok && ep.FailingSince.IsZero():
			return nil
		case ok:
			next.FailingSince = time.Time{}
		case a.Status == http.StatusGone:
			next.DisabledAt, next.DisabledReason = a.At, "it answered 410 Gone"
		case ep.FailingSince.IsZero():
			next.FailingSince = a.At
		case a.At.Sub(ep.FailingSince) >= FailingLimit:
			next.DisabledAt = a.At
			next.DisabledReason = fmt.Sprintf("every delivery failed since %s", ep.FailingSince.UTC().Format(time.RFC3339))
		default:
			return nil
		}
		if ep.Disabled() {
			return nil
		}
		next.UpdatedAt = n.cfg.Now()
		_, err := n.cfg.Store.UpdateEndpoint(ctx, next)
		if err == nil && next.Disabled() {
			return n.tellDisabled(ctx, next)
		}
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		if ep, err = n.cfg.Store.GetEndpoint(ctx, ep.ProjectID, ep.ID); err != nil {
			return err
		}
	}
	return nil
}
