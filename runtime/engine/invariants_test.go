package engine_test

// Tests that pin invariants of docs/design.md's table by breaking what
// enforces them: each fails when its guard is removed.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stead/approvals"
	"stead/runtime/bundle"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/store"
)

// tamperedApprovals is a store whose approved approvals read with their
// Input replaced and their InputDigest kept: an approval item changed behind
// the engine's back after the decision.
type tamperedApprovals struct {
	store.Store
	input json.RawMessage
	reads atomic.Int64
}

func (s *tamperedApprovals) GetApproval(ctx context.Context, id string) (approvals.Approval, error) {
	a, err := s.Store.GetApproval(ctx, id)
	if err == nil && a.Status == approvals.Approved {
		a.Input = s.input
		s.reads.Add(1)
	}
	return a, err
}

// wantTamperRefused checks that a resumed run whose approved input no longer
// matches its digest failed internal-error on step, and never ran the
// tampered input.
func wantTamperRefused(t *testing.T, h *harness, ts *tamperedApprovals, runID, step string) {
	t.Helper()
	if ts.reads.Load() == 0 {
		t.Fatal("the resumed run never read its approved approval")
	}
	for _, c := range h.calls(runID, step) {
		if c.Input["amount"] == float64(9999) || jsonString(c.Input["item"]) == `{"amount":9999,"id":"o-1"}` {
			t.Errorf("the handler ran with the tampered input: %+v", c)
		}
	}
	r := h.run(runID)
	wantStatus(t, r, store.RunFailed, engine.CodeInternal)
	if r.Error.Step != step || !strings.Contains(r.Error.Message, "does not match its digest") {
		t.Errorf("run error = %+v", r.Error)
	}
}

// A run resumes with exactly the approved input: when the stored input no
// longer matches the digest the decision approved, the run fails
// internal-error and the handler never runs.
func TestResumeRefusesAnInputThatIsNotTheApprovedDigest(t *testing.T) {
	t.Parallel()
	ts := &tamperedApprovals{input: json.RawMessage(`{"item":{"amount":9999,"id":"o-1"}}`)}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { ts.Store = s; return ts } })
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	wantTamperRefused(t, h, ts, r.ID, "refund")
	if c := h.calls(r.ID, "refund"); len(c) != 0 {
		t.Errorf("refund ran %d times, want never: %+v", len(c), c)
	}
}

// The same in an agent loop: the approved call of a resumed loop runs only
// with the input its digest names.
func TestAgentLoopResumeRefusesAnInputThatIsNotTheApprovedDigest(t *testing.T) {
	t.Parallel()
	ts := &tamperedApprovals{input: json.RawMessage(`{"amount":9999,"orderId":"o-1"}`)}
	h, l := setupModels(t, func(o *options) { o.wrap = func(s store.Store) store.Store { ts.Store = s; return ts } })
	r, a := startTriage(t, h, l, "triage")
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	wantTamperRefused(t, h, ts, r.ID, "triage")
	if c := h.calls(r.ID, "triage"); len(c) != 1 {
		t.Errorf("the loop's handlers ran %d times, want once (listOrders, before the pause): %+v", len(c), c)
	}
	if n := l.count(); n != 2 {
		t.Errorf("%d model requests, want 2: a refused resume asks the model nothing", n)
	}
}

// leaseWatch is an Invoker that makes every call take callTime on the
// engine's clock and, around each call, checks the run's lease as the store
// has it: before the call it is this execution's and outlasts the call's
// timeout; at the call's end another worker's claim is refused.
type leaseWatch struct {
	engine.Invoker
	t        *testing.T
	h        *harness
	callTime time.Duration
	calls    int
}

