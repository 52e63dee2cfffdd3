// Package console serves Stead's browser pages from files embedded in the
// binary: the web console for project owners (/console/), the live status
// page for end users (/status/{runId}) and embed.js, the script a customer
// UI includes to render the same status into its own page.
//
// The pages are hand-written HTML, CSS and JavaScript modules with no build
// step and nothing loaded from elsewhere: they work offline and on Lambda
// alike, because the API handler serves them (see api/console.go). They
// talk to the API of the origin that served them with a bearer credential
// that never appears in a URL or a cookie: the console's API key is kept in
// sessionStorage, and the status page reads a customer token from the URL
// fragment, which browsers never send to a server.
//
// Every response carries a strict Content-Security-Policy (scripts, styles
// and connections from this origin only, no inline script or style, no
// framing), X-Frame-Options DENY, nosniff and Referrer-Policy no-referrer.
// The scripts build the page with DOM calls and textContent only, never
// innerHTML, so data from the API is always text. They write no style but
// one: the project's accent colour (stead.json branding.accentColor, a
// #rrggbb checked at deploy and again before use), set as the custom
// property --stead-accent through the CSSOM, which the CSP allows.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is sent with every response of the Handler.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// StatusContentSecurityPolicy is the status page's: ContentSecurityPolicy,
// but images may also come from https: (the project's logo, stead.json
// branding.logoUrl, which the config allows only as https: or data:image).
const StatusContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data: https:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Routes are the path patterns (net/http.ServeMux syntax, for GET) the
// Handler serves; mount it on each.
var Routes = []string{"/{$}", "/console", "/console/", "/status/{runId}", "/embed.js", "/embed.css"}

// Handler serves the embedded pages. It is safe for concurrent use.
type Handler struct {
	// files maps a URL path to what it serves.
	files  map[string]*file
	status *file
}

var _ http.Handler = (*Handler)(nil)

type file struct {
	body        []byte
	contentType string
	etag        string
	// public: meant to be loaded by other origins' pages (embed.js, embed.css).
	public bool
}

// New returns a Handler over the embedded assets.
func New() *Handler {
	h, err := newHandler(assets)
	if err != nil {
		// The assets are part of the binary: a failure here is a build bug.
		panic(err)
	}
	return h
}

// newHandler indexes fsys: assets/console/* at /console/*, assets/embed.*
// at /embed.*, and assets/status.html for /status/{runId}.
func newHandler(fsys fs.FS) (*Handler, error) {
	h := &Handler{files: map[string]*file{}}
	load := func(name string, public bool) (*file, error) {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read console asset %s: %w", name, err)
		}
		ct, ok := contentTypes[path.Ext(name)]
		if !ok {
			return nil, fmt.Errorf("console asset %s: no content type for %q", name, path.Ext(name))
		}
		sum := sha256.Sum256(b)
		return &file{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, public: public}, nil
	}
	entries, err := fs.ReadDir(fsys, "assets/console")
	if err != nil {
		return nil, fmt.Errorf("list console assets: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		f, err := load("assets/console/"+e.Name(), false)
		if err != nil {
			return nil, err
		}
		url := "/console/" + e.Name()
		if e.Name() == "index.html" {
			url = "/console/"
		}
		h.files[url] = f
	}
	for _, name := range []string{"embed.js", "embed.css"} {
		f, err := load("assets/"+name, true)
		if err != nil {
			return nil, err
		}
		h.files["/"+name] = f
	}
	if h.status, err = load("assets/status.html", false); err != nil {
		return nil, err
	}
	return h, nil
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// SetPageHeaders sets the security headers of every page Stead serves
// (these, and the API's review page): the strict ContentSecurityPolicy, no
// framing, nosniff, and no Referer — a page's URL may hold a credential
// (the review page's link) that must not leak to what it links to.
func SetPageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// ServeHTTP serves GET and HEAD of the console's paths; anything else is a
// plain 404 (or 405), with the security headers all the same.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	SetPageHeaders(hd)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	var f *file
	switch {
	case p == "/console":
		http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
		return
	case p == "/": // the address stead dev prints: a person opening it wants the console
		http.Redirect(w, r, "/console/", http.StatusFound)
		return
	case strings.HasPrefix(p, "/status/"):
		if id := strings.TrimPrefix(p, "/status/"); id != "" && !strings.Contains(id, "/") {
			f = h.status
			hd.Set("Content-Security-Policy", StatusContentSecurityPolicy)
		}
	default:
		f = h.files[p]
	}
	if f == nil {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	hd.Set("Content-Type", f.contentType)
	// Revalidate every time: a new binary serves new assets at once.
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", f.etag)
	if f.public {
		// embed.js and embed.css are loaded by customer pages of any origin.
		hd.Set("Access-Control-Allow-Origin", "*")
		hd.Set("Cross-Origin-Resource-Policy", "cross-origin")
	} else {
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}

// Assets returns the embedded files (under assets/), for tests and tools.
func Assets() fs.FS { return assets }
