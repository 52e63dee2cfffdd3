// Package egress is the policy on where Stead's outbound requests may go:
// the handlers' fetch and model requests whose destination a deployment
// chooses (an openai-compatible baseUrl, a Bedrock baseUrl override).
//
// A Policy refuses loopback, private, link-local (cloud metadata services),
// multicast, unspecified, broadcast, IPv4-mapped, CGNAT, NAT64, 6to4 and the
// other reserved ranges unless its Allow admits them. The check runs in the
// dialer (Control), after name resolution, on the address actually dialled,
// for every connection and so every redirect: a name that resolves, or
// re-resolves, to a refused address cannot get through (no DNS rebinding).
// CheckLiteral adds the one check a dialler cannot make: an IP literal
// written in a refused form that dials as an allowed one (an IPv4-mapped
// IPv6 literal).
//
// Allow is an owner setting (a flag of `stead dev`, the runner's
// environment on AWS), never something a deployment sets: a developer must
// not be able to point the server at internal services.
package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Policy refuses destinations inside the host's networks unless Allow
// admits them. The zero Policy admits public addresses only.
type Policy struct {
	// Allow admits addresses the policy would otherwise refuse. An
	// IPv4-mapped IPv6 address needs an IPv6 prefix.
	Allow []netip.Prefix
}

// RefusedError is a destination the policy refused.
type RefusedError struct {
	// Addr is the refused address; the zero Addr when what was dialled was
	// not an IP address.
	Addr netip.Addr
	// Reason says what kind of address it is: "a loopback address".
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("destination %s is refused: it is %s", e.Addr, e.Reason)
}

// refusedPrefixes are ranges refused besides what netip's predicates cover.
var refusedPrefixes = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `a "this network" address`},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT (shared) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address (it embeds an IPv4 address)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address (it embeds an IPv4 address)"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address (it embeds an IPv4 address)"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
}

// Check returns a *RefusedError for a refused address, or nil.
func (p Policy) Check(addr netip.Addr) error {
	for _, a := range p.Allow {
		if a.Contains(addr) {
			return nil
		}
	}
	reason := ""
	switch {
	case !addr.IsValid():
		reason = "not an IP address"
	case addr.Is4In6():
		reason = "an IPv4-mapped IPv6 address"
	case addr.IsLoopback():
		reason = "a loopback address"
	case addr.IsPrivate():
		reason = "a private address"
	case addr.IsLinkLocalUnicast():
		reason = "a link-local address (this includes cloud metadata services such as 169.254.169.254)"
	case addr.IsMulticast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast():
		reason = "a multicast address"
	case addr.IsUnspecified():
		reason = "an unspecified address"
	case addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		reason = "the broadcast address"
	default:
		for _, r := range refusedPrefixes {
			if r.prefix.Contains(addr) {
				reason = r.reason
				break
			}
		}
	}
	if reason == "" {
		return nil
	}
	return &RefusedError{Addr: addr, Reason: reason}
}

// CheckLiteral refuses a URL host that is an IP literal in a form the
// policy refuses (an IPv4-mapped IPv6 literal is dialled as IPv4, so it is
// caught here, by how it was written). Names pass: they are checked when
// dialled.
func (p Policy) CheckLiteral(host string) error {
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	return p.Check(addr)
}

// Control is a net.Dialer's ControlContext: it runs for every connection
// attempt, after name resolution, with the address about to be dialled,
// and returns a *RefusedError for a refused one.
func (p Policy) Control(_ context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Reason: "not an IP address (" + network + " " + address + ")"}
	}
	return p.Check(ap.Addr())
}

// Dialer returns a dialer that applies the policy to every connection.
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, ControlContext: p.Control}
}

// MaxRedirects is how many redirects Client follows.
const MaxRedirects = 10

// Client returns an HTTP client whose every connection, redirects
// included, goes through the policy. It uses no proxy (a proxy would be
// dialled instead of the destination) and has no overall timeout: each
// request carries its own in its context.
func (p Policy) Client() *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           p.Dialer(30 * time.Second).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return fmt.Errorf("stopped after %d redirects", MaxRedirects)
			}
			return p.CheckLiteral(req.URL.Hostname())
		},
	}
}

// String lists the allowed ranges, comma-separated ("" when none), in the
// form ParseAllow reads.
func (p Policy) String() string {
	s := make([]string, len(p.Allow))
	for i, a := range p.Allow {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// Loopback is 127.0.0.0/8 and ::1/128: what `stead dev` allows by default,
// for local model servers and services.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ParseAllow reads an allowlist: comma-separated CIDR ranges
// ("10.0.0.0/8,fd00::/8") or single addresses ("192.168.1.20"); spaces
// around items are ignored and "" is no range. A range must be written
// as its network address (10.0.0.0/8, not 10.1.2.3/8).
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if !strings.Contains(item, "/") {
			a, err := netip.ParseAddr(item)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%q is not an IP address or CIDR range (write ranges such as 10.0.0.0/8 or fd00::/8, comma-separated)", item)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR range (write ranges such as 10.0.0.0/8 or fd00::/8, comma-separated)", item)
		}
		if m := p.Masked(); m != p {
			return nil, fmt.Errorf("%q has bits set past its /%d; write the range as %s", item, p.Bits(), m)
		}
		out = append(out, p)
	}
	return out, nil
}
