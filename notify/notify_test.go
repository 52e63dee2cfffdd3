package notify_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"stead/notify"
)

// Trace events of the notifying types notify; the notices and
// webhook.disabled, which the Notifier makes itself, and trace events of
// no notifying type do not.
func TestNotifiesTraceEventsOnly(t *testing.T) {
	t.Parallel()
	for typ, want := range map[string]bool{
		"approval.requested": true, "approval.vote": true, "approval.approved": true, "approval.denied": true,
		"approval.expired": true, "approval.cancelled": true, "run.succeeded": true, "run.failed": true, "run.cancelled": true,
		"approval.reminder": false, "approval.expiring": false, "approval.escalated": false, notify.Disabled: false,
		notify.Ping: false, "run.created": false, "tool.called": false,
	} {
		if got := notify.Notifies(typ); got != want {
			t.Errorf("Notifies(%q) = %t, want %t", typ, got, want)
		}
	}
}

// An event filter may name any event type, the notices included, and
// nothing else; the refusal names the types.
func TestCheckTypesRefusesUnknownTypes(t *testing.T) {
	t.Parallel()
	if err := notify.CheckTypes(notify.Types); err != nil {
		t.Errorf("every event type: %v", err)
	}
	err := notify.CheckTypes([]string{"approval.approved", "approval.approve"})
	if err == nil || !strings.Contains(err.Error(), `"approval.approve"`) || !strings.Contains(err.Error(), "approval.reminder") {
		t.Errorf("a filter naming approval.approve: %v", err)
	}
}

// The next try comes on the schedule; a Retry-After defers it, by at most
// MaxRetryAfter, and never hastens it; there is none before the first try
// or after the eighth.
func TestNextFollowsTheSchedule(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tried      int
		retryAfter time.Duration
		want       time.Duration
		more       bool
	}{
		{tried: 0},
		{tried: 1, want: 5 * time.Second, more: true},
		{tried: 2, want: 5 * time.Minute, more: true},
		{tried: 7, want: 10 * time.Hour, more: true},
		{tried: 8},
		{tried: 1, retryAfter: 7 * time.Second, want: 7 * time.Second, more: true},
		{tried: 3, retryAfter: time.Minute, want: 30 * time.Minute, more: true},
		{tried: 1, retryAfter: 100 * time.Hour, want: notify.MaxRetryAfter, more: true},
		{tried: 8, retryAfter: time.Hour},
	} {
		got, more := notify.Next(c.tried, c.retryAfter)
		if got != c.want || more != c.more {
			t.Errorf("Next(%d, %s) = %s, %t; want %s, %t", c.tried, c.retryAfter, got, more, c.want, c.more)
		}
	}
}

// A secret is "whsec_" and the base64 of a non-empty key; anything else is
// ErrSecret.
func TestKeyIsTheBase64BehindThePrefix(t *testing.T) {
	t.Parallel()
	key, err := notify.Key("whsec_AAEC")
	if err != nil || !bytes.Equal(key, []byte{0, 1, 2}) {
		t.Errorf("Key(whsec_AAEC) = %v, %v", key, err)
	}
	for _, s := range []string{"", "whsec_", "AAEC", "whsk_AAEC", "whsec_not base64!"} {
		if _, err := notify.Key(s); !errors.Is(err, notify.ErrSecret) {
			t.Errorf("Key(%q): %v, want ErrSecret", s, err)
		}
	}
}

// A new secret is a valid one holding 24 bytes of the reader; a reader
// that runs dry makes none.
func TestNewSecretHolds24Bytes(t *testing.T) {
	t.Parallel()
	s, err := notify.NewSecret(bytes.NewReader(bytes.Repeat([]byte{7}, 30)))
	if err != nil {
		t.Fatal(err)
	}
	key, err := notify.Key(s)
	if err != nil || !bytes.Equal(key, bytes.Repeat([]byte{7}, 24)) {
		t.Errorf("the key of %s is %v, %v; want 24 sevens", s, key, err)
	}
	if _, err := notify.NewSecret(bytes.NewReader(make([]byte, 23))); err == nil {
		t.Error("a secret from 23 bytes")
	}
}

// The signature is the Standard Webhooks spec's own example; the headers
// carry one per secret, the timestamp in Unix seconds, and a bad secret
// signs nothing.
func TestHeadersSignPerTheSpec(t *testing.T) {
	t.Parallel()
	const (
		id    = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		other = "whsec_AAEC"
	)
	ts := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	h, err := notify.Headers([]string{secret, other}, id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := notify.Key(other)
	want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= " + notify.Sign(otherKey, id, ts, body)
	if h["webhook-signature"] != want || h["webhook-id"] != id || h["webhook-timestamp"] != "1614265330" || h["content-type"] != "application/json" {
		t.Errorf("headers: %v; want the signature %s", h, want)
	}
	if _, err := notify.Headers([]string{secret, "whsec_"}, id, ts, body); !errors.Is(err, notify.ErrSecret) {
		t.Errorf("headers with a bad secret: %v", err)
	}
}

// A webhook-id is the same for the same endpoint, run and event, and
// differs when any of them does.
func TestMessageIDPerEndpointAndEvent(t *testing.T) {
	t.Parallel()
	id := notify.MessageID("whe_a", "run_1", 3)
	if !strings.HasPrefix(id, "msg_") || id != notify.MessageID("whe_a", "run_1", 3) {
		t.Errorf("MessageID is %s, then %s", id, notify.MessageID("whe_a", "run_1", 3))
	}
	for _, other := range []string{notify.MessageID("whe_b", "run_1", 3), notify.MessageID("whe_a", "run_2", 3), notify.MessageID("whe_a", "run_1", 4)} {
		if other == id {
			t.Errorf("another endpoint, run or event has the webhook-id %s too", id)
		}
	}
}
