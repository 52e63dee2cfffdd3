package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"stead/api"
	"stead/api/mcpclient"
	"stead/api/wire"
)

// mcpClient connects the Go SDK's client to POST /mcp with an MCP key;
// with tasks, it declares the tasks extension.
func (w *world) mcpClient(key string, tasks bool) *mcp.ClientSession {
	w.t.Helper()
	cs, err := mcpclient.ConnectGo(context.Background(), w.url+"/mcp", key, mcpclient.GoOptions{Tasks: tasks, Transport: checkedTransport{t: w.t}})
	if err != nil {
		w.t.Fatalf("connect: %v", err)
	}
	w.t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func callIDOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	id := mcpclient.CallID(res.Meta)
	if !strings.HasPrefix(id, "run_") {
		t.Fatalf("result has no call id: %+v", res.Meta)
	}
	return id
}

// approveWhenAsked approves the first pending approval of the run list's
// newest MCP call as the owner, once it appears.
func (w *world) approveWhenAsked(note string, edit map[string]any) chan string {
	done := make(chan string, 1)
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			var list wire.ApprovalList
			w.must(w.do("GET", "/v1/approvals?status=pending", w.owner, nil), 200).decode(&list)
			if len(list.Approvals) > 0 {
				body := map[string]any{"note": note}
				if edit != nil {
					body["input"] = edit
				}
				w.must(w.do("POST", "/v1/approvals/"+list.Approvals[0].ID+"/approve", w.owner, body), 200)
				done <- list.Approvals[0].ID
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		done <- ""
	}()
	return done
}

func TestMCPToolsList(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cs := w.mcpClient(w.newMCPKey("refunds", "alice").Key, false)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		tools[tl.Name] = tl
	}
	if len(tools) != 3 || tools["listOrders"] == nil || tools["refundOrder"] == nil || tools["stead_call_result"] == nil {
		t.Fatalf("tools = %v, want listOrders, refundOrder, stead_call_result", res.Tools)
	}
	lo, ro := tools["listOrders"], tools["refundOrder"]
	if !lo.Annotations.ReadOnlyHint || *lo.Annotations.DestructiveHint || lo.Description != "List orders." || lo.Meta["io.getstead/requiresApproval"] != false {
		t.Errorf("listOrders = %+v %+v", lo, lo.Annotations)
	}
	if ro.Annotations.ReadOnlyHint || !*ro.Annotations.DestructiveHint || *ro.Annotations.OpenWorldHint ||
		!strings.Contains(ro.Description, "approval") || ro.Meta["io.getstead/requiresApproval"] != true {
		t.Errorf("refundOrder = %+v %+v", ro, ro.Annotations)
	}
	schema, _ := json.Marshal(ro.InputSchema)
	if !strings.Contains(string(schema), `"required":["orderId","amount"]`) {
		t.Errorf("refundOrder input schema = %s", schema)
	}

	// A key of another agent lists that agent's tools only.
	other := w.mcpClient(w.newMCPKey("plain", "alice").Key, false)
	res, err = other.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 2 || res.Tools[0].Name != "addNote" {
		t.Errorf("plain's tools = %v", res.Tools)
	}
	if _, err := other.CallTool(t.Context(), &mcp.CallToolParams{Name: "refundOrder", Arguments: map[string]any{"orderId": "o-1", "amount": 1}}); err == nil ||
		!strings.Contains(err.Error(), `unknown tool "refundOrder"`) {
		t.Errorf("a plain key called refundOrder: %v", err)
	}
}

