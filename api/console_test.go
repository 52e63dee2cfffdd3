package api_test

import (
	"net/http"
	"strings"
	"testing"

	"stead/console"
)

// The API serves the console, the status page and embed.js, with the
// console's headers and no credential.
func TestServesConsole(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, p := range []string{"/console/", "/console/app.js", "/status/run_123", "/embed.js"} {
		r := w.must(w.do(http.MethodGet, p, "", nil, "Origin", "https://shop.example"), http.StatusOK)
		csp := console.ContentSecurityPolicy
		if strings.HasPrefix(p, "/status/") {
			csp = console.StatusContentSecurityPolicy
		}
		if got := r.header.Get("Content-Security-Policy"); got != csp {
			t.Errorf("GET %s: CSP %q", p, got)
		}
		if got := r.header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q", p, got)
		}
		if got := r.header.Get("Cache-Control"); got != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q, want no-cache (revalidated by ETag)", p, got)
		}
	}
	r := w.must(w.do(http.MethodGet, "/embed.js", "", nil, "Origin", "https://shop.example"), http.StatusOK)
	if r.header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(string(r.body), "Stead.status") {
		t.Errorf("GET /embed.js: ACAO %q", r.header.Get("Access-Control-Allow-Origin"))
	}
	w.must(w.do(http.MethodGet, "/console/missing.js", "", nil), http.StatusNotFound)
	w.must(w.do(http.MethodPost, "/console/", "", nil), http.StatusMethodNotAllowed)
}