func (w *leaseWatch) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error) {
	if w.h == nil { // setup's deployment
		return w.Invoker.Invoke(ctx, b, inv)
	}
	w.calls++
	h := w.h
	now := h.clock.Now()
	r, err := h.store.GetRun(ctx, inv.RunID)
	if err != nil {
		w.t.Fatal(err)
	}
	if left := r.LeaseUntil.Sub(now); r.Status != store.RunRunning || !strings.HasPrefix(r.LeaseOwner, "test/") || left < inv.Timeout {
		w.t.Errorf("before call %d (%s, timeout %s): run %s leased by %q for %s more, want this worker's lease to outlast the call",
			w.calls, inv.StepID, inv.Timeout, r.Status, r.LeaseOwner, left)
	}
	res, err := w.Invoker.Invoke(ctx, b, inv)
	h.clock.Advance(w.callTime)
	if _, cerr := h.store.ClaimRun(ctx, store.ClaimParams{RunID: inv.RunID, Owner: "thief/1", Now: h.clock.Now(), Until: h.clock.Now().Add(time.Hour)}); !errors.Is(cerr, store.ErrConflict) {
		w.t.Errorf("at the end of call %d (%s): another worker's claim returned %v, want store.ErrConflict", w.calls, inv.StepID, cerr)
	}
	return res, err
}

// leasedConfig: reads of 20 s (two of them can share a commit within the
// 60 s lease: the longest timeout, the write's default 30 s, plus the 30 s
// margin) around a write.
const leasedConfig = `{
  "agents": {
    "leased": {
      "tools": {
        "listOrders": { "effect": "read", "timeoutMs": 20000 },
        "spend": { "effect": "read", "timeoutMs": 20000 },
        "addNote": { "effect": "write" }
      },
      "steps": [
        { "id": "a", "tool": "listOrders", "input": { "user": "$run.endUserId" } },
        { "id": "b", "tool": "spend", "input": {} },
        { "id": "c", "tool": "listOrders", "input": { "user": "$run.endUserId" } },
        { "id": "d", "tool": "addNote", "input": { "text": "listed" } },
        { "id": "e", "tool": "listOrders", "input": { "user": "$run.endUserId" } },
        { "id": "f", "tool": "spend", "input": {} },
        { "id": "g", "tool": "listOrders", "input": { "user": "$run.endUserId" } }
      ]
    }
  }
}`

// Each write renews the run's lease, so that no other worker can claim a
// run while it executes: seven calls of 15 s each (105 s, well past the
// claim's 60 s lease), with batched reads and a write between them. Before
// every call the lease is this worker's and outlasts the call; at the end of
// every call another worker's claim is refused.
func TestEveryWriteRenewsTheLease(t *testing.T) {
	t.Parallel()
	log := &commitLog{}
	w := &leaseWatch{t: t, callTime: 15 * time.Second}
	h := setup(t,
		func(o *options) { o.wrap = func(s store.Store) store.Store { log.Store = s; return log } },
		func(o *options) {
			o.invoker = func(rt engine.Invoker) engine.Invoker { w.Invoker = rt; return w }
		})
	h.deploy(h.owner, handlers, leasedConfig)
	w.h = h
	start := h.clock.Now()
	r := h.start("leased", `{}`)
	wantStatus(t, r, store.RunSucceeded, "")
	if w.calls != 7 {
		t.Errorf("%d calls, want 7", w.calls)
	}
	if took := h.clock.Now().Sub(start); took < 105*time.Second {
		t.Errorf("the run took %s on the engine's clock, want at least 105s", took)
	}
	shared := false
	for _, steps := range log.recorded() {
		shared = shared || len(steps) > 1
	}
	if !shared {
		t.Errorf("no reads shared a commit (%v): the test no longer covers held steps", log.recorded())
	}
}

// realTime moves the engine's test clock along with the real one, for
// tests of waits the sandbox times on the real clock.
type realTime struct {
	mu    sync.Mutex
	h     *harness
	start time.Time // on the real clock
	base  time.Time // the engine's clock at start
}

func (c *realTime) sync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == nil { // not started yet
		return
	}
	if d := c.base.Add(time.Since(c.start)).Sub(c.h.clock.Now()); d > 0 {
		c.h.clock.Advance(d)
	}
}

// clockedInvoker syncs the engine's clock with the real one after every
// call (a call that waited for a worker returns jsvm.CodeBusy).
type clockedInvoker struct {
	engine.Invoker
	clock *realTime
}

func (c *clockedInvoker) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error) {
	res, err := c.Invoker.Invoke(ctx, b, inv)
	c.clock.sync()
	return res, err
}

