package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"stead/api/mcpclient"
)

// TestMCPEndToEnd drives the real `stead dev` binary's POST /mcp with the
// official MCP TypeScript SDK's client (protocol 2025-11-25, negotiated by
// the Go SDK's server): list the tools, call a read tool, a gated call an
// owner approves within the wait (→ its result), a gated call that outlives
// the wait (→ the pending result) approved later (→ stead_call_result
// returns the result), a denied call (→ a tool error with the note); each
// call is a run marked as coming from MCP and the key. Then the Go SDK's
// client (2026-07-28) with the tasks extension: a task, followed by
// tasks/get to its result.
func TestMCPEndToEnd(t *testing.T) {
	e, tmp := newE2E(t)
	addr := freeAddr(t)
	e.startServer(addr, filepath.Join(tmp, "data"), "--mcp-wait", "3s")
	created := e.must("mcp-keys", "create", "--agent", "refunds", "--end-user", "demo-user", "--name", "e2e", "--json").stdout
	key, keyID := jsonField(t, created, "key"), jsonField(t, created, "id")
	c := mcpclient.New(t, "http://"+addr+"/mcp", key)
	ctx := t.Context()

	listed, err := c.List(ctx)
	res := mustMCP(t, listed, err)
	if res.ProtocolVersion != "2025-11-25" {
		t.Errorf("negotiated %q, want 2025-11-25", res.ProtocolVersion)
	}
	var tools struct {
		Tools []struct {
			Name        string `json:"name"`
			Annotations struct {
				ReadOnlyHint    bool `json:"readOnlyHint"`
				DestructiveHint bool `json:"destructiveHint"`
			} `json:"annotations"`
		} `json:"tools"`
	}
	decodeMCP(t, res, &tools)
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
		if tl.Name == "refundOrder" && (!tl.Annotations.DestructiveHint || tl.Annotations.ReadOnlyHint) {
			t.Errorf("refundOrder annotations %+v", tl.Annotations)
		}
	}
	if len(names) != 3 || !names["listOrders"] || !names["refundOrder"] || !names["stead_call_result"] {
		t.Fatalf("tools %v", names)
	}

	type callResult struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Meta map[string]any `json:"_meta"`
	}
	call := func(tool string, args any) callResult {
		t.Helper()
		var out callResult
		res, err := c.Call(ctx, tool, args)
		decodeMCP(t, mustMCP(t, res, err), &out)
		return out
	}
	textOf := func(r callResult) string {
		var b strings.Builder
		for _, c := range r.Content {
			b.WriteString(c.Text)
		}
		return b.String()
	}

	// A read tool answers with its result.
	if r := call("listOrders", map[string]any{}); r.IsError || !strings.Contains(textOf(r), "o-1001") {
		t.Fatalf("listOrders: %+v", r)
	}

	// A gated call an owner approves within the wait answers with its result.
	type outcome struct {
		r   callResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var out callResult
		res, err := c.Call(context.Background(), "refundOrder", map[string]any{"orderId": "o-1001", "reason": "damaged"})
		if err == nil {
			err = json.Unmarshal(res.Raw, &out)
		}
		done <- outcome{out, err}
	}()
	approval := e.waitApproval("refundOrder")
	e.must("approve", approval, "--note", "fine")
	o := <-done
	if o.err != nil || o.r.IsError || !strings.Contains(textOf(o.r), "refunded") {
		t.Fatalf("approved call: %+v %v", o.r, o.err)
	}
	runID, _ := o.r.Meta["io.getstead/callId"].(string)
	trace := e.must("trace", runID, "--json").stdout
	if via := jsonField(t, trace, "run.via"); via != "mcp:"+keyID {
		t.Errorf("the call's run via %q, want mcp:%s", via, keyID)
	}
	if tool := jsonField(t, trace, "run.tool"); tool != "refundOrder" {
		t.Errorf("the call's run tool %q", tool)
	}
	if r := e.must("runs"); !strings.Contains(r.stdout, "refunds.refundOrder via mcp:"+keyID) {
		t.Errorf("runs does not mark the call as MCP's: %s", r.stdout)
	}
	if r := e.must("trace", runID); !strings.Contains(r.stdout, "refunds.refundOrder via mcp:"+keyID) {
		t.Errorf("trace does not mark the call as MCP's: %s", r.stdout)
	}

	// Outliving the wait: the pending result, then stead_call_result once
	// approved.
	r := call("refundOrder", map[string]any{"orderId": "o-1002", "reason": "late"})
	pendingID, _ := r.Meta["io.getstead/callId"].(string)
	if !r.IsError || !strings.Contains(textOf(r), "Not run yet") || !strings.Contains(textOf(r), "stead_call_result") {
		t.Fatalf("pending call: %+v", r)
	}
	e.must("approve", e.waitApproval("refundOrder"))
	if r := call("stead_call_result", map[string]any{"callId": pendingID}); r.IsError || !strings.Contains(textOf(r), "refunded") {
		t.Fatalf("stead_call_result: %+v", r)
	}

	// Denied: a tool error with the note.
	r = call("refundOrder", map[string]any{"orderId": "o-1003", "reason": "again"})
	deniedID, _ := r.Meta["io.getstead/callId"].(string)
	e.must("deny", e.waitApproval("refundOrder"), "--note", "refunded already")
	if r := call("stead_call_result", map[string]any{"callId": deniedID}); !r.IsError || !strings.Contains(textOf(r), "Denied") || !strings.Contains(textOf(r), "refunded already") {
		t.Fatalf("denied: %+v", r)
	}

	// The Go SDK's client, declaring the tasks extension: a gated call that
	// outlives the wait is a task, which tasks/get follows once approved.
	gocs, err := mcpclient.ConnectGo(ctx, "http://"+addr+"/mcp", key, mcpclient.GoOptions{Tasks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gocs.Close()
	gres, err := gocs.CallTool(ctx, &mcp.CallToolParams{Name: "refundOrder", Arguments: map[string]any{"orderId": "o-1003", "reason": "go"}})
	if err != nil {
		t.Fatal(err)
	}
	taskID := mcpclient.CallID(gres.Meta)
	task, err := mcpclient.GetTask(ctx, gocs, taskID)
	if err != nil || task.Status != "working" || !strings.Contains(task.StatusMessage, "waiting for approval") {
		t.Fatalf("tasks/get %s: %+v %v", taskID, task, err)
	}
	e.must("approve", e.waitApproval("refundOrder"))
	e.waitStatus(taskID, "succeeded")
	if task, err = mcpclient.GetTask(ctx, gocs, taskID); err != nil || task.Status != "completed" || !strings.Contains(string(task.Result), "refunded") {
		t.Fatalf("tasks/get after approval: %+v %v", task, err)
	}

	// Revoked, the key stops working at once.
	e.must("mcp-keys", "revoke", keyID)
	if res, err := c.List(ctx); err != nil || !strings.Contains(res.ClientError, "was revoked") {
		t.Errorf("a revoked key: %+v %v", res, err)
	}
}

// waitApproval polls `stead approvals --json` until a pending approval of
// the tool is listed, and returns its id.
func (e *e2e) waitApproval(tool string) string {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var list struct {
			Approvals []struct {
				ID   string `json:"id"`
				Tool string `json:"tool"`
			} `json:"approvals"`
		}
		if err := json.Unmarshal([]byte(e.must("approvals", "--json").stdout), &list); err != nil {
			e.t.Fatal(err)
		}
		for _, a := range list.Approvals {
			if a.Tool == tool {
				return a.ID
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no approval of %s was asked for", tool)
		}
		time.Sleep(100 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

func mustMCP(t *testing.T, r mcpclient.Result, err error) mcpclient.Result {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if r.ClientError != "" {
		t.Fatalf("mcp client: %s", r.ClientError)
	}
	return r
}

func decodeMCP(t *testing.T, r mcpclient.Result, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Raw, v); err != nil {
		t.Fatalf("decode %s: %v", r.Raw, err)
	}
}
