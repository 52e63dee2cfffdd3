package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
	"stead/store"
	"stead/strictjson"
)

// Why the parent killed a worker.
type killReason int32

const (
	killNone     killReason = iota
	killRetired             // spent, surplus or idle too long: no call is affected
	killClosed              // the pool closed
	killTimeout             // its call's deadline passed, plus the grace
	killMemory              // its resident memory went over WorkerMemory
	killProtocol            // it broke the protocol
)

// proc is one worker process, seen from the parent.
type proc struct {
	pool   *Pool
	key    string
	pid    int
	cmd    *exec.Cmd
	stderr *tailBuffer

	// ch is read by the goroutine holding the worker, written under wmu.
	ch   *channel
	rbuf []byte
	wmu  sync.Mutex
	wbuf []byte

	calls     int       // calls served; touched by the caller holding it
	idleSince time.Time // guarded by Pool.mu
	running   atomic.Bool
	rss       atomic.Int64 // resident memory that got it killed

	mu        sync.Mutex // guards cur, why, violation
	cur       *pcall
	why       killReason
	violation string
	killOnce  sync.Once

	exited chan struct{} // closed when the process was reaped
}

// pcall is the parent's state of the call a worker runs.
type pcall struct {
	inv       *jsvm.Invocation
	ctx       context.Context // host work; cancelled when the call ends
	seq       uint64          // the call's number on its worker, in every frame of it
	writeCap  time.Time       // no write to the worker for this call after it (the deadline and grace; zero: none)
	untrusted []string
	hostCalls int
	inFlight  int
	fetches   int
	ended     bool
	host      sync.WaitGroup
}

// writeBy is when a write to the worker for c that starts now must end:
// writeTimeout from now — a frame fits the pipe's buffer at once unless
// the worker stopped reading — and never past the call's deadline and
// grace. Per write, not per call: a call that makes thousands of host
// requests on a busy machine outlasts one writeTimeout without its worker
// having stopped reading.
func (c *pcall) writeBy() time.Time {
	w := time.Now().Add(writeTimeout)
	if !c.writeCap.IsZero() {
		w = minTime(w, c.writeCap)
	}
	return w
}

// send writes one frame, within writeTimeout: a worker that stops reading
// cannot hold the parent (the caller kills it on an error).
func (pr *proc) send(m *message) error { return pr.sendBy(m, time.Now().Add(writeTimeout)) }

// sendBy is send with the write's own deadline.
func (pr *proc) sendBy(m *message, deadline time.Time) error {
	pr.wmu.Lock()
	defer pr.wmu.Unlock()
	_ = pr.ch.out.SetWriteDeadline(deadline)
	err := writeFrame(pr.ch.w, &pr.wbuf, m)
	if cap(pr.wbuf) > bigBuffer {
		pr.wbuf = nil // a large frame (a bundle, a big reply) is not kept for the worker's life
	}
	return err
}

const (
	// writeTimeout bounds one write to a worker: a frame fits the pipe's
	// buffer at once unless the worker stopped reading.
	writeTimeout = 5 * time.Second
	// bigBuffer is the frame size past which a buffer is dropped after use.
	bigBuffer = 1 << 20
)

// kill sends SIGKILL once, recording why (the first reason stays).
func (pr *proc) kill(why killReason) {
	pr.mu.Lock()
	if pr.why == killNone {
		pr.why = why
	}
	pr.mu.Unlock()
	pr.killOnce.Do(func() {
		_ = pr.cmd.Process.Signal(syscall.SIGKILL)
		pr.ch.close()
	})
}

func (pr *proc) violate(format string, args ...any) {
	pr.mu.Lock()
	if pr.violation == "" {
		pr.violation = fmt.Sprintf(format, args...)
	}
	pr.mu.Unlock()
	pr.kill(killProtocol)
}

// wait reaps the process.
func (pr *proc) wait() {
	_ = pr.cmd.Wait()
	pr.ch.close()
	pr.pool.forget(pr)
	close(pr.exited)
}