// renewalCheck is a store that checks every lease renewal (a write of a
// running run with no step, event or approval: what an execution writes
// while its call waits for a sandbox worker): the lease it writes must be
// later than the one stored, and outlast the call's timeout from the
// write's time.
type renewalCheck struct {
	store.Store
	timeout time.Duration
	mu      sync.Mutex
	n       int
	bad     []string
}

func (s *renewalCheck) CommitRun(ctx context.Context, c store.RunCommit) (store.Run, error) {
	if c.Run.Status != store.RunRunning || len(c.Steps) > 0 || len(c.Events) > 0 || c.Approval != nil {
		return s.Store.CommitRun(ctx, c)
	}
	before, err := s.GetRun(ctx, c.Run.ID)
	if err != nil {
		return store.Run{}, err
	}
	r, err := s.Store.CommitRun(ctx, c)
	if err == nil {
		s.mu.Lock()
		s.n++
		if !r.LeaseUntil.After(before.LeaseUntil) || r.LeaseUntil.Sub(r.UpdatedAt) < s.timeout {
			s.bad = append(s.bad, "lease "+before.LeaseUntil.Format(time.StampMilli)+" → "+r.LeaseUntil.Format(time.StampMilli)+" at "+r.UpdatedAt.Format(time.StampMilli))
		}
		s.mu.Unlock()
	}
	return r, err
}

// A completed write step never runs again: the write that records it is the
// write that moves the cursor past it, so a worker that dies at its next
// write leaves the run after the step, not before it.
func TestCrashAfterAWriteIsRecordedDoesNotRunItAgain(t *testing.T) {
	t.Parallel()
	recorded := false
	cs := &crashingStore{crashes: 1, match: func(c store.RunCommit) bool {
		// The worker dies at the first write after the one that records
		// the write step two.
		if recordsStep(c, "two") {
			recorded = true
			return false
		}
		return recorded
	}}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { cs.Store = s; return cs } })
	r, _, err := h.eng.StartRun(h.ctx, h.dev, engine.StartParams{Agent: "plain", EndUserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	crashRun(t, h, r.ID)
	if c := h.calls(r.ID, "two"); len(c) != 1 {
		t.Errorf("the recorded write step ran %d times, want once: %+v", len(c), c)
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunSucceeded, "")
	c := h.calls(r.ID, "three")
	if len(c) != 2 || c[0].Key != c[1].Key {
		t.Errorf("step three calls = %+v, want two with the same key (the crash lost it)", c)
	}
	steps, _ := h.store.ListSteps(h.ctx, r.ID)
	if len(steps) != 3 {
		t.Errorf("%d step records, want 3", len(steps))
	}
}

// Trust only goes down, and an untrusted run asks before every write: also
// before a write after a resume, in an execution that did not lower it.
func TestUntrustedRunAsksBeforeEveryWrite(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.deploy(h.owner, handlers, `{
  "agents": {
    "reviews": {
      "tools": {
        "fetchReviews": { "effect": "read", "source": "external" },
        "addNote": { "effect": "write" }
      },
      "steps": [
        { "id": "reviews", "tool": "fetchReviews", "input": {} },
        { "id": "note", "tool": "addNote", "input": { "text": "summary" } },
        { "id": "again", "tool": "addNote", "input": { "text": "second" } }
      ]
    }
  }
}`)
	r := h.start("reviews", `{}`)
	for _, step := range []string{"note", "again"} {
		a := h.pending(r.ID)
		if a.StepID != step || !strings.Contains(a.Reason, "untrusted") {
			t.Fatalf("approval = %s %q, want step %s asked because the run is untrusted", a.StepID, a.Reason, step)
		}
		if c := h.calls(r.ID, step); len(c) != 0 {
			t.Fatalf("%s ran before its approval: %+v", step, c)
		}
		if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunSucceeded, "")
	if r.Trust != store.Untrusted {
		t.Error("trust went back up")
	}
}

// Expired is not denied, in the trace too: the run.failed event of an
// approval the sweeper expired carries approval-expired, as the run does.
func TestExpiryIsNotDeniedInTheTrace(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	h.pending(r.ID)
	h.clock.Advance(time.Hour)
	if res, err := h.eng.Sweep(h.ctx); err != nil || res.Expired != 1 {
		t.Fatalf("sweep at the deadline: %+v, %v", res, err)
	}
	h.drain()
	wantStatus(t, h.run(r.ID), store.RunFailed, engine.CodeApprovalExpired)
	if d := h.eventData(r.ID, "run.failed"); d["code"] != engine.CodeApprovalExpired {
		t.Errorf("run.failed = %v, want code %s", d, engine.CodeApprovalExpired)
	}
}

// leaseThief is an Invoker that, at the end of the first call, lets the
// run's lease run out and claims the run for another worker, as one whose
// claim came while this worker's call outlasted its lease.
type leaseThief struct {
	engine.Invoker
	t      *testing.T
	h      *harness
	stolen bool
}

func (w *leaseThief) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error) {
	res, err := w.Invoker.Invoke(ctx, b, inv)
	if w.h == nil || w.stolen { // setup's deployment, or already taken
		return res, err
	}
	w.stolen = true
	h := w.h
	h.clock.Advance(2 * time.Minute)
	now := h.clock.Now()
	if _, cerr := h.store.ClaimRun(ctx, store.ClaimParams{RunID: inv.RunID, Owner: "thief/1", Now: now, Until: now.Add(time.Hour)}); cerr != nil {
		w.t.Errorf("the other worker's claim after the lease ran out: %v", cerr)
	}
	return res, err
}

