package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"time"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxIdle      = 16
	DefaultIdleTimeout  = 10 * time.Minute
	DefaultMaxCalls     = 10000
	DefaultGrace        = 300 * time.Millisecond
	DefaultStartTimeout = 10 * time.Second
	DefaultMaxStack     = 64 << 20
	// DefaultWorkerMemoryOver is how much resident memory a worker may have
	// beyond Options.MemoryLimit (the Go runtime, the VM, the bundle).
	DefaultWorkerMemoryOver = 256 << 20
)

// Options configure a Pool. Zero fields take the defaults.
type Options struct {
	// Path is the worker binary; this executable when empty (it must call
	// Main first thing).
	Path string
	// MaxWorkers bounds the calls running at once, all tenants together;
	// 2 × GOMAXPROCS + 2 when zero. MaxPerTenant bounds one tenant's share
	// (half of MaxWorkers, at least 1), so one project's hostile handlers
	// cannot hold every worker. A call waits for a free slot for as long
	// as ctx and its StartBy allow; its Timeout starts once it has one and
	// a worker is loaded for it.
	MaxWorkers   int
	MaxPerTenant int
	// MaxIdlePerBundle and MaxIdle bound the warm workers kept per (tenant,
	// bundle) — MaxPerTenant when zero — and in all; the one idle longest
	// goes first. A worker idle
	// for IdleTimeout is stopped; one that served MaxCalls calls is
	// replaced.
	MaxIdlePerBundle int
	MaxIdle          int
	IdleTimeout      time.Duration
	MaxCalls         int
	// Grace is how long after a call's deadline (or cancellation) the
	// parent waits for the worker's own interrupt before it kills it.
	Grace time.Duration
	// StartTimeout bounds starting a worker and loading its bundle.
	StartTimeout time.Duration
	// MemoryLimit is the heap growth one call may cause (the jsvm limit,
	// enforced inside the worker); WorkerMemory is the resident memory past
	// which the parent kills the worker (MemoryLimit +
	// DefaultWorkerMemoryOver when zero). On Linux the worker's data
	// segment is limited to WorkerMemory + MemoryLimit as well.
	MemoryLimit  int64
	WorkerMemory int64
	// MaxStack is the Go stack one goroutine of a worker may grow to: native
	// recursion (goja's JSON, regexps) dies there, as a worker.
	MaxStack int
	// MaxResultSize, MaxInputSize, MaxLogLines and MaxLogBytes are the jsvm
	// limits of the same names.
	MaxResultSize int
	MaxInputSize  int
	MaxLogLines   int
	MaxLogBytes   int
	// Fetch is the egress policy of handlers' fetch, enforced here, in the
	// parent.
	Fetch jsvm.FetchOptions
	// Now is the clock for log timestamps; time.Now when nil.
	Now func() time.Time
}

