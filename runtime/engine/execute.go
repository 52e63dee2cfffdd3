package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/runtime/bundle"
	"stead/runtime/jsvm"
	"stead/store"
)

// Run error codes, stable for the API and CLI.
const (
	CodeApprovalDenied  = "approval-denied"
	CodeApprovalExpired = "approval-expired"
	CodePolicyDenied    = "policy-denied"
	CodeInvalidInput    = "invalid-input"
	CodeInvalidOutput   = "invalid-output"
	CodeHandlerError    = "handler-error"
	CodeTimeout         = "timeout"
	CodeCancelled       = "cancelled"
	CodeInternal        = "internal-error"
	// The sandbox's codes (see package sandbox): the step's handler hit its
	// memory limit or the JS stack limit, or its sandbox worker died.
	CodeMemoryLimit    = "memory-limit"
	CodeStackOverflow  = "stack-overflow"
	CodeSandboxCrashed = "sandbox-crashed"
)

// errStop ends an execution without a write: the run changed under the
// worker (cancelled, or its lease was taken over) or the worker is shutting
// down. Whatever it was doing is redone by whoever holds the run next.
var errStop = errors.New("execution stopped")

// Execute claims a run and executes its steps until the run ends or waits
// for an approval, then releases it. A run that cannot be claimed — another
// worker holds it, it awaits approval, it ended — is left alone and Execute
// returns nil, so duplicate dispatches are harmless. An error means the run
// could not be worked on now (the store is unreachable, the worker is
// shutting down); it stays claimable and the sweeper dispatches it again.
func (e *Engine) Execute(ctx context.Context, runID string) error {
	now := e.now()
	r, err := e.store.GetRun(ctx, runID)
	if err != nil {
		return fmt.Errorf("execute %s: %w", runID, err)
	}
	if !claimable(r, now) {
		return nil
	}
	d, err := e.deployments.get(ctx, r.ProjectID, r.Deployment)
	var ag *agent.Agent
	if err == nil {
		ag, err = agentIn(d, r)
	}
	if err != nil {
		if unrunnable(err) {
			return e.failUnrunnable(ctx, r, err)
		}
		return fmt.Errorf("execute %s: %w", runID, err)
	}
	lease := e.lease(d.config, ag)

	// Listen for a local cancel before claiming, so that a cancel landing
	// right after the claim still interrupts this execution.
	ctx, stop := e.listen(ctx, runID)
	defer stop()

	r, err = e.store.ClaimRun(ctx, store.ClaimParams{
		RunID: runID, Owner: e.leaseOwner(), Until: now.Add(lease), Now: now,
	})
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("claim %s: %w", runID, err)
	}
	e.watch.publish(r)
	return e.executeClaimed(ctx, r, d, ag, lease)
}

// executeClaimed executes r, which this process has just claimed, with its
// deployment d and agent ag, until it ends or waits for an approval.
func (e *Engine) executeClaimed(ctx context.Context, r store.Run, d *deployment, ag *agent.Agent, lease time.Duration) error {
	// A claim that retries (the last worker stopped mid-step) holds no
	// steps: each is recorded as it completes, so the attempts counted
	// belong to the step that keeps failing, not to a batch before it.
	x := &execution{e: e, run: r, dep: d, agent: ag, lease: lease, noHold: r.Attempts > 1}
	var err error
	if limit := e.maxAttempts(); r.Attempts > limit {
		step := ag.Steps[r.Cursor].ID
		err = x.fail(ctx, step, CodeInternal, fmt.Sprintf(
			"step %s did not complete in %d attempts: each time, its worker stopped before recording a result (a crash, a lost lease or memory pressure); giving up",
			step, limit))
	} else {
		err = x.execute(ctx)
	}
	if errors.Is(err, errStop) || errors.Is(context.Cause(ctx), errCancelled) {
		// Stopped, or cancelled whatever it was doing (reading its
		// project, say): the run stays as stored.
		return nil
	}
	return err
}

// leaseOwner names one claim by this process.
func (e *Engine) leaseOwner() string { return e.cfg.WorkerID + "/" + e.newID("lease") }

// errCancelled is the cause of an execution's context that Cancel ended.
var errCancelled = errors.New("run cancelled")

// listen makes ctx end, with the cause errCancelled, when Cancel cancels
// runID in this process, until stop (which may be called more than once).
func (e *Engine) listen(ctx context.Context, runID string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	l := &listener{cancel: cancel}
	e.runningMu.Lock()
	e.running[runID] = l
	e.runningMu.Unlock()
	return ctx, func() {
		e.runningMu.Lock()
		if e.running[runID] == l { // not a later execution's
			delete(e.running, runID)
		}
		e.runningMu.Unlock()
		cancel(nil)
	}
}