// A worker whose lease was taken over writes nothing more: its next write
// is refused and it stops, leaving the run as the new owner holds it —
// never writing over the other worker's claim and going on.
func TestWorkerThatLostItsLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	w := &leaseThief{t: t}
	h := setup(t, func(o *options) {
		o.invoker = func(rt engine.Invoker) engine.Invoker { w.Invoker = rt; return w }
	})
	w.h = h
	r := h.start("plain", `{}`)
	if !w.stolen {
		t.Fatal("no call ran")
	}
	if r.Status != store.RunRunning || r.LeaseOwner != "thief/1" || r.Cursor != 0 {
		t.Errorf("run %s at cursor %d leased by %q, want running at 0 as the other worker claimed it", r.Status, r.Cursor, r.LeaseOwner)
	}
	if c := h.calls(r.ID, "two"); len(c) != 0 {
		t.Errorf("the worker that lost its lease went on to step two: %+v", c)
	}
	if steps, _ := h.store.ListSteps(h.ctx, r.ID); len(steps) != 0 {
		t.Errorf("the worker that lost its lease recorded %d steps", len(steps))
	}
}

// rewrittenApprovals is a store whose approved approvals read with their
// Input replaced and their InputDigest made to match it: an approved input
// that passes the digest check but that a deny rule matches.
type rewrittenApprovals struct {
	store.Store
	input json.RawMessage
	reads atomic.Int64
}

func (s *rewrittenApprovals) GetApproval(ctx context.Context, id string) (approvals.Approval, error) {
	a, err := s.Store.GetApproval(ctx, id)
	if err == nil && a.Status == approvals.Approved {
		a.Input = s.input
		a.InputDigest, err = approvals.Digest(s.input)
		s.reads.Add(1)
	}
	return a, err
}

// An approval never lets a call through that a deny rule matches: the
// approved input is checked against the deny rules again when it is about
// to run.
func TestApprovedInputADenyRuleMatchesNeverRuns(t *testing.T) {
	t.Parallel()
	ts := &rewrittenApprovals{input: json.RawMessage(`{"amount":5000}`)}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { ts.Store = s; return ts } })
	r := h.start("rules", `{"text":"plain","amount":5}`)
	a := h.pending(r.ID)
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	if ts.reads.Load() == 0 {
		t.Fatal("the resumed run never read its approved approval")
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodePolicyDenied)
	if !strings.Contains(r.Error.Message, "never automatic") {
		t.Errorf("run error = %+v", r.Error)
	}
	if c := h.calls(r.ID, "refund"); len(c) != 0 {
		t.Errorf("refund ran with an input a deny rule matches: %+v", c)
	}
}

