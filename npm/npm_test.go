package npm_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"stead"
	"stead/infra/localproc"
	"stead/npm"
)

// verdaccio is the local registry the test publishes to (npm verdaccio,
// pinned in registry/package-lock.json; make npm-registry installs it).
func verdaccio(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "registry", "node_modules", "verdaccio", "bin", "verdaccio")
	if _, err := os.Stat(bin); err != nil {
		localproc.Unavailable(t, "verdaccio is not installed: run make npm-registry (npm ci in npm/registry): %v", err)
	}
	return bin
}

// TestNPXGetstead builds the getstead packages as `make npm` does (the
// binary of this platform only: the launcher names all five), publishes
// them to a verdaccio started on loopback, starts `stead dev` from the
// published binary, and runs `npx --yes getstead@VERSION approvals`
// against it: the approval a run waits for is listed.
func TestNPXGetstead(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the stead binary and runs a registry and a server; skipped with -short")
	}
	bin := verdaccio(t)
	host, ok := npm.Host()
	if !ok {
		t.Skipf("getstead ships no binary for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	ctx := t.Context()
	tmp := t.TempDir()
	version := stead.Version()
	tgzs, err := npm.Build(ctx, npm.Options{Root: "..", Out: filepath.Join(tmp, "dist"), Version: version, Platforms: []npm.Platform{host}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"getstead-" + version + ".tgz", host.Name() + "-" + version + ".tgz"}
	var names []string
	for _, p := range tgzs {
		names = append(names, filepath.Base(p))
	}
	if !slices.Equal(names, want) {
		t.Fatalf("tarballs %v, want %v", names, want)
	}

	// The launcher runs the binary of every platform, at this version.
	var launcher struct {
		Name     string            `json:"name"`
		Version  string            `json:"version"`
		Bin      map[string]string `json:"bin"`
		Optional map[string]string `json:"optionalDependencies"`
	}
	if err := json.Unmarshal(fileInTar(t, tgzs[0], "package/package.json"), &launcher); err != nil {
		t.Fatal(err)
	}
	if launcher.Name != "getstead" || launcher.Version != version || launcher.Bin["getstead"] == "" || len(launcher.Optional) != 5 {
		t.Fatalf("launcher package.json %+v", launcher)
	}
	for _, p := range npm.Platforms {
		if launcher.Optional[p.Name()] != version {
			t.Errorf("launcher lacks %s@%s: %v", p.Name(), version, launcher.Optional)
		}
	}

	registry := startVerdaccio(t, bin, tmp)
	npmrc := filepath.Join(tmp, "npmrc")
	// verdaccio's config lets anyone publish; npm still wants a token.
	host2 := strings.TrimPrefix(registry, "http:")
	if err := os.WriteFile(npmrc, []byte(host2+"/:_authToken=test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	npmEnv := append(os.Environ(),
		"npm_config_registry="+registry+"/",
		"npm_config_userconfig="+npmrc,
		"npm_config_cache="+filepath.Join(tmp, "npm-cache"),
		"npm_config_update_notifier=false",
		"npm_config_fund=false",
		"npm_config_audit=false",
	)
	for _, tgz := range tgzs {
		cmd := exec.CommandContext(ctx, "npm", "publish", tgz)
		cmd.Env, cmd.Dir = npmEnv, tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm publish %s: %v\n%s", filepath.Base(tgz), err, out)
		}
	}

	// stead dev from the published binary, with the example.
	steadBin := filepath.Join(tmp, "stead")
	if err := os.WriteFile(steadBin, fileInTar(t, tgzs[1], "package/bin/stead"), 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	steadEnv := append(slices.Clone(npmEnv), "HOME="+home, "STEAD_CONFIG="+filepath.Join(tmp, "config.json"), "STEAD_URL=", "STEAD_KEY=")
	startDev(t, steadBin, steadEnv, filepath.Join(tmp, "data"))
	run := exec.CommandContext(ctx, steadBin, "run", "refunds", "--input", `{"orderId":"o-1001","reason":"damaged"}`, "--end-user", "demo-user", "--wait", "--json")
	run.Env = steadEnv
	out, err := run.Output()
	if err != nil {
		t.Fatalf("stead run: %v\n%s", err, out)
	}
	var started struct {
		Status   string `json:"status"`
		Approval struct {
			ID string `json:"id"`
		} `json:"approval"`
	}
	if err := json.Unmarshal(out, &started); err != nil || started.Status != "awaiting-approval" {
		t.Fatalf("stead run: %s (%v)", out, err)
	}

	npx := func(args ...string) string {
		t.Helper()
		work := filepath.Join(tmp, "work")
		if err := os.MkdirAll(work, 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "npx", append([]string{"--yes", "getstead@" + version}, args...)...)
		cmd.Env, cmd.Dir = steadEnv, work
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("npx getstead %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if got := npx("--version"); !strings.HasPrefix(got, "stead "+version+" ") {
		t.Errorf("npx getstead --version: %q", got)
	}
	if got := npx("approvals"); !strings.Contains(got, started.Approval.ID) || !strings.Contains(got, "refundOrder") {
		t.Errorf("npx getstead approvals does not list %s:\n%s", started.Approval.ID, got)
	}
}

// fileInTar returns one file of a .tgz.
func fileInTar(t *testing.T, tgz, name string) []byte {
	t.Helper()
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s has no %s", filepath.Base(tgz), name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// startVerdaccio starts the registry on a free loopback port with its
// storage in dir, open to anyone (no uplinks: only what the test
// publishes), and returns its URL once it answers.
func startVerdaccio(t *testing.T, bin, dir string) string {
	t.Helper()
	port, err := localproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "verdaccio.yaml")
	conf := fmt.Sprintf("storage: %s\nmax_body_size: 200mb\nauth:\n  htpasswd:\n    file: %s\n    max_users: -1\nuplinks: {}\npackages:\n  '**':\n    access: $all\n    publish: $all\nlog: { type: stdout, format: pretty, level: warn }\n",
		filepath.Join(dir, "registry-storage"), filepath.Join(dir, "htpasswd"))
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", bin, "--config", cfg, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	logs := &localproc.Log{Max: 8 << 10}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("verdaccio did not answer on %s: %v\n%s", url, err, logs)
		}
		time.Sleep(100 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

// startDev runs `stead dev --example` on a free loopback port until the
// test ends, once it has printed that it is ready.
func startDev(t *testing.T, bin string, env []string, data string) {
	t.Helper()
	port, err := localproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "dev", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--data", data, "--example", "--log-level", "warn")
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "Press Ctrl-C to stop." {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("stead dev ended before it was ready:\n%s", stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("stead dev was not ready in 60 s:\n%s", stderr.String())
	}
}
