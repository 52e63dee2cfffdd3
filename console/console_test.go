package console_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"

	"stead/console"
)

// get serves one request from a fresh Handler.
func get(t *testing.T, method, target string, headers ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	console.New().ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkSecurityHeaders fails unless res carries every security header.
func checkSecurityHeaders(t *testing.T, target string, res *http.Response) {
	t.Helper()
	csp := console.ContentSecurityPolicy
	if strings.HasPrefix(target, "/status/") && res.StatusCode == http.StatusOK {
		// The status page may show the project's logo from https:.
		csp = console.StatusContentSecurityPolicy
	}
	want := map[string]string{
		"Content-Security-Policy": csp,
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
	}
	for k, v := range want {
		if got := res.Header.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", target, k, got, v)
		}
	}
}

// served lists every embedded asset with the URL that serves it.
func served(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{
		"/console/":  "assets/console/index.html",
		"/embed.js":  "assets/embed.js",
		"/embed.css": "assets/embed.css",
	}
	entries, err := fs.ReadDir(console.Assets(), "assets/console")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "index.html" {
			out["/console/"+e.Name()] = "assets/console/" + e.Name()
		}
	}
	return out
}

func TestEveryAssetIsServedWithHeadersAndType(t *testing.T) {
	t.Parallel()
	types := map[string]string{
		".html": "text/html; charset=utf-8",
		".js":   "text/javascript; charset=utf-8",
		".css":  "text/css; charset=utf-8",
		".svg":  "image/svg+xml",
	}
	assets := served(t)
	if len(assets) < 10 {
		t.Fatalf("only %d assets are served: %v", len(assets), assets)
	}
	for url, name := range assets {
		res := get(t, http.MethodGet, url)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d", url, res.StatusCode)
			continue
		}
		checkSecurityHeaders(t, url, res)
		if got, want := res.Header.Get("Content-Type"), types[path.Ext(name)]; got != want || want == "" {
			t.Errorf("GET %s: Content-Type %q, want %q", url, got, want)
		}
		embedded, err := fs.ReadFile(console.Assets(), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := body(t, res); got != string(embedded) {
			t.Errorf("GET %s: body is not the embedded %s", url, name)
		}
		if res.Header.Get("ETag") == "" || res.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: ETag %q, Cache-Control %q", url, res.Header.Get("ETag"), res.Header.Get("Cache-Control"))
		}
	}
}

func TestStatusPage(t *testing.T) {
	t.Parallel()
	res := get(t, http.MethodGet, "/status/run_01J8ZQ4RX9")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	checkSecurityHeaders(t, "/status/…", res)
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	b := body(t, res)
	status, _ := fs.ReadFile(console.Assets(), "assets/status.html")
	if b != string(status) || !strings.Contains(b, `src="/embed.js"`) || !strings.Contains(b, `src="/console/status.js"`) {
		t.Errorf("GET /status/{id} did not serve status.html:\n%s", b)
	}
}

func TestUnknownPathsAre404(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		"/console/nope.js", "/console/index.html", "/console/../embed.js", "/console/assets/console/app.js",
		"/console/app.js/", "/status/", "/status/run_1/x", "/embed.jsx", "/console/e2e/package.json",
		"/console/console.go", "/status.html",
	} {
		res := get(t, http.MethodGet, p)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, res.StatusCode)
		}
		checkSecurityHeaders(t, p, res)
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
	}
}

func TestConsoleRedirectsToSlash(t *testing.T) {
	t.Parallel()
	res := get(t, http.MethodGet, "/console")
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console: %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
}

func TestOnlyGetAndHead(t *testing.T) {
	t.Parallel()
	res := get(t, http.MethodHead, "/console/")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Length") == "" {
		t.Errorf("HEAD /console/: %d, Content-Length %q", res.StatusCode, res.Header.Get("Content-Length"))
	}
	res = get(t, http.MethodPost, "/console/")
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /console/: %d Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
	checkSecurityHeaders(t, "POST /console/", res)
}

func TestETagRevalidates(t *testing.T) {
	t.Parallel()
	etag := get(t, http.MethodGet, "/console/app.js").Header.Get("ETag")
	res := get(t, http.MethodGet, "/console/app.js", "If-None-Match", etag)
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match %s: status %d, want 304", etag, res.StatusCode)
	}
}

func TestEmbedIsLoadableFromOtherOrigins(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/embed.js", "/embed.css"} {
		res := get(t, http.MethodGet, p)
		if res.Header.Get("Access-Control-Allow-Origin") != "*" || res.Header.Get("Cross-Origin-Resource-Policy") != "cross-origin" {
			t.Errorf("GET %s: ACAO %q, CORP %q", p, res.Header.Get("Access-Control-Allow-Origin"), res.Header.Get("Cross-Origin-Resource-Policy"))
		}
	}
	res := get(t, http.MethodGet, "/console/")
	if res.Header.Get("Access-Control-Allow-Origin") != "" || res.Header.Get("Cross-Origin-Resource-Policy") != "same-origin" {
		t.Errorf("GET /console/: ACAO %q, CORP %q", res.Header.Get("Access-Control-Allow-Origin"), res.Header.Get("Cross-Origin-Resource-Policy"))
	}
}

