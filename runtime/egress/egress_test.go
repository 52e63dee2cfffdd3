package egress_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"stead/runtime/egress"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	// Each refused address with what its error says it is: a user reads the
	// reason to know which range to allow (an IPv4-mapped address needs an
	// IPv6 prefix, not its IPv4 one).
	refused := []struct{ addr, reason string }{
		{"127.0.0.1", "loopback"}, {"127.1.2.3", "loopback"}, {"::1", "loopback"},
		{"10.1.2.3", "private"}, {"172.16.0.1", "private"}, {"192.168.1.1", "private"}, {"fd00::1", "private"},
		{"169.254.169.254", "link-local"}, {"fe80::1", "link-local"},
		{"224.0.0.1", "multicast"}, {"239.255.255.250", "multicast"}, {"ff02::1", "multicast"}, {"ff0e::1", "multicast"},
		{"0.0.0.0", "unspecified"}, {"::", "unspecified"},
		{"::ffff:127.0.0.1", "IPv4-mapped"}, {"::ffff:8.8.8.8", "IPv4-mapped"},
		{"255.255.255.255", "broadcast"},
		{"0.1.2.3", `"this network"`},
		{"100.64.0.1", "carrier-grade NAT"}, {"100.127.255.254", "carrier-grade NAT"},
		{"192.0.0.8", "IETF protocol assignment"}, {"192.0.0.255", "IETF protocol assignment"},
		{"198.18.0.1", "benchmarking"}, {"198.19.255.255", "benchmarking"},
		{"240.0.0.1", "reserved"}, {"250.1.2.3", "reserved"}, {"255.255.255.254", "reserved"},
		{"64:ff9b::a00:1", "NAT64"}, {"64:ff9b:1::a00:1", "NAT64"},
		{"2002:a00:1::1", "6to4"},
		{"fec0::1", "site-local"}, {"feff::1", "site-local"},
	}
	// Public addresses, some just outside a refused range.
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "172.32.0.1",
		"100.63.255.255", "100.128.0.1", "192.0.1.1", "198.17.255.255", "198.20.0.1", "2003::1",
	}
	var p egress.Policy
	for _, c := range refused {
		err := p.Check(netip.MustParseAddr(c.addr))
		var re *egress.RefusedError
		if !errors.As(err, &re) || re.Addr != netip.MustParseAddr(c.addr) || !strings.Contains(re.Reason, c.reason) {
			t.Errorf("%s: %v, want a *RefusedError naming it, its reason containing %q", c.addr, err, c.reason)
		}
	}
	for _, s := range allowed {
		if err := p.Check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s refused: %v", s, err)
		}
	}
	err := p.Check(netip.MustParseAddr("169.254.169.254"))
	if !strings.Contains(err.Error(), "169.254.169.254") || !strings.Contains(err.Error(), "link-local") {
		t.Errorf("message %q", err)
	}
	// Allow admits exactly its prefixes; a mapped address needs an IPv6 prefix.
	p = egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	if p.Check(netip.MustParseAddr("127.0.0.1")) != nil || p.Check(netip.MustParseAddr("127.0.0.2")) == nil ||
		p.Check(netip.MustParseAddr("::ffff:127.0.0.1")) == nil {
		t.Error("allowlist 127.0.0.1/32 misapplied")
	}
	if (egress.Policy{}).Check(netip.Addr{}) == nil {
		t.Error("the zero Addr passed")
	}
}

func TestCheckLiteral(t *testing.T) {
	t.Parallel()
	p := egress.Policy{Allow: egress.Loopback}
	for host, refused := range map[string]bool{
		"localhost": false, "example.com": false, "8.8.8.8": false, "127.0.0.1": false, "127.1.2.3": false, "::1": false,
		"::ffff:127.0.0.1": true, "10.0.0.1": true, "169.254.169.254": true,
	} {
		if err := p.CheckLiteral(host); (err != nil) != refused {
			t.Errorf("CheckLiteral(%q) = %v, want refused %v", host, err, refused)
		}
	}
}

func TestParseAllow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want string // the parsed policy's String, or the error's text
		bad  bool
	}{
		{in: "", want: ""},
		{in: " , ", want: ""},
		{in: "10.0.0.0/8", want: "10.0.0.0/8"},
		{in: "10.0.0.0/8, fd00::/8 ,192.168.1.20", want: "10.0.0.0/8,fd00::/8,192.168.1.20/32"},
		{in: "::1", want: "::1/128"},
		{in: "10.1.2.3/8", bad: true, want: "write the range as 10.0.0.0/8"},
		{in: "10.0.0.0/33", bad: true, want: `"10.0.0.0/33" is not a CIDR range`},
		{in: "localhost", bad: true, want: `"localhost" is not an IP address or CIDR range`},
		{in: "fe80::1%eth0", bad: true, want: "is not an IP address"},
		{in: "10.0.0.0/8;192.168.0.0/16", bad: true, want: "comma-separated"},
	} {
		got, err := egress.ParseAllow(c.in)
		switch {
		case c.bad && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("ParseAllow(%q) = %v, %v; want an error containing %q", c.in, got, err, c.want)
		case !c.bad && err != nil:
			t.Errorf("ParseAllow(%q): %v", c.in, err)
		case !c.bad && (egress.Policy{Allow: got}).String() != c.want:
			t.Errorf("ParseAllow(%q) = %v, want %s", c.in, got, c.want)
		}
	}
}