func (o *Options) defaults() error {
	if o.Path == "" {
		p, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the worker binary: %w", err)
		}
		o.Path = p
	}
	if o.MaxWorkers <= 0 {
		o.MaxWorkers = 2*runtime.GOMAXPROCS(0) + 2
	}
	if o.MaxPerTenant <= 0 {
		o.MaxPerTenant = max(1, o.MaxWorkers/2)
	}
	// Keep as many warm as a tenant may run at once, so that a burst of
	// its calls never ends by killing workers the next burst starts again.
	orDefault(&o.MaxIdlePerBundle, o.MaxPerTenant)
	orDefault(&o.MaxIdle, DefaultMaxIdle)
	orDefault(&o.MaxCalls, DefaultMaxCalls)
	orDefault(&o.MaxStack, DefaultMaxStack)
	orDefault(&o.MaxResultSize, jsvm.DefaultMaxResultSize)
	orDefault(&o.MaxInputSize, jsvm.DefaultMaxInputSize)
	orDefault(&o.MaxLogLines, jsvm.DefaultMaxLogLines)
	orDefault(&o.MaxLogBytes, jsvm.DefaultMaxLogBytes)
	orDefault(&o.IdleTimeout, DefaultIdleTimeout)
	orDefault(&o.Grace, DefaultGrace)
	orDefault(&o.StartTimeout, DefaultStartTimeout)
	orDefault(&o.MemoryLimit, jsvm.DefaultMemoryLimit)
	if o.WorkerMemory <= 0 {
		o.WorkerMemory = o.MemoryLimit + DefaultWorkerMemoryOver
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// orDefault sets *v to d when it is zero or negative.
func orDefault[T int | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Pool runs handler calls in sandbox worker processes: warm workers per
// (tenant, bundle digest), never shared across tenants, each running one
// call at a time. It implements the engine's Invoker. Safe for concurrent
// use; Close it when done.
type Pool struct {
	opts    Options
	fetcher *jsvm.HTTPFetcher

	mu       sync.Mutex
	closed   bool
	idle     []*proc // oldest first
	busy     int
	byTenant map[string]int
	freed    chan struct{} // closed and replaced when a slot frees
	live     map[*proc]struct{}
	starting sync.WaitGroup

	wake chan struct{} // the memory watch: a worker started
	done chan struct{} // closed by Close
	bg   sync.WaitGroup
}

var inheritOnce sync.Once

// New returns a Pool. It starts no worker until the first call.
func New(o Options) (*Pool, error) {
	if !Supported {
		return nil, errors.New("handlers run in sandbox worker processes, which need Linux or macOS: on Windows, run stead dev inside WSL (the client commands work everywhere)")
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	inheritOnce.Do(closeOnExecInherited)
	p := &Pool{
		opts:     o,
		fetcher:  jsvm.NewFetcher(o.Fetch),
		byTenant: make(map[string]int),
		freed:    make(chan struct{}),
		live:     make(map[*proc]struct{}),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	p.bg.Add(2)
	go p.watchMemory()
	go p.reapIdle()
	return p, nil
}

// Close stops every worker and waits for them to exit. Calls running
// concurrently fail with jsvm.CodeCancelled.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	procs := make([]*proc, 0, len(p.live))
	for pr := range p.live {
		procs = append(procs, pr)
	}
	p.idle = nil
	p.mu.Unlock()
	p.starting.Wait()
	for _, pr := range procs {
		pr.kill(killClosed)
	}
	for _, pr := range procs {
		<-pr.exited
	}
	p.bg.Wait()
	p.fetcher.Close()
}

// Stats is a snapshot of a Pool's workers.
type Stats struct {
	// Live counts worker processes (busy, idle and starting); Busy those
	// running a call; Idle the warm ones waiting.
	Live, Busy, Idle int
	// PIDs are the live workers' process ids.
	PIDs []int
}

// Stats returns the pool's current workers.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Live: len(p.live), Busy: p.busy, Idle: len(p.idle)}
	for pr := range p.live {
		s.PIDs = append(s.PIDs, pr.pid)
	}
	slices.Sort(s.PIDs)
	return s
}

// Invoke runs inv on a worker for (inv.Tenant, b.Digest): a warm one, or one
// started for it. It has jsvm.Runtime.Invoke's contract, and fails with
// jsvm.CodeSandboxCrashed (Retryable) when the worker dies other than by
// the call's time or memory limit.
func (p *Pool) Invoke(ctx context.Context, b *bundle.Bundle, inv jsvm.Invocation) (res jsvm.Result, err error) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	if b == nil {
		return res, jsvm.NewError(jsvm.CodeInternal, "sandbox: Invoke called without a bundle")
	}
	if e := jsvm.CheckExport(b, inv.Export); e != nil {
		return res, e
	}
	if len(inv.Input) > p.opts.MaxInputSize {
		return res, jsvm.NewError(jsvm.CodeInvalidInput, fmt.Sprintf("input is %s, over the %s limit",
			bundle.FormatSize(int64(len(inv.Input))), bundle.FormatSize(int64(p.opts.MaxInputSize))))
	}
	if err := p.acquireSlot(ctx, inv.Tenant, inv.StartBy); err != nil {
		switch {
		case errors.Is(err, errNotBy):
			return res, jsvm.NewError(jsvm.CodeBusy, fmt.Sprintf(
				"no sandbox worker was free for %s: the project's calls hold all it may use", time.Since(start).Round(time.Millisecond)))
		case ctx.Err() == nil:
			return res, jsvm.NewError(jsvm.CodeCancelled, "the sandbox pool is closed")
		}
		return res, p.contextError(ctx, start, "while waiting for a free sandbox worker")
	}
	defer p.releaseSlot(inv.Tenant)
	// Starting a worker (a process, the bundle loaded in it) is bounded by
	// StartTimeout and ctx, not by the call's Timeout: it is not the
	// handler's time, and a fresh start on a loaded machine can take a
	// good part of a short timeoutMs.
	pr, err := p.take(ctx, poolKey(inv.Tenant, b.Digest), b)
	if err != nil {
		if ctx.Err() != nil {
			return res, p.contextError(ctx, start, "while starting a sandbox worker")
		}
		return res, err
	}
	if inv.Timeout > 0 {
		// The call's time starts now, with a worker ready for it.
		start = time.Now()
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, inv.Timeout)
		defer cancel()
	}
	res, err, keep := pr.call(ctx, p, &inv, start)
	if keep {
		p.putIdle(pr)
	} else {
		pr.kill(killRetired)
	}
	return res, err
}

