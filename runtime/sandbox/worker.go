package sandbox

import (
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
)

// WorkerArg is the first argument that makes a binary a sandbox worker.
const WorkerArg = "__stead_sandbox_worker__"

// Main makes this process a sandbox worker when it was started as one
// (os.Args[1] is WorkerArg): it serves its parent on file descriptor 3 and
// exits. Otherwise it returns at once. Every binary that starts workers
// calls it first thing in main — and so does TestMain in a package whose
// tests start them (the test binary is the worker binary there).
func Main() {
	if len(os.Args) < 2 || os.Args[1] != WorkerArg {
		return
	}
	os.Exit(serveWorker(os.Args[2:]))
}

// workerArgs are what the parent passes on the command line: the protocol
// version, then the worker's limits (see Options).
type workerArgs struct {
	version   int
	maxStack  int   // bytes of Go stack per goroutine
	dataLimit int64 // RLIMIT_DATA, bytes; 0 for none
	goMemory  int64 // debug.SetMemoryLimit, bytes
}

func (a workerArgs) list() []string {
	return []string{WorkerArg, strconv.Itoa(a.version), strconv.Itoa(a.maxStack),
		strconv.FormatInt(a.dataLimit, 10), strconv.FormatInt(a.goMemory, 10)}
}

func parseWorkerArgs(args []string) (workerArgs, error) {
	if len(args) != 4 {
		return workerArgs{}, fmt.Errorf("want 4 arguments, got %d", len(args))
	}
	var a workerArgs
	var err error
	nums := []*int64{new(int64), new(int64), &a.dataLimit, &a.goMemory}
	for i, s := range args {
		if *nums[i], err = strconv.ParseInt(s, 10, 64); err != nil || *nums[i] < 0 {
			return workerArgs{}, fmt.Errorf("argument %d (%q) is not a size", i+1, s)
		}
	}
	a.version, a.maxStack = int(*nums[0]), int(*nums[1])
	return a, nil
}

// serveWorker is the worker's whole life; it returns the exit code.
func serveWorker(args []string) int {
	a, err := parseWorkerArgs(args)
	if err != nil || a.version != protocolVersion {
		fmt.Fprintf(os.Stderr, "stead sandbox worker: bad arguments %q (protocol %d expected): %v\n", args, protocolVersion, err)
		return 2
	}
	if err := harden(a); err != nil {
		fmt.Fprintf(os.Stderr, "stead sandbox worker: %v\n", err)
		return 2
	}
	ch, err := openChannel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "stead sandbox worker: open the channel on fds %d and %d: %v\n", workerOutFD, workerInFD, err)
		return 2
	}
	w := &workerConn{ch: ch, pending: make(map[uint64]chan *replyMsg),
		inFlight: make(chan struct{}, maxHostInFlight), fetches: make(chan struct{}, maxFetchInFlight)}
	if err := w.serve(); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(os.Stderr, "stead sandbox worker: %v\n", err)
		return 1
	}
	return 0
}

// openChannel opens the worker's ends of the channel, made nonblocking so
// that the runtime's poller waits on them.
func openChannel() (*channel, error) {
	for _, fd := range []int{workerOutFD, workerInFD} {
		if err := setNonblock(fd); err != nil {
			return nil, err
		}
	}
	return newChannel(os.NewFile(workerInFD, "sandbox-in"), os.NewFile(workerOutFD, "sandbox-out"))
}

// workerGCPercent is a worker's GOGC (see harden).
const workerGCPercent = 200

// harden applies the worker's own limits before it reads anything.
func harden(a workerArgs) error {
	runtime.GOMAXPROCS(1)
	if a.maxStack > 0 {
		debug.SetMaxStack(a.maxStack)
	}
	if a.goMemory > 0 {
		debug.SetMemoryLimit(a.goMemory)
	}
	// A worker's live heap is small (the VM and its bundle) and a warm call
	// allocates a few KiB, so at the default GOGC of 100 the collector ran
	// often and took a sixth of the worker's CPU, on the call's path (one P).
	// At 200 a busy worker is 4 MiB larger (26 → 30 MiB resident in
	// BenchmarkInvokeWarm) and its CPU a call about a quarter less. Memory
	// stays bounded as before: the memory limit just above, the jsvm
	// watchdog (which collects before it counts garbage as growth) and the
	// parent's watch.
	debug.SetGCPercent(workerGCPercent)
	return platformHarden(a)
}