// load waits for the worker's ready frame and hands it the bundle; with
// list, the worker evaluates its top level and answers its exports.
func (pr *proc) load(ctx context.Context, b *bundle.Bundle, lim limitsMsg, list bool) ([]bundle.Export, error) {
	// ctx is only a time limit here (its cancellation is not watched, so no
	// callback can touch the channel after load returns).
	if d, ok := ctx.Deadline(); ok {
		_ = pr.ch.in.SetReadDeadline(d)
		defer func() { _ = pr.ch.in.SetReadDeadline(time.Time{}) }()
	}
	fail := func(what string, err error) ([]bundle.Export, error) {
		pr.kill(killProtocol)
		<-pr.exited
		return nil, &startError{what: what, err: err, fatal: pr.stderr.fatalLine()}
	}
	var m message
	if err := readFrame(pr.ch.br, &pr.rbuf, maxWorkerFrame, &m); err != nil {
		return fail("wait for it to start", err)
	}
	if m.T != msgReady || m.V != protocolVersion {
		return fail("handshake", fmt.Errorf("got %q frame with protocol %d, want ready with %d", m.T, m.V, protocolVersion))
	}
	ld := &loadMsg{Name: b.Name, Source: b.Source, Exports: b.Exports, Limits: lim, List: list}
	if list {
		ld.Exports = nil
	}
	if err := pr.send(&message{T: msgLoad, Load: ld}); err != nil {
		return fail("send the bundle", err)
	}
	if err := readFrame(pr.ch.br, &pr.rbuf, maxWorkerFrame, &m); err != nil {
		return fail("load the bundle", err)
	}
	if m.T != msgLoaded {
		return fail("load the bundle", fmt.Errorf("got %q frame", m.T))
	}
	if m.Error != nil {
		file := clip(m.Error.File, 1024)
		if file == "" {
			file = b.Name
		}
		return nil, &bundle.Error{Code: m.Error.Code, File: file, Line: max(m.Error.Line, 0), Column: max(m.Error.Column, 0), Message: clip(m.Error.Message, maxMessage)}
	}
	if len(m.Exports) > maxExports {
		return fail("list the exports", fmt.Errorf("%d exports, over the limit of %d", len(m.Exports), maxExports))
	}
	return m.Exports, nil
}

// maxExports bounds the exports a worker may list.
const maxExports = 10000

// startError is a worker that could not be started or loaded. fatal is the
// Go runtime's fatal line when the worker died of its own accord (its
// bundle overflowed the stack while being compiled, say).
type startError struct {
	what, fatal string
	err         error
}

func (e *startError) Error() string {
	msg := "start a sandbox worker: " + e.what + ": " + e.err.Error()
	if e.fatal != "" {
		msg += ": " + e.fatal
	}
	return msg
}

func (e *startError) Unwrap() error { return e.err }

// asCallError reports a start failure to the call that needed the worker.
func asCallError(err error) error {
	var se *startError
	if errors.As(err, &se) {
		e := jsvm.NewError(jsvm.CodeSandboxCrashed, se.Error())
		e.Retryable = true
		return e
	}
	return err
}

// next reads the worker's frames of call c until its done frame, which it
// returns. It returns nil when the worker died or broke the protocol (it is
// then killed). The caller's goroutine reads: no goroutine hands frames
// over between calls. Every frame names its call (Seq): one of an earlier
// call — a host request a handler left floating — is a violation, never
// served under this call's broker.
func (pr *proc) next(c *pcall) *doneMsg {
	for {
		var m message
		if err := readFrame(pr.ch.br, &pr.rbuf, maxWorkerFrame, &m); err != nil {
			if errors.Is(err, errFrameTooLarge) || strings.HasPrefix(err.Error(), "malformed frame") {
				pr.violate("%v", err)
			}
			return nil
		}
		if cap(pr.rbuf) > bigBuffer {
			pr.rbuf = nil
		}
		if m.Seq != c.seq {
			pr.violate("a %q frame of call %d during call %d", m.T, m.Seq, c.seq)
			return nil
		}
		switch m.T {
		case msgHost:
			if m.Host == nil || !pr.startHost(c, m.ID, m.Host) {
				return nil
			}
		case msgUntrusted:
			if m.Origin == "" || len(m.Origin) > maxOrigin {
				pr.violate("an untrusted mark of %d bytes", len(m.Origin))
				return nil
			}
			pr.mu.Lock()
			if len(c.untrusted) < maxUntrusted && !slices.Contains(c.untrusted, m.Origin) {
				c.untrusted = append(c.untrusted, m.Origin)
			}
			pr.mu.Unlock()
		case msgDone:
			if m.Done == nil {
				pr.violate("a done frame without a result")
				return nil
			}
			return m.Done
		default:
			pr.violate("an unexpected %q frame", m.T)
			return nil
		}
	}
}