func TestMCPCalls(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.MCPWait = 1500 * time.Millisecond })
	key := w.newMCPKey("refunds", "alice")
	cs := w.mcpClient(key.Key, false)

	// A read tool answers with its result, as the key's end user.
	res := callTool(t, cs, "listOrders", map[string]any{})
	if res.IsError || !strings.Contains(text(res), `"user":"alice"`) {
		t.Fatalf("listOrders: %v %s", res.IsError, text(res))
	}
	if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), `"user":"alice"`) {
		t.Errorf("structured content %s", sc)
	}
	// An allowed call repeated is a second call: only one that waits for a
	// person is shared.
	if again := callTool(t, cs, "listOrders", map[string]any{}); callIDOf(t, again) == callIDOf(t, res) {
		t.Errorf("a repeated allowed call returned the first call %s", callIDOf(t, res))
	}
	runs := w.runCount()

	// Input the tool's schema refuses is a tool error with the usual
	// message, and starts no run.
	res = callTool(t, cs, "refundOrder", map[string]any{"orderId": "o-1"})
	if !res.IsError || !strings.Contains(text(res), "amount") {
		t.Fatalf("bad input: %v %s", res.IsError, text(res))
	}
	if n := w.runCount(); n != runs {
		t.Errorf("a refused call made a run: %d runs, want %d", n, runs)
	}

	// A gated call waits; an owner approving within the wait gets the
	// call its result, with the approved (edited) input.
	approved := w.approveWhenAsked("ok", map[string]any{"orderId": "o-1", "amount": 5})
	res = callTool(t, cs, "refundOrder", map[string]any{"orderId": "o-1", "amount": 50})
	if id := <-approved; id == "" {
		t.Fatal("no approval was asked for")
	}
	if res.IsError || !strings.Contains(text(res), `"refunded":5`) {
		t.Fatalf("approved call: %v %s", res.IsError, text(res))
	}
	var run wire.Run
	w.must(w.do("GET", "/v1/runs/"+callIDOf(t, res), w.owner, nil), 200).decode(&run)
	if run.Tool != "refundOrder" || run.Via != "mcp:"+key.ID || run.EndUserID != "alice" || run.Agent != "refunds" {
		t.Errorf("the call's run = %+v", run)
	}

	// Not approved within the wait: a pending result naming the approval,
	// its expiry and stead_call_result. The same call again is the same
	// call: no second approval.
	res = callTool(t, cs, "refundOrder", map[string]any{"orderId": "o-2", "amount": 7})
	id := callIDOf(t, res)
	if !res.IsError || !strings.Contains(text(res), "Not run yet") || !strings.Contains(text(res), "apr_") ||
		!strings.Contains(text(res), "expires") || !strings.Contains(text(res), "stead_call_result") || !strings.Contains(text(res), id) {
		t.Fatalf("pending call: %s", text(res))
	}
	again := callTool(t, cs, "refundOrder", map[string]any{"amount": 7, "orderId": "o-2"})
	if callIDOf(t, again) != id {
		t.Errorf("a repeated call made a second call: %s, want %s", callIDOf(t, again), id)
	}
	var pending wire.ApprovalList
	w.must(w.do("GET", "/v1/approvals?status=pending", w.owner, nil), 200).decode(&pending)
	if len(pending.Approvals) != 1 {
		t.Fatalf("%d pending approvals, want 1", len(pending.Approvals))
	}
	// Approved later: stead_call_result returns the result.
	w.must(w.do("POST", "/v1/approvals/"+pending.Approvals[0].ID+"/approve", w.owner, nil), 200)
	res = callTool(t, cs, "stead_call_result", map[string]any{"callId": id})
	if res.IsError || !strings.Contains(text(res), `"refunded":7`) {
		t.Fatalf("stead_call_result: %v %s", res.IsError, text(res))
	}

	// Denied: a tool error with the note, worded apart from an expiry.
	res = callTool(t, cs, "refundOrder", map[string]any{"orderId": "o-3", "amount": 9})
	id = callIDOf(t, res)
	w.must(w.do("GET", "/v1/approvals?status=pending", w.owner, nil), 200).decode(&pending)
	w.must(w.do("POST", "/v1/approvals/"+pending.Approvals[0].ID+"/deny", w.owner, map[string]any{"note": "already refunded"}), 200)
	res = callTool(t, cs, "stead_call_result", map[string]any{"callId": id})
	if !res.IsError || !strings.HasPrefix(text(res), "Denied:") || !strings.Contains(text(res), "already refunded") {
		t.Fatalf("denied: %s", text(res))
	}

	// Expired: worded as such.
	res = callTool(t, cs, "refundOrder", map[string]any{"orderId": "o-4", "amount": 9})
	id = callIDOf(t, res)
	w.clock.Advance(11 * time.Minute)
	if _, err := w.eng.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	res = callTool(t, cs, "stead_call_result", map[string]any{"callId": id})
	if !res.IsError || !strings.HasPrefix(text(res), "Expired:") {
		t.Fatalf("expired: %s", text(res))
	}

	// Another key's calls are not this key's to follow.
	other := w.mcpClient(w.newMCPKey("refunds", "bob").Key, false)
	if res := callTool(t, other, "stead_call_result", map[string]any{"callId": id}); !res.IsError || !strings.Contains(text(res), "no call") {
		t.Errorf("another key read the call: %s", text(res))
	}
}

