// Package email is the email channel of notifications (a notify.Channel
// named "email"): when an approval is requested, each member who may
// decide it gets a mail, HTML and text, with its summary, a signed review
// link and the console link, sent over SMTP.
//
// Who gets mail (Recipients): the project's members who are not removed,
// have an email address and a role that may decide (approvals.Decide); for
// an approval with requirements, only its eligible voters; never the
// member the approval is separated from. Of those, each gets the mail
// their notification settings ask for (Wants, store.MemberNotify): every
// Mailed event, the requests only, or none.
//
// A delivery's Body is the rendered Message, so every try (the Notifier's
// retry schedule) sends the same mail with the same Message-ID. SMTP reply
// codes are the attempts' statuses: 250 is delivered; a refused recipient
// (5xx to RCPT) or a refused message (5xx after DATA) is final; anything
// else is tried again.
//
// The review link (review.go) opens a page of the API (api/review.go)
// that shows the call and decides only on a POST from its form: mail
// scanners that fetch links change nothing.
package email

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"stead/approvals"
	"stead/notify"
	"stead/store"
)

// Name is the channel's name: the Delivery.Channel of its deliveries.
const Name = "email"

// Store is what the channel reads.
type Store interface {
	GetProject(ctx context.Context, id string) (store.Project, error)
	GetApproval(ctx context.Context, id string) (approvals.Approval, error)
	ListMembers(ctx context.Context, projectID string, includeRemoved bool) ([]store.Member, error)
}

// Options configure a Channel.
type Options struct {
	SMTP  Config
	Store Store
	// PublicURL is where people reach Stead: the base of review links.
	PublicURL string
	Now       func() time.Time
}

// Channel mails the members who may decide an approval.
type Channel struct {
	cfg   Config
	store Store
	base  string
	now   func() time.Time
}

var _ notify.Channel = (*Channel)(nil)