const (
	maxUntrusted = 100
	maxOrigin    = 2048
)

// call runs one invocation on the worker. keep reports whether the worker
// may serve another call.
func (pr *proc) call(ctx context.Context, p *Pool, inv *jsvm.Invocation, start time.Time) (res jsvm.Result, err error, keep bool) {
	hostCtx, cancelHost := context.WithCancel(ctx)
	pr.calls++
	c := &pcall{inv: inv, ctx: hostCtx, seq: uint64(pr.calls)}
	pr.mu.Lock()
	pr.cur = c
	pr.mu.Unlock()
	pr.running.Store(true)
	var killTimer *time.Timer
	// The end of ctx: a deadline the worker sees by itself, a cancellation
	// it is told; either way it has Grace to answer, then it is killed
	// (which ends the read below). The read itself never times out, so a
	// frame is never cut in the middle.
	stop := context.AfterFunc(ctx, func() {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		if c.ended {
			return
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			go func() {
				if pr.send(&message{T: msgCancel, Seq: c.seq}) != nil {
					pr.kill(killTimeout)
				}
			}()
		}
		killTimer = time.AfterFunc(p.opts.Grace, func() { pr.kill(killTimeout) })
	})
	defer func() {
		stop()
		pr.mu.Lock()
		c.ended = true
		if killTimer != nil {
			killTimer.Stop()
		}
		pr.mu.Unlock()
		pr.running.Store(false)
		cancelHost()
		c.host.Wait() // replies are bounded by writeTimeout
		pr.mu.Lock()
		pr.cur = nil
		pr.mu.Unlock()
	}()
	red := jsvm.NewRedactor(append([]string{inv.BrokerToken}, inv.Secrets...)...)
	cm := &callMsg{
		Export: inv.Export,
		RunID:  inv.RunID, StepID: inv.StepID, StepIndex: inv.StepIndex, EndUserID: inv.EndUserID,
		IdempotencyKey: inv.IdempotencyKey, BrokerToken: inv.BrokerToken, Broker: inv.Broker != nil,
	}
	if len(inv.Input) > 0 {
		cm.Input = jsontext.Value(inv.Input)
	}
	if d, ok := ctx.Deadline(); ok {
		cm.Deadline = d.UnixMilli()
		c.writeCap = d.Add(p.opts.Grace)
	}
	if err := pr.sendBy(&message{T: msgCall, Seq: c.seq, Call: cm}, c.writeBy()); err != nil {
		pr.kill(killProtocol)
		return pr.died(ctx, c, red, start)
	}
	d := pr.next(c)
	if d == nil {
		return pr.died(ctx, c, red, start)
	}
	res, err, keep = pr.finish(c, d, red, start)
	return res, err, keep && ctx.Err() == nil // interrupted: the VM is spent
}