// An MCP key reads only its own calls, not those of another key of the
// same agent and end user (a second client of the same person): the call
// is the key's (Run.Via), not the end user's.
func TestMCPKeyReadsOnlyItsOwnCalls(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.MCPWait = 200 * time.Millisecond })
	first := w.newMCPKey("refunds", "alice")
	cs := w.mcpClient(first.Key, false)
	res := callTool(t, cs, "refundOrder", map[string]any{"orderId": "o-1", "amount": 50})
	id := callIDOf(t, res)
	if !res.IsError || !strings.Contains(text(res), "Not run yet") {
		t.Fatalf("pending call: %s", text(res))
	}
	task := w.rawTaskCall(first.Key, map[string]any{"orderId": "o-2", "amount": 4})

	secondKey := w.newMCPKey("refunds", "alice").Key
	second := w.mcpClient(secondKey, false)
	if res := callTool(t, second, "stead_call_result", map[string]any{"callId": id}); !res.IsError || !strings.Contains(text(res), "no call") {
		t.Errorf("another key of the same agent and end user read the call: %s", text(res))
	}
	if _, err := mcpclient.GetTask(t.Context(), w.mcpClient(secondKey, true), task.TaskID); err == nil || !strings.Contains(err.Error(), "no task") {
		t.Errorf("another key of the same agent and end user: tasks/get = %v", err)
	}
	// The key that made them still reads both.
	if res := callTool(t, cs, "stead_call_result", map[string]any{"callId": id}); !strings.Contains(text(res), "Not run yet") {
		t.Errorf("the key's own call: %s", text(res))
	}
	if got, err := mcpclient.GetTask(t.Context(), w.mcpClient(first.Key, true), task.TaskID); err != nil || got.TaskID != task.TaskID {
		t.Errorf("the key's own task: %+v, %v", got, err)
	}
}

func TestMCPTasks(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.MCPWait = 200 * time.Millisecond })
	key := w.newMCPKey("refunds", "alice")

	// A client that declares the tasks extension gets a task.
	task := w.rawTaskCall(key.Key, map[string]any{"orderId": "o-1", "amount": 3})
	if task.ResultType != "task" || task.Status != "working" || !strings.HasPrefix(task.TaskID, "run_") ||
		!strings.Contains(task.StatusMessage, "waiting for approval") || !strings.Contains(task.StatusMessage, "refundOrder") ||
		!strings.Contains(task.StatusMessage, "expires 2026-11-29T12:10:00Z") || task.PollIntervalMs <= 0 {
		t.Fatalf("task = %+v", task)
	}
	if task.Meta["io.getstead/callId"] != task.TaskID {
		t.Errorf("the task's _meta lacks its call id: %v", task.Meta)
	}
	cs := w.mcpClient(key.Key, true)
	// The Go SDK's client, which reads a task as an empty call result,
	// still gets the call id.
	res := callTool(t, cs, "refundOrder", map[string]any{"orderId": "o-9", "amount": 1})
	if goTask := callIDOf(t, res); goTask == task.TaskID {
		t.Errorf("a second call is the first task %s", goTask)
	}
	if res.IsError || text(res) != "" {
		t.Errorf("a client that declared tasks got the awaiting-approval result %q, want a task", text(res))
	}
	got, err := mcpclient.GetTask(t.Context(), cs, task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "working" || got.ResultType != "complete" {
		t.Fatalf("tasks/get = %+v", got)
	}
	w.must(w.do("POST", "/v1/approvals/"+task.approvalID(w)+"/approve", w.owner, nil), 200)
	w.wait(task.TaskID, "terminal")
	got, err = mcpclient.GetTask(t.Context(), cs, task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "completed" || !strings.Contains(string(got.Result), `\"refunded\":3`) || strings.Contains(string(got.Result), `"isError":true`) {
		t.Fatalf("tasks/get after approval = %+v %s", got, got.Result)
	}

	// tasks/cancel cancels the call and settles its approval.
	task = w.rawTaskCall(key.Key, map[string]any{"orderId": "o-2", "amount": 4})
	if err := mcpclient.CancelTask(t.Context(), cs, task.TaskID); err != nil {
		t.Fatal(err)
	}
	got, err = mcpclient.GetTask(t.Context(), cs, task.TaskID)
	if err != nil || got.Status != "cancelled" {
		t.Fatalf("tasks/get after cancel = %+v, %v", got, err)
	}
	var ap wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+task.approvalID(w), w.owner, nil), 200).decode(&ap)
	if ap.Status != "cancelled" {
		t.Errorf("approval of a cancelled task is %s", ap.Status)
	}

	// Another key's task is unknown to this one.
	other := w.mcpClient(w.newMCPKey("refunds", "bob").Key, true)
	if _, err := mcpclient.GetTask(t.Context(), other, task.TaskID); err == nil ||
		!strings.Contains(err.Error(), "no task") {
		t.Errorf("another key's tasks/get: %v", err)
	}
}