// workerConn is the worker's side of the channel.
type workerConn struct {
	ch   *channel // read by serve, written under wmu
	rbuf []byte

	wmu  sync.Mutex // guards ch writes and wbuf
	wbuf []byte

	mu      sync.Mutex // guards what follows
	nextID  uint64
	pending map[uint64]chan *replyMsg
	cancel  context.CancelFunc // the running call's
	seq     uint64             // the running (or last) call's number
	hosts   int                // host requests of the running call

	inFlight chan struct{} // a slot per host request awaiting its reply
	fetches  chan struct{} // a slot per fetch awaiting its response
}

func (w *workerConn) send(m *message) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return writeFrame(w.ch.w, &w.wbuf, m)
}

// sendFor writes a frame of the call whose context is ctx, tagged with its
// number — unless that call is over (its context ends before its done
// frame is written, under the same lock), so a request a handler left
// floating never reaches the parent after its call.
func (w *workerConn) sendFor(ctx context.Context, m *message) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	m.Seq = w.seq
	w.mu.Unlock()
	return writeFrame(w.ch.w, &w.wbuf, m)
}

func (w *workerConn) serve() error {
	if err := w.send(&message{T: msgReady, V: protocolVersion}); err != nil {
		return err
	}
	var m message
	if err := readFrame(w.ch.br, &w.rbuf, maxParentFrame, &m); err != nil {
		return err
	}
	if m.T != msgLoad || m.Load == nil {
		return fmt.Errorf("expected a load frame, got %q", m.T)
	}
	ld := m.Load
	bundleError := func(err error) *errorMsg {
		msg := &errorMsg{Code: jsvm.CodeInternal, Message: err.Error()}
		if be, ok := bundle.AsError(err); ok {
			msg.Code, msg.Message, msg.File, msg.Line, msg.Column = be.Code, be.Message, be.File, be.Line, be.Column
		}
		return msg
	}
	b, err := bundle.Compile(ld.Name, ld.Source, ld.Exports)
	if err != nil {
		return w.send(&message{T: msgLoaded, Error: bundleError(err)})
	}
	ld.Source = nil
	if ld.List {
		rt := jsvm.New(jsvm.Options{MemoryLimit: ld.Limits.MemoryLimit})
		defer rt.Close()
		exports, err := bundle.ListExports(context.Background(), b, rt.Setup, 0)
		if err != nil {
			return w.send(&message{T: msgLoaded, Error: bundleError(err)})
		}
		return w.send(&message{T: msgLoaded, Exports: exports})
	}
	rt := jsvm.New(jsvm.Options{
		MaxIdlePerBundle: 1,
		MaxBundles:       1,
		MemoryLimit:      ld.Limits.MemoryLimit,
		MaxResultSize:    ld.Limits.MaxResultSize,
		MaxInputSize:     ld.Limits.MaxInputSize,
		MaxLogLines:      ld.Limits.MaxLogLines,
		MaxLogBytes:      ld.Limits.MaxLogBytes,
		Fetcher:          w,
	})
	if err := w.send(&message{T: msgLoaded}); err != nil {
		return err
	}
	// Calls run one at a time on one goroutine that lives as long as the
	// worker, so the stack goja grew for the first call serves the next
	// (a fresh goroutine per call spent a fifth of the worker's CPU
	// growing its stack). The reader goes on reading meanwhile: replies to
	// the call's host requests and its cancel arrive on the same channel.
	calls := make(chan queuedCall, 1)
	go func() {
		for q := range calls {
			done := w.invoke(q.ctx, rt, b, q.call)
			w.wmu.Lock()
			q.cancel() // before done is written: no frame of this call follows it
			err := writeFrame(w.ch.w, &w.wbuf, &message{T: msgDone, Seq: q.seq, Done: done})
			w.wmu.Unlock()
			if err != nil {
				os.Exit(1) // the parent is gone
			}
		}
	}()
	for {
		var m message
		if err := readFrame(w.ch.br, &w.rbuf, maxParentFrame, &m); err != nil {
			// The parent is gone (or broke the protocol): exit at once, even
			// with a call running — nobody will read its answer.
			return err
		}
		if cap(w.rbuf) > 1<<20 {
			w.rbuf = nil
		}
		switch m.T {
		case msgCall:
			if m.Call == nil {
				return errors.New("call frame without a call")
			}
			ctx, cancel := w.callContext(m.Call.Deadline)
			w.mu.Lock()
			w.cancel, w.seq, w.hosts = cancel, m.Seq, 0
			w.mu.Unlock()
			// The parent sends a call only after the previous one's done
			// frame, so this never waits for more than that call's last
			// steps.
			calls <- queuedCall{ctx: ctx, cancel: cancel, call: m.Call, seq: m.Seq}
		case msgReply:
			w.mu.Lock()
			ch, ok := w.pending[m.ID]
			delete(w.pending, m.ID)
			w.mu.Unlock()
			if ok && m.Reply != nil {
				ch <- m.Reply
			}
		case msgCancel:
			w.mu.Lock()
			if w.cancel != nil && m.Seq == w.seq {
				w.cancel()
			}
			w.mu.Unlock()
		default:
			return fmt.Errorf("unexpected %q frame", m.T)
		}
	}
}