// listener is one execution's entry in Engine.running.
type listener struct{ cancel context.CancelCauseFunc }

// unrunnableError: the run's agent or tool is not in its deployment.
type unrunnableError struct{ cause error }

func (e *unrunnableError) Error() string { return e.cause.Error() }

// agentIn returns the agent of d that executes r: r's agent, or for a run
// of one tool call that agent narrowed to the tool. Errors:
// *unrunnableError.
func agentIn(d *deployment, r store.Run) (*agent.Agent, error) {
	ag, ok := d.config.Agent(r.Agent)
	if !ok {
		return nil, &unrunnableError{fmt.Errorf("agent %q is not in deployment %d", r.Agent, r.Deployment)}
	}
	if r.Tool != "" {
		if ag, ok = ag.Call(r.Tool); !ok {
			return nil, &unrunnableError{fmt.Errorf("agent %q of deployment %d has no tool %q", r.Agent, r.Deployment, r.Tool)}
		}
	}
	return ag, nil
}

// MaxAttempts is how many times a step is tried (claims that did not end
// with the step recorded, a pause or a failure) before its run fails. An
// approval pause does not count. A run whose executing process keeps dying
// (a runner invocation that times out or runs out of memory, a server
// killed mid-step) gets as many tries as a step whose sandbox keeps
// crashing (1 + DefaultSandboxRetries).
const MaxAttempts = 1 + DefaultSandboxRetries

// maxAttempts is how many claims a step gets before its run fails: at
// least MaxAttempts, more when SandboxRetries allows a crashing sandbox
// more tries.
func (e *Engine) maxAttempts() int { return max(MaxAttempts, 1+e.sandboxRetries()) }

// Defaults of Config.SandboxRetries and Config.SandboxBackoff.
const (
	DefaultSandboxRetries = 2
	DefaultSandboxBackoff = 400 * time.Millisecond
)

// unrunnable tells errors that will not go away by retrying: the run's
// deployment, config or bundle is missing or broken.
func unrunnable(err error) bool {
	var (
		be *bundle.Error
		ce *agent.ConfigError
		ue *unrunnableError
	)
	return errors.Is(err, store.ErrNotFound) || errors.As(err, &be) || errors.As(err, &ce) || errors.As(err, &ue)
}

// failUnrunnable fails a run whose deployment cannot run it, instead of
// leaving it for the sweeper to dispatch again and again.
func (e *Engine) failUnrunnable(ctx context.Context, r store.Run, cause error) error {
	now := e.now()
	msg := fmt.Sprintf("deployment %d cannot run this run: %v", r.Deployment, cause)
	next := r
	next.Status = store.RunFailed
	next.Error = &store.RunError{Code: CodeInternal, Message: msg}
	next.FinishedAt, next.UpdatedAt = now, now
	next.LeaseOwner, next.LeaseUntil = "", zeroTime
	failed, err := e.store.CommitRun(ctx, store.RunCommit{Run: next, Events: []store.Event{
		event("run.failed", now, "", map[string]any{"code": CodeInternal, "message": msg}),
	}})
	if errors.Is(err, store.ErrConflict) {
		return nil // the run moved on meanwhile
	}
	if err != nil {
		return fmt.Errorf("fail run %s: %w", r.ID, err)
	}
	e.watch.publish(failed)
	return nil
}

func claimable(r store.Run, now time.Time) bool {
	return r.Status == store.RunQueued || (r.Status == store.RunRunning && r.LeaseUntil.Before(now))
}

// lease is how long a claim holds a run: the longest piece of work between
// two writes — the agent's longest tool timeout or the longest timeoutMs of
// the models its steps use (an agent step writes after every model answer
// and every tool call) — plus a margin, renewed with every write.
func (e *Engine) lease(cfg *agent.Config, ag *agent.Agent) time.Duration {
	longest := time.Duration(0)
	for _, name := range ag.ToolNames() {
		if t, _ := ag.Tool(name); t.Timeout > longest {
			longest = t.Timeout
		}
	}
	for _, s := range ag.Steps {
		if m, ok := cfg.Model(s.Model); ok && m.Timeout > longest {
			longest = m.Timeout
		}
	}
	return longest + e.cfg.LeaseMargin
}

// execution is one claim of a run by this worker.
type execution struct {
	e       *Engine
	run     store.Run
	dep     *deployment
	agent   *agent.Agent
	lease   time.Duration
	outputs map[string]any
	// pending are events not yet written; the next commit writes them.
	pending []store.Event
	// token is the run's broker token, registered for redaction.
	token string
	// secrets are the API keys of the models this execution opened; every
	// record the commit writes is redacted of them.
	secrets secretSet
	// held are completed read steps not yet recorded: consecutive read steps
	// share one commit, the next one this execution makes (see hold).
	// heldBytes sums their outputs.
	held      []store.Step
	heldBytes int
	noHold    bool
}

