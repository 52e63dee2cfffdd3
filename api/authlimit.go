package api

import (
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Failed authentication is rate-limited, in memory, per API process: on
// AWS each API Lambda instance keeps its own counts, so a guesser spread
// over many instances gets up to the limit from each.
//
// Two counts, each a fixed window per key: failures from one source address
// (r.RemoteAddr: the peer for `stead dev`, API Gateway's sourceIp behind the
// apigw adapter; an IPv6 address counts by its /64, which one host usually
// holds whole), and failures with one key prefix, the part of a credential
// before its secret (an API key's first 12 characters, a customer token's
// project and end user, a broker token's run), so that guessing the secret
// of one credential is limited even from many addresses. PerAddress or
// PerKey failures within Window refuse that address or prefix for Window
// from the failure that reached the limit: 429 rate_limited with
// Retry-After, without checking the credential at all, a correct one
// included. Successes do not count, nor does a request without a
// credential.
//
// A limited key prefix refuses its credential from everywhere, so whoever
// knows a key's prefix can hold that key off for a window at a time by
// failing with it; the secret it protects is never at risk.

// Defaults of AuthLimit.
const (
	DefaultAuthFailuresPerAddress = 20
	DefaultAuthFailuresPerKey     = 10
	DefaultAuthWindow             = time.Minute
	DefaultAuthTracked            = 10000
)

// AuthLimit bounds failed authentication (see above). The zero value means
// the defaults.
type AuthLimit struct {
	// PerAddress is how many failures one source address may have within
	// Window; DefaultAuthFailuresPerAddress when zero, no limit when
	// negative.
	PerAddress int
	// PerKey is the same for one key prefix; DefaultAuthFailuresPerKey when
	// zero, no limit when negative.
	PerKey int
	// Window is the counting window and how long a limit holds;
	// DefaultAuthWindow when zero.
	Window time.Duration
	// MaxTracked bounds how many addresses, and how many key prefixes, are
	// remembered at once (some 100 bytes each); DefaultAuthTracked when
	// zero. A flood of distinct addresses past it makes room by forgetting
	// ended counts first, then counts still under the limit, then others.
	MaxTracked int
}

func (l *AuthLimit) validate() error {
	if l.Window < 0 || l.MaxTracked < 0 {
		return fmt.Errorf("api config: AuthLimit.Window and MaxTracked must not be negative")
	}
	if l.PerAddress == 0 {
		l.PerAddress = DefaultAuthFailuresPerAddress
	}
	if l.PerKey == 0 {
		l.PerKey = DefaultAuthFailuresPerKey
	}
	if l.Window == 0 {
		l.Window = DefaultAuthWindow
	}
	if l.MaxTracked == 0 {
		l.MaxTracked = DefaultAuthTracked
	}
	return nil
}

// authLimiter is the two counts of failures.
type authLimiter struct {
	byAddress, byKey *failureCounts
}

func newAuthLimiter(l AuthLimit) *authLimiter {
	return &authLimiter{
		byAddress: newFailureCounts(l.PerAddress, l.Window, l.MaxTracked),
		byKey:     newFailureCounts(l.PerKey, l.Window, l.MaxTracked),
	}
}

// authSubject is who a request's failures count against.
type authSubject struct {
	address, key    countKey
	hasAddr, hasKey bool
}

func (l *authLimiter) subject(r *http.Request, token string) authSubject {
	var s authSubject
	if a := sourceAddress(r.RemoteAddr); a != "" {
		s.address, s.hasAddr = hashKeyOf("addr", a), true
	}
	if p := credentialPrefix(token); p != "" {
		s.key, s.hasKey = hashKeyOf("key", p), true
	}
	return s
}

// retryAfter returns how long s is still refused, and by which count; zero
// when it is not.
func (l *authLimiter) retryAfter(s authSubject, now time.Time) (time.Duration, string) {
	var wait time.Duration
	by := ""
	if s.hasAddr {
		if d := l.byAddress.blocked(s.address, now); d > wait {
			wait, by = d, "this address"
		}
	}
	if s.hasKey {
		if d := l.byKey.blocked(s.key, now); d > wait {
			wait, by = d, "this credential"
		}
	}
	return wait, by
}

// failed counts one failed authentication of s.
func (l *authLimiter) failed(s authSubject, now time.Time) {
	if s.hasAddr {
		l.byAddress.fail(s.address, now)
	}
	if s.hasKey {
		l.byKey.fail(s.key, now)
	}
}

// sourceAddress is the address part of a RemoteAddr, an IPv6 address as
// its /64.
func sourceAddress(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.WithZone("").Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// credentialPrefix is the part of a credential before its secret; "" when
// it has none that can be told.
func credentialPrefix(token string) string {
	switch {
	case strings.HasPrefix(token, KeyPrefix), strings.HasPrefix(token, MCPKeyPrefix):
		return token[:min(len(token), keyPrefixLen)]
	case strings.HasPrefix(token, CustomerTokenPrefix):
		if _, _, cl, ok := parseCustomerToken(token); ok {
			return CustomerTokenPrefix + cl.ProjectID + "\x00" + cl.EndUserID
		}
	case strings.HasPrefix(token, BrokerTokenPrefix):
		run, _, ok := strings.Cut(strings.TrimPrefix(token, BrokerTokenPrefix), ".")
		if ok {
			return BrokerTokenPrefix + run
		}
	}
	return ""
}

// countKey is a fixed-size key, so that long prefixes cost no more memory.
type countKey [16]byte

func hashKeyOf(kind, s string) countKey {
	sum := sha256.Sum256([]byte(kind + "\x00" + s))
	var k countKey
	copy(k[:], sum[:])
	return k
}

// failureCounts counts failures per key in fixed windows, bounded in size.
type failureCounts struct {
	limit  int // failures within window that refuse a key; <0: none
	window time.Duration
	max    int

	mu sync.Mutex
	m  map[countKey]*failureCount
}

type failureCount struct {
	start time.Time // of the window
	n     int
	until time.Time // refused until then
}

// ended reports whether the count says nothing any more at now.
func (c *failureCount) ended(now time.Time, window time.Duration) bool {
	return !now.Before(c.start.Add(window)) && !now.Before(c.until)
}

func newFailureCounts(limit int, window time.Duration, max int) *failureCounts {
	return &failureCounts{limit: limit, window: window, max: max, m: map[countKey]*failureCount{}}
}

// blocked returns how long k is still refused at now; zero if it is not.
func (f *failureCounts) blocked(k countKey, now time.Time) time.Duration {
	if f.limit < 0 {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.m[k]; c != nil && now.Before(c.until) {
		return c.until.Sub(now)
	}
	return 0
}

// fail counts a failure of k at now.
func (f *failureCounts) fail(k countKey, now time.Time) {
	if f.limit < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.m[k]
	if c == nil {
		if len(f.m) >= f.max {
			f.makeRoom(now)
		}
		c = &failureCount{start: now}
		f.m[k] = c
	}
	if c.ended(now, f.window) {
		*c = failureCount{start: now}
	}
	c.n++
	if c.n >= f.limit {
		c.until = now.Add(f.window)
	}
}

// makeRoom forgets counts until the map is at 7/8 of its bound: ended
// counts first, then counts under the limit, then refused ones. Each call
// frees an eighth, so a flood pays for one pass every max/8 new keys.
func (f *failureCounts) makeRoom(now time.Time) {
	target := f.max - f.max/8 - 1
	for pass := range 3 {
		for k, c := range f.m {
			if len(f.m) <= target {
				return
			}
			switch {
			case pass == 0 && c.ended(now, f.window),
				pass == 1 && !now.Before(c.until),
				pass == 2:
				delete(f.m, k)
			}
		}
	}
}

// size is how many keys are remembered.
func (f *failureCounts) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}