type rawTask struct {
	mcpclient.Task
}

func (t rawTask) approvalID(w *world) string {
	var list wire.ApprovalList
	w.must(w.do("GET", "/v1/approvals?status=all&limit=500", w.owner, nil), 200).decode(&list)
	for _, a := range list.Approvals {
		if a.RunID == t.TaskID {
			return a.ID
		}
	}
	w.t.Fatalf("no approval of run %s", t.TaskID)
	return ""
}

// rawTaskCall sends tools/call refundOrder as a 2026-07-28 client that
// declares the tasks extension on the request, and decodes the task.
func (w *world) rawTaskCall(key string, args map[string]any) rawTask {
	w.t.Helper()
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{
			"name": "refundOrder", "arguments": args,
			"_meta": map[string]any{
				"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
				"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
				"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
			},
		},
	})
	req, _ := http.NewRequest("POST", w.url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "refundOrder")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Result rawTask         `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != 200 || out.Error != nil {
		w.t.Fatalf("tools/call: %d %s (%v)", resp.StatusCode, raw, err)
	}
	return out.Result
}

func TestMCPAuth(t *testing.T) {
	t.Parallel()
	w := setup(t)
	init := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	for _, tc := range []struct {
		name, key string
		status    int
	}{
		{"no credential", "", 401},
		{"an owner key", w.owner, 403},
		{"a customer token", w.customer, 403},
		{"a revoked key", w.revoked, 401},
		{"an unknown MCP key", "stm_nope", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := w.request("POST", "/mcp", tc.key, init, "Accept", "application/json, text/event-stream")
			resp := w.must(w.send(req), tc.status)
			if got := resp.header.Get("WWW-Authenticate"); (tc.status == 401) != (got == `Bearer realm="stead"`) {
				t.Errorf("WWW-Authenticate %q on a %d", got, tc.status)
			}
		})
	}
	// Revoked, an MCP key stops working at once.
	k := w.newMCPKey("refunds", "alice")
	cs := w.mcpClient(k.Key, false)
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	w.must(w.do("DELETE", "/v1/mcp-keys/"+k.ID, w.owner, nil), 200)
	if _, err := cs.ListTools(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("a revoked key listed tools: %v", err)
	}
}

// POST /mcp holds JSON-RPC bodies to the rules of every other edge, before
// the SDK reads them, and changes nothing when it refuses one.
func TestMCPStrictBodies(t *testing.T) {
	t.Parallel()
	w := setup(t)
	key := w.newMCPKey("refunds", "alice").Key
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`
	}
	runs := w.runCount()
	for _, tc := range []struct{ name, body, field, says string }{
		{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{}}`, "method", "more than once"},
		{"case variant of method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","METHOD":"tools/call","params":{}}`, "METHOD", "case-sensitive"},
		{"case variant of a param", call(`{"name":"listOrders","NAME":"refundOrder","arguments":{}}`), "params.NAME", "case-sensitive"},
		{"duplicate argument", call(`{"name":"listOrders","arguments":{"a":1,"a":2}}`), "params.arguments.a", "more than once"},
		{"invalid UTF-8", call("{\"name\":\"listOrders\",\"arguments\":{\"a\":\"eu\xff\"}}"), "params.arguments.a", "UTF-8"},
		{"deep", call(`{"name":"listOrders","arguments":{"a":` + deepJSON(70) + `}}`), "params.arguments.a" + strings.Repeat("[0]", 60), "deeper than 64 levels"},
		{"trailing", call(`{"name":"listOrders","arguments":{}}`) + `{}`, "", "data after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := w.request("POST", "/mcp", key, tc.body, "Accept", "application/json, text/event-stream")
			refused(t, w.send(req), tc.field, tc.says)
		})
	}
	if n := w.runCount(); n != runs {
		t.Errorf("refused bodies made runs: %d, want %d", n, runs)
	}
}

