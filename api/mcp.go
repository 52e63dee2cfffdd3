package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/runtime/engine"
	"stead/store"
	"stead/strictjson"
)

// POST /mcp: Stead as an MCP server
//
// An MCP client holding an MCP key (stm_…, see mcpkeys.go) reaches the
// tools of the key's agent over the Model Context Protocol: Streamable
// HTTP, stateless, JSON responses, served by the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), which speaks 2026-07-28 and
// negotiates 2025-06-18 and 2025-11-25 with older clients. The SDK owns the
// protocol; this file maps it onto the engine:
//
//   - tools/list is the agent's tools, their schemas, descriptions and
//     posture as annotations (readOnlyHint for read, destructiveHint for
//     write, openWorldHint for external; _meta "io.getstead/requiresApproval"),
//     and stead_call_result. A tool whose input schema is not an object
//     cannot be described over MCP and is not listed.
//   - tools/call is engine.StartCall: a one-call run for the key's end
//     user through the same validation, policy and approval path as a tool
//     step. It answers with the outcome once the run settles, waiting at
//     most Config.MCPWait (20 s: inside API Gateway's 29 s). A call still
//     waiting for a person then answers, to a client that declared the
//     io.modelcontextprotocol/tasks extension on the request, with a task
//     (task id = run id) that tasks/get and tasks/cancel follow; to any
//     other client, with a result saying the call awaits approval (isError,
//     since it has no output yet; "do not retry") that stead_call_result
//     waits on. Denied and expired calls are tool errors, worded apart.
//     The caller is never asked to approve (no elicitation): the approver
//     is a person of the project, not the caller.
//   - An MCP key sees only its own calls (Run.Via "mcp:<key id>").
//
// The SDK's tasks support (go-sdk#942) does not exist yet, so tasks/get
// and tasks/cancel are custom methods and the task result replaces the
// call's in a receiving middleware.

// Defaults of the MCP settings of Config.
const (
	// DefaultMCPWait is how long tools/call and stead_call_result wait for
	// a call to settle.
	DefaultMCPWait = 20 * time.Second
	// mcpPollInterval is the polling interval a task suggests.
	mcpPollInterval = 2 * time.Second
)

const (
	tasksExtension = "io.modelcontextprotocol/tasks"
	// callResultTool waits for the outcome of a call that awaited approval.
	callResultTool = "stead_call_result"
	// metaTask marks a call result the middleware turns into a task.
	metaTask = "io.getstead/task"
	// metaRequiresApproval says in tools/list that a tool's calls need a
	// person's approval (before any policy rule or remembered decision).
	metaRequiresApproval = "io.getstead/requiresApproval"
	// metaCallID names the call (its run) in every call result.
	metaCallID = "io.getstead/callId"
	// relatedTaskMeta is the tasks extension's _meta key naming a task.
	relatedTaskMeta = "io.modelcontextprotocol/related-task"
)

// mcpRequest is what one POST /mcp carries to the SDK's handlers.
type mcpRequest struct {
	caller *caller
	server *mcp.Server
}

type mcpRequestKey struct{}

func mcpRequestOf(ctx context.Context) *mcpRequest {
	m, _ := ctx.Value(mcpRequestKey{}).(*mcpRequest)
	return m
}

// mcpServerKey names one agent as one deployment declares it: its MCP
// server (tools and handlers) is the same for every key of the agent.
type mcpServerKey struct {
	project    string
	deployment int
	agent      string
}

func (s *Server) initMCP() error {
	servers, err := lru.New[mcpServerKey, *mcp.Server](256)
	if err != nil {
		return err
	}
	s.mcpServers = servers
	s.mcpHTTP = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if m := mcpRequestOf(r.Context()); m != nil {
			return m.server
		}
		return nil
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.log})
	return nil
}

// serveMCP: POST /mcp with an MCP key.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, c *caller) error {
	version, ag, err := s.engine.CallAgent(r.Context(), c.actor)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("agent %q of this MCP key is not in the latest deployment; deploy it again, or create a key for a deployed agent (stead mcp-keys create)", c.actor.Agent)
	}
	if err != nil {
		return err
	}
	if err := strictMCPBody(r, s.cfg.MaxBody); err != nil {
		return err
	}
	key := mcpServerKey{c.actor.ProjectID, version, ag.Name}
	srv, ok := s.mcpServers.Get(key)
	if !ok {
		srv = s.newMCPServer(ag)
		s.mcpServers.Add(key, srv)
	}
	ctx := context.WithValue(r.Context(), mcpRequestKey{}, &mcpRequest{caller: c, server: srv})
	s.mcpHTTP.ServeHTTP(w, r.WithContext(ctx))
	return nil
}

