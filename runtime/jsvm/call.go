package jsvm

import (
	"context"
	"math"
	"time"
	"unicode/utf8"

	"stead/runtime/redact"
)

// call is one invocation's state: what the handler recorded and the
// secrets to redact. Touched only on the VM's goroutine (host goroutines
// get copies of what they need).
type call struct {
	ctx   context.Context
	start time.Time
	rt    *Runtime
	inv   *Invocation

	hostCtx context.Context // ctx for host work, cancelled when the call ends
	cancel  context.CancelFunc

	loading   bool   // the bundle's top level is running
	memBreach string // set by a size-checked built-in
	uncaught  *Error // an error thrown by a timer or microtask callback

	red Redactor

	cost      Cost
	untrusted []string
	logs      []Log
	logBytes  int
	truncated bool
}

const (
	maxUntrusted     = 100
	maxOriginLength  = 2048
	truncationMarker = "…[truncated]"
)

func newCall(ctx context.Context, rt *Runtime, inv *Invocation, start time.Time) *call {
	c := &call{ctx: ctx, start: start, rt: rt, inv: inv}
	c.red = Redactor{Set: redact.New(append([]string{inv.BrokerToken}, inv.Secrets...)...)}
	return c
}

// Redactor replaces secrets with "[REDACTED]" in what an invocation
// recorded (package redact does the replacing). Runtime.Invoke applies one
// to every Result; a caller that hands a Result across a boundary (a sandbox
// parent) applies one again with the secrets the other side never saw. The
// zero value redacts nothing.
type Redactor struct{ redact.Set }

// NewRedactor returns a Redactor of secrets (empty ones are ignored).
func NewRedactor(secrets ...string) *Redactor { return &Redactor{Set: redact.New(secrets...)} }

// Result redacts res's output (see redact.Set.JSON), log lines and untrusted
// origins in place.
func (r *Redactor) Result(res *Result) {
	if res.Output != nil {
		res.Output = r.JSON(res.Output)
	}
	for i := range res.Logs {
		res.Logs[i].Message = r.String(res.Logs[i].Message)
	}
	for i := range res.Untrusted {
		res.Untrusted[i] = r.String(res.Untrusted[i])
	}
}

// Error redacts e's message, name, stack and file in place.
func (r *Redactor) Error(e *Error) {
	e.Message = r.String(e.Message)
	e.Name = r.String(e.Name)
	e.Stack = r.String(e.Stack)
	e.File = r.String(e.File)
}

// host returns the context for host work started by this call, creating it
// on first use (most calls start none).
func (c *call) host() context.Context {
	if c.hostCtx == nil {
		c.hostCtx, c.cancel = context.WithCancel(c.ctx)
	}
	return c.hostCtx
}

// end cancels host work still in flight.
func (c *call) end() {
	if c.cancel != nil {
		c.cancel()
	}
}

func (c *call) result() Result {
	return Result{Cost: c.cost, Untrusted: c.untrusted, Logs: c.logs, LogsTruncated: c.truncated}
}

// log records one console line, redacted, within the bounds.
func (c *call) log(level, msg string) {
	o := &c.rt.opts
	if len(c.logs) >= o.MaxLogLines || c.logBytes >= o.MaxLogBytes {
		c.truncated = true
		return
	}
	msg = c.red.String(msg)
	if room := o.MaxLogBytes - c.logBytes; len(msg) > room {
		msg = cutUTF8(msg, room) + truncationMarker
		c.truncated = true
	}
	c.logBytes += len(msg)
	c.logs = append(c.logs, Log{Level: level, Message: msg, At: o.Now()})
}

// logFull reports whether further console lines would be dropped.
func (c *call) logFull() bool {
	o := &c.rt.opts
	if len(c.logs) >= o.MaxLogLines || c.logBytes >= o.MaxLogBytes {
		c.truncated = true
		return true
	}
	return false
}

func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (c *call) markUntrusted(origin string) {
	origin = c.red.String(origin)
	for _, o := range c.untrusted {
		if o == origin {
			return
		}
	}
	if len(c.untrusted) < maxUntrusted {
		c.untrusted = append(c.untrusted, origin)
		if c.inv.OnUntrusted != nil {
			c.inv.OnUntrusted(origin)
		}
	}
}

func (c *call) addCost(ti, to int64, usd float64) {
	c.cost.TokensInput = satAdd(c.cost.TokensInput, ti)
	c.cost.TokensOutput = satAdd(c.cost.TokensOutput, to)
	c.cost.CostUSD += usd
	if math.IsInf(c.cost.CostUSD, 0) {
		c.cost.CostUSD = math.MaxFloat64
	}
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
