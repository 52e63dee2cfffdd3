package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"stead/api/mcpclient"
	"stead/api/wire"
	"stead/infra/rie"
)

// mcp drives POST /mcp of the API function under the emulator with the
// official MCP TypeScript SDK's client, through rie.Gateway (API Gateway's
// HTTP API, payload format 2.0). The emulator runs one invocation at a time
// and a tools/call holds its instance while it waits, so the approver talks
// to a second API instance, as a second Lambda execution environment
// would; a pump replays the runner's queued invocations meanwhile.
func (s *stack) mcp(ctx context.Context, apiBin string, env []string) {
	t := s.t
	approverAPI := rie.Start(t, rie.Function{Name: "stead-e2e-api-approver", Bootstrap: apiBin, Env: env})
	callerURL, approverURL := s.api.Gateway(t), approverAPI.Gateway(t)
	rest := func(method, path string, body any, out any) {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequestWithContext(ctx, method, approverURL+path, rd)
		req.Header.Set("Authorization", "Bearer "+s.key)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
	}
	// asked lists the pending approvals of refundOrder; pending waits for
	// one not in before: the approval of the call just made (earlier
	// subtests may leave theirs pending).
	asked := func() map[string]bool {
		t.Helper()
		var list wire.ApprovalList
		rest("GET", "/v1/approvals?status=pending&limit=500", nil, &list)
		ids := map[string]bool{}
		for _, a := range list.Approvals {
			if a.Tool == "refundOrder" {
				ids[a.ID] = true
			}
		}
		return ids
	}
	pending := func(before map[string]bool) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			for id := range asked() {
				if !before[id] {
					return id
				}
			}
			time.Sleep(200 * time.Millisecond) // poll interval, bounded by the deadline
		}
		t.Fatal("no approval of refundOrder was asked for")
		return ""
	}

	// The runner, invoked for every queued dispatch while the calls wait.
	pumpCtx, stopPump := context.WithCancel(ctx)
	var pumped sync.WaitGroup
	pumped.Go(func() {
		for pumpCtx.Err() == nil {
			for _, ev := range s.queue.Take(runnerName) {
				if _, err := s.runner.Invoke(pumpCtx, ev); err != nil && pumpCtx.Err() == nil {
					t.Errorf("runner %s: %v", ev, err)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	defer func() {
		stopPump()
		pumped.Wait()
	}()

	// Orders of the test's own, whatever the other subtests refunded.
	for _, o := range []string{"o-2001", "o-2002", "o-2004"} {
		rest("PUT", "/v1/broker/orders/"+o+"?endUserId=demo-user", map[string]any{"value": map[string]any{"id": o, "item": "Lamp", "amount": 30, "currency": "USD"}}, nil)
	}
	var key wire.MCPKey
	rest("POST", "/v1/mcp-keys", map[string]any{"agent": "refunds", "endUserId": "demo-user", "name": "lambda-e2e"}, &key)
	c := mcpclient.New(t, callerURL+"/mcp", key.Key)

	type result struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Meta  map[string]any `json:"_meta"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	decode := func(r mcpclient.Result, err error) result {
		t.Helper()
		if err != nil || r.ClientError != "" {
			t.Fatalf("mcp client: %v %s", err, r.ClientError)
		}
		var out result
		if err := json.Unmarshal(r.Raw, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	textOf := func(r result) string {
		var b strings.Builder
		for _, c := range r.Content {
			b.WriteString(c.Text)
		}
		return b.String()
	}

	listed := decode(c.List(ctx))
	if len(listed.Tools) != 3 {
		t.Fatalf("tools %+v", listed.Tools)
	}
	if r := decode(c.Call(ctx, "listOrders", map[string]any{})); r.IsError || !strings.Contains(textOf(r), "o-1001") {
		t.Fatalf("listOrders: %+v", r)
	}

	// decided calls refundOrder and decides its approval (approve or deny,
	// with a note) on the other instance while the call waits.
	decided := func(order, decision, note string) result {
		t.Helper()
		before := asked()
		done := make(chan result, 1)
		go func() {
			res, err := c.Call(ctx, "refundOrder", map[string]any{"orderId": order, "reason": "mcp"})
			var out result
			if err == nil {
				err = json.Unmarshal(res.Raw, &out)
			}
			if err != nil {
				t.Errorf("gated call: %v", err)
			}
			done <- out
		}()
		rest("POST", "/v1/approvals/"+pending(before)+"/"+decision, map[string]any{"note": note}, nil)
		return <-done
	}

	// Approved within the wait: the call's result.
	if r := decided("o-2001", "approve", "ok"); r.IsError || !strings.Contains(textOf(r), "refunded") {
		t.Fatalf("approved call: %+v", r)
	}
	// Denied within the wait: a tool error with the note.
	denied := decided("o-2003", "deny", "refunded already")
	if !denied.IsError || !strings.Contains(textOf(denied), "Denied") || !strings.Contains(textOf(denied), "refunded already") {
		t.Fatalf("denied: %+v", denied)
	}

	// Outliving the wait: pending, then stead_call_result once approved.
	before := asked()
	r := decode(c.Call(ctx, "refundOrder", map[string]any{"orderId": "o-2002", "reason": "mcp"}))
	if !r.IsError || !strings.Contains(textOf(r), "Not run yet") {
		t.Fatalf("pending call: %+v", r)
	}
	id := mcpclient.CallID(r.Meta)
	rest("POST", "/v1/approvals/"+pending(before)+"/approve", nil, nil)
	if r := decode(c.Call(ctx, "stead_call_result", map[string]any{"callId": id})); r.IsError || !strings.Contains(textOf(r), "refunded") {
		t.Fatalf("stead_call_result: %+v", r)
	}

	// The Go SDK's client with the tasks extension: a task, followed by
	// tasks/get to its result once approved on the other instance.
	gocs, err := mcpclient.ConnectGo(ctx, callerURL+"/mcp", key.Key, mcpclient.GoOptions{Tasks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gocs.Close()
	before = asked()
	gres, err := gocs.CallTool(ctx, &mcp.CallToolParams{Name: "refundOrder", Arguments: map[string]any{"orderId": "o-2004", "reason": "go"}})
	if err != nil {
		t.Fatal(err)
	}
	taskID := mcpclient.CallID(gres.Meta)
	if task, err := mcpclient.GetTask(ctx, gocs, taskID); err != nil || task.Status != "working" {
		t.Fatalf("tasks/get %s: %+v %v", taskID, task, err)
	}
	rest("POST", "/v1/approvals/"+pending(before)+"/approve", nil, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		task, err := mcpclient.GetTask(ctx, gocs, taskID)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status == "completed" {
			if !strings.Contains(string(task.Result), "refunded") {
				t.Fatalf("task result %s", task.Result)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is still %s", taskID, task.Status)
		}
		time.Sleep(time.Duration(task.PollIntervalMs) * time.Millisecond) // as the task asks
	}

	id = mcpclient.CallID(denied.Meta)
	var run wire.Run
	rest("GET", "/v1/runs/"+id, nil, &run)
	if run.Via != "mcp:"+key.ID || run.Tool != "refundOrder" || run.Error == nil || run.Error.Code != "approval-denied" {
		t.Errorf("the denied call's run %+v", run)
	}
}
