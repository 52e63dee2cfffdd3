// Package notifytest has a webhook receiver for tests of packages that
// send webhooks through Stead (api, cli).
package notifytest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"stead/notify"
)

// Request is one request the receiver got.
type Request struct {
	Header http.Header
	Body   []byte
}

// Receiver is a webhook receiver on loopback: it checks every request's
// body against the API's OpenAPI document (CheckPayload), hands it to the
// test and answers with Status (200 unless set) and a short body.
type Receiver struct {
	// URL is where it receives: the server's address and path.
	URL    string
	Status atomic.Int32

	t   testing.TB
	got chan Request
}

// NewReceiver starts a receiver at path, stopped when t ends.
func NewReceiver(t testing.TB, path string) *Receiver {
	t.Helper()
	rc := &Receiver{t: t, got: make(chan Request, 2000)}
	rc.Status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// Every delivery is held to the published contract.
		if err := CheckPayload(body); err != nil {
			t.Errorf("webhook %s: %v\n%s", r.Header.Get("webhook-id"), err, body)
		}
		rc.got <- Request{Header: r.Header.Clone(), Body: body}
		status := int(rc.Status.Load())
		w.WriteHeader(status)
		fmt.Fprintf(w, "receiver says %d", status)
	}))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL + path
	return rc
}

// Next is the next request the receiver got; the test fails if none comes
// within 20 s.
func (rc *Receiver) Next() Request {
	rc.t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(20 * time.Second):
		rc.t.Fatal("the receiver got nothing")
		return Request{}
	}
}

// None fails the test if the receiver got something not yet read.
func (rc *Receiver) None() {
	rc.t.Helper()
	select {
	case r := <-rc.got:
		rc.t.Fatalf("the receiver got an unexpected %s: %s", r.Header.Get("webhook-id"), r.Body)
	default:
	}
}

// Signed fails the test unless r carries Standard Webhooks headers — a
// msg_ webhook-id, a Unix timestamp, JSON — and one valid signature per
// secret, in that order; it returns the webhook-id.
func (r Request) Signed(t testing.TB, secrets ...string) string {
	t.Helper()
	id := r.Header.Get("webhook-id")
	if !strings.HasPrefix(id, "msg_") {
		t.Errorf("webhook-id %q", id)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	ts, err := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	if err != nil {
		t.Fatalf("webhook-timestamp %q: %v", r.Header.Get("webhook-timestamp"), err)
	}
	sigs := strings.Fields(r.Header.Get("webhook-signature"))
	if len(sigs) != len(secrets) {
		t.Fatalf("%d signatures (%q), want %d", len(sigs), r.Header.Get("webhook-signature"), len(secrets))
	}
	for i, secret := range secrets {
		key, err := notify.Key(secret)
		if err != nil {
			t.Fatalf("secret %d: %v", i, err)
		}
		if want := notify.Sign(key, id, time.Unix(ts, 0), r.Body); sigs[i] != want {
			t.Errorf("signature %d is %q; with secret %d it should be %q", i, sigs[i], i, want)
		}
	}
	return id
}