// staleApprovals is a store whose approvals read as still pending, as a
// read that lags behind the decision would (an eventually consistent
// index, a replica).
type staleApprovals struct {
	store.Store
	reads atomic.Int64
}

func (s *staleApprovals) GetApproval(ctx context.Context, id string) (approvals.Approval, error) {
	a, err := s.Store.GetApproval(ctx, id)
	if err == nil && a.Status == approvals.Approved {
		a.Status, a.DecidedBy, a.DecidedAt = approvals.Pending, "", time.Time{}
		s.reads.Add(1)
	}
	return a, err
}

// A gated step runs only on an approval the worker reads as approved: a
// resumed run whose approval reads as pending fails internal-error and the
// handler never runs.
func TestResumeRefusesAnApprovalThatIsNotApproved(t *testing.T) {
	t.Parallel()
	st := &staleApprovals{}
	h := setup(t, func(o *options) { o.wrap = func(s store.Store) store.Store { st.Store = s; return st } })
	r := h.start("refunds", `{"orderId":"o-1","amount":12}`)
	a := h.pending(r.ID)
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	if st.reads.Load() == 0 {
		t.Fatal("the resumed run never read its approval")
	}
	if c := h.calls(r.ID, "refund"); len(c) != 0 {
		t.Errorf("refund ran %d times on an approval that read as pending: %+v", len(c), c)
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodeInternal)
	if r.Error.Step != "refund" || !strings.Contains(r.Error.Message, "is pending, not approved") {
		t.Errorf("run error = %+v", r.Error)
	}
}

// twiceUntrusted is an agent whose trust is lowered twice before a write:
// by an external tool, then by a handler's markUntrusted.
const twiceUntrusted = `{
  "agents": {
    "twice": {
      "tools": {
        "fetchReviews": { "effect": "read", "source": "external" },
        "relay": { "effect": "read" },
        "addNote": { "effect": "write" }
      },
      "steps": [
        { "id": "reviews", "tool": "fetchReviews", "input": {} },
        { "id": "relay", "tool": "relay", "input": { "from": "x@example.com" } },
        { "id": "note", "tool": "addNote", "input": { "text": "summary" } }
      ]
    }
  }
}`

// Trust only goes down, once: a second lowering keeps the first origin,
// which the run, its one trust.lowered event and the write's approval name.
func TestTrustLoweredOnceKeepsTheFirstOrigin(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.deploy(h.owner, handlers, twiceUntrusted)
	r := h.start("twice", `{}`)
	a := h.pending(r.ID)
	r = h.run(r.ID)
	if r.Trust != store.Untrusted || r.TrustOrigin != "tool:fetchReviews" {
		t.Errorf("trust = %s (%s), want untrusted by tool:fetchReviews, the first origin", r.Trust, r.TrustOrigin)
	}
	var lowered []string
	for _, e := range h.events(r.ID) {
		if e.Type == "trust.lowered" {
			lowered = append(lowered, string(e.Data))
		}
	}
	if len(lowered) != 1 || !strings.Contains(lowered[0], "tool:fetchReviews") {
		t.Errorf("trust.lowered events = %v, want one, by tool:fetchReviews", lowered)
	}
	if !strings.Contains(a.Reason, "trust lowered by tool:fetchReviews") {
		t.Errorf("approval reason = %q, want it to name the first origin", a.Reason)
	}
}

// crashedOnce makes the first call of one export run and then report its
// sandbox worker crashed (with an untrusted mark added when mark is set), as
// a worker that died after the handler acted would; later calls run as
// they are.
type crashedOnce struct {
	engine.Invoker
	export, mark string
	mu           sync.Mutex
	done         bool
}

func (c *crashedOnce) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (jsvm.Result, error) {
	c.mu.Lock()
	first := inv.Export == c.export && !c.done
	c.done = c.done || first
	c.mu.Unlock()
	res, err := c.Invoker.Invoke(ctx, b, inv)
	if !first || err != nil {
		return res, err
	}
	if c.mark != "" {
		res.Untrusted = append(res.Untrusted, c.mark)
	}
	return res, &jsvm.Error{Code: jsvm.CodeSandboxCrashed, Message: "sandbox worker died"}
}