// The check runs on the address dialled, after name resolution: a name that
// resolves to loopback ("localhost") is refused like the literal.
func TestDialerChecksTheDialledAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx := context.Background()
	for _, addr := range []string{ln.Addr().String(), net.JoinHostPort("localhost", port)} {
		_, err := egress.Policy{}.Dialer(time.Second).DialContext(ctx, "tcp", addr)
		var re *egress.RefusedError
		if !errors.As(err, &re) || !re.Addr.IsLoopback() {
			t.Errorf("dial %s: %v, want a *RefusedError for a loopback address", addr, err)
		}
	}
	c, err := egress.Policy{Allow: egress.Loopback}.Dialer(time.Second).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial with loopback allowed: %v", err)
	}
	c.Close()
	if d := (egress.Policy{}).Dialer(3 * time.Second); d.Timeout != 3*time.Second {
		t.Errorf("Dialer(3s).Timeout = %v, want 3s", d.Timeout)
	}
}

// Control is what a dialer calls with the address about to be dialled. A
// net.Dialer already dials an IPv4-mapped address as IPv4, but Control
// refuses one itself; and what is not an IP address and port (a unix
// socket) is refused, naming what was dialled.
func TestControl(t *testing.T) {
	t.Parallel()
	p := egress.Policy{Allow: egress.Loopback}
	ctx := context.Background()
	for address, refused := range map[string]bool{
		"127.0.0.1:80": false, "[::1]:443": false, "8.8.8.8:53": false,
		"10.0.0.1:80": true, "[::ffff:127.0.0.1]:80": true,
	} {
		if err := p.Control(ctx, "tcp", address, nil); (err != nil) != refused {
			t.Errorf("Control(tcp %s) = %v, want refused %v", address, err, refused)
		}
	}
	err := p.Control(ctx, "unix", "/var/run/docker.sock", nil)
	var re *egress.RefusedError
	if !errors.As(err, &re) || re.Addr.IsValid() || !strings.Contains(err.Error(), "unix /var/run/docker.sock") {
		t.Errorf("Control(unix /var/run/docker.sock) = %v, want a *RefusedError with no Addr naming the socket", err)
	}
}

// Client ignores HTTP_PROXY: a proxy is dialled instead of the destination,
// so the policy would check the proxy's address and let any destination
// through it. Not parallel, as it sets the environment; net/http reads the
// proxy variables once per process, and a parallel test runs only after
// this one.
func TestClientIgnoresProxyEnvironment(t *testing.T) {
	var hits atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer proxy.Close()
	for _, k := range []string{"HTTP_PROXY", "http_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	for _, k := range []string{"NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
		t.Setenv(k, "")
	}
	// The proxy (on loopback) is allowed, the destination is not.
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://10.0.0.1/", nil)
	res, err := egress.Policy{Allow: egress.Loopback}.Client().Do(req)
	if err == nil {
		res.Body.Close()
	}
	var re *egress.RefusedError
	if !errors.As(err, &re) || hits.Load() != 0 {
		t.Errorf("GET http://10.0.0.1/ with HTTP_PROXY set: %v, and the proxy saw %d requests; want refused, and none", err, hits.Load())
	}
}

func TestClientChecksRedirects(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/mapped":
			http.Redirect(w, r, "http://[::ffff:127.0.0.1]/", http.StatusFound)
		case "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		default: // /redirects/n: n redirects, then 200
			if n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/redirects/")); n > 0 {
				http.Redirect(w, r, "/redirects/"+strconv.Itoa(n-1), http.StatusFound)
			}
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	get := func(p egress.Policy, url string) error {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		res, err := p.Client().Do(req)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	var re *egress.RefusedError
	if err := get(egress.Policy{}, "http://localhost:"+port+"/"); !errors.As(err, &re) {
		t.Errorf("strict policy, localhost: %v, want refused", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server saw %d requests from a strict policy", n)
	}
	allowed := egress.Policy{Allow: egress.Loopback}
	if err := get(allowed, "http://localhost:"+port+"/"); err != nil {
		t.Errorf("loopback allowed, localhost: %v", err)
	}
	for _, path := range []string{"/mapped", "/metadata"} {
		if err := get(allowed, srv.URL+path); !errors.As(err, &re) {
			t.Errorf("redirect %s: %v, want refused", path, err)
		}
	}
	// MaxRedirects redirects are followed; one more is not.
	if err := get(allowed, srv.URL+"/redirects/"+strconv.Itoa(egress.MaxRedirects)); err != nil {
		t.Errorf("%d redirects: %v, want followed", egress.MaxRedirects, err)
	}
	if err := get(allowed, srv.URL+"/redirects/"+strconv.Itoa(egress.MaxRedirects+1)); err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Errorf("%d redirects: %v, want stopped after 10", egress.MaxRedirects+1, err)
	}
}
