// Package engine is the run state machine: it starts runs, executes an
// agent's steps until the run ends or reaches a gated tool call, records the
// approval and releases the worker, resumes on approve, fails on deny or
// expiry, and sweeps what was left behind. It is store-agnostic: the same
// engine runs in `stead dev` (bbolt, an in-process worker pool, a ticker)
// and on AWS (DynamoDB, async Lambda invokes, a scheduled sweeper).
//
// Invariants the engine keeps:
//   - Policy is decided before any side effect; the approval gate is per tool
//     call, not per step.
//   - What runs after approval is exactly the approved input, bound by digest.
//   - A completed write step never runs again; a step that may have started
//     before a crash is re-run with the same idempotency key
//     (at-least-once). Consecutive read steps may share one commit (see
//     Read steps below), so a crash may re-run reads that had finished.
//   - Trust only goes down.
//   - Every write that moves a run is conditional on its version or lease.
//
// # Steps
//
// A tool step calls one tool through the gate. A model step asks a model
// once (stead/runtime/model, with retries, backoff and the model's
// deadline); its answer, text or schema-validated JSON, is its output. An
// agent step lets a model propose tool calls: each proposed call goes
// through the same gate as a tool step's — unknown tools and invalid
// arguments are told to the model, then the policy decides, an ask pauses
// the run with an approval for that exact call (CallID "t<turn>.<n>") — and
// its result goes back to the model, bounded in size and, for external
// output, marked as untrusted data. The conversation is kept in
// Run.StepState (see loopState), written after every model answer and every
// settled call, so a paused or crashed run resumes the same conversation
// and a completed call never runs again. With onDecline "tell-model", Decide
// and the sweeper queue the run instead of failing it, and the model is told
// the call was declined or expired.
//
// # MCP-backed tools
//
// A tool with "mcp" runs on a remote MCP server (package mcptool): Deploy
// lists each server's tools and pins the declared ones' definitions in the
// deployment (store.Deployment.MCPTools); invoke sends the call there,
// with its idempotency key in _meta, after the same gate as a handler's.
// A definition that is not the pinned one fails the run with
// CodeToolChanged; a server that cannot be reached is retried as a
// retryable handler error is; an isError result is a handler error.
// step.started and tool.called carry "mcp": {"server", "tool"}.
//
// # Read steps
//
// A completed step of a read tool is held, not recorded, while the step
// after it is a tool step: it goes out with the run's next commit, so
// consecutive read steps cost one write (execution.mayHold). The held
// steps are recorded before a write's handler runs and before a call that
// could outlast the lease (flushBefore); a write step is recorded on its
// own. A crash before the commit loses the held steps: whoever claims the
// run next runs them again, with the same idempotency keys, and their
// events, costs and trust changes are written once, by the commit that
// records them.
//
// # Costs
//
// Model usage is recorded by the engine as the cost of its step (tokens as
// the provider reported them; costUsd as the provider or gateway reported
// it, else from the model's prices); a handler's recordCost is recorded as
// the cost of its call. Each lands in the run's costs once, in the same
// conditional write as the progress it belongs to, with a cost.recorded
// event whose "source" is "model" or "handler". An agent step's cost is the
// sum of its model answers and its handlers' costs.
//
// # Trace events
//
// Besides run.*, step.started, step.completed, step.failed,
// approval.*, cost.recorded, trust.lowered and log, model and agent steps
// write:
//
//   - model.retried: a retryable model failure and the wait before the next
//     attempt (model, attempt, status, waitMs, error, turn).
//   - model.responded: one answer of an agent step's model (turn, content,
//     toolCalls with their callId, usage, costs, stopReason, attempts).
//   - tool.called / tool.completed: one call the model proposed, run (callId,
//     tool, input, idempotencyKey, policy; output in full, costs,
//     truncated and resultBytes for what the model was sent, untrusted).
//   - tool.failed: the handler threw, timed out or returned what its schema
//     refuses; the model is told the error.
//   - tool.rejected: an unknown tool, invalid arguments (reason
//     "unknown-tool", "invalid-arguments") or, with onDecline "tell-model",
//     a policy denial ("policy-denied"); the model is told the message.
//   - tool.declined: a denied or expired approval told to the model.
//
// Step-level events of model and agent steps carry "kind": "model" or
// "agent".
package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
	"stead/runtime/mcptool"
	"stead/store"
)