func (x *execution) emit(typ, step string, data map[string]any) {
	x.pending = append(x.pending, event(typ, x.e.now(), step, data))
}

func (x *execution) execute(ctx context.Context) error {
	steps := x.agent.Steps
	x.emit("run.started", "", map[string]any{"attempt": x.run.Attempts, "cursor": x.run.Cursor, "worker": x.e.cfg.WorkerID})
	if err := x.loadOutputs(ctx); err != nil {
		return err
	}
	tok, err := x.e.brokerToken(ctx, x.run.ProjectID, x.run.ID)
	if err != nil {
		return err
	}
	x.token = tok
	for x.run.Cursor < len(steps) {
		step := steps[x.run.Cursor]
		out, err := x.step(ctx, step)
		switch {
		case errors.Is(err, errPaused):
			return nil
		case err != nil:
			return err
		}
		if err := x.complete(ctx, step, out); err != nil {
			return err
		}
	}
	return nil
}

// loadOutputs reads the outputs of the steps completed before this claim.
func (x *execution) loadOutputs(ctx context.Context) error {
	x.outputs = map[string]any{}
	if x.run.Cursor == 0 {
		return nil
	}
	steps, err := x.e.store.ListSteps(ctx, x.run.ID)
	if err != nil {
		return fmt.Errorf("load steps of %s: %w", x.run.ID, err)
	}
	for _, s := range steps {
		v, err := decode(s.Output)
		if err != nil {
			return fmt.Errorf("decode output of step %s: %w", s.ID, err)
		}
		x.outputs[s.ID] = v
	}
	return nil
}

// errPaused: the step waits for an approval; the run was released.
var errPaused = errors.New("paused for approval")

// stepOutput is what a completed step leaves.
type stepOutput struct {
	output json.RawMessage
	value  any
	costs  store.Costs
	key    string
}

// step executes one step. It returns the completed step's output, errPaused
// after recording an approval, errStop, or another error after recording the
// run as failed (then wrapped in errStop).
func (x *execution) step(ctx context.Context, s *agent.Step) (stepOutput, error) {
	switch s.Kind {
	case agent.ModelStep:
		return x.modelStep(ctx, s)
	case agent.AgentStep:
		return x.agentStep(ctx, s)
	}
	input, err := s.ResolveInput(x.scope())
	if err != nil {
		return stepOutput{}, x.fail(ctx, s.ID, CodeInvalidInput, fmt.Sprintf("step %s: %v", s.ID, err))
	}
	return x.callTool(ctx, s, s.ID, s.Tool, input)
}

// scope is what the step's expressions and templates resolve against.
func (x *execution) scope() agent.Scope {
	return agent.Scope{Input: mustDecode(x.run.Input), Outputs: x.outputs, RunID: x.run.ID, EndUserID: x.run.EndUserID}
}

func mustDecode(raw json.RawMessage) any {
	v, _ := decode(raw)
	return v
}

// IdempotencyKey is the key a call's handler sees: derived from project,
// run, step and call, so it is the same across crash retries and across the
// approval pause.
func IdempotencyKey(projectID, runID string, stepIndex int, callID string) string {
	sum := sha256.Sum256([]byte("stead/idempotency\x00" + projectID + "\x00" + runID + "\x00" + strconv.Itoa(stepIndex) + "\x00" + callID))
	return "idk_" + hex.EncodeToString(sum[:16])
}