// queuedCall is a call frame handed to the call goroutine.
type queuedCall struct {
	ctx    context.Context
	cancel context.CancelFunc
	call   *callMsg
	seq    uint64
}

func (w *workerConn) callContext(deadline int64) (context.Context, context.CancelFunc) {
	if deadline == 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithDeadline(context.Background(), time.UnixMilli(deadline))
}

// maxOutputDepth bounds the nesting of a handler's result.
const maxOutputDepth = 256

func (w *workerConn) invoke(ctx context.Context, rt *jsvm.Runtime, b *bundle.Bundle, c *callMsg) *doneMsg {
	inv := jsvm.Invocation{
		Export: c.Export, Input: []byte(c.Input),
		RunID: c.RunID, StepID: c.StepID, StepIndex: c.StepIndex,
		EndUserID: c.EndUserID, IdempotencyKey: c.IdempotencyKey, BrokerToken: c.BrokerToken,
		OnUntrusted: func(origin string) {
			if err := w.sendFor(ctx, &message{T: msgUntrusted, Origin: origin}); err != nil && ctx.Err() == nil {
				os.Exit(1)
			}
		},
	}
	if c.Broker {
		inv.Broker = w
	}
	res, err := rt.Invoke(ctx, b, inv)
	if err == nil {
		if why := outputProblem(res.Output); why != "" {
			err = jsvm.NewError(jsvm.CodeNotSerializable, "the handler's result is not JSON-serializable: "+why)
			res.Output = nil
		}
	}
	d := &doneMsg{
		Output:        jsontext.Value(res.Output),
		Cost:          costMsg{TokensInput: res.Cost.TokensInput, TokensOutput: res.Cost.TokensOutput, CostUSD: res.Cost.CostUSD},
		Untrusted:     res.Untrusted,
		LogsTruncated: res.LogsTruncated,
		Retired:       res.Retired,
	}
	for _, l := range res.Logs {
		d.Logs = append(d.Logs, logMsg{Level: l.Level, Message: l.Message, At: l.At.UnixMicro()})
	}
	if err != nil {
		je, ok := jsvm.AsError(err)
		if !ok {
			je = jsvm.NewError(jsvm.CodeInternal, err.Error())
		}
		d.Error = toErrorMsg(je)
		d.Output = nil
	}
	return d
}

// outputProblem says why a result cannot cross to the parent, or "".
func outputProblem(out []byte) string {
	if out == nil {
		return ""
	}
	if d := depth(out); d > maxOutputDepth {
		return fmt.Sprintf("it nests %d levels deep, over the limit of %d", d, maxOutputDepth)
	}
	if !jsontext.Value(out).IsValid() {
		return "it contains text that is not valid Unicode (a lone surrogate such as \"\\ud800\"); build strings from whole characters"
	}
	return ""
}

// depth returns the deepest nesting of arrays and objects in a JSON text.
func depth(b []byte) int {
	d, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			d++
			deepest = max(deepest, d)
		case ']', '}':
			d--
		}
	}
	return deepest
}