// Errors the engine returns besides the store's and approvals' sentinels.
var (
	// ErrForbidden: the actor's role may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrIdempotencyKeyReused: the key was used for a different request.
	ErrIdempotencyKeyReused = errors.New("idempotency key was already used with a different request")
	// ErrRunFinished: the run already ended.
	ErrRunFinished = errors.New("run has already finished")
	// ErrNoDeployment: the project has nothing deployed yet.
	ErrNoDeployment = errors.New("nothing is deployed yet; deploy a bundle and stead.json first (stead deploy)")
)

// Invoker is the JS runtime that runs handlers (a *jsvm.Runtime in
// process, a *sandbox.Pool in worker processes). It also makes the
// compiler of the bundles it runs, so the two cannot come from different
// runtimes. A wrapper that embeds an Invoker and overrides Invoke keeps the
// compiler of the runtime it wraps.
type Invoker interface {
	// Invoke runs one handler export of b, compiled by a Compiler this
	// Invoker made, for at most inv.Timeout from the call's start (a
	// sandbox's wait for a free worker does not count; past inv.StartBy it
	// gives up waiting with jsvm.CodeBusy). Errors are *jsvm.Error.
	Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error)
	// Compiler returns a new Compiler with o's limits whose bundles Invoke
	// runs; the runtime sets o.Setup or o.ListExports itself.
	Compiler(o bundle.Options) *bundle.Compiler
}

// Blobs keeps bundles by digest.
type Blobs interface {
	// Put stores data under its sha256 digest; storing the same digest again
	// is not an error.
	Put(ctx context.Context, digest string, data []byte) error
	// Get returns the data or an error wrapping store.ErrNotFound.
	Get(ctx context.Context, digest string) ([]byte, error)
}

// Dispatcher hands a run to a worker that will call Execute. Delivery is at
// least once; duplicates are harmless because the claim is conditional.
type Dispatcher interface {
	Dispatch(ctx context.Context, runID string) error
}

// Config wires an Engine.
type Config struct {
	Store store.Store
	Blobs Blobs
	// Invoker runs handlers and compiles their bundles.
	Invoker  Invoker
	Dispatch Dispatcher
	// MaxBundle bounds a deployed bundle; bundle.DefaultMaxSize (5 MiB)
	// when zero.
	MaxBundle int64
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Sleep waits d before a crashed sandbox call is tried again, and
	// between tries of a cancel that lost a race, returning early with
	// ctx's error; a timer when nil.
	Sleep func(ctx context.Context, d time.Duration) error
	// Entropy feeds ids; crypto/rand when nil.
	Entropy io.Reader
	// WorkerID names this process in leases.
	WorkerID string
	// LeaseMargin is added to the longest tool timeout of an agent to form a
	// run's lease; 30s when zero.
	LeaseMargin time.Duration
	// DispatchGrace is how long a queued run may wait for a worker before the
	// sweeper dispatches it again; 30s when zero.
	DispatchGrace time.Duration
	// Notifications, when set, is told of the writes whose events notify
	// (webhooks); without it no event notifies.
	Notifications Notifications
	// Purger, when set, deletes the finished runs, settled notifications
	// and expired rules past the store's retention at the end of every
	// sweep: boltstore.Store, opened with a Retention. DynamoDB's time to
	// live needs none.
	Purger Purger
	// SoleWriter says that no other process writes this store's runs
	// (stead dev: bbolt's lock keeps other processes out), so every write
	// of a run is this engine's: a wait that begins right after a run's
	// create is then answered with what this engine's writes returned,
	// without reading the run back.
	SoleWriter bool
	// PollInterval is how often waiters re-read a run changed by another
	// process; 1s when zero.
	PollInterval time.Duration
	// MaxOutputInline bounds a step output kept in the store; larger outputs
	// fail the step. 256 KiB when zero (the handler result limit).
	MaxOutputInline int
	// SandboxRetries is how often a step whose sandbox worker crashed
	// (jsvm.CodeSandboxCrashed) is tried again before the run fails with
	// CodeSandboxCrashed: DefaultSandboxRetries when zero, none when
	// negative. Retry n waits n × SandboxBackoff (DefaultSandboxBackoff
	// when zero) first.
	SandboxRetries int
	SandboxBackoff time.Duration
	// Models configures how model and agent steps reach model providers
	// (HTTP client, API key lookup, retry sleeps); the zero value uses the
	// real ones.
	Models ModelOptions
	// MCP configures how MCP-backed tools reach their servers; the zero
	// value uses Models' egress policy and environment lookup.
	MCP MCPOptions
}