func (p *Pool) contextError(ctx context.Context, start time.Time, while string) *jsvm.Error {
	elapsed := time.Since(start).Round(time.Millisecond)
	if errors.Is(ctx.Err(), context.Canceled) {
		return jsvm.NewError(jsvm.CodeCancelled, fmt.Sprintf("invocation cancelled after %s %s", elapsed, while))
	}
	return jsvm.NewError(jsvm.CodeTimeout, fmt.Sprintf(
		"handler did not finish before its deadline (ran %s, %s); make it faster or raise the step timeout", elapsed, while))
}

// poolKey names the warm workers of one tenant's bundle.
func poolKey(tenant, digest string) string { return tenant + "\x00" + digest }

// errNotBy: no slot was free by the call's StartBy.
var errNotBy = errors.New("no free slot by the call's start-by time")

// acquireSlot waits until the tenant may run one more call, or until by
// (when set: errNotBy).
func (p *Pool) acquireSlot(ctx context.Context, tenant string, by time.Time) error {
	var late <-chan time.Time
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return errors.New("the sandbox pool is closed")
		}
		if p.busy < p.opts.MaxWorkers && p.byTenant[tenant] < p.opts.MaxPerTenant {
			p.busy++
			p.byTenant[tenant]++
			p.mu.Unlock()
			return nil
		}
		freed := p.freed
		p.mu.Unlock()
		if late == nil && !by.IsZero() {
			t := time.NewTimer(time.Until(by))
			defer t.Stop()
			late = t.C
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		case <-late:
			return errNotBy
		}
	}
}

func (p *Pool) releaseSlot(tenant string) {
	p.mu.Lock()
	p.busy--
	if p.byTenant[tenant]--; p.byTenant[tenant] <= 0 {
		delete(p.byTenant, tenant)
	}
	close(p.freed)
	p.freed = make(chan struct{})
	p.mu.Unlock()
}

// take returns an idle worker of key, or starts one.
func (p *Pool) take(ctx context.Context, key string, b *bundle.Bundle) (*proc, error) {
	p.mu.Lock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		if pr := p.idle[i]; pr.key == key {
			p.idle = slices.Delete(p.idle, i, i+1)
			select {
			case <-pr.exited: // it died idle: keep looking
				continue
			default:
			}
			p.mu.Unlock()
			return pr, nil
		}
	}
	if p.closed {
		p.mu.Unlock()
		return nil, jsvm.NewError(jsvm.CodeCancelled, "the sandbox pool is closed")
	}
	p.starting.Add(1)
	p.mu.Unlock()
	// A worker starts within StartTimeout, whatever the call's deadline: a
	// call that ends first leaves it warm for the next one, so a bundle
	// slow to load (5 MiB, a short timeoutMs) still gets a warm worker.
	started := make(chan startResult, 1)
	go func() {
		defer p.starting.Done()
		pr, err := p.start(key, b)
		started <- startResult{pr, err}
	}()
	select {
	case r := <-started:
		return r.pr, asCallError(r.err)
	case <-ctx.Done():
		go func() {
			if r := <-started; r.err == nil {
				p.putIdle(r.pr)
			}
		}()
		return nil, ctx.Err()
	}
}

type startResult struct {
	pr  *proc
	err error
}

// putIdle keeps a worker warm, within the idle bounds.
func (p *Pool) putIdle(pr *proc) {
	if !pr.healthy() {
		pr.kill(killRetired)
		return
	}
	p.mu.Lock()
	if p.closed || pr.calls >= p.opts.MaxCalls {
		p.mu.Unlock()
		pr.kill(killRetired)
		return
	}
	var drop []*proc
	same := 0
	for _, q := range p.idle {
		if q.key == pr.key {
			same++
		}
	}
	if same >= p.opts.MaxIdlePerBundle {
		for i, q := range p.idle { // the oldest of the same bundle
			if q.key == pr.key {
				drop = append(drop, q)
				p.idle = slices.Delete(p.idle, i, i+1)
				break
			}
		}
	}
	if len(p.idle) >= p.opts.MaxIdle {
		drop = append(drop, p.idle[0])
		p.idle = p.idle[1:]
	}
	pr.idleSince = time.Now()
	p.idle = append(p.idle, pr)
	p.mu.Unlock()
	for _, q := range drop {
		q.kill(killRetired)
	}
}