// callTool runs one tool call through the gate: validate, decide policy, and
// then pause for an approval, fail, or invoke the handler. A call whose
// approval was granted runs with exactly the approved input.
func (x *execution) callTool(ctx context.Context, s *agent.Step, callID, toolName string, input any) (stepOutput, error) {
	tool, ok := x.agent.Tool(toolName)
	if !ok {
		return stepOutput{}, x.fail(ctx, s.ID, CodeInvalidInput, fmt.Sprintf("step %s: tool %q is not declared", s.ID, toolName))
	}
	key := IdempotencyKey(x.run.ProjectID, x.run.ID, s.Index, callID)
	var policy map[string]any

	approved, err := x.approvedCall(ctx, s, callID)
	if err != nil {
		return stepOutput{}, err
	}
	if approved != nil {
		input, err = decode(approved.Input)
		if err != nil {
			return stepOutput{}, x.fail(ctx, s.ID, CodeInternal, fmt.Sprintf("approval %s: stored input is not JSON: %v", approved.ID, err))
		}
		policy = approvedPolicy(*approved)
		if d, denied := x.deniedDespiteApproval(tool, input); denied {
			return stepOutput{}, x.fail(ctx, s.ID, CodePolicyDenied, policyDenial(tool.Name, d))
		}
	} else {
		if err := tool.ValidateInput(input); err != nil {
			x.emit("step.started", s.ID, map[string]any{"tool": tool.Name, "input": input, "idempotencyKey": key, "attempt": x.run.Attempts})
			return stepOutput{}, x.fail(ctx, s.ID, CodeInvalidInput, err.Error())
		}
		d, err := x.evaluate(ctx, tool, input)
		if err != nil {
			return stepOutput{}, err
		}
		policy = map[string]any{"decision": string(d.Outcome), "reason": d.Reason}
		if d.Remembered != "" {
			policy["remembered"] = d.Remembered
		}
		switch d.Outcome {
		case agent.Deny:
			x.emit("step.started", s.ID, map[string]any{"tool": tool.Name, "input": input, "idempotencyKey": key, "attempt": x.run.Attempts, "policy": policy})
			return stepOutput{}, x.fail(ctx, s.ID, CodePolicyDenied, policyDenial(tool.Name, d))
		case agent.Ask:
			return stepOutput{}, x.pause(ctx, s, callID, tool, input, d)
		}
	}

	inputJSON, err := json.Marshal(input)
	if err != nil {
		return stepOutput{}, x.fail(ctx, s.ID, CodeInvalidInput, fmt.Sprintf("step %s: input is not JSON: %v", s.ID, err))
	}
	if err := x.flushBefore(ctx, tool); err != nil {
		return stepOutput{}, err
	}
	hc, err := x.invoke(ctx, s, callID, tool, inputJSON, key, traceNames{started: "step.started", completed: "step.completed"},
		map[string]any{"policy": policy})
	if err != nil {
		return stepOutput{}, err
	}
	if hc.code != "" {
		return stepOutput{}, x.failThrown(ctx, s.ID, hc.code, hc.msg, hc.thrown)
	}
	return stepOutput{output: hc.raw, value: hc.value, costs: hc.costs, key: key}, nil
}

// handlerCall is what one handler call produced. A failed call (the handler
// threw, timed out, or returned what its schema refuses) has code and msg
// set; its logs, costs and untrusted marks are recorded all the same.
type handlerCall struct {
	raw   json.RawMessage
	value any
	costs store.Costs
	// untrusted: the output comes from an external tool or the handler
	// marked the run untrusted.
	untrusted bool
	took      time.Duration
	code, msg string
	// thrown is where a failed handler threw, when its error says.
	thrown thrown
}

// thrown is where a failed handler's error came from: its JS stack, and the
// file, line and column it was thrown at (in the developer's sources when
// the bundle carries their map). It goes into the failure's trace events
// (as stack, file, line, column) and the run's error.
type thrown struct {
	stack, file  string
	line, column int
}

func thrownBy(je *jsvm.Error) thrown {
	return thrown{stack: je.Stack, file: je.File, line: je.Line, column: je.Column}
}

// into adds what is known to an event's data.
func (t thrown) into(data map[string]any) map[string]any {
	if t.stack != "" {
		data["stack"] = t.stack
	}
	if t.file != "" && t.line > 0 {
		data["file"], data["line"], data["column"] = t.file, t.line, t.column
	}
	return data
}

// onto adds what is known to a run's error.
func (t thrown) onto(e *store.RunError) {
	e.Stack = t.stack
	if t.file != "" && t.line > 0 {
		e.File, e.Line, e.Column = t.file, t.line, t.column
	}
}

// traceNames are the event types that open and close a handler call in the
// trace: step.started/step.completed for a tool step,
// tool.called for a call an agent step's model proposed (whose caller
// emits tool.completed itself, with what the model was sent).
type traceNames struct{ started, completed string }