func (c *Config) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("engine config: Store is required")
	case c.Blobs == nil:
		return errors.New("engine config: Blobs is required")
	case c.Invoker == nil:
		return errors.New("engine config: Invoker is required")
	case c.Dispatch == nil:
		return errors.New("engine config: Dispatch is required")
	case c.MaxBundle < 0:
		return errors.New("engine config: MaxBundle must not be negative")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = sleepCtx
	}
	if c.Entropy == nil {
		c.Entropy = rand.Reader
	}
	if c.WorkerID == "" {
		c.WorkerID = "worker"
	}
	if c.LeaseMargin <= 0 {
		c.LeaseMargin = 30 * time.Second
	}
	if c.DispatchGrace <= 0 {
		c.DispatchGrace = 30 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.MaxOutputInline <= 0 {
		c.MaxOutputInline = 256 << 10
	}
	c.Models.defaults()
	c.MCP.defaults(c.Models)
	return nil
}

// Engine runs agents. It is safe for concurrent use.
type Engine struct {
	cfg         Config
	store       store.Store
	compiler    *bundle.Compiler
	deployments *deploymentCache
	watch       *hub
	mcp         *mcptool.Client

	idMu sync.Mutex
	ids  *ulid.MonotonicEntropy

	// running are the executions in this process, by run, for Cancel to
	// interrupt (see listen).
	runningMu sync.Mutex
	running   map[string]*listener

	// keys caches project signing keys by project id.
	keys sync.Map
}

// New returns an Engine.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:     cfg,
		store:   cfg.Store,
		running: map[string]*listener{},
		ids:     ulid.Monotonic(cfg.Entropy, 0),
		mcp:     newMCPClient(cfg),
		watch:   newHub(cfg.SoleWriter),
	}
	if cfg.Notifications != nil {
		e.store = notifying{Store: cfg.Store, n: cfg.Notifications}
	}
	e.compiler = cfg.Invoker.Compiler(bundle.Options{MaxSize: int(cfg.MaxBundle)})
	e.deployments = newDeploymentCache(e)
	return e, nil
}

// newID returns a sortable unique id with a prefix: "run_01J…".
func (e *Engine) newID(prefix string) string {
	e.idMu.Lock()
	defer e.idMu.Unlock()
	id := ulid.MustNew(ulid.Timestamp(e.cfg.Now()), e.ids)
	return fmt.Sprintf("%s_%s", prefix, id.String())
}

// unique returns 8 characters no other call of this engine returns in the
// same millisecond: the tail of a fresh monotonic ULID (its random part).
func (e *Engine) unique() string {
	id := e.newID("")
	return id[len(id)-8:]
}

func (e *Engine) now() time.Time { return e.cfg.Now().UTC() }

func (e *Engine) sandboxRetries() int {
	switch n := e.cfg.SandboxRetries; {
	case n == 0:
		return DefaultSandboxRetries
	case n < 0:
		return 0
	default:
		return n
	}
}

func (e *Engine) sandboxBackoff() time.Duration {
	if e.cfg.SandboxBackoff <= 0 {
		return DefaultSandboxBackoff
	}
	return e.cfg.SandboxBackoff
}
