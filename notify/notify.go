// Package notify tells the systems a project names what happened to its runs
// and approvals: webhook events, signed per the Standard Webhooks spec and
// delivered at least once.
//
// Notifications are never separate from what they report. The engine flags
// the trace events that notify (Notifies) when it appends them, and the
// store marks the run in its outbox in the same write that appends them
// (store.Outbox): a crash right after a decision leaves its
// approval.approved in the trace and the run in the outbox. The Notifier
// (notifier.go) turns outbox entries into one Delivery per endpoint — its id,
// the webhook-id, is derived from the endpoint and the event, so doing it
// twice makes the same deliveries — and delivers them on the retry schedule.
package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The event types an endpoint may receive. Trace events of these types
// notify; so does ping, sent by hand. The notices — approval.reminder,
// approval.expiring, approval.escalated — are no trace events: the
// Notifier schedules them when it fans out the approval.requested.
var Types = []string{
	"approval.requested", "approval.vote", "approval.reminder", "approval.expiring", "approval.escalated",
	"approval.approved", "approval.denied", "approval.expired", "approval.cancelled",
	"run.succeeded", "run.failed", "run.cancelled",
	Disabled,
}

// notice reports whether typ is a notice's (or webhook.disabled): types
// the Notifier makes, not trace events.
func notice(typ string) bool {
	switch typ {
	case "approval.reminder", "approval.expiring", "approval.escalated", Disabled:
		return true
	}
	return false
}

// Ping is the event `stead webhooks ping` sends: it checks an endpoint and
// its signature check, and reports nothing.
const Ping = "webhook.ping"

// Disabled is the event the project's other endpoints get when one is
// disabled (it answered 410, or failed every delivery for FailingLimit).
const Disabled = "webhook.disabled"

// Notifies reports whether a trace event of type typ is a notification.
func Notifies(typ string) bool { return slices.Contains(Types, typ) && !notice(typ) }

// CheckTypes refuses an event filter naming a type that is not one; it
// names the types that are.
func CheckTypes(types []string) error {
	for _, t := range types {
		if !slices.Contains(Types, t) {
			return fmt.Errorf("%q is not an event type; the types are %s", t, strings.Join(Types, ", "))
		}
	}
	return nil
}

// Schedule is when a delivery is tried, from the first try: at once, then
// 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h after the try before. After
// the last, the delivery has failed.
var Schedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// MaxRetryAfter bounds how long a receiver's Retry-After may defer the
// next try.
const MaxRetryAfter = 10 * time.Hour

// Next is how long after the try numbered tried (1 for the first) the next
// try comes, and false when there is none. A receiver's Retry-After defers
// it, never hastens it.
func Next(tried int, retryAfter time.Duration) (time.Duration, bool) {
	if tried < 1 || tried >= len(Schedule) {
		return 0, false
	}
	wait := Schedule[tried]
	if retryAfter > wait {
		wait = min(retryAfter, MaxRetryAfter)
	}
	return wait, true
}

// FailingLimit is how long an endpoint may fail every delivery before it
// is disabled.
const FailingLimit = 5 * 24 * time.Hour

// RotationOverlap is how long the secret an endpoint had before a rotation
// keeps signing deliveries beside the new one.
const RotationOverlap = 24 * time.Hour

// Timeout bounds one delivery attempt.
const Timeout = 15 * time.Second

// secretPrefix starts every endpoint secret (the spec's serialization: the
// key, base64, behind "whsec_").
const secretPrefix = "whsec_"

// NewSecret makes an endpoint secret from 24 bytes of r.
func NewSecret(r io.Reader) (string, error) {
	b := make([]byte, 24)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("new webhook secret: %w", err)
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// ErrSecret is a secret that is not "whsec_" and base64.
var ErrSecret = errors.New(`a webhook secret is "whsec_" followed by base64`)

// Key returns the HMAC key a secret serializes.
func Key(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, ErrSecret
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, ErrSecret
	}
	return key, nil
}

// Sign is one signature of a delivery: "v1," and the base64 HMAC-SHA256,
// with key, of "<id>.<timestamp>.<body>" (timestamp in Unix seconds).
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Headers are the Standard Webhooks headers of a delivery signed with each
// of secrets (after a rotation, the new secret and the old one): the
// receiver accepts it if one signature matches.
func Headers(secrets []string, id string, ts time.Time, body []byte) (map[string]string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := Key(s)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, Sign(key, id, ts, body))
	}
	return map[string]string{
		"webhook-id":        id,
		"webhook-timestamp": strconv.FormatInt(ts.Unix(), 10),
		"webhook-signature": strings.Join(sigs, " "),
		"content-type":      "application/json",
	}, nil
}

// MessageID is the webhook-id of the delivery of a run's event seq to an
// endpoint: the same for every try and every fan-out of that event to that
// endpoint (the receiver's dedupe key), different for any other event or
// endpoint.
func MessageID(endpointID, runID string, seq int64) string {
	sum := sha256.Sum256([]byte(endpointID + "\x00" + runID + "\x00" + strconv.FormatInt(seq, 10)))
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}