// invoke runs one handler call whose policy decision is already made, and
// records it. It returns errStop when ctx ended (the run is left to whoever
// holds it next); a failed handler is a handlerCall with a code.
func (x *execution) invoke(ctx context.Context, s *agent.Step, callID string, tool *agent.Tool, inputJSON json.RawMessage, key string, names traceNames, extra map[string]any) (handlerCall, error) {
	startData := map[string]any{"tool": tool.Name, "input": inputJSON, "idempotencyKey": key, "attempt": x.run.Attempts}
	maps.Copy(startData, extra)
	if tool.MCP != nil {
		startData["mcp"] = map[string]any{"server": tool.MCP.Server, "tool": tool.MCP.Name}
	}
	x.emit(names.started, s.ID, startData)

	started := x.e.now()
	if tool.MCP != nil {
		callCtx, cancel := context.WithTimeout(ctx, tool.Timeout)
		defer cancel()
		return x.callMCP(ctx, callCtx, s, tool, inputJSON, key, names, started)
	}
	inv := jsvm.Invocation{
		Tenant:         x.run.ProjectID,
		Export:         tool.Name,
		Input:          inputJSON,
		RunID:          x.run.ID,
		StepID:         s.ID,
		StepIndex:      s.Index,
		EndUserID:      x.run.EndUserID,
		IdempotencyKey: key,
		Broker:         &storeBroker{store: x.e.store, scope: store.BrokerScope{ProjectID: x.run.ProjectID, EndUserID: x.run.EndUserID}, now: x.e.now},
		BrokerToken:    x.token,
		Secrets:        x.secrets.list(),
		Timeout:        tool.Timeout,
	}
	var (
		res jsvm.Result
		err error
	)
	for {
		// The call's timeout starts once a sandbox worker is free for it.
		// It may wait for one for as long as it could still finish within
		// the lease this execution's last write took (with half the margin
		// to spare; on the real clock, as the sandbox waits); then the
		// lease is renewed before it waits on.
		inv.StartBy = time.Now().Add(x.run.LeaseUntil.Sub(x.e.now()) - tool.Timeout - x.e.cfg.LeaseMargin/2)
		res, err = x.e.cfg.Invoker.Invoke(ctx, x.dep.bundle, inv)
		if je, ok := jsvm.AsError(err); !ok || je.Code != jsvm.CodeBusy || ctx.Err() != nil {
			break
		}
		if err := x.commit(ctx, x.run, nil, nil); err != nil {
			return handlerCall{}, err
		}
	}
	if ctx.Err() != nil {
		// Cancelled, or the worker is shutting down: leave the run to whoever
		// holds it next.
		return handlerCall{}, errStop
	}
	hc := handlerCall{costs: x.record(s.ID, res, tool.Name, extra["callId"]), took: x.e.now().Sub(started)}
	hc.untrusted = tool.Source == agent.SourceExternal || len(res.Untrusted) > 0
	if tool.Source == agent.SourceExternal {
		// Whatever an external tool produced — a result, or an error whose
		// text came from outside — lowers the run's trust before anything
		// of it goes further.
		x.lowerTrust("tool:"+tool.Name, s.ID)
	}
	if je, ok := jsvm.AsError(err); ok && je.Code == jsvm.CodeSandboxCrashed {
		// Maybe not this call's doing (a fault of the worker): try the call
		// again, here, after a short backoff, a bounded number of times —
		// in this execution, so it needs no dispatch (the runner Lambda
		// dispatches nothing). Each attempt is counted in the store before
		// it runs (the claim counted the first), so a restart or a runner
		// that keeps dying cannot reset the count.
		if x.run.Attempts > x.e.sandboxRetries() {
			hc.code, hc.msg = CodeSandboxCrashed, fmt.Sprintf("%s crashed its sandbox %d times; giving up: %s", tool.Name, x.run.Attempts, je.Message)
			return hc, nil
		}
		if err := x.e.cfg.Sleep(ctx, time.Duration(x.run.Attempts)*x.e.sandboxBackoff()); err != nil {
			return hc, errStop
		}
		x.emit("step.retrying", s.ID, map[string]any{"tool": tool.Name, "attempt": x.run.Attempts, "code": CodeSandboxCrashed, "reason": je.Message})
		next := x.run
		next.Attempts++
		if err := x.commit(ctx, next, nil, nil); err != nil {
			return hc, err
		}
		retry, err := x.invoke(ctx, s, callID, tool, inputJSON, key, names, extra)
		retry.untrusted = retry.untrusted || hc.untrusted // a mark the crashed attempt made still holds
		return retry, err
	}
	if je, ok := jsvm.AsError(err); ok && je.Retryable {
		// Not necessarily this handler's doing: try the step again (up to
		// MaxAttempts) rather than fail the run.
		return hc, x.requeue(ctx, s.ID, tool.Name, je.Message)
	}
	if err != nil {
		hc.code, hc.msg = CodeHandlerError, fmt.Sprintf("%s failed: %v", tool.Name, err)
		var je *jsvm.Error
		if errors.As(err, &je) {
			hc.thrown = thrownBy(je)
			switch je.Code {
			case jsvm.CodeTimeout:
				hc.code, hc.msg = CodeTimeout, fmt.Sprintf("%s timed out after %s", tool.Name, tool.Timeout)
			case jsvm.CodeMemory:
				hc.code = CodeMemoryLimit
			case jsvm.CodeStackOverflow:
				hc.code = CodeStackOverflow
			case jsvm.CodeNotSerializable, jsvm.CodeResultTooLarge:
				hc.code = CodeInvalidOutput
			}
		}
		return hc, nil
	}
	return x.accept(s, tool, hc, res.Output, key, names), nil
}

