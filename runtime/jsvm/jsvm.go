package jsvm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	lru "github.com/hashicorp/golang-lru/v2"

	"stead/runtime/bundle"
)

// Defaults for Options and FetchOptions fields left zero.
const (
	DefaultMaxIdlePerBundle = 4
	DefaultMaxBundles       = 64
	DefaultMemoryLimit      = 256 << 20
	DefaultMaxResultSize    = 256 << 10
	DefaultMaxInputSize     = 1 << 20
	DefaultMaxLogLines      = 100
	DefaultMaxLogBytes      = 64 << 10
	DefaultMaxResponse      = 2 << 20
	DefaultMaxRedirects     = 5
)

// maxCallDepth is the call depth past which a handler gets CodeStackOverflow.
const maxCallDepth = bundle.MaxCallStackSize

// Options configure a Runtime. Zero fields take the defaults above.
type Options struct {
	// MaxIdlePerBundle is how many warm VMs are kept per bundle digest.
	MaxIdlePerBundle int
	// MaxBundles is how many bundle digests keep a pool (least recently
	// used pools are dropped first).
	MaxBundles int
	// MemoryLimit is the heap growth, in bytes, one invocation may cause
	// before it fails with CodeMemory.
	MemoryLimit int64
	// MaxResultSize bounds the serialized result, in bytes.
	MaxResultSize int
	// MaxInputSize bounds Invocation.Input, in bytes.
	MaxInputSize int
	// MaxLogLines and MaxLogBytes bound the console lines kept per
	// invocation; past them lines are cut or dropped and
	// Result.LogsTruncated is set.
	MaxLogLines int
	MaxLogBytes int
	// Fetch is the egress policy of the fetch global.
	Fetch FetchOptions
	// Fetcher, when set, sends fetch's requests instead of an HTTPFetcher
	// with the policy Fetch (which is then unused).
	Fetcher Fetcher
	// Now is the clock for log timestamps; time.Now when nil.
	Now func() time.Time
}

// FetchOptions is the egress policy of fetch.
type FetchOptions struct {
	// Allow admits destination addresses the policy would otherwise refuse
	// (loopback, private, link-local, …): for tests and local development.
	// An address is checked as dialled; IPv4-mapped IPv6 addresses match
	// only IPv6 prefixes.
	Allow []netip.Prefix
	// MaxResponse bounds a response body, in bytes.
	MaxResponse int64
	// MaxRedirects bounds the redirects one fetch follows.
	MaxRedirects int
	// Timeout bounds connecting (dial and TLS handshake); the invocation's
	// deadline bounds the whole request. 10s when zero.
	Timeout time.Duration
}