// A write whose sandbox crashed after its handler ran is tried again with
// the same idempotency key, so the handler can tell it is a retry.
func TestSandboxCrashRetrySharesTheKey(t *testing.T) {
	t.Parallel()
	h := setup(t, func(o *options) {
		o.invoker = func(rt engine.Invoker) engine.Invoker { return &crashedOnce{Invoker: rt, export: "addNote"} }
	})
	h.cfg.SandboxBackoff = time.Millisecond
	h.restart()
	r := h.start("plain", `{}`)
	wantStatus(t, r, store.RunSucceeded, "")
	c := h.calls(r.ID, "two")
	if len(c) != 2 || c[0].Key != c[1].Key || c[0].Key != engine.IdempotencyKey(h.project, r.ID, 1, "two") {
		t.Errorf("step two calls = %+v, want two with the step's key", c)
	}
}

// An untrusted mark that a call made before its sandbox crashed still holds
// for the retry: the model reads the retried call's result as untrusted
// data.
func TestUntrustedMarkOutlivesASandboxCrash(t *testing.T) {
	t.Parallel()
	h, l := setupModels(t, func(o *options) {
		o.invoker = func(rt engine.Invoker) engine.Invoker {
			return &crashedOnce{Invoker: rt, export: "spend", mark: "email:x@example.com"}
		}
	})
	h.cfg.SandboxBackoff = time.Millisecond
	h.restart()
	l.then(
		calls(1, 1, tcall{"c1", "spend", `{}`}),
		answer("spent", 1, 1),
	)
	r := h.start("spender", `{}`)
	wantStatus(t, r, store.RunSucceeded, "")
	if r.Trust != store.Untrusted || r.TrustOrigin != "email:x@example.com" {
		t.Errorf("trust = %s (%s), want untrusted by the crashed call's mark", r.Trust, r.TrustOrigin)
	}
	content := msg(t, l.request(2), 3)["content"].(string)
	if !strings.HasPrefix(content, `<untrusted-data source="tool:spend">`) {
		t.Errorf("the retried call's result reached the model as %q, want it wrapped as untrusted data", content)
	}
	l.done()
}

// gatedLoop is an agent step whose gated refunds a deny rule refuses above
// 100.
const gatedLoop = `{
  "models": { "default": { "provider": "openai", "baseUrl": "%URL%", "model": "m", "apiKeyEnv": "TEST_LLM_KEY" } },
  "agents": {
    "gatedLoop": {
      "tools": { "refundOrder": { "effect": "write", "requiresApproval": true } },
      "policy": [ { "tool": "refundOrder", "decision": "deny", "reason": "refunds over 100 go to finance",
                    "when": { "required": ["amount"], "properties": { "amount": { "exclusiveMinimum": 100 } } } } ],
      "steps": [ { "id": "loop", "agent": { "model": "default", "prompt": "Refund.", "tools": ["refundOrder"] } } ]
    }
  }
}`

// The same in an agent loop: an approved call whose input a deny rule
// matches fails the run policy-denied when it is about to run, and never
// runs.
func TestAgentLoopApprovedInputADenyRuleMatchesNeverRuns(t *testing.T) {
	t.Parallel()
	ts := &rewrittenApprovals{input: json.RawMessage(`{"amount":5000,"orderId":"o-1"}`)}
	h, l := setupModels(t, func(o *options) { o.wrap = func(s store.Store) store.Store { ts.Store = s; return ts } })
	h.deploy(h.owner, handlers, strings.ReplaceAll(gatedLoop, "%URL%", l.url()))
	l.then(calls(1, 1, tcall{"c1", "refundOrder", `{"orderId":"o-1","amount":12}`}))
	r := h.start("gatedLoop", `{}`)
	a := h.pending(r.ID)
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	if ts.reads.Load() == 0 {
		t.Fatal("the resumed run never read its approved approval")
	}
	if c := h.calls(r.ID, "loop"); len(c) != 0 {
		t.Errorf("refundOrder ran with an input a deny rule matches: %+v", c)
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodePolicyDenied)
	if r.Error.Step != "loop" || !strings.Contains(r.Error.Message, "go to finance") {
		t.Errorf("run error = %+v", r.Error)
	}
	l.done()
}