// accept takes a call's output: JSON its tool's output schema admits, or
// the call fails invalid-output; an accepted call's completion is traced.
func (x *execution) accept(s *agent.Step, tool *agent.Tool, hc handlerCall, output json.RawMessage, key string, names traceNames) handlerCall {
	out, err := decode(output)
	if err != nil {
		hc.code, hc.msg = CodeInvalidOutput, fmt.Sprintf("%s returned invalid JSON: %v", tool.Name, err)
		return hc
	}
	if err := tool.ValidateOutput(out); err != nil {
		hc.code, hc.msg = CodeInvalidOutput, err.Error()
		return hc
	}
	if names.completed != "" {
		x.emit(names.completed, s.ID, map[string]any{
			"tool": tool.Name, "output": output, "costs": hc.costs, "durationMs": hc.took.Milliseconds(),
			"idempotencyKey": key,
		})
	}
	hc.raw, hc.value = output, out
	return hc
}

// record applies what a handler reported — logs, costs, untrusted marks —
// whether it succeeded or not, and returns the call's costs.
func (x *execution) record(step string, res jsvm.Result, tool string, callID any) store.Costs {
	for _, l := range res.Logs {
		x.pending = append(x.pending, event("log", l.At, step, map[string]any{"level": l.Level, "message": l.Message}))
	}
	if res.LogsTruncated {
		x.emit("log", step, map[string]any{"level": "warn", "message": "further log lines were dropped (limit reached)"})
	}
	costs := store.Costs{TokensInput: res.Cost.TokensInput, TokensOutput: res.Cost.TokensOutput, CostUSD: res.Cost.CostUSD}
	if !costs.IsZero() {
		x.run.Costs = x.run.Costs.Add(costs)
		data := map[string]any{"source": "handler", "tool": tool, "costs": costs, "runCosts": x.run.Costs}
		if callID != nil {
			data["callId"] = callID
		}
		x.emit("cost.recorded", step, data)
	}
	for _, origin := range res.Untrusted {
		x.lowerTrust(origin, step)
	}
	return costs
}

// evaluate is the policy's verdict on a call; a call that asks because the
// run is untrusted names what lowered the trust. A call that asks may be
// let through by a remembered decision (remembered); the error is the
// store's, reading them.
func (x *execution) evaluate(ctx context.Context, tool *agent.Tool, input any) (agent.Verdict, error) {
	d := x.agent.Evaluate(tool.Name, input, x.run.Trust == store.Untrusted)
	if d.Untrusted && x.run.TrustOrigin != "" {
		d.Reason += " (trust lowered by " + x.run.TrustOrigin + ")"
	}
	if d.Outcome == agent.Ask {
		return x.remembered(ctx, tool, input, d)
	}
	return d, nil
}

// lowerTrust makes the run untrusted. Trust only goes down; the first origin
// is kept.
func (x *execution) lowerTrust(origin, step string) {
	if x.run.Trust == store.Untrusted {
		return
	}
	x.run.Trust = store.Untrusted
	x.run.TrustOrigin = origin
	x.emit("trust.lowered", step, map[string]any{"origin": origin})
}

// approvedCall returns the granted approval of this call, if the run resumed
// from one. It checks the approved input against its digest.
func (x *execution) approvedCall(ctx context.Context, s *agent.Step, callID string) (*approvals.Approval, error) {
	if x.run.ApprovalID == "" {
		return nil, nil
	}
	a, err := x.e.store.GetApproval(ctx, x.run.ApprovalID)
	if err != nil {
		return nil, fmt.Errorf("get approval %s: %w", x.run.ApprovalID, err)
	}
	if a.StepIndex != s.Index || a.CallID != callID {
		return nil, nil
	}
	if a.Status != approvals.Approved {
		return nil, x.fail(ctx, s.ID, CodeInternal, fmt.Sprintf("approval %s is %s, not approved", a.ID, a.Status))
	}
	digest, err := approvals.Digest(a.Input)
	if err != nil || digest != a.InputDigest {
		return nil, x.fail(ctx, s.ID, CodeInternal, fmt.Sprintf("approval %s: the stored input does not match its digest; refusing to run it", a.ID))
	}
	return &a, nil
}

// approvedPolicy is the policy record of a call that runs because a person
// approved it.
func approvedPolicy(a approvals.Approval) map[string]any {
	return decidedBy(a, map[string]any{"decision": "approved", "approvalId": a.ID})
}

// decidedBy adds who decided a to an event's data: "by", the key, and
// "byName", the member when known.
func decidedBy(a approvals.Approval, data map[string]any) map[string]any {
	data["by"] = a.DecidedBy
	if a.DecidedByName != "" {
		data["byName"] = a.DecidedByName
	}
	return data
}

