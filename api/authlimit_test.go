package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"stead/api"
)

// from sends a request to the server as if from remote (host:port), as
// r.RemoteAddr tells it: the peer for `stead dev`, API Gateway's sourceIp
// behind the Lambda adapter.
func (w *world) from(remote, key string) *response {
	w.t.Helper()
	req := httptest.NewRequest("GET", "/v1/runs", nil)
	req.RemoteAddr = remote
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	w.api.ServeHTTP(rec, req)
	checkExchange(w.t, exchange{req: req, status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()})
	return &response{t: w.t, req: "GET /v1/runs from " + remote, status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// limited checks a 429 rate_limited answer with Retry-After in whole seconds.
func limited(t *testing.T, r *response, retryAfter string) {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("%s: status %d, want 429; body %s", r.req, r.status, r.body)
	}
	if got := r.header.Get("Retry-After"); got != retryAfter {
		t.Errorf("%s: Retry-After %q, want %q", r.req, got, retryAfter)
	}
	e := r.apiErr()
	if e.Code != api.CodeRateLimited || !strings.Contains(e.Message, "too many failed authentications") || !strings.Contains(e.Message, "try again in "+retryAfter+"s") {
		t.Errorf("%s: error %s %q", r.req, e.Code, e.Message)
	}
}

// unknownKey is an API key that does not exist, with a prefix of its own.
func unknownKey(i int) string {
	return fmt.Sprintf("%s%08dxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", api.KeyPrefix, i)
}

func TestFailedAuthLimitedPerAddress(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.AuthLimit = api.AuthLimit{PerAddress: 5, Window: time.Minute} })
	const attacker = "203.0.113.7:4242"
	for i := range 5 {
		w.must(w.from(attacker, unknownKey(i)), 401)
	}
	// Limited: refused without checking the credential, a correct one too.
	limited(t, w.from(attacker, w.owner), "60")
	limited(t, w.from("203.0.113.7:5555", unknownKey(99)), "60")
	// Other addresses are not.
	w.must(w.from("203.0.113.8:4242", w.owner), 200)
	w.must(w.from("[2001:db8::7]:4242", w.owner), 200)

	w.clock.Advance(30 * time.Second)
	limited(t, w.from(attacker, w.owner), "30")
	w.clock.Advance(29*time.Second + 500*time.Millisecond)
	limited(t, w.from(attacker, w.owner), "1") // rounded up
	w.clock.Advance(500 * time.Millisecond)
	w.must(w.from(attacker, w.owner), 200)
	// The count starts again.
	w.must(w.from(attacker, unknownKey(100)), 401)

	// An IPv6 address counts by its /64.
	for i := range 5 {
		w.must(w.from(fmt.Sprintf("[2001:db8::%x]:1", i+1), unknownKey(200+i)), 401)
	}
	limited(t, w.from("[2001:db8::ffff]:1", w.owner), "60")
	w.must(w.from("[2001:db8:0:1::1]:1", w.owner), 200)

	// Successes do not count, nor requests without a credential.
	const user = "198.51.100.1:1"
	for range 20 {
		w.must(w.from(user, w.owner), 200)
		w.must(w.from(user, ""), 401)
	}
	for i := range 4 {
		w.must(w.from(user, unknownKey(300+i)), 401)
	}
	w.must(w.from(user, w.owner), 200)
	w.must(w.from(user, unknownKey(304)), 401)
	limited(t, w.from(user, w.owner), "60")
}

// Guessing the secret of one credential is limited even from many
// addresses: failures count against its prefix too.
func TestFailedAuthLimitedPerKeyPrefix(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.AuthLimit = api.AuthLimit{PerKey: 3, Window: time.Minute} })
	addr := func(i int) string { return fmt.Sprintf("192.0.2.%d:1", i+1) }

	// Forged MACs for alice's tokens, each from another address.
	forged := w.customer[:strings.LastIndex(w.customer, ".")+1] + strings.Repeat("A", 43)
	for i := range 3 {
		w.must(w.from(addr(i), forged), 401)
	}
	r := w.from(addr(10), w.customer)
	limited(t, r, "60")
	if !strings.Contains(r.apiErr().Message, "this credential") {
		t.Errorf("message %q does not say the credential is limited", r.apiErr().Message)
	}
	// Another end user's token, and keys, are not limited, from anywhere.
	w.must(w.from(addr(0), w.customerToken("bob", 60)), 200)
	w.must(w.from(addr(0), w.owner), 200)

	// The same for an API key's prefix: the revoked key fails, then is
	// refused unchecked.
	for i := range 3 {
		w.must(w.from(addr(20+i), w.revoked), 401)
	}
	limited(t, w.from(addr(30), w.revoked), "60")
	w.must(w.from(addr(30), w.developer), 200)

	w.clock.Advance(time.Minute)
	w.must(w.from(addr(10), w.customer), 200)
}
