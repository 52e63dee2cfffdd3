package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"stead/api"
	"stead/api/wire"
	"stead/infra/testclock"
	"stead/internal/eventschema"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/store"
	"stead/store/boltstore"
	"stead/store/fsblob"
)

// TestMain runs the tests, then fails the run for a documented operation
// no test exercised (contract_test.go) and for leaked goroutines.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := checkCoverage(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testHandlers is the bundle every test deploys. leakToken hands the run's
// broker token to the test through the broker, reversed so that no
// redaction of the token can hide it: tests need a real token to check
// what it may reach.
const testHandlers = `
export async function listOrders(input, context) {
  const orders = await context.broker.list("orders");
  return { user: context.endUserId, orders: orders.map((o) => o.value) };
}

export async function refundOrder(input, context) {
  return { refunded: input.amount, orderId: input.orderId, key: context.idempotencyKey };
}

export async function addNote(input, context) {
  console.log("note", input.text);
  return { noted: input.text };
}

export async function leakToken(input, context) {
  await context.broker.put("secrets", "token", context.broker.token.split("").reverse().join(""));
  return { ok: true };
}
`

// testConfig: refunds (read, then a gated write with an input schema and a
// 10m approval timeout), plain (one ungated write), leak (stores the broker
// token, then waits for approval so the run stays active).
const testConfig = `{
  "agents": {
    "refunds": {
      "description": "Refund an order after approval.",
      "input": { "type": "object", "required": ["orderId"], "properties": { "orderId": { "type": "string" }, "amount": { "type": "number" } } },
      "approvals": { "timeout": "10m" },
      "tools": {
        "listOrders": { "effect": "read", "description": "List orders." },
        "refundOrder": { "effect": "write", "requiresApproval": true, "timeoutMs": 5000,
          "input": { "type": "object", "required": ["orderId", "amount"], "additionalProperties": false,
            "properties": { "orderId": { "type": "string" }, "amount": { "type": "number" } } } }
      },
      "steps": [
        { "id": "orders", "tool": "listOrders", "input": { "user": "$run.endUserId" } },
        { "id": "refund", "tool": "refundOrder", "input": { "orderId": "$input.orderId", "amount": "$input.amount" } }
      ]
    },
    "plain": {
      "tools": { "addNote": { "effect": "write" } },
      "steps": [ { "id": "note", "tool": "addNote", "input": { "text": "hello" } } ]
    },
    "leak": {
      "tools": { "leakToken": { "effect": "read" }, "refundOrder": { "effect": "write", "requiresApproval": true } },
      "steps": [
        { "id": "leak", "tool": "leakToken" },
        { "id": "refund", "tool": "refundOrder", "input": { "orderId": "o-1", "amount": 1 } }
      ]
    }
  }
}`