// reapIdle stops workers idle for longer than IdleTimeout.
func (p *Pool) reapIdle() {
	defer p.bg.Done()
	t := time.NewTicker(min(p.opts.IdleTimeout/4, time.Minute))
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-p.opts.IdleTimeout)
		p.mu.Lock()
		var drop []*proc
		p.idle = slices.DeleteFunc(p.idle, func(pr *proc) bool {
			if pr.idleSince.Before(cutoff) {
				drop = append(drop, pr)
				return true
			}
			return false
		})
		p.mu.Unlock()
		for _, pr := range drop {
			pr.kill(killRetired)
		}
	}
}

// watchMemory reads, every memoryPollMillis while workers live, the
// resident memory of those running a call, and kills those over
// WorkerMemory. (A call costs it nothing: the watch ticks by itself.) It
// keeps each worker's statm open while the worker lives.
func (p *Pool) watchMemory() {
	defer p.bg.Done()
	t := time.NewTicker(memoryPollMillis * time.Millisecond)
	defer t.Stop()
	open := make(map[*proc]*resident)
	defer func() {
		for _, m := range open {
			m.close()
		}
	}()
	for {
		p.mu.Lock()
		idle := len(p.live) == 0
		p.mu.Unlock()
		if idle {
			select { // no worker: sleep until one starts
			case <-p.done:
				return
			case <-p.wake:
			}
		}
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		p.mu.Lock()
		var busy []*proc
		for pr := range p.live {
			if pr.running.Load() {
				busy = append(busy, pr)
			}
		}
		for pr, m := range open {
			if _, ok := p.live[pr]; !ok {
				m.close()
				delete(open, pr)
			}
		}
		p.mu.Unlock()
		for _, pr := range busy {
			m := open[pr]
			if m == nil {
				var err error
				if m, err = openResident(pr.pid); err != nil {
					continue // it exited
				}
				open[pr] = m
			}
			if rss, err := m.read(); err == nil && rss > p.opts.WorkerMemory {
				pr.rss.Store(rss)
				pr.kill(killMemory)
			}
		}
	}
}

// start starts a worker for key and loads b into it, within StartTimeout.
func (p *Pool) start(key string, b *bundle.Bundle) (*proc, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.StartTimeout)
	defer cancel()
	pr, err := p.spawn(key)
	if err != nil {
		return nil, err
	}
	if _, err := pr.load(ctx, b, p.loadLimits(), false); err != nil {
		pr.kill(killRetired)
		return nil, err
	}
	return pr, nil
}

// listTimeout bounds listing a bundle's exports: the worker's own limit on
// evaluating the top level (5s), and the parent's kill a little later.
const listTimeout = 6 * time.Second

// Compiler returns a new Compiler of bundles for p: o with ListExports set
// to p.ListExports.
func (p *Pool) Compiler(o bundle.Options) *bundle.Compiler {
	o.ListExports = p.ListExports
	return bundle.NewCompiler(o)
}

// ListExports evaluates b's top level in a worker started for it alone and
// lists its exports. Compiler passes it as bundle.Options.ListExports, so
// that the process that compiles bundles (at deploy, and when it loads a
// deployment) never runs their code. A top level that fails, or kills its
// worker, is a *bundle.Error (bundle.CodeEvaluation).
func (p *Pool) ListExports(ctx context.Context, b *bundle.Bundle) ([]bundle.Export, error) {
	const tenant = "\x00deploy"
	if err := p.acquireSlot(ctx, tenant, time.Time{}); err != nil {
		return nil, fmt.Errorf("list the exports of %s: %w", b.Name, err)
	}
	defer p.releaseSlot(tenant)
	pr, err := p.spawn("")
	if err != nil {
		return nil, fmt.Errorf("list the exports of %s: %w", b.Name, err)
	}
	defer func() {
		pr.kill(killRetired)
		<-pr.exited
	}()
	pr.running.Store(true) // under the memory watch while it evaluates
	lctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	exports, err := pr.load(lctx, b, p.loadLimits(), true)
	var se *startError
	switch {
	case err == nil, !errors.As(err, &se):
		return exports, err // listed, or the worker's own *bundle.Error
	case se.fatal != "" || pr.reason() == killMemory:
		// It died of the bundle: converting, compiling or evaluating it
		// overflowed the stack or took the memory. That will not change.
		why := se.fatal
		if why == "" {
			why = fmt.Sprintf("it went over %s of memory", bundle.FormatSize(p.opts.WorkerMemory))
		}
		return nil, &bundle.Error{Code: bundle.CodeEvaluation, File: b.Name, Message: "loading the bundle killed its sandbox worker: " + why}
	case lctx.Err() != nil:
		return nil, &bundle.Error{Code: bundle.CodeEvaluation, File: b.Name, Message: fmt.Sprintf(
			"loading the bundle (converting, compiling and running its top level) did not finish within %s", listTimeout)}
	}
	return nil, fmt.Errorf("list the exports of %s: %w", b.Name, err) // transient: not the bundle's fault
}