// finish turns the worker's done frame into the call's result.
func (pr *proc) finish(c *pcall, d *doneMsg, red *jsvm.Redactor, start time.Time) (jsvm.Result, error, bool) {
	o := &pr.pool.opts
	res := jsvm.Result{
		Cost:          jsvm.Cost{TokensInput: max(0, d.Cost.TokensInput), TokensOutput: max(0, d.Cost.TokensOutput), CostUSD: d.Cost.CostUSD},
		LogsTruncated: d.LogsTruncated,
		Retired:       d.Retired,
	}
	if math.IsNaN(res.Cost.CostUSD) || res.Cost.CostUSD < 0 {
		res.Cost.CostUSD = 0
	}
	res.Untrusted = c.untrusted
	for _, u := range d.Untrusted {
		if len(res.Untrusted) < maxUntrusted && u != "" && len(u) <= maxOrigin && !slices.Contains(res.Untrusted, u) {
			res.Untrusted = append(res.Untrusted, u)
		}
	}
	// Redact first, then cut: a secret cut in two would not be found.
	for i := range d.Logs {
		d.Logs[i].Message = red.String(d.Logs[i].Message)
	}
	res.Logs, res.LogsTruncated = boundLogs(d.Logs, o.MaxLogLines, o.MaxLogBytes, start, o.Now())
	res.LogsTruncated = res.LogsTruncated || d.LogsTruncated
	red.Result(&res)
	if d.Error != nil {
		if !workerCodes[d.Error.Code] {
			pr.violate("an error with code %q", clip(d.Error.Code, 64))
			<-pr.exited
			return res, pr.crashError(), false
		}
		e := jsvm.NewError(d.Error.Code, d.Error.Message)
		e.Name, e.Stack = d.Error.Name, d.Error.Stack
		red.Error(e) // (a worker runs one call at a time: nothing it reports is retryable)
		e.Message, e.Name, e.Stack = clip(e.Message, maxMessage), clip(e.Name, 200), clip(e.Stack, maxMessage)
		// Read from the stack here rather than taken from the worker: the
		// stack is all a worker reports, bounded and redacted above (its
		// positions are the sources' already: goja maps them in the worker).
		e.SetPosition()
		return res, e, !d.Retired && pr.healthy()
	}
	switch {
	case len(d.Output) == 0:
		pr.violate("a result without output or error")
	case len(d.Output) > o.MaxResultSize:
		pr.violate("a result of %d bytes, over the %d-byte limit", len(d.Output), o.MaxResultSize)
	case depth(d.Output) > maxOutputDepth:
		pr.violate("a result nested over %d levels", maxOutputDepth)
	default:
		res.Output = red.JSON(bytes.Clone(d.Output))
		return res, nil, !d.Retired && pr.healthy()
	}
	res.Logs, res.Untrusted = nil, c.untrusted
	<-pr.exited // violate killed it
	return res, pr.crashError(), false
}

const maxMessage = 16 << 10

// workerCodes are the error codes a worker may report (jsvm's own).
var workerCodes = map[string]bool{
	jsvm.CodeHandlerError: true, jsvm.CodeTimeout: true, jsvm.CodeCancelled: true, jsvm.CodeMemory: true,
	jsvm.CodeStackOverflow: true, jsvm.CodeNotSerializable: true, jsvm.CodeResultTooLarge: true,
	jsvm.CodeExportNotFound: true, jsvm.CodeNotFunction: true, jsvm.CodeNeverSettles: true,
	jsvm.CodeInternal: true, jsvm.CodeInvalidInput: true,
}

// reason returns why the worker was killed, if it was.
func (pr *proc) reason() killReason {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.why
}

// healthy reports whether nothing is killing the worker.
func (pr *proc) healthy() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.why == killNone
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…[truncated]"
}

// boundLogs keeps the worker's log lines within the limits, with sane
// levels and times.
func boundLogs(in []logMsg, maxLines, maxBytes int, start, now time.Time) ([]jsvm.Log, bool) {
	var out []jsvm.Log
	total, cut := 0, false
	for _, l := range in {
		if len(out) >= maxLines || total >= maxBytes {
			return out, true
		}
		msg := l.Message
		if room := maxBytes - total; len(msg) > room {
			msg, cut = clip(msg, room), true
		}
		total += len(msg)
		level := l.Level
		switch level {
		case "log", "info", "warn", "error", "debug":
		default:
			level = "log"
		}
		at := time.UnixMicro(l.At)
		if at.Before(start) || at.After(now) {
			at = now
		}
		out = append(out, jsvm.Log{Level: level, Message: msg, At: at})
	}
	return out, cut
}