// deniedDespiteApproval re-checks an approved input against the deny rules:
// an approval never lets a call through that policy denies (Engine.Decide refuses
// such edits; this guards the input that is about to run).
func (x *execution) deniedDespiteApproval(tool *agent.Tool, input any) (agent.Verdict, bool) {
	d := x.agent.Evaluate(tool.Name, input, x.run.Trust == store.Untrusted)
	return d, d.Outcome == agent.Deny
}

// policyDenial is the failure of a call of tool that d denies, worded as a
// person's denial is: "refundOrder was denied by policy rule 0: large
// refunds go to finance".
func policyDenial(tool string, d agent.Verdict) string {
	if strings.HasPrefix(d.Reason, "denied by ") {
		return tool + " was " + d.Reason
	}
	return fmt.Sprintf("%s was denied by policy: %s", tool, d.Reason)
}

// pause records an approval for the call and releases the run.
func (x *execution) pause(ctx context.Context, s *agent.Step, callID string, tool *agent.Tool, input any, v agent.Verdict) error {
	reason := v.Reason
	raw, err := json.Marshal(input)
	if err != nil {
		return x.fail(ctx, s.ID, CodeInvalidInput, fmt.Sprintf("step %s: input is not JSON: %v", s.ID, err))
	}
	separated := separateFrom(v, x.run)
	reqs, err := x.requirements(ctx, v, separated)
	if err != nil {
		return err
	}
	a, err := approvals.New(approvals.Request{
		ProjectID: x.run.ProjectID, RunID: x.run.ID, Agent: x.run.Agent, EndUserID: x.run.EndUserID,
		Deployment: x.run.Deployment, StepIndex: s.Index, StepID: s.ID, CallID: callID, Tool: tool.Name,
		Input: raw, Reason: reason, RequestedAt: x.e.now(), Timeout: tool.ApprovalTimeout,
		SeparateFrom: separated, SeparatedBy: v.SeparatedBy, NoteToCustomer: tool.NoteToCustomer,
		Requirements: reqs, Notices: tool.Notices,
	}, x.e.unique())
	if err != nil {
		return x.fail(ctx, s.ID, CodeInvalidInput, fmt.Sprintf("step %s: %v", s.ID, err))
	}
	data := map[string]any{
		"approvalId": a.ID, "tool": tool.Name, "input": json.RawMessage(raw), "reason": reason,
		"expiresAt": a.ExpiresAt, "idempotencyKey": IdempotencyKey(x.run.ProjectID, x.run.ID, s.Index, callID),
	}
	if s.Kind == agent.AgentStep {
		data["callId"] = callID
	}
	if a.SeparateFrom != "" {
		data["separatedBy"] = a.SeparatedBy
	}
	if a.HasQuorum() {
		data["progress"] = a.ProgressText()
		data["approversOn"] = v.ApproversOn
	}
	x.emit("approval.requested", s.ID, data)
	next := x.run
	next.Status = store.RunAwaitingApproval
	next.ApprovalID = a.ID
	next.LeaseOwner, next.LeaseUntil = "", zeroTime
	next.Attempts = 0 // resuming after the decision is not a retry
	if err := x.commit(ctx, next, nil, &a); err != nil {
		return err
	}
	return errPaused
}

// separateFrom is the member an approval asked for under v may not be
// decided by: the run's requester, when v is separated from it.
func separateFrom(v agent.Verdict, r store.Run) string {
	if v.SeparatedBy == "" {
		return ""
	}
	return r.Requester
}

// complete records a completed step and advances the cursor; after the last
// step the same write ends the run as succeeded.
func (x *execution) complete(ctx context.Context, s *agent.Step, out stepOutput) error {
	now := x.e.now()
	next := x.run
	next.Cursor++
	next.ApprovalID = ""
	next.StepState = nil
	// The claim goes on to the next step: its first attempt.
	next.Attempts = 1
	step := &store.Step{
		RunID: x.run.ID, Index: s.Index, ID: s.ID, Output: out.output, Costs: out.costs,
		IdempotencyKey: out.key, CompletedAt: now,
	}
	if next.Cursor >= len(x.agent.Steps) {
		next.Attempts = 0
		next.Status = store.RunSucceeded
		next.Output = out.output
		next.FinishedAt = now
		next.LeaseOwner, next.LeaseUntil = "", zeroTime
		x.emit("run.succeeded", "", map[string]any{"output": out.output, "costs": next.Costs})
	}
	x.outputs[s.ID] = out.value
	if next.Status == store.RunRunning && x.mayHold(s, len(out.output)) {
		x.held = append(x.held, *step)
		x.heldBytes += len(out.output)
		x.run = next
		return nil
	}
	return x.commit(ctx, next, step, nil)
}