// New returns a Channel; it refuses an SMTP configuration that cannot send
// and a missing public URL (review links need one).
func New(o Options) (*Channel, error) {
	if err := o.SMTP.Validate(); err != nil {
		return nil, fmt.Errorf("email: %w", err)
	}
	if o.Store == nil {
		return nil, errors.New("email: Store is required")
	}
	if !strings.HasPrefix(o.PublicURL, "http://") && !strings.HasPrefix(o.PublicURL, "https://") {
		return nil, fmt.Errorf("email: the public URL %q must be an http or https URL: review links are built on it (publicUrl, STEAD_PUBLIC_URL)", o.PublicURL)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Channel{cfg: o.SMTP, store: o.Store, base: strings.TrimSuffix(o.PublicURL, "/"), now: o.Now}, nil
}

// Name is "email".
func (c *Channel) Name() string { return Name }

// Mailed are the event types that mail the approval's deciders: a request
// and, once they exist, its reminders, escalation and expiry warning.
var Mailed = []string{"approval.requested", "approval.reminder", "approval.escalated", "approval.expiring"}

// EndpointID is the Delivery.EndpointID of mail to a member.
func EndpointID(memberID string) string { return "email:" + memberID }

// Deliveries are one mail per recipient of ev, when ev is of a Mailed
// type, names an approval, and that approval is still pending and
// unexpired (a mail about a settled approval would hold a dead link).
func (c *Channel) Deliveries(ctx context.Context, run store.Run, ev store.Event, data notify.Data) ([]store.Delivery, error) {
	if !slices.Contains(Mailed, ev.Type) || data.ApprovalID == "" {
		return nil, nil
	}
	a, err := c.store.GetApproval(ctx, data.ApprovalID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get approval %s: %w", data.ApprovalID, err)
	}
	now := c.now()
	if a.Status != approvals.Pending || !now.Before(a.ExpiresAt) || a.ProjectID != run.ProjectID {
		return nil, nil
	}
	members, err := c.store.ListMembers(ctx, a.ProjectID, false)
	if err != nil {
		return nil, fmt.Errorf("list members of %s: %w", a.ProjectID, err)
	}
	to := slices.DeleteFunc(Recipients(a, members), func(m store.Member) bool { return !Wants(m, ev.Type) })
	if len(to) == 0 {
		return nil, nil
	}
	p, err := c.store.GetProject(ctx, a.ProjectID)
	if err != nil {
		return nil, fmt.Errorf("get project %s: %w", a.ProjectID, err)
	}
	consoleURL := data.ConsoleURL
	if consoleURL == "" {
		consoleURL = c.base + "/console/#/approvals/" + a.ID
	}
	sum := SummaryOf(a)
	out := make([]store.Delivery, 0, len(to))
	for _, m := range to {
		token, err := SignReview(p.SigningKey, Review{
			ProjectID: a.ProjectID, ApprovalID: a.ID, MemberID: m.ID, InputDigest: a.InputDigest, ExpiresAt: a.ExpiresAt,
		})
		if err != nil {
			return nil, err
		}
		msg, err := render(sum, mail.Address{Name: m.Name, Address: m.Email}, m.Role, ReviewURL(c.base, token), consoleURL, now)
		if err != nil {
			return nil, err
		}
		body, err := json.Marshal(msg)
		if err != nil {
			return nil, err
		}
		ep := EndpointID(m.ID)
		out = append(out, store.Delivery{ID: notify.MessageID(ep, run.ID, ev.Seq), EndpointID: ep, Body: body})
	}
	return out, nil
}

// Wants reports whether member m's settings (m.Notify.Email) ask for mail
// about an event of type eventType, one of Mailed: every one for
// store.EmailAll (and when unset), approval.requested only for
// store.EmailRequests, none for store.EmailNone.
func Wants(m store.Member, eventType string) bool {
	switch m.Notify.EmailSetting() {
	case store.EmailAll:
		return true
	case store.EmailRequests:
		return eventType == "approval.requested"
	}
	return false
}

// Recipients are the members of a's project to mail about a, in the order
// given: not removed, with a mail address, with a role that may decide;
// for an approval with requirements only its eligible voters who have not
// voted on its input yet; never the member a is separated from.
func Recipients(a approvals.Approval, members []store.Member) []store.Member {
	var out []store.Member
	for _, m := range members {
		switch {
		case m.ProjectID != a.ProjectID, m.Removed(), !m.Role.May(approvals.Decide):
		case a.SeparateFrom != "" && m.ID == a.SeparateFrom:
		case a.HasQuorum() && (!a.Eligible(m.ID) || a.Voted(m.ID)):
		default:
			if addr, err := mail.ParseAddress(m.Email); err == nil && addr.Address == strings.TrimSpace(m.Email) {
				out = append(out, m)
			}
		}
	}
	return out
}

// Send tries one mail once: the SMTP transaction's last reply is the
// attempt's status (250 when accepted). A refused recipient or message is
// final, and so is a mail whose approval was settled since it was made
// (nothing is sent: its link would be refused).
func (c *Channel) Send(ctx context.Context, d store.Delivery) (store.Attempt, bool) {
	start := c.now()
	a := store.Attempt{At: start}
	var m Message
	if err := json.Unmarshal(d.Body, &m); err != nil || m.To == "" {
		a.Error = "the delivery's body is not a mail; it cannot be sent"
		return a, true
	}
	if m.ApprovalID != "" {
		ap, err := c.store.GetApproval(ctx, m.ApprovalID)
		switch {
		case err == nil && ap.Status != approvals.Pending:
			a.Error = fmt.Sprintf("not sent: approval %s is %s", ap.ID, ap.Status)
			return a, true
		case errors.Is(err, store.ErrNotFound):
			a.Error = fmt.Sprintf("not sent: approval %s no longer exists", m.ApprovalID)
			return a, true
		}
	}
	raw, err := m.bytes(c.cfg.From, d.ID)
	if err != nil {
		a.Error = err.Error()
		return a, true
	}
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		a.Error = fmt.Sprintf("the recipient %q is not a mail address", m.To)
		return a, true
	}
	from, _ := mail.ParseAddress(c.cfg.From) // checked by Validate
	t := time.Now()
	r := c.transmit(ctx, from.Address, to.Address, raw)
	a.LatencyMs = time.Since(t).Milliseconds()
	a.Status, a.Response = r.code, truncate(r.reply, 1024)
	if r.err != nil {
		a.Error = r.err.Error()
	}
	return a, r.final
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
