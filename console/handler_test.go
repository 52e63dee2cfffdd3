package console

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"
)

// TestFoldersUnderConsoleAreSkipped: a folder in assets/console is not an
// asset (and does not stop the Handler from being built).
func TestFoldersUnderConsoleAreSkipped(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"assets/console/index.html": {Data: []byte("<!doctype html>")},
		"assets/console/sub/x.js":   {Data: []byte("export {};")},
		"assets/embed.js":           {Data: []byte("//")},
		"assets/embed.css":          {Data: []byte("")},
		"assets/status.html":        {Data: []byte("<!doctype html>")},
	}
	h, err := newHandler(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]int{"/console/": 200, "/console/sub": 404, "/console/sub/x.js": 404} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", target, rec.Code, want)
		}
	}
}
