package jsvm

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
)

// watchInterval is how often the watchdog samples the heap while
// invocations run.
const watchInterval = 2 * time.Millisecond

// watchdog is one goroutine per Runtime that looks at the running
// invocations every watchInterval and sleeps when none runs, so an
// invocation only pays for a mutex and a map write, never for starting a
// goroutine or a ticker.
//
// Memory: it samples the Go heap and interrupts the VM of every invocation
// whose growth over its baseline passes the limit. The heap is the
// process's: concurrent invocations share one signal, and a breach
// interrupts each invocation whose own baseline is exceeded. When several
// ran, the culprit cannot be told from its neighbours: their errors say so
// (Error.Retryable), and the engine retries those steps instead of failing
// them — the culprit breaches again, the others complete. Before
// interrupting, the watchdog forces a collection and re-measures, so garbage
// alone never counts as a breach.
//
// Deadlines: an invocation still running at its second sample (so after at
// least one interval) gets a context.AfterFunc that interrupts its VM when
// its ctx ends; one whose ctx already ended is interrupted at once. The
// typical invocation, done in microseconds, never pays for registering with
// its ctx; a deadline that passes within the first interval is acted on up
// to one interval late. (While the VM waits for host work, the event loop
// watches ctx.Done itself.)
type watchdog struct {
	limit int64

	mu     sync.Mutex
	active map[*watch]struct{}
	wake   chan struct{}
	done   chan struct{}
	exited chan struct{}

	samples []metrics.Sample // watchdog goroutine only
}

// watch is one invocation's registration. baseline and tripped are guarded
// by watchdog.mu; used is read by the VM's size checks.
type watch struct {
	vm       *goja.Runtime
	ctx      context.Context
	baseline int64 // live heap when first sampled; -1 until then
	tripped  bool  // interrupted for memory
	shared   bool  // other invocations ran when it tripped: the cause is uncertain
	timedOut bool  // interrupted because ctx ended
	stop     func() bool
	used     atomic.Int64 // last measured growth over baseline, bytes
}

const (
	metricObjects = "/memory/classes/heap/objects:bytes"
	metricLive    = "/gc/heap/live:bytes"
)

func newWatchdog(limit int64) *watchdog {
	wd := &watchdog{
		limit:  limit,
		active: make(map[*watch]struct{}),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
		samples: []metrics.Sample{
			{Name: metricObjects},
			{Name: metricLive},
		},
	}
	go wd.loop()
	return wd
}

// add starts watching w's invocation, running under ctx.
func (wd *watchdog) add(w *watch, ctx context.Context) {
	w.ctx = ctx
	w.baseline = -1
	w.tripped, w.shared, w.timedOut = false, false, false
	w.stop = nil
	w.used.Store(0)
	wd.mu.Lock()
	wd.active[w] = struct{}{}
	first := len(wd.active) == 1
	wd.mu.Unlock()
	if first {
		select {
		case wd.wake <- struct{}{}:
		default:
		}
	}
}

// remove stops watching. It reports whether the VM was interrupted for
// memory (and whether other invocations were running then, so that this one
// may not be the cause), and whether it was (or may yet be, by an AfterFunc
// already started) interrupted because ctx ended. After remove returns,
// nothing the watchdog set up touches w.vm again.
func (wd *watchdog) remove(w *watch) (memory, shared, deadline bool) {
	wd.mu.Lock()
	delete(wd.active, w)
	memory, shared, deadline = w.tripped, w.shared, w.timedOut
	if w.stop != nil && !w.stop() {
		deadline = true
	}
	w.stop, w.ctx = nil, nil
	wd.mu.Unlock()
	return memory, shared, deadline
}

func (wd *watchdog) stop() {
	close(wd.done)
	<-wd.exited
}

func (wd *watchdog) read() (objects, live int64) {
	metrics.Read(wd.samples)
	return int64(wd.samples[0].Value.Uint64()), int64(wd.samples[1].Value.Uint64())
}

func (wd *watchdog) loop() {
	defer close(wd.exited)
	tick := time.NewTimer(watchInterval)
	defer tick.Stop()
	for {
		wd.mu.Lock()
		n := len(wd.active)
		wd.mu.Unlock()
		if n == 0 {
			select {
			case <-wd.wake:
				continue
			case <-wd.done:
				return
			}
		}
		tick.Reset(watchInterval)
		select {
		case <-tick.C:
		case <-wd.done:
			return
		}
		if wd.sample(false) {
			// Over the limit on the raw heap, which counts garbage too:
			// collect and measure again before interrupting anyone.
			runtime.GC()
			wd.sample(true)
		}
	}
}

// watchDeadline arranges for w's VM to be interrupted when its ctx ends.
// Called with wd.mu held.
func (wd *watchdog) watchDeadline(w *watch) {
	if w.ctx.Err() != nil {
		w.timedOut = true
		w.vm.Interrupt(errInterruptTimeout)
		return
	}
	vm := w.vm
	w.stop = context.AfterFunc(w.ctx, func() { vm.Interrupt(errInterruptTimeout) })
}

// sample measures the heap and updates every watch. With confirm, it
// interrupts the watches over the limit; without, it only reports whether
// any is.
func (wd *watchdog) sample(confirm bool) (over bool) {
	objects, live := wd.read()
	wd.mu.Lock()
	defer wd.mu.Unlock()
	for w := range wd.active {
		if w.baseline < 0 {
			w.baseline = live
		} else if w.stop == nil && !w.timedOut && w.ctx.Done() != nil {
			wd.watchDeadline(w)
		}
		grown := objects - w.baseline
		if confirm || grown <= wd.limit {
			// An unconfirmed reading over the limit may be garbage: keep
			// it from the size checks until a collection confirms it.
			w.used.Store(max(grown, 0))
		}
		if grown > wd.limit && !w.tripped {
			over = true
			if confirm {
				w.tripped = true
				w.shared = len(wd.active) > 1
				w.vm.Interrupt(errInterruptMemory)
			}
		}
	}
	return over
}