// world is the whole stack behind a loopback HTTP server: bbolt store, blob
// folder, bundle compiler, goja runtime, engine with a worker pool, API.
type world struct {
	t     testing.TB
	url   string
	api   *api.Server
	store store.Store
	eng   *engine.Engine
	clock *testclock.Clock
	logs  *syncBuffer

	project store.Project
	// Credentials of project A: owner, developer, a revoked developer key,
	// and a customer token of end user alice. other is the owner key of
	// project B.
	owner, developer, revoked, customer, other string
	// approver and viewer are made by the tests that need them.
	approver, viewer string
	// mcp is an MCP key of project A (agent refunds, end user alice) and
	// mcpRevoked a revoked one; made by the tests that need them.
	mcp, mcpRevoked string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func setup(t testing.TB, opts ...func(*api.Config)) *world {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := boltstore.Open(filepath.Join(dir, "stead.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	blobs, err := fsblob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	rt := jsvm.New(jsvm.Options{})
	t.Cleanup(rt.Close)
	clk := testclock.New(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	pool := engine.NewPool(2, 256, nil)
	eng, err := engine.New(engine.Config{
		Store:    st,
		Blobs:    blobs,
		Invoker:  rt,
		Dispatch: pool,
		Now:      clk.Now,
		WorkerID: "test",
		// Waiters are woken in-process; the poll only covers other
		// processes, of which a test has none.
		PollInterval: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	pool.Start(eng.Execute)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pool.Stop(ctx)
	})
	logs := &syncBuffer{}
	cfg := api.Config{
		Engine: eng, Store: st, Now: clk.Now,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	w := &world{t: t, url: hs.URL, api: srv, store: st, eng: eng, clock: clk, logs: logs}
	var ownerKey string
	w.project, ownerKey, err = api.Bootstrap(ctx, st, "test", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	w.owner = ownerKey
	_, w.other, err = api.Bootstrap(ctx, st, "other", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	w.developer = w.newKey("developer").Key
	revoked := w.newKey("developer")
	w.revoked = revoked.Key
	w.must(w.do("DELETE", "/v1/keys/"+revoked.ID, w.owner, nil), 200)
	w.customer = w.customerToken("alice", 3600)

	w.deploy(w.owner)
	w.deploy(w.other)
	return w
}

func (w *world) newKey(role string) wire.APIKey {
	w.t.Helper()
	var k wire.APIKey
	w.must(w.do("POST", "/v1/keys", w.owner, map[string]any{"name": role, "role": role}), 201).decode(&k)
	return k
}

// newMCPKey makes an MCP key of project A for the agent and end user.
func (w *world) newMCPKey(agent, endUser string) wire.MCPKey {
	w.t.Helper()
	var k wire.MCPKey
	w.must(w.do("POST", "/v1/mcp-keys", w.owner, map[string]any{"agent": agent, "endUserId": endUser}), 201).decode(&k)
	return k
}

func (w *world) customerToken(endUser string, ttl int) string {
	w.t.Helper()
	var tok wire.CustomerToken
	w.must(w.do("POST", "/v1/customer-tokens", w.developer, map[string]any{"endUserId": endUser, "ttlSeconds": ttl}), 201).decode(&tok)
	return tok.Token
}

func (w *world) deploy(key string) wire.Deployment {
	w.t.Helper()
	var d wire.Deployment
	w.must(w.do("POST", "/v1/deployments", key, map[string]any{"bundle": testHandlers, "config": json.RawMessage(testConfig)}), 201).decode(&d)
	return d
}

// response is a finished HTTP exchange.
type response struct {
	t      testing.TB
	req    string
	status int
	header http.Header
	body   []byte
}

func (r *response) decode(v any) {
	r.t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		r.t.Fatalf("%s: decode %s: %v", r.req, r.body, err)
	}
}

// apiErr decodes an error body.
func (r *response) apiErr() api.Error {
	r.t.Helper()
	var b api.ErrorBody
	r.decode(&b)
	return b.Error
}

// lacks fails the test when the object at path in the body (a list's
// name and an index, e.g. "keys", "0"; none for the body itself) has any of
// the fields: what is unset is left out, not shown as "", null or
// 0001-01-01T00:00:00Z.
func (r *response) lacks(path []string, fields ...string) {
	r.t.Helper()
	var v any
	r.decode(&v)
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				r.t.Fatalf("%s: no %v in %s", r.req, path, r.body)
			}
			v = x[i]
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		r.t.Fatalf("%s: %v is not an object in %s", r.req, path, r.body)
	}
	for _, f := range fields {
		if got, ok := obj[f]; ok {
			r.t.Errorf("%s: %v has %s %#v, want it left out", r.req, path, f, got)
		}
	}
}

// request builds a request: body nil (none), string or []byte (sent as is,
// as JSON) or anything else (marshalled). Extra headers come in pairs.
func (w *world) request(method, path, key string, body any, headers ...string) *http.Request {
	w.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			w.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, w.url+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// send makes the request and checks the exchange against openapi.json
// (checkExchange): every request a test makes through the harness does.
func (w *world) send(req *http.Request) *response {
	w.t.Helper()
	reqBody := w.readRequestBody(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	checkExchange(w.t, exchange{req: req, reqBody: reqBody, status: resp.StatusCode, header: resp.Header, body: b})
	return &response{t: w.t, req: req.Method + " " + req.URL.RequestURI(), status: resp.StatusCode, header: resp.Header, body: b}
}

// readRequestBody reads req's body for the contract check and puts it back.
func (w *world) readRequestBody(req *http.Request) []byte {
	w.t.Helper()
	if req.Body == nil {
		return nil
	}
	b, err := io.ReadAll(req.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return b
}

func (w *world) do(method, path, key string, body any, headers ...string) *response {
	w.t.Helper()
	return w.send(w.request(method, path, key, body, headers...))
}

// must fails the test unless the response has the status.
func (w *world) must(r *response, status int) *response {
	w.t.Helper()
	if r.status != status {
		w.t.Fatalf("%s: status %d, want %d; body: %s", r.req, r.status, status, r.body)
	}
	return r
}

// start starts a run (as the developer) and returns it as created.
func (w *world) start(agentName, endUser string, input any) wire.Run {
	w.t.Helper()
	var run wire.Run
	w.must(w.do("POST", "/v1/agents/"+agentName+"/runs", w.developer, map[string]any{"input": input, "endUserId": endUser}), 202).decode(&run)
	return run
}

// wait long-polls a run until it is settled (or, with until=terminal,
// ended), failing the test after a deadline.
func (w *world) wait(id, until string) wire.Run {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var run wire.Run
		w.must(w.do("GET", "/v1/runs/"+id+"?wait=5s&until="+until, w.developer, nil), 200).decode(&run)
		switch {
		case until == "terminal" && (run.Status == "succeeded" || run.Status == "failed" || run.Status == "cancelled"):
			return run
		case until == "settled" && run.Status != "queued" && run.Status != "running":
			return run
		case time.Now().After(deadline):
			w.t.Fatalf("run %s is still %s", id, run.Status)
		}
	}
}

// awaiting starts a refunds run for an end user and waits until it awaits
// approval.
func (w *world) awaiting(endUser string) wire.Run {
	w.t.Helper()
	run := w.start("refunds", endUser, map[string]any{"orderId": "o-1", "amount": 12})
	run = w.wait(run.ID, "settled")
	if run.Status != "awaiting-approval" || run.Approval == nil {
		w.t.Fatalf("run %s is %s (approval %v), want awaiting-approval", run.ID, run.Status, run.Approval)
	}
	return run
}

// runCount counts project A's runs.
func (w *world) runCount() int {
	w.t.Helper()
	var list wire.RunList
	w.must(w.do("GET", "/v1/runs?limit=500", w.owner, nil), 200).decode(&list)
	return len(list.Runs)
}

// sseEvent is one event read off a stream.
type sseEvent struct {
	id, event string
	data      wire.Event
}

// checkStreamMessage fails the test when an SSE message is not what the
// OpenAPI document's StreamMessage says: its data an Event of a documented
// kind, id its seq, event its type.
func checkStreamMessage(t testing.TB, ev sseEvent, data []byte) {
	t.Helper()
	s, err := eventSchemas()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckMessage(ev.id, ev.event, data); err != nil {
		t.Errorf("an event stream message the OpenAPI document does not describe: %v", err)
	}
	if bytes.Contains(data, zeroTime) {
		t.Errorf("an event stream message with a zero time, which stands for an unset one: %s", data)
	}
}

var eventSchemas = sync.OnceValues(func() (*eventschema.Schemas, error) { return eventschema.Load(api.OpenAPI) })

// sseStream is an open event stream.
type sseStream struct {
	t      testing.TB
	resp   *http.Response
	lines  *bufio.Scanner
	cancel context.CancelFunc
	// comments counts comment lines (heartbeats) seen.
	comments int
}

func (w *world) stream(path, key string, headers ...string) *sseStream {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req := w.request("GET", path, key, nil, append([]string{"Accept", "text/event-stream"}, headers...)...).WithContext(ctx)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		w.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		w.t.Fatalf("stream %s: status %d: %s", path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		w.t.Fatalf("stream content type %q", ct)
	}
	checkExchange(w.t, exchange{req: req, status: resp.StatusCode, header: resp.Header, stream: true})
	s := &sseStream{t: w.t, resp: resp, lines: bufio.NewScanner(resp.Body), cancel: cancel}
	w.t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// waitEnd fails the test unless the server ends the stream within d; why
// says what should have ended it.
func (s *sseStream) waitEnd(d time.Duration, why string) {
	s.t.Helper()
	ended := make(chan struct{})
	go func() {
		for s.lines.Scan() {
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(d):
		s.t.Fatalf("the stream outlived %s by %s", why, d)
	}
}

// next reads the next event; ok is false when the stream ended.
func (s *sseStream) next() (sseEvent, bool) {
	s.t.Helper()
	var ev sseEvent
	var raw []byte
	have := false
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case line == "":
			if have {
				checkStreamMessage(s.t, ev, raw)
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
			s.comments++
		case strings.HasPrefix(line, "id: "):
			ev.id, have = strings.TrimPrefix(line, "id: "), true
		case strings.HasPrefix(line, "event: "):
			ev.event, have = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			raw = []byte(strings.TrimPrefix(line, "data: "))
			if err := json.Unmarshal(raw, &ev.data); err != nil {
				s.t.Fatalf("event data %q: %v", line, err)
			}
			have = true
		case strings.HasPrefix(line, "retry: "):
		default:
			s.t.Fatalf("unexpected stream line %q", line)
		}
	}
	return ev, false
}

// rest reads events until the stream ends.
// skipTo reads events up to and including the first of type typ; the
// test fails if the stream ends first.
func (s *sseStream) skipTo(typ string) {
	s.t.Helper()
	for {
		ev, ok := s.next()
		if !ok {
			s.t.Fatalf("the stream ended before a %s event", typ)
		}
		if ev.event == typ {
			return
		}
	}
}

func (s *sseStream) rest() []sseEvent {
	s.t.Helper()
	var out []sseEvent
	for {
		ev, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

func seqs(evs []sseEvent) string {
	var b strings.Builder
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, e.data.Seq)
	}
	return b.String()
}