// A 2025-06-18 client (session-based initialize, then requests with the
// MCP-Protocol-Version header) works through the SDK's negotiation against
// the stateless server.
func TestMCPOlderProtocol(t *testing.T) {
	t.Parallel()
	w := setup(t)
	key := w.newMCPKey("refunds", "alice").Key
	post := func(body, version string) map[string]any {
		t.Helper()
		headers := []string{"Accept", "application/json, text/event-stream"}
		if version != "" {
			headers = append(headers, "MCP-Protocol-Version", version)
		}
		resp := w.must(w.send(w.request("POST", "/mcp", key, body, headers...)), 200)
		var out map[string]any
		resp.decode(&out)
		if out["error"] != nil {
			t.Fatalf("%s: %v", body, out["error"])
		}
		return out["result"].(map[string]any)
	}
	init := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`, "")
	if init["protocolVersion"] != "2025-06-18" {
		t.Fatalf("initialize answered %v", init)
	}
	res := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"listOrders","arguments":{}}}`, "2025-06-18")
	if res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), `"user":"alice"`) {
		t.Fatalf("tools/call answered %v", res)
	}
}

// checkedTransport hands every exchange the Go SDK's client makes to
// checkExchange, as the harness does with its own requests, so MCP traffic
// is held to the document too.
type checkedTransport struct{ t testing.TB }

func (c checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	checkExchange(c.t, exchange{req: req, reqBody: reqBody, status: resp.StatusCode, header: resp.Header, body: body})
	return resp, nil
}

// A client that declares the tasks extension gets a task only for a call
// still waiting for a person: a call that settled within the wait answers
// with its result. tasks/cancel of a call that already ended is
// acknowledged and changes nothing; tasks/get and tasks/cancel without a
// taskId are refused as such; a cancelled call answers stead_call_result
// as cancelled, a tool error.
func TestMCPTasksOfSettledCalls(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.MCPWait = 200 * time.Millisecond })
	key := w.newMCPKey("refunds", "alice").Key
	cs := w.mcpClient(key, true)

	res := callTool(t, cs, "listOrders", map[string]any{})
	if res.IsError || !strings.Contains(text(res), `"user":"alice"`) {
		t.Fatalf("a settled call of a tasks client answers %v %q, want its result", res.IsError, text(res))
	}
	ended := callIDOf(t, res)
	if err := mcpclient.CancelTask(t.Context(), cs, ended); err != nil {
		t.Errorf("tasks/cancel of a call that ended: %v, want it acknowledged", err)
	}
	if got, err := mcpclient.GetTask(t.Context(), cs, ended); err != nil || got.Status != "completed" {
		t.Errorf("after tasks/cancel of an ended call, tasks/get = %+v, %v; want completed", got, err)
	}

	if _, err := mcpclient.GetTask(t.Context(), cs, ""); err == nil || !strings.Contains(err.Error(), "taskId is required") {
		t.Errorf("tasks/get without a taskId: %v", err)
	}
	if err := mcpclient.CancelTask(t.Context(), cs, ""); err == nil || !strings.Contains(err.Error(), "taskId is required") {
		t.Errorf("tasks/cancel without a taskId: %v", err)
	}

	task := w.rawTaskCall(key, map[string]any{"orderId": "o-1", "amount": 3})
	if want := "waiting for approval " + task.approvalID(w) + " of refundOrder, expires 2026-11-29T12:10:00Z"; task.StatusMessage != want {
		t.Errorf("status message %q, want %q", task.StatusMessage, want)
	}
	if err := mcpclient.CancelTask(t.Context(), cs, task.TaskID); err != nil {
		t.Fatal(err)
	}
	res = callTool(t, w.mcpClient(key, false), "stead_call_result", map[string]any{"callId": task.TaskID})
	if !res.IsError || text(res) != "Cancelled: the call was cancelled before it ran to the end." {
		t.Errorf("stead_call_result of a cancelled call: %v %q", res.IsError, text(res))
	}
}