// mcpNames are the member names of JSON-RPC messages and of the params of
// the methods Stead serves that a case-insensitive reader would confuse.
var mcpNames = []string{
	"jsonrpc", "id", "method", "params", "result", "error",
	"name", "arguments", "_meta", "taskId", "cursor", "protocolVersion", "capabilities", "clientInfo",
}

// strictMCPBody holds a JSON-RPC body to the rules of every other edge
// (package strictjson: no duplicate names, valid UTF-8, bounded depth, one
// value) before the SDK reads it, and refuses case variants of the
// protocol's names in the message and its params, which the SDK's decoder
// would match case-insensitively: one body read one way, by a proxy and by
// Stead alike. The arguments are user data: any names, held to the same
// rules by the check of the whole body.
func strictMCPBody(r *http.Request, limit int64) error {
	data, err := readAll(r, limit)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	if err := strictjson.Check(data); err != nil {
		return decodeError(err)
	}
	var msg map[string]jsontext.Value
	if err := strictjson.UnmarshalForeign(data, &msg); err != nil {
		// A batch or a non-object: the SDK answers it.
		return nil
	}
	if err := caseVariant(msg, ""); err != nil {
		return err
	}
	var params map[string]jsontext.Value
	if strictjson.UnmarshalForeign(msg["params"], &params) == nil {
		return caseVariant(params, "params.")
	}
	return nil
}

func caseVariant[V any](obj map[string]V, prefix string) error {
	for k := range obj {
		for _, name := range mcpNames {
			if k != name && strings.EqualFold(k, name) {
				return invalidField(prefix+k, "names are case-sensitive: this is not %q; send each name exactly once, as the protocol spells it", name)
			}
		}
	}
	return nil
}

// newMCPServer describes one agent's tools to MCP clients.
func (s *Server) newMCPServer(ag *agent.Agent) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "stead", Title: "Stead: " + ag.Name, Version: "1"}, &mcp.ServerOptions{
		Instructions: "Tools of the agent " + ag.Name + ". Calls of some tools wait for a person's approval; " +
			"such a call answers once decided, or says it awaits approval: do not call it again, follow its task or call " + callResultTool + ".",
		Logger: s.log,
		Capabilities: &mcp.ServerCapabilities{
			Tools:      &mcp.ToolCapabilities{},
			Extensions: map[string]any{tasksExtension: map[string]any{}},
		},
	})
	for _, name := range ag.ToolNames() {
		t, _ := ag.Tool(name)
		if d, ok := mcpTool(t); ok {
			srv.AddTool(d, s.mcpCall(name))
		}
	}
	srv.AddTool(&mcp.Tool{
		Name: callResultTool,
		Description: "Waits (up to 20 seconds) for the outcome of a call that awaited a person's approval, and returns it: " +
			"the tool's result, or why it did not run. Give it the callId the waiting call answered with.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"callId":{"type":"string","description":"the callId of the waiting call"}},"required":["callId"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
	}, s.mcpCallResult)
	srv.AddReceivingMiddleware(taskMiddleware)
	if err := mcp.AddReceivingCustomMethod(srv, "tasks/get", s.mcpTaskGet); err != nil {
		panic(err)
	}
	if err := mcp.AddReceivingCustomMethod(srv, "tasks/cancel", s.mcpTaskCancel); err != nil {
		panic(err)
	}
	return srv
}

// mcpTool describes a tool: posture as annotations, whether it needs an
// approval in _meta. ok is false for a tool whose input is not an object.
func mcpTool(t *agent.Tool) (*mcp.Tool, bool) {
	in := t.InputSchema
	if len(in) == 0 {
		in = json.RawMessage(`{"type":"object"}`)
	}
	if !objectSchema(in) {
		return nil, false
	}
	desc := t.Description
	if t.RequiresApproval {
		desc = strings.TrimSpace(desc + " Each call needs a person's approval before it runs.")
	}
	d := &mcp.Tool{
		Name:        t.Name,
		Description: desc,
		InputSchema: in,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    t.Effect == agent.EffectRead,
			DestructiveHint: new(t.Effect == agent.EffectWrite),
			OpenWorldHint:   new(t.Source == agent.SourceExternal),
		},
		Meta: mcp.Meta{metaRequiresApproval: t.RequiresApproval},
	}
	if objectSchema(t.OutputSchema) {
		d.OutputSchema = t.OutputSchema
	}
	return d, true
}