// host sends a host request and waits for its reply (or ctx's end). At
// most maxHostInFlight wait at once (more wait for a slot) and a call makes
// at most maxHostCalls: the limits the parent enforces, so that a handler
// meets them as errors, never as a killed worker.
func (w *workerConn) host(ctx context.Context, h *hostMsg) (*replyMsg, error) {
	w.mu.Lock()
	w.hosts++
	n := w.hosts
	w.mu.Unlock()
	if n > maxHostCalls {
		return nil, fmt.Errorf("more than %d broker and fetch calls in one invocation", maxHostCalls)
	}
	select {
	case w.inFlight <- struct{}{}:
		defer func() { <-w.inFlight }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ch := make(chan *replyMsg, 1)
	w.mu.Lock()
	w.nextID++
	id := w.nextID
	w.pending[id] = ch
	w.mu.Unlock()
	forget := func() {
		w.mu.Lock()
		delete(w.pending, id)
		w.mu.Unlock()
	}
	if err := w.sendFor(ctx, &message{T: msgHost, ID: id, Host: h}); err != nil {
		forget()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		os.Exit(1)
	}
	select {
	case r := <-ch:
		if r.Error != "" {
			return nil, errors.New(r.Error)
		}
		return r, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}

// The worker's Broker and Fetcher: requests to the parent.
var (
	_ jsvm.Broker  = (*workerConn)(nil)
	_ jsvm.Fetcher = (*workerConn)(nil)
)

func (w *workerConn) Get(ctx context.Context, collection, key string) (stdjson.RawMessage, bool, error) {
	r, err := w.host(ctx, &hostMsg{Op: opGet, Collection: collection, Key: key})
	if err != nil {
		return nil, false, err
	}
	return []byte(r.Value), r.Found, nil
}

func (w *workerConn) Put(ctx context.Context, collection, key string, value stdjson.RawMessage) error {
	if len(value) > maxBrokerValue {
		return fmt.Errorf("the value is %s as JSON, over the %s limit", bundle.FormatSize(int64(len(value))), bundle.FormatSize(maxBrokerValue))
	}
	_, err := w.host(ctx, &hostMsg{Op: opPut, Collection: collection, Key: key, Value: jsontext.Value(value)})
	return err
}

func (w *workerConn) Delete(ctx context.Context, collection, key string) (bool, error) {
	r, err := w.host(ctx, &hostMsg{Op: opDelete, Collection: collection, Key: key})
	if err != nil {
		return false, err
	}
	return r.Found, nil
}

func (w *workerConn) List(ctx context.Context, collection string) ([]jsvm.BrokerItem, error) {
	r, err := w.host(ctx, &hostMsg{Op: opList, Collection: collection})
	if err != nil {
		return nil, err
	}
	items := make([]jsvm.BrokerItem, len(r.Items))
	for i, it := range r.Items {
		items[i] = jsvm.BrokerItem{Key: it.Key, Value: []byte(it.Value)}
	}
	return items, nil
}

func (w *workerConn) Fetch(ctx context.Context, req jsvm.FetchRequest) (jsvm.FetchResponse, error) {
	if len(req.Body) > maxFetchBody {
		return jsvm.FetchResponse{}, &jsvm.FetchError{Message: fmt.Sprintf(
			"fetch %s failed: the request body is %s, over the %s limit", req.URL,
			bundle.FormatSize(int64(len(req.Body))), bundle.FormatSize(maxFetchBody))}
	}
	select { // at most maxFetchInFlight at once; the others wait their turn
	case w.fetches <- struct{}{}:
		defer func() { <-w.fetches }()
	case <-ctx.Done():
		return jsvm.FetchResponse{}, ctx.Err()
	}
	r, err := w.host(ctx, &hostMsg{Op: opFetch, Fetch: &req})
	if err != nil {
		if ctx.Err() != nil {
			return jsvm.FetchResponse{}, err
		}
		return jsvm.FetchResponse{}, &jsvm.FetchError{Message: err.Error()}
	}
	if r.Fetch == nil {
		return jsvm.FetchResponse{}, &jsvm.FetchError{Message: "fetch " + req.URL + " failed: no response"}
	}
	return *r.Fetch, nil
}