func (o *FetchOptions) defaults() {
	if o.MaxResponse <= 0 {
		o.MaxResponse = DefaultMaxResponse
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
}

func (o *Options) defaults() {
	if o.MaxIdlePerBundle <= 0 {
		o.MaxIdlePerBundle = DefaultMaxIdlePerBundle
	}
	if o.MaxBundles <= 0 {
		o.MaxBundles = DefaultMaxBundles
	}
	if o.MemoryLimit <= 0 {
		o.MemoryLimit = DefaultMemoryLimit
	}
	if o.MaxResultSize <= 0 {
		o.MaxResultSize = DefaultMaxResultSize
	}
	if o.MaxInputSize <= 0 {
		o.MaxInputSize = DefaultMaxInputSize
	}
	if o.MaxLogLines <= 0 {
		o.MaxLogLines = DefaultMaxLogLines
	}
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = DefaultMaxLogBytes
	}
	o.Fetch.defaults()
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Invocation is one call of a handler export.
type Invocation struct {
	// Tenant isolates warm VMs: invocations of different tenants (Stead
	// passes the project id) never share a VM, even for byte-identical
	// bundles, so module state never crosses projects.
	Tenant string
	// Export is the name of the exported handler function.
	Export string
	// Input is the handler's first argument, as JSON. Empty means undefined.
	Input json.RawMessage
	// RunID, StepID, StepIndex, EndUserID and IdempotencyKey are exposed
	// on the context argument.
	RunID          string
	StepID         string
	StepIndex      int
	EndUserID      string
	IdempotencyKey string
	// Broker backs context.broker; nil makes broker calls reject.
	Broker Broker
	// BrokerToken is exposed as context.broker.token and always redacted.
	BrokerToken string
	// Secrets are more values to redact from the result, errors and logs.
	Secrets []string
	// Timeout, when set, is the call's time limit, counted from when it
	// starts: in a sandbox, once a worker is free for it, however long it
	// waited for one. Zero: ctx's deadline alone bounds the call.
	Timeout time.Duration
	// StartBy, when set, is the latest a sandboxed call may wait for a free
	// worker: past it the call fails CodeBusy without having started, and
	// may be tried again (the engine renews its run's lease first). Zero:
	// it waits as long as ctx allows. A Runtime in process never waits.
	StartBy time.Time
	// OnUntrusted, when set, is called on the VM's goroutine with each new
	// origin as markUntrusted records it (redacted), before the handler goes
	// on: a sandbox worker reports a mark at once, so that it survives the
	// worker being killed later in the call.
	OnUntrusted func(origin string)
}

// Cost is what a handler reported with context.recordCost, summed.
type Cost struct {
	TokensInput  int64
	TokensOutput int64
	CostUSD      float64
}

// Log is one captured console line.
type Log struct {
	// Level is the console method: "log", "info", "warn", "error" or "debug".
	Level   string
	Message string
	At      time.Time
}

// Result is what an invocation produced. Invoke returns it also with an
// error, holding the logs, costs and untrusted marks recorded so far.
type Result struct {
	// Output is the handler's return value as JSON (nil on error).
	Output json.RawMessage
	// Cost sums the handler's recordCost calls.
	Cost Cost
	// Untrusted lists the origins passed to markUntrusted, first mark first,
	// without repeats.
	Untrusted []string
	// Logs are the console lines, in order.
	Logs []Log
	// LogsTruncated is set when lines were cut or dropped.
	LogsTruncated bool
	// Duration is the wall time of Invoke.
	Duration time.Duration
	// Retired is set when the VM that ran the invocation was discarded
	// (after an interrupt, a stack overflow, a Go panic or a failed top
	// level; see the package doc), so the next invocation starts afresh.
	Retired bool
}

// Runtime invokes handler exports of compiled bundles on pooled, hardened
// goja VMs. It is safe for concurrent use; each invocation runs on the
// calling goroutine with a VM no other invocation holds.
type Runtime struct {
	opts     Options
	wd       *watchdog
	fetcher  Fetcher
	ownFetch *HTTPFetcher   // the fetcher New made, closed by Close
	host     sync.WaitGroup // host goroutines (fetch, broker) still running

	mu     sync.Mutex
	pools  *lru.Cache[string, *pool]
	closed bool
}

// pool holds a bundle's idle warm VMs. Guarded by Runtime.mu.
type pool struct {
	idle []*worker
}

// New returns a Runtime. Call Close when done with it.
func New(o Options) *Runtime {
	o.defaults()
	pools, err := lru.New[string, *pool](o.MaxBundles)
	if err != nil {
		panic(err) // only for a non-positive size, excluded by defaults
	}
	r := &Runtime{opts: o, wd: newWatchdog(o.MemoryLimit), fetcher: o.Fetcher, pools: pools}
	if r.fetcher == nil {
		r.ownFetch = NewFetcher(o.Fetch)
		r.fetcher = r.ownFetch
	}
	return r
}

// Close drops every warm VM, stops the watchdog and waits for host
// goroutines (fetch, broker calls) still finishing. Invocations running
// concurrently with Close still complete; later ones fail.
func (r *Runtime) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.pools.Purge()
	r.mu.Unlock()
	r.host.Wait()
	r.wd.stop()
	if r.ownFetch != nil {
		r.ownFetch.Close()
	}
}

// Compiler returns a new Compiler of bundles for r: o with Setup set to
// r.Setup.
func (r *Runtime) Compiler(o bundle.Options) *bundle.Compiler {
	o.Setup = r.Setup
	return bundle.NewCompiler(o)
}

// Setup installs on vm the globals handlers get (console, fetch, timers,
// URL, TextEncoder, …, and the size-checked built-ins). Compiler passes it
// as bundle.Options.Setup so that a bundle's top-level code sees the same
// globals when the compiler lists its exports. On such a VM no handler
// runs: console output is dropped, and fetch, timers and the broker throw.
func (r *Runtime) Setup(vm *goja.Runtime) error {
	_, err := r.install(vm)
	return err
}