// The same in an agent loop: a resumed loop whose approval reads as pending
// fails internal-error; the call never runs and the model is not told it
// was declined.
func TestAgentLoopResumeRefusesAnApprovalThatIsNotDecided(t *testing.T) {
	t.Parallel()
	st := &staleApprovals{}
	h, l := setupModels(t, func(o *options) { o.wrap = func(s store.Store) store.Store { st.Store = s; return st } })
	r, a := startTriage(t, h, l, "triage")
	if _, err := h.decide(h.owner, a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	if st.reads.Load() == 0 {
		t.Fatal("the resumed run never read its approval")
	}
	if c := h.calls(r.ID, "triage"); len(c) != 1 {
		t.Errorf("the loop's handlers ran %d times, want once (listOrders, before the pause): %+v", len(c), c)
	}
	r = h.run(r.ID)
	wantStatus(t, r, store.RunFailed, engine.CodeInternal)
	if r.Error.Step != "triage" || !strings.Contains(r.Error.Message, "is pending; the run should not have resumed") {
		t.Errorf("run error = %+v", r.Error)
	}
	if n := l.count(); n != 2 {
		t.Errorf("%d model requests, want 2: a refused resume asks the model nothing", n)
	}
}

// relayLoop is an agent step with a handler that marks its result
// untrusted, and a write the step does not offer the model.
const relayLoop = `{
  "models": { "default": { "provider": "openai", "baseUrl": "%URL%", "model": "m", "apiKeyEnv": "TEST_LLM_KEY" } },
  "agents": {
    "relayLoop": {
      "tools": { "relay": { "effect": "read" }, "addNote": { "effect": "write" } },
      "steps": [ { "id": "loop", "agent": { "model": "default", "prompt": "Relay.", "tools": ["relay"] } } ]
    }
  }
}`

// A result whose handler called markUntrusted reaches the model as
// untrusted data, like an external tool's.
func TestAgentLoopMarkedResultIsUntrustedData(t *testing.T) {
	t.Parallel()
	h, l := setupModels(t)
	h.deploy(h.owner, handlers, strings.ReplaceAll(relayLoop, "%URL%", l.url()))
	l.then(calls(1, 1, tcall{"c1", "relay", `{"from":"x@example.com"}`}), answer("relayed", 1, 1))
	r := h.start("relayLoop", `{}`)
	wantStatus(t, r, store.RunSucceeded, "")
	if r.Trust != store.Untrusted || r.TrustOrigin != "email:x@example.com" {
		t.Errorf("trust = %s (%s)", r.Trust, r.TrustOrigin)
	}
	if content := msg(t, l.request(2), 3)["content"].(string); !strings.HasPrefix(content, `<untrusted-data source="tool:relay">`) {
		t.Errorf("the marked result reached the model as %q, want it wrapped as untrusted data", content)
	}
	l.done()
}

// The model can call only the tools its step offers: a call of a tool the
// agent declares but the step does not offer is refused as unknown and
// never runs.
func TestAgentLoopRefusesAToolTheStepDoesNotOffer(t *testing.T) {
	t.Parallel()
	h, l := setupModels(t)
	h.deploy(h.owner, handlers, strings.ReplaceAll(relayLoop, "%URL%", l.url()))
	l.then(calls(1, 1, tcall{"c1", "addNote", `{"text":"hi"}`}), answer("could not", 1, 1))
	r := h.start("relayLoop", `{}`)
	wantStatus(t, r, store.RunSucceeded, "")
	if c := h.calls(r.ID, "loop"); len(c) != 0 {
		t.Errorf("a tool the step does not offer ran: %+v", c)
	}
	if d := h.eventData(r.ID, "tool.rejected"); d["tool"] != "addNote" || d["reason"] != "unknown-tool" {
		t.Errorf("tool.rejected = %v", d)
	}
	l.done()
}