// TestReferencesResolve: every /path an HTML page loads and every module a
// script imports is served.
func TestReferencesResolve(t *testing.T) {
	t.Parallel()
	ref := regexp.MustCompile(`(?:src|href)="(/[^"#]*)"`)
	imp := regexp.MustCompile(`(?m)^import [^;]*from "\./([^"]+)";`)
	checked := 0
	err := fs.WalkDir(console.Assets(), "assets", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(console.Assets(), name)
		if err != nil {
			return err
		}
		var urls []string
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			urls = append(urls, m[1])
		}
		for _, m := range imp.FindAllStringSubmatch(string(b), -1) {
			urls = append(urls, "/console/"+m[1])
		}
		for _, u := range urls {
			if u == "/console/" || strings.HasPrefix(u, "/console/#") {
				continue
			}
			checked++
			if res := get(t, http.MethodGet, u); res.StatusCode != http.StatusOK {
				t.Errorf("%s refers to %s: status %d", name, u, res.StatusCode)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 15 {
		t.Errorf("only %d references checked; is the pattern still right?", checked)
	}
}

// TestNoMarkupFromData guards the rules that keep the CSP strict and API
// data text: no inline script or style, no event-handler attributes, and no
// HTML parsing of strings in the scripts.
func TestNoMarkupFromData(t *testing.T) {
	t.Parallel()
	script := regexp.MustCompile(`(?is)<script([^>]*)>(.*?)</script>`)
	html := []*regexp.Regexp{
		regexp.MustCompile(`(?i)<style`),
		regexp.MustCompile(`(?i)\sstyle=`),
		regexp.MustCompile(`(?i)\son[a-z]+=`),
		regexp.MustCompile(`(?i)javascript:`),
	}
	accentLine := regexp.MustCompile(`^\s*(box|document\.documentElement)\.style\.setProperty\("--stead-accent", (c|b\.accentColor)\);$`)
	js := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*["']style|\.style\b|createElement\(\s*["']style`)
	err := fs.WalkDir(console.Assets(), "assets", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(console.Assets(), name)
		if err != nil {
			return err
		}
		switch path.Ext(name) {
		case ".html":
			for _, m := range script.FindAllStringSubmatch(string(b), -1) {
				if !strings.Contains(m[1], " src=") || strings.TrimSpace(m[2]) != "" {
					t.Errorf("%s: inline script %q", name, m[0])
				}
			}
			for _, re := range html {
				if m := re.Find(b); m != nil {
					t.Errorf("%s: %q breaks the CSP rules", name, m)
				}
			}
		case ".js":
			for i, line := range strings.Split(string(b), "\n") {
				// The one style written: the project's accent colour, checked
				// to be #rrggbb first, as a custom property through the CSSOM
				// (not a style attribute; the CSP allows it).
				if accentLine.MatchString(line) {
					continue
				}
				if js.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") && !strings.HasPrefix(strings.TrimSpace(line), "*") {
					t.Errorf("%s:%d: %s", name, i+1, strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRootRedirectsToConsole(t *testing.T) {
	t.Parallel()
	res := get(t, http.MethodGet, "/")
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/console/" {
		t.Errorf("GET /: %d Location %q, want 302 to /console/", res.StatusCode, res.Header.Get("Location"))
	}
	checkSecurityHeaders(t, "/", res)
}

func TestPagesAreIsolatedFromOpeners(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/console/", "/console/app.js", "/status/run_1"} {
		res := get(t, http.MethodGet, p)
		if res.Header.Get("Cross-Origin-Opener-Policy") != "same-origin" || res.Header.Get("Cross-Origin-Resource-Policy") != "same-origin" {
			t.Errorf("GET %s: COOP %q, CORP %q", p, res.Header.Get("Cross-Origin-Opener-Policy"), res.Header.Get("Cross-Origin-Resource-Policy"))
		}
	}
}

// TestStatusPolicyOnlyAddsHTTPSImages: the status page's policy is the
// strict one with https: images (the project's logo), nothing else.
func TestStatusPolicyOnlyAddsHTTPSImages(t *testing.T) {
	t.Parallel()
	want := strings.Replace(console.ContentSecurityPolicy, "img-src 'self' data:;", "img-src 'self' data: https:;", 1)
	if want == console.ContentSecurityPolicy || console.StatusContentSecurityPolicy != want {
		t.Errorf("status page policy %q, want %q", console.StatusContentSecurityPolicy, want)
	}
}

// TestETagsAreContentHashes: each asset's ETag is a quoted hash of its
// bytes, so a new binary with changed assets invalidates caches.
func TestETagsAreContentHashes(t *testing.T) {
	t.Parallel()
	etag := regexp.MustCompile(`^"[0-9a-f]{24}"$`)
	seen := map[string]string{}
	for url := range served(t) {
		tag := get(t, http.MethodGet, url).Header.Get("ETag")
		if !etag.MatchString(tag) {
			t.Errorf("GET %s: ETag %q", url, tag)
		}
		if other, ok := seen[tag]; ok {
			t.Errorf("%s and %s share the ETag %s", url, other, tag)
		}
		seen[tag] = url
	}
}