// poolKey names the pool of warm VMs of one tenant's bundle.
func poolKey(tenant, digest string) string { return tenant + "\x00" + digest }

func (r *Runtime) acquire(key string) (*worker, *Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, &Error{Code: CodeInternal, Message: "the jsvm runtime is closed"}
	}
	if p, ok := r.pools.Get(key); ok && len(p.idle) > 0 {
		w := p.idle[len(p.idle)-1]
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
		return w, nil
	}
	return nil, nil
}

func (r *Runtime) release(w *worker) {
	if w.broken {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	p, ok := r.pools.Peek(w.pool)
	if !ok {
		p = &pool{}
		r.pools.Add(w.pool, p)
	}
	if len(p.idle) < r.opts.MaxIdlePerBundle {
		p.idle = append(p.idle, w)
	}
}

// Invoke calls the export inv.Export of b with inv.Input and a context
// object, waits until its promise settles (or ctx ends), and returns the
// result as JSON. Errors are *Error with one of the Code constants; the
// Result is returned with them too.
func (r *Runtime) Invoke(ctx context.Context, b *bundle.Bundle, inv Invocation) (res Result, err error) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	if b == nil {
		return res, &Error{Code: CodeInternal, Message: "jsvm: Invoke called without a bundle"}
	}
	if e := CheckExport(b, inv.Export); e != nil {
		return res, e
	}
	if len(inv.Input) > r.opts.MaxInputSize {
		return res, &Error{Code: CodeInvalidInput, Message: fmt.Sprintf(
			"input is %s, over the %s limit", bundle.FormatSize(int64(len(inv.Input))), bundle.FormatSize(int64(r.opts.MaxInputSize)))}
	}
	if inv.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, inv.Timeout)
		defer cancel()
	}
	if ctx.Err() != nil {
		return res, contextError(ctx, start)
	}
	key := poolKey(inv.Tenant, b.Digest)
	w, e := r.acquire(key)
	if e != nil {
		return res, e
	}
	if w == nil {
		vm := bundle.NewRuntime()
		if w, err = r.install(vm); err != nil {
			return res, &Error{Code: CodeInternal, Message: "prepare runtime: " + err.Error()}
		}
		w.pool = key
	}
	c := newCall(ctx, r, &inv, start)
	out, e := w.invoke(ctx, c, b, inv.Export, inv.Input)
	r.release(w)
	res = c.result()
	res.Retired = w.broken
	if e != nil {
		c.red.Error(e)
		return res, e
	}
	res.Output = c.red.JSON(out)
	return res, nil
}

// CheckExport returns the *Error Invoke fails with when b has no function
// export name, or nil.
func CheckExport(b *bundle.Bundle, name string) *Error {
	ex, ok := b.Export(name)
	if !ok {
		fns := b.Functions()
		list := "none"
		if len(fns) > 0 {
			list = strings.Join(fns, ", ")
		}
		return &Error{Code: CodeExportNotFound, Message: fmt.Sprintf(
			"%s has no export %q; its handler exports are: %s", b.Name, name, list)}
	}
	if !ex.Function {
		return &Error{Code: CodeNotFunction, Message: fmt.Sprintf(
			"export %q of %s is not a function; export the handler as `export async function %s(input, context) {…}`", name, b.Name, name)}
	}
	return nil
}

// Broker is the scoped application-data store behind context.broker. The
// caller scopes it to the project and end user. Methods are called from
// host goroutines, possibly concurrently, with the invocation's context.
type Broker interface {
	// Get returns the value stored under collection/key; found is false
	// when there is none.
	Get(ctx context.Context, collection, key string) (value json.RawMessage, found bool, err error)
	// Put stores value (valid JSON) under collection/key.
	Put(ctx context.Context, collection, key string, value json.RawMessage) error
	// Delete removes collection/key; found reports whether it existed.
	Delete(ctx context.Context, collection, key string) (found bool, err error)
	// List returns a collection's items in key order.
	List(ctx context.Context, collection string) ([]BrokerItem, error)
}

// BrokerItem is one entry of Broker.List.
type BrokerItem struct {
	Key   string
	Value json.RawMessage
}