// died reports the call of a worker that is dead or dying: it waits for the
// process to be reaped and says why it died.
func (pr *proc) died(ctx context.Context, c *pcall, red *jsvm.Redactor, start time.Time) (jsvm.Result, error, bool) {
	pr.kill(killNone) // make sure; the first reason stays
	<-pr.exited
	pr.mu.Lock()
	res := jsvm.Result{Untrusted: slices.Clone(c.untrusted), Retired: true}
	reason := pr.why
	pr.mu.Unlock()
	red.Result(&res)
	o := &pr.pool.opts
	elapsed := time.Since(start).Round(time.Millisecond)
	var e *jsvm.Error
	switch {
	case reason == killClosed:
		e = jsvm.NewError(jsvm.CodeCancelled, fmt.Sprintf("invocation cancelled after %s: the sandbox pool closed", elapsed))
	case reason == killTimeout || (ctx.Err() != nil && reason != killMemory):
		e = pr.pool.contextError(ctx, start, fmt.Sprintf("its sandbox worker was stopped %s after the deadline", o.Grace))
	case reason == killMemory || pr.stderr.outOfMemory():
		e = jsvm.NewError(jsvm.CodeMemory, fmt.Sprintf(
			"memory limit exceeded: the handler's sandbox worker reached %s of memory (the limit is %s) after %s and was stopped; process less data per call",
			bundle.FormatSize(max(pr.rss.Load(), o.WorkerMemory)), bundle.FormatSize(o.WorkerMemory), elapsed))
	default:
		e = pr.crashError()
	}
	red.Error(e)
	return res, e, false
}

// crashError describes a worker that died another way.
func (pr *proc) crashError() *jsvm.Error {
	pr.mu.Lock()
	violation := pr.violation
	pr.mu.Unlock()
	var why string
	if violation != "" {
		why = "it broke the sandbox protocol (" + violation + ")"
	} else {
		why = "it " + exitDescription(pr.cmd.ProcessState)
	}
	e := jsvm.NewError(jsvm.CodeSandboxCrashed, "the handler's sandbox worker died: "+why+pr.stderrNote())
	e.Retryable = true
	return e
}

func exitDescription(ps interface{ String() string }) string {
	if ps == nil {
		return "ended"
	}
	return "ended with " + ps.String()
}

// stderrNote quotes the worker's fatal error line, if it printed one.
func (pr *proc) stderrNote() string {
	if line := pr.stderr.fatalLine(); line != "" {
		return ": " + line
	}
	return ""
}

// startHost runs one host request of the worker's call on its own
// goroutine; it reports false (having killed the worker) for a request the
// protocol does not allow.
func (pr *proc) startHost(c *pcall, id uint64, h *hostMsg) bool {
	pr.mu.Lock()
	c.hostCalls++
	c.inFlight++
	calls, inFlight := c.hostCalls, c.inFlight
	pr.mu.Unlock()
	fetch := h.Op == opFetch
	if fetch {
		pr.mu.Lock()
		c.fetches++
		fetches := c.fetches
		pr.mu.Unlock()
		if fetches > maxFetchInFlight {
			pr.violate("more than %d fetches at once", maxFetchInFlight)
			return false
		}
	}
	switch {
	case id == 0:
		pr.violate("a host request without an id")
		return false
	case calls > maxHostCalls:
		pr.violate("more than %d host requests in one call", maxHostCalls)
		return false
	case inFlight > maxHostInFlight:
		pr.violate("more than %d host requests at once", maxHostInFlight)
		return false
	}
	c.host.Add(1)
	go func() {
		defer c.host.Done()
		r := pr.pool.serveHost(c.ctx, c.inv, h)
		pr.mu.Lock()
		c.inFlight--
		if fetch {
			c.fetches--
		}
		current := pr.cur == c && !c.ended
		pr.mu.Unlock()
		if current && c.ctx.Err() == nil {
			if pr.sendBy(&message{T: msgReply, Seq: c.seq, ID: id, Reply: r}, c.writeBy()) != nil {
				pr.violate("it stopped reading replies")
			}
		}
	}()
	return true
}