// mayHold tells whether the completed step s may wait for the next commit
// instead of being recorded now. Consecutive read steps share a commit: a
// step of a read tool is held while the step after it is a tool step, and
// the outputs held stay within what one step may keep. A crash before that
// commit re-runs the held steps with the same idempotency keys (effect
// read declares them safe to repeat); their events, costs and trust
// changes go out once, with the commit that records them. A write step is
// never held, and held steps are recorded before a write's handler runs
// (flushBefore), so a write never shares a commit and a completed write
// never runs again.
func (x *execution) mayHold(s *agent.Step, outBytes int) bool {
	if x.noHold || s.Kind != agent.ToolStep || x.run.Cursor+1 >= len(x.agent.Steps) {
		return false
	}
	t, ok := x.agent.Tool(s.Tool)
	if !ok || t.Effect != agent.EffectRead || x.agent.Steps[x.run.Cursor+1].Kind != agent.ToolStep {
		return false
	}
	return x.heldBytes+outBytes <= x.e.cfg.MaxOutputInline
}

// flushBefore records the held steps before tool's handler runs if tool is
// a write, or if its call could outlast the lease this execution's last
// write took (the lease covers the longest call between two writes, with
// half its margin to spare) or the execution's own deadline (a runner
// Lambda's).
func (x *execution) flushBefore(ctx context.Context, tool *agent.Tool) error {
	if len(x.held) == 0 {
		return nil
	}
	need := tool.Timeout + x.e.cfg.LeaseMargin/2
	deadline, bounded := ctx.Deadline() // on the real clock, as contexts are
	if tool.Effect == agent.EffectRead && x.e.now().Add(need).Before(x.run.LeaseUntil) && (!bounded || time.Until(deadline) > need) {
		return nil
	}
	return x.commit(ctx, x.run, nil, nil)
}

// requeue puts the run back in the queue to try the current step again, and
// returns errStop. The next claim counts as another attempt.
func (x *execution) requeue(ctx context.Context, step, tool, why string) error {
	now := x.e.now()
	x.emit("step.retrying", step, map[string]any{"tool": tool, "attempt": x.run.Attempts, "reason": why})
	next := x.run
	next.Status = store.RunQueued
	next.LeaseOwner, next.LeaseUntil = "", now
	if err := x.commit(ctx, next, nil, nil); err != nil {
		return err
	}
	_ = x.e.cfg.Dispatch.Dispatch(ctx, x.run.ID) // or the sweeper, at once
	return errStop
}

// fail ends the run as failed and returns errStop (or the write's error).
func (x *execution) fail(ctx context.Context, step, code, msg string) error {
	return x.failThrown(ctx, step, code, msg, thrown{})
}

// failThrown is fail for a handler that threw: its stack and position go
// into both events and the run's error.
func (x *execution) failThrown(ctx context.Context, step, code, msg string, t thrown) error {
	now := x.e.now()
	x.emit("step.failed", step, t.into(map[string]any{"code": code, "message": msg}))
	x.emit("run.failed", "", t.into(map[string]any{"code": code, "message": msg, "step": step}))
	next := x.run
	next.Status = store.RunFailed
	next.Error = &store.RunError{Code: code, Message: msg, Step: step}
	t.onto(next.Error)
	next.FinishedAt = now
	next.LeaseOwner, next.LeaseUntil = "", zeroTime
	if err := x.commit(ctx, next, nil, nil); err != nil {
		return err
	}
	return errStop
}

// commit writes the run's next state with the pending events and the held
// steps (and step, if set), conditional on the version this worker holds.
// Losing the condition means the run changed under the worker (cancelled,
// or the lease was taken over): errStop, and the held steps are lost with
// it, to be run again by whoever holds the run next.
func (x *execution) commit(ctx context.Context, next store.Run, step *store.Step, a *approvals.Approval) error {
	now := x.e.now()
	next.UpdatedAt = now
	steps := x.held
	if step != nil {
		steps = append(steps, *step)
	}
	x.held, x.heldBytes = nil, 0
	x.secrets.redactCommit(&next, steps, a, x.pending)
	if next.Status == store.RunRunning {
		next.LeaseUntil = now.Add(x.lease)
	}
	r, err := x.e.store.CommitRun(ctx, store.RunCommit{Run: next, Events: x.pending, Steps: steps, Approval: a})
	if errors.Is(err, store.ErrConflict) {
		return errStop
	}
	if err != nil {
		return fmt.Errorf("commit run %s: %w", x.run.ID, err)
	}
	x.run = r
	x.pending = nil
	x.e.watch.publish(r)
	return nil
}
