// Package mcptooltest starts the MCP reference test server,
// @modelcontextprotocol/server-everything (npm, pinned in
// runtime/mcptool/testdata/tooling/package-lock.json), in its streamable
// HTTP mode on a free loopback port, for tests of MCP-backed tools.
//
// `make mcp-everything` installs it (npm ci). Without it a test is skipped
// with that command — and fails under CI=true, where `make test` has
// installed it.
package mcptooltest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"stead/infra/localproc"
)

// Version is the pinned server-everything version (package.json).
const Version = "2026.8.31"

// StartEverything starts server-everything and returns its MCP endpoint
// (http://127.0.0.1:PORT/mcp) once it answers; the server is stopped in
// t.Cleanup.
func StartEverything(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "testdata", "tooling")
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		localproc.Unavailable(t, "server-everything is not installed: run make mcp-everything (npm ci in runtime/mcptool/testdata/tooling): %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		localproc.Unavailable(t, "node is not on PATH (apt-get install nodejs): %v", err)
	}
	var lastErr error
	for range 3 { // a free port may be taken before the server binds it
		port, err := localproc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		url, err := start(t, node, entry, port)
		if err == nil {
			return url
		}
		lastErr = err
	}
	t.Fatalf("start server-everything: %v", lastErr)
	return ""
}

func start(t testing.TB, node, entry string, port int) (string, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	log := &localproc.Log{Max: 64 << 10, Show: 4 << 10}
	cmd.Stdout = log
	stderr, err := cmd.StderrPipe()
	if err != nil {
		cancel()
		return "", err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return "", fmt.Errorf("start node: %w", err)
	}
	exited := make(chan struct{})
	listening := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			if strings.Contains(line, "listening on port") {
				select {
				case listening <- struct{}{}:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() { cancel(); <-exited }
	select {
	case <-listening:
	case <-exited:
		cancel()
		return "", fmt.Errorf("server-everything exited: %s", log)
	case <-time.After(30 * time.Second):
		stop()
		return "", fmt.Errorf("server-everything did not listen within 30s: %s", log)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	// It answers: a GET without a session is refused with a 4xx, from
	// the server itself.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("server-everything does not answer at %s: %v: %s", url, err, log)
		}
		time.Sleep(50 * time.Millisecond) // poll a starting process, bounded by the deadline
	}
	t.Cleanup(stop)
	return url, nil
}