func objectSchema(raw json.RawMessage) bool {
	var s struct {
		Type any `json:"type"`
	}
	return len(raw) > 0 && json.Unmarshal(raw, &s) == nil && s.Type == "object"
}

// mcpCall calls one tool: a one-call run, waited for.
func (s *Server) mcpCall(tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		m := mcpRequestOf(ctx)
		if m == nil {
			return nil, errors.New("mcp: no caller")
		}
		run, _, err := s.engine.StartCall(ctx, m.caller.actor, engine.CallParams{Tool: tool, Input: req.Params.Arguments})
		var ie *engine.InputError
		switch {
		case errors.As(err, &ie):
			return toolError(ie.Error()), nil
		case errors.Is(err, store.ErrNotFound):
			return toolError(fmt.Sprintf("no tool %q in the latest deployment of agent %q: list the tools again", tool, m.caller.actor.Agent)), nil
		case err != nil:
			return nil, err
		}
		if !run.Status.Terminal() {
			run, err = s.waitSettled(ctx, m.caller.actor, run.ID, s.cfg.MCPWait, terminal)
			if err != nil && ctx.Err() != nil {
				return nil, err
			}
		}
		res, pending := s.outcome(ctx, m.caller.actor, run)
		if pending && tasksDeclared(req.ClientCapabilities()) {
			task, err := json.Marshal(s.task(ctx, m.caller.actor, run))
			if err != nil {
				return nil, err
			}
			res.Meta[metaTask] = json.RawMessage(task)
		}
		return res, nil
	}
}