// A call waiting on a quorum says how far it has come, in the task and in
// the pending result alike.
func TestMCPQuorumProgress(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.MCPWait = 200 * time.Millisecond })
	var ana, bo wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana Diaz", "role": "approver"}), 201).decode(&ana)
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Bo Li", "role": "approver"}), 201).decode(&bo)
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance", "members": []string{ana.ID, bo.ID}}), 201)
	cfg := strings.Replace(testConfig, `"approvals": { "timeout": "10m" },`,
		`"approvals": { "timeout": "10m", "approvers": { "group": "finance", "min": 2 } },`, 1)
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201)
	key := w.newMCPKey("refunds", "alice").Key

	task := w.rawTaskCall(key, map[string]any{"orderId": "o-1", "amount": 3})
	want := "waiting for approval " + task.approvalID(w) + " of refundOrder, expires 2026-11-29T12:10:00Z (0 of 2 from finance — waiting on Ana Diaz, Bo Li)"
	if task.StatusMessage != want {
		t.Errorf("status message %q, want %q", task.StatusMessage, want)
	}
	res := callTool(t, w.mcpClient(key, false), "stead_call_result", map[string]any{"callId": task.TaskID})
	if !res.IsError || !strings.HasPrefix(text(res), "Not run yet: "+want+". ") {
		t.Errorf("the pending result says %q, want it to start with %q", text(res), "Not run yet: "+want+". ")
	}
}

// tagsConfig adds to the plain agent a tool answering an array, declared
// with an array output schema, and a tool whose input is an array.
var tagsConfig = strings.Replace(testConfig, `"tools": { "addNote": { "effect": "write" } },`,
	`"tools": { "addNote": { "effect": "write" }, "listTags": { "effect": "read", "output": { "type": "array" } },
	  "countTags": { "effect": "read", "input": { "type": "array" } } },`, 1)

const tagsHandlers = testHandlers + `
export async function listTags(input, context) {
  return ["a", "b"];
}

export async function countTags(input, context) {
  return input.length;
}
`

// tools/list follows the latest deployment of the key's project: tools a
// new deployment adds appear, another project's tools of an agent of the
// same name do not. A tool whose input is not an object is not listed; a
// non-object output schema is not described, nor is a non-object output
// structured content.
func TestMCPToolsFollowTheDeployment(t *testing.T) {
	t.Parallel()
	w := setup(t)
	names := func(cs *mcp.ClientSession) string {
		t.Helper()
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return strings.Join(out, ",")
	}
	cs := w.mcpClient(w.newMCPKey("plain", "alice").Key, false)
	if got := names(cs); got != "addNote,stead_call_result" {
		t.Fatalf("tools before the new deployment: %s", got)
	}
	if tagsConfig == testConfig {
		t.Fatal("fixture: the config did not change")
	}
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": tagsHandlers, "config": json.RawMessage(tagsConfig)}), 201)
	w.deploy(w.other) // project B's second deployment, as A's: the same version of an agent of the same name
	if got := names(cs); got != "addNote,listTags,stead_call_result" {
		t.Errorf("tools after the new deployment: %s, want addNote,listTags,stead_call_result", got)
	}
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == "listTags" && tl.OutputSchema != nil {
			t.Errorf("listTags describes the output schema %v, which is not an object", tl.OutputSchema)
		}
	}
	tags := callTool(t, cs, "listTags", map[string]any{})
	if tags.IsError || text(tags) != `["a","b"]` || tags.StructuredContent != nil {
		t.Errorf("listTags: %v %q, structured content %v", tags.IsError, text(tags), tags.StructuredContent)
	}

	var k wire.MCPKey
	w.must(w.do("POST", "/v1/mcp-keys", w.other, map[string]any{"agent": "plain", "endUserId": "bob"}), 201).decode(&k)
	if got := names(w.mcpClient(k.Key, false)); got != "addNote,stead_call_result" {
		t.Errorf("project B's plain lists %s, want addNote,stead_call_result", got)
	}
}

// A call a deny rule refuses is a tool error worded as a refusal, apart
// from a person's denial.
func TestMCPPolicyDenied(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cfg := strings.Replace(testConfig, `"approvals": { "timeout": "10m" },`, `"approvals": { "timeout": "10m" },
      "policy": [ { "tool": "refundOrder", "decision": "deny", "reason": "large refunds go to finance",
        "when": { "required": ["amount"], "properties": { "amount": { "exclusiveMinimum": 500 } } } } ],`, 1)
	if cfg == testConfig {
		t.Fatal("fixture: the config did not change")
	}
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201)
	res := callTool(t, w.mcpClient(w.newMCPKey("refunds", "alice").Key, false), "refundOrder", map[string]any{"orderId": "o-1", "amount": 900})
	if want := "Refused by policy: refundOrder was denied by policy rule 0: large refunds go to finance. The tool did not run."; !res.IsError || text(res) != want {
		t.Errorf("a call a deny rule refuses: %v %q, want %q", res.IsError, text(res), want)
	}
}