// serveHost carries out a broker or fetch request for inv, checking it as
// the VM's side would have: the worker may be lying.
func (p *Pool) serveHost(ctx context.Context, inv *jsvm.Invocation, h *hostMsg) *replyMsg {
	fail := func(err error) *replyMsg {
		if err == nil {
			return &replyMsg{}
		}
		return &replyMsg{Error: err.Error()}
	}
	if h.Op == opFetch {
		if h.Fetch == nil {
			return fail(errors.New("fetch: no request"))
		}
		if len(h.Fetch.Body) > maxFetchBody {
			return fail(fmt.Errorf("fetch %s failed: the request body is over the %s limit", h.Fetch.URL, bundle.FormatSize(maxFetchBody)))
		}
		resp, err := p.fetcher.Fetch(ctx, *h.Fetch)
		if err != nil {
			return fail(err)
		}
		return &replyMsg{Fetch: &resp}
	}
	br := inv.Broker
	if br == nil {
		return fail(errors.New("the broker is not available for this invocation (no broker is configured)"))
	}
	if err := store.CheckBrokerCollection(h.Collection); err != nil {
		return fail(err)
	}
	if h.Op != opList {
		if err := store.CheckBrokerKey(h.Key); err != nil {
			return fail(err)
		}
	}
	switch h.Op {
	case opGet:
		v, found, err := br.Get(ctx, h.Collection, h.Key)
		if err != nil {
			return fail(err)
		}
		return &replyMsg{Value: jsontext.Value(v), Found: found}
	case opPut:
		if len(h.Value) > maxBrokerValue {
			return fail(fmt.Errorf("the value is %s as JSON, over the %s limit", bundle.FormatSize(int64(len(h.Value))), bundle.FormatSize(maxBrokerValue)))
		}
		if err := strictjson.Check(h.Value); err != nil {
			return fail(fmt.Errorf("the value is refused: %w", err))
		}
		return fail(br.Put(ctx, h.Collection, h.Key, []byte(h.Value)))
	case opDelete:
		found, err := br.Delete(ctx, h.Collection, h.Key)
		if err != nil {
			return fail(err)
		}
		return &replyMsg{Found: found}
	case opList:
		items, err := br.List(ctx, h.Collection)
		if err != nil {
			return fail(err)
		}
		r := &replyMsg{Items: make([]brokerItem, len(items))}
		total := 0
		for i, it := range items {
			if total += len(it.Key) + len(it.Value); total > maxListBytes {
				return fail(fmt.Errorf("the collection holds over %s; a list returns at most that (get the items by key)", bundle.FormatSize(maxListBytes)))
			}
			r.Items[i] = brokerItem{Key: it.Key, Value: jsontext.Value(it.Value)}
		}
		return r
	}
	return fail(fmt.Errorf("unknown host operation %q", h.Op))
}

// tailBuffer keeps the first and the last few KiB a worker wrote to
// stderr: Go's fatal errors come first, followed by long goroutine dumps.
type tailBuffer struct {
	mu   sync.Mutex
	head []byte
	tail []byte
}

const stderrKeep = 4 << 10

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	if room := stderrKeep - len(t.head); room > 0 {
		k := min(room, len(b))
		t.head = append(t.head, b[:k]...)
		b = b[k:]
	}
	t.tail = append(t.tail, b...)
	if len(t.tail) > stderrKeep {
		t.tail = append(t.tail[:0], t.tail[len(t.tail)-stderrKeep:]...)
	}
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.head) + "\n" + string(t.tail)
}

// fatalLine returns the Go runtime's "fatal error: …" line (or the worker's
// own complaint), clipped and made valid UTF-8.
func (t *tailBuffer) fatalLine() string {
	for _, line := range strings.Split(t.String(), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "runtime: ") || strings.HasPrefix(line, "stead sandbox worker:") {
			return clip(strings.ToValidUTF8(line, "?"), 300)
		}
	}
	return ""
}

// outOfMemory reports whether the Go runtime died for want of memory (its
// data-segment limit).
func (t *tailBuffer) outOfMemory() bool {
	s := t.String()
	return strings.Contains(s, "out of memory") || strings.Contains(s, "cannot allocate memory")
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