// mcpCallResult: stead_call_result {callId}.
func (s *Server) mcpCallResult(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	m := mcpRequestOf(ctx)
	if m == nil {
		return nil, errors.New("mcp: no caller")
	}
	var in struct {
		CallID string `json:"callId"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.CallID == "" {
		return toolError(`callId is required: give the callId a waiting call answered with, as {"callId": "run_…"}`), nil
	}
	run, err := s.waitSettled(ctx, m.caller.actor, in.CallID, s.cfg.MCPWait, terminal)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return toolError(fmt.Sprintf("no call %s of this MCP key", in.CallID)), nil
	}
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	res, _ := s.outcome(ctx, m.caller.actor, run)
	return res, nil
}

// outcome is a call's result as the run stands; pending when the run has
// not ended (it awaits approval, or runs after one).
func (s *Server) outcome(ctx context.Context, actor approvals.Actor, run store.Run) (*mcp.CallToolResult, bool) {
	res := &mcp.CallToolResult{Meta: mcp.Meta{metaCallID: run.ID}}
	switch run.Status {
	case store.RunSucceeded:
		out := run.Output
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(out)}}
		if isObject(out) {
			res.StructuredContent = out
		}
		return res, false
	case store.RunFailed:
		res.IsError = true
		res.Content = []mcp.Content{&mcp.TextContent{Text: failureText(run)}}
		return res, false
	case store.RunCancelled:
		res.IsError = true
		res.Content = []mcp.Content{&mcp.TextContent{Text: "Cancelled: the call was cancelled before it ran to the end."}}
		return res, false
	}
	res.IsError = true
	res.Content = []mcp.Content{&mcp.TextContent{Text: pendingText(s.statusMessage(ctx, actor, run), run.ID)}}
	return res, true
}

// isObject: the JSON value is an object.
func isObject(raw json.RawMessage) bool {
	trimmed := strings.TrimLeft(string(raw), " \t\r\n")
	return strings.HasPrefix(trimmed, "{")
}

func failureText(run store.Run) string {
	if run.Error == nil {
		return "Failed: the call failed."
	}
	switch run.Error.Code {
	case engine.CodeApprovalDenied:
		return "Denied: " + run.Error.Message + ". The tool did not run; do not call it again with the same input unless asked to."
	case engine.CodeApprovalExpired:
		return "Expired: " + run.Error.Message + ". The tool did not run; call it again if it is still needed."
	case engine.CodePolicyDenied:
		return "Refused by policy: " + run.Error.Message + ". The tool did not run."
	}
	return "Failed (" + run.Error.Code + "): " + run.Error.Message
}

func pendingText(status, callID string) string {
	return "Not run yet: " + status + ". Do not call the tool again: this call runs once a person approves it. " +
		"Call " + callResultTool + ` with {"callId": "` + callID + `"} to wait for its outcome.`
}

// statusMessage says what a call that has not ended waits for.
func (s *Server) statusMessage(ctx context.Context, actor approvals.Actor, run store.Run) string {
	tool := run.Tool
	if run.Status != store.RunAwaitingApproval {
		return tool + " is " + string(run.Status)
	}
	a, err := s.engine.CallApproval(ctx, actor, run)
	if err != nil {
		return "waiting for approval of " + tool
	}
	msg := fmt.Sprintf("waiting for approval %s of %s, expires %s", a.ID, tool, a.ExpiresAt.UTC().Format(time.RFC3339))
	if a.HasQuorum() {
		msg += " (" + a.ProgressText() + ")"
	}
	return msg
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// tasksDeclared: the request declared the tasks extension.
func tasksDeclared(c *mcp.ClientCapabilities) bool {
	if c == nil {
		return false
	}
	_, ok := c.Extensions[tasksExtension]
	return ok
}

// mcpTask is a task of the tasks extension: a call that awaited approval.
type mcpTask struct {
	mcp.ResultBase
	ResultType     string           `json:"resultType"`
	TaskID         string           `json:"taskId"`
	Status         string           `json:"status"`
	StatusMessage  string           `json:"statusMessage,omitempty"`
	CreatedAt      time.Time        `json:"createdAt"`
	LastUpdatedAt  time.Time        `json:"lastUpdatedAt"`
	TTLMs          *int64           `json:"ttlMs"`
	PollIntervalMs int64            `json:"pollIntervalMs"`
	Result         *json.RawMessage `json:"result,omitempty"`
}

// task is the call as a task: working until its run ends, then completed
// with the call's result (a denial is a completed call whose result is a
// tool error) or cancelled.
func (s *Server) task(ctx context.Context, actor approvals.Actor, run store.Run) *mcpTask {
	t := &mcpTask{
		// The call id in _meta too: a client whose SDK reads a task as an
		// empty call result (the Go SDK's, go-sdk#942) still finds it.
		ResultBase: mcp.ResultBase{Meta: mcp.Meta{metaCallID: run.ID, relatedTaskMeta: map[string]any{"taskId": run.ID}}},
		ResultType: "task", TaskID: run.ID, Status: "working",
		CreatedAt: run.CreatedAt.UTC(), LastUpdatedAt: run.UpdatedAt.UTC(), PollIntervalMs: mcpPollInterval.Milliseconds(),
	}
	res, pending := s.outcome(ctx, actor, run)
	switch {
	case pending:
		t.StatusMessage = s.statusMessage(ctx, actor, run)
	case run.Status == store.RunCancelled:
		t.Status, t.StatusMessage = "cancelled", "the call was cancelled"
	default:
		t.Status = "completed"
		if raw, err := json.Marshal(res); err == nil {
			r := json.RawMessage(raw)
			t.Result = &r
		}
	}
	return t
}

// taskMiddleware answers a tools/call whose result carries a task with
// that task (resultType "task") instead.
func taskMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		ctr, ok := res.(*mcp.CallToolResult)
		if err != nil || method != "tools/call" || !ok {
			return res, err
		}
		raw, ok := ctr.Meta[metaTask].(json.RawMessage)
		if !ok {
			return res, nil
		}
		var t mcpTask
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, err
		}
		return &t, nil
	}
}

type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type emptyResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// mcpTaskGet: tasks/get {taskId}.
func (s *Server) mcpTaskGet(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*mcpTask, error) {
	m, run, err := s.taskRun(ctx, p)
	if err != nil {
		return nil, err
	}
	t := s.task(ctx, m.caller.actor, run)
	t.ResultType = "complete"
	return t, nil
}

// mcpTaskCancel: tasks/cancel {taskId}: cancels the call (its approval is
// settled as cancelled). A call that already ended is acknowledged alike.
func (s *Server) mcpTaskCancel(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*emptyResult, error) {
	m, run, err := s.taskRun(ctx, p)
	if err != nil {
		return nil, err
	}
	if _, err := s.engine.Cancel(ctx, m.caller.actor, run.ID); err != nil && !errors.Is(err, engine.ErrRunFinished) {
		return nil, err
	}
	return &emptyResult{ResultType: "complete"}, nil
}

// taskRun finds the call a task names among the key's own.
func (s *Server) taskRun(ctx context.Context, p *taskParams) (*mcpRequest, store.Run, error) {
	m := mcpRequestOf(ctx)
	if m == nil {
		return nil, store.Run{}, errors.New("mcp: no caller")
	}
	if p == nil || p.TaskID == "" {
		return nil, store.Run{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "taskId is required"}
	}
	run, err := s.engine.GetRun(ctx, m.caller.actor, p.TaskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Run{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no task " + p.TaskID + " of this MCP key"}
	}
	return m, run, err
}
