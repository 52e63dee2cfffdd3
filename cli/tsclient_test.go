package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"stead"

	"stead/infra/localproc"
)

// TestTypeScriptClient: @getstead/client (clients/typescript), compiled
// with tsc --strict from the API's OpenAPI document, drives a gated run end
// to end against the built stead dev: start (and an idempotent repeat),
// wait, approve with the owner key, the status with a customer token, the
// events, resumed after an event, and an error as a typed object.
func TestTypeScriptClient(t *testing.T) {
	script := filepath.Join("..", "clients", "typescript", "dist-test", "test", "e2e.js")
	// clients/ is one npm workspace: its dependencies are installed in
	// clients/node_modules.
	if _, err := os.Stat(filepath.Join("..", "clients", "node_modules", "openapi-fetch")); err != nil {
		localproc.Unavailable(t, "clients/ is not installed: run make ts-client: %v", err)
	}
	e, tmp := newE2E(t)
	addr := freeAddr(t)
	e.startServer(addr, filepath.Join(tmp, "data"))
	cfg, err := readConfig(e.config)
	if err != nil {
		t.Fatal(err)
	}
	// Its types are the document's as it is now: generated again, they are
	// the committed ones.
	dir := filepath.Join("..", "clients", "typescript")
	fresh := filepath.Join(tmp, "schema.d.ts")
	gen := exec.Command("npx", "--no-install", "openapi-typescript", filepath.Join("..", "..", "api", "openapi.json"), "-o", fresh)
	gen.Dir = dir
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, out)
	}
	want, _ := os.ReadFile(fresh)
	have, _ := os.ReadFile(filepath.Join(dir, "src", "schema.d.ts"))
	if string(want) != string(have) {
		t.Errorf("clients/typescript/src/schema.d.ts is not the OpenAPI document's: run npm run generate in clients/typescript")
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "package.json")); err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Version != stead.Version() {
		t.Errorf("@getstead/client's version is %q, VERSION says %q", pkg.Version, stead.Version())
	}
	// @getstead/react (clients/react, tested in make test-browser) is
	// released with it, and depends on exactly it.
	var react struct {
		Version      string            `json:"version"`
		Dependencies map[string]string `json:"dependencies"`
	}
	if b, err := os.ReadFile(filepath.Join("..", "clients", "react", "package.json")); err != nil || json.Unmarshal(b, &react) != nil ||
		react.Version != stead.Version() || react.Dependencies["@getstead/client"] != stead.Version() {
		t.Errorf("@getstead/react's version is %q and its @getstead/client %q, VERSION says %q", react.Version, react.Dependencies["@getstead/client"], stead.Version())
	}
	// Compiled here, with tsc --strict, as the document is now.
	build := exec.Command("npm", "run", "--silent", "build-test")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("tsc --strict: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", script, "http://"+addr, cfg.Key).CombinedOutput()
	if err != nil {
		t.Fatalf("the TypeScript client: %v\n%s", err, out)
	}
	var got struct {
		StartedStatus, EndedStatus, CustomerStatus, NotFound string
		SameRun                                              bool
		Events                                               []string
		ResumedFirst, ResumedCount                           int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.StartedStatus != "awaiting-approval" || got.EndedStatus != "succeeded" || got.CustomerStatus != "succeeded" || !got.SameRun {
		t.Errorf("the run through the client: %s", out)
	}
	if !slices.Contains(got.Events, "1 run.created") || !strings.HasSuffix(got.Events[len(got.Events)-1], " run.succeeded") ||
		got.ResumedFirst != 4 || got.ResumedCount != len(got.Events)-3 {
		t.Errorf("events and their resumption: %s", out)
	}
	if got.NotFound != "404 not_found" {
		t.Errorf("an error as a SteadError: %q", got.NotFound)
	}
}