// spawn starts a worker process for key, without a bundle.
func (p *Pool) spawn(key string) (*proc, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, errors.New("the sandbox pool is closed")
	}
	in, out, workerFiles, err := pipes()
	if err != nil {
		return nil, jsvm.NewError(jsvm.CodeInternal, "start a sandbox worker: pipe: "+err.Error())
	}
	closeWorkerFiles := func() {
		for _, f := range workerFiles {
			_ = f.Close()
		}
	}
	ch, err := newChannel(in, out)
	if err != nil {
		closeWorkerFiles()
		_ = in.Close()
		_ = out.Close()
		return nil, jsvm.NewError(jsvm.CodeInternal, "start a sandbox worker: "+err.Error())
	}
	args := workerArgs{
		version: protocolVersion, maxStack: p.opts.MaxStack,
		dataLimit: p.opts.WorkerMemory + p.opts.MemoryLimit, goMemory: p.opts.MemoryLimit + p.opts.MemoryLimit/2,
	}
	cmd := exec.Command(p.opts.Path, args.list()...)
	cmd.Env = []string{} // nothing of the parent's environment: no credentials, no keys
	cmd.Dir = os.TempDir()
	cmd.ExtraFiles = workerFiles
	tail := &tailBuffer{}
	cmd.Stderr = tail
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = procAttr()
	err = startProcess(cmd)
	closeWorkerFiles()
	if err != nil {
		ch.close()
		return nil, jsvm.NewError(jsvm.CodeInternal, "start a sandbox worker: "+err.Error())
	}
	pr := &proc{pool: p, key: key, pid: cmd.Process.Pid, cmd: cmd, ch: ch, stderr: tail, exited: make(chan struct{})}
	p.mu.Lock()
	if p.closed { // Close ran since the check above: it will not see this one
		p.mu.Unlock()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		ch.close()
		return nil, errors.New("the sandbox pool is closed")
	}
	p.live[pr] = struct{}{}
	p.mu.Unlock()
	select { // the memory watch
	case p.wake <- struct{}{}:
	default:
	}
	go pr.wait()
	return pr, nil
}

func (p *Pool) loadLimits() limitsMsg {
	return limitsMsg{
		MemoryLimit: p.opts.MemoryLimit, MaxResultSize: p.opts.MaxResultSize, MaxInputSize: p.opts.MaxInputSize,
		// The worker keeps more log text than the call may record: the parent
		// redacts the secrets (which the worker never sees) and then cuts,
		// so no secret is cut in two where redaction cannot find it.
		MaxLogLines: p.opts.MaxLogLines, MaxLogBytes: 2*p.opts.MaxLogBytes + logSlack,
	}
}

// logSlack is the room beyond twice the log budget a worker keeps: a
// secret up to this long straddling the parent's cut is still whole.
const logSlack = 64 << 10

// forget drops an exited worker from the pool.
func (p *Pool) forget(pr *proc) {
	p.mu.Lock()
	delete(p.live, pr)
	p.idle = slices.DeleteFunc(p.idle, func(q *proc) bool { return q == pr })
	p.mu.Unlock()
}

// startProcess starts cmd from one OS thread that never exits: Linux sends
// a child its Pdeathsig when the thread that forked it exits (not the
// process), and Go ends threads now and then (golang/go#27505), which would
// kill healthy workers.
func startProcess(cmd *exec.Cmd) error {
	spawnerOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawnCh {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, done: done}
	return <-done
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnerOnce sync.Once
	spawnCh     chan spawnReq
)

// ResidentMemory returns a process's resident memory in bytes, as the
// pool's memory watch reads it (for reports and benchmarks).
func ResidentMemory(pid int) (int64, error) { return residentMemory(pid) }
