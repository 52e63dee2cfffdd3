// Package mcpclient runs the official MCP clients against Stead's POST
// /mcp, for tests: the TypeScript SDK's (npm @modelcontextprotocol/sdk,
// pinned in package-lock.json here; `make mcp-client` installs it; New
// skips a test without it, and fails it with CI=true) and the Go SDK's
// (ConnectGo, with the tasks extension's methods). The end-to-end tests of
// `stead dev` and of the API function under the Lambda emulator drive both.
package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"stead/infra/localproc"
)

// Version is the pinned @modelcontextprotocol/sdk.
const Version = "1.32.2"

// Client is client.mjs with its node.
type Client struct {
	node, script string
	url, key     string
}

// New finds node and the installed SDK; it skips the test (fails it with
// CI=true) when either is missing.
func New(t testing.TB, url, key string) *Client {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		localproc.Unavailable(t, "@modelcontextprotocol/sdk is not installed: run make mcp-client (npm ci in api/mcpclient): %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		localproc.Unavailable(t, "node is not on PATH (apt-get install nodejs): %v", err)
	}
	return &Client{node: node, script: filepath.Join(dir, "client.mjs"), url: url, key: key}
}

// Result is what one command printed: the MCP result as JSON, or the
// client's error.
type Result struct {
	Raw         json.RawMessage
	ClientError string
	// ProtocolVersion is the version the SDK negotiated.
	ProtocolVersion string
}

// List runs tools/list.
func (c *Client) List(ctx context.Context) (Result, error) { return c.run(ctx, "list") }

// Call runs tools/call of tool with args (a JSON object).
func (c *Client) Call(ctx context.Context, tool string, args any) (Result, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return Result{}, err
	}
	return c.run(ctx, "call", tool, string(b))
}

func (c *Client) run(ctx context.Context, args ...string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.node, append([]string{c.script, c.url, c.key}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	var res struct {
		ClientError     string `json:"clientError"`
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &res); err != nil {
		return Result{}, &Error{Err: runErr, Stdout: out.String(), Stderr: errb.String()}
	}
	return Result{Raw: bytes.TrimSpace(out.Bytes()), ClientError: res.ClientError, ProtocolVersion: res.ProtocolVersion}, nil
}

// Error is a client run that printed no result.
type Error struct {
	Err            error
	Stdout, Stderr string
}

func (e *Error) Error() string {
	return "mcp client: " + errString(e.Err) + "; stdout: " + e.Stdout + "; stderr: " + e.Stderr
}

func errString(err error) string {
	if err == nil {
		return "no result"
	}
	return err.Error()
}
