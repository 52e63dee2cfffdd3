package jsvm

import (
	"context"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// loop is a worker's event loop: host goroutines hand results back to the
// VM's goroutine through it, exactly once per reservation (the k6
// RegisterCallback pattern), and it keeps the handler's timers.
//
// Everything but the mutex-guarded part is touched only on the VM's
// goroutine.
type loop struct {
	mu      sync.Mutex
	jobs    []func() error // queued by host goroutines
	pending int            // reservations not yet queued
	gen     uint64         // bumped when an invocation ends; stale jobs are dropped
	wake    chan struct{}  // capacity 1

	spare  []func() error // the other job buffer, to swap without allocating
	used   bool           // a reservation or timer was made since the last reset
	timers []*timer       // pending timers, unordered (few)
	nextID int64
	clock  *time.Timer // reused for the earliest timer
}

type timer struct {
	id   int64
	when time.Time
	fn   goja.Callable
	args []goja.Value
}

func newLoop() *loop {
	return &loop{wake: make(chan struct{}, 1)}
}

// reserve records one host operation in flight and returns the function
// its goroutine must call exactly once with the continuation to run on the
// VM's goroutine. Call it on the VM's goroutine.
func (l *loop) reserve() (enqueue func(func() error)) {
	l.used = true
	l.mu.Lock()
	l.pending++
	gen := l.gen
	l.mu.Unlock()
	return func(job func() error) {
		l.mu.Lock()
		if l.gen != gen { // the invocation is over; drop the result
			l.mu.Unlock()
			return
		}
		l.jobs = append(l.jobs, job)
		l.pending--
		l.mu.Unlock()
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// take returns the queued jobs and how many reservations are outstanding.
func (l *loop) take() ([]func() error, int) {
	l.mu.Lock()
	jobs := l.jobs
	l.jobs = l.spare[:0]
	pending := l.pending
	l.mu.Unlock()
	l.spare = jobs
	return jobs, pending
}

// reset ends an invocation: queued and future results of its host work are
// dropped and its timers cleared.
func (l *loop) reset() {
	if !l.used {
		return
	}
	l.used = false
	l.mu.Lock()
	l.gen++
	clear(l.jobs)
	l.jobs = l.jobs[:0]
	l.pending = 0
	l.mu.Unlock()
	clear(l.spare)
	clear(l.timers)
	l.timers = l.timers[:0]
	if l.clock != nil {
		l.clock.Stop()
	}
	select {
	case <-l.wake:
	default:
	}
}

func (l *loop) addTimer(fn goja.Callable, delay time.Duration, args []goja.Value) int64 {
	l.used = true
	l.nextID++
	l.timers = append(l.timers, &timer{id: l.nextID, when: time.Now().Add(delay), fn: fn, args: args})
	return l.nextID
}

func (l *loop) clearTimer(id int64) {
	for i, t := range l.timers {
		if t.id == id {
			l.timers = append(l.timers[:i], l.timers[i+1:]...)
			return
		}
	}
}

// earliest returns the index of the timer due first, or -1.
func (l *loop) earliest() int {
	best := -1
	for i, t := range l.timers {
		if best < 0 || t.when.Before(l.timers[best].when) ||
			(t.when.Equal(l.timers[best].when) && t.id < l.timers[best].id) {
			best = i
		}
	}
	return best
}

// run pumps host results and timers until p settles. It returns the first
// error a continuation or timer returned (an uncatchable goja error, or a
// handler error), errNeverSettles when nothing is left that could settle p,
// or errWaitDone when ctx ends first.
func (w *worker) run(ctx context.Context, p *goja.Promise) error {
	l := w.loop
	c := w.cur
	for p.State() == goja.PromiseStatePending {
		if c.uncaught != nil {
			return c.uncaught
		}
		jobs, pending := l.take()
		if len(jobs) > 0 {
			for i, job := range jobs {
				jobs[i] = nil
				if err := job(); err != nil {
					return err
				}
			}
			continue
		}
		next := l.earliest()
		if pending == 0 && next < 0 {
			return errNeverSettles
		}
		var due <-chan time.Time
		if next >= 0 {
			t := l.timers[next]
			wait := time.Until(t.when)
			if wait <= 0 {
				l.timers = append(l.timers[:next], l.timers[next+1:]...)
				if _, err := t.fn(goja.Undefined(), t.args...); err != nil {
					return w.uncaught(err, "a setTimeout callback")
				}
				continue
			}
			if l.clock == nil {
				l.clock = time.NewTimer(wait)
			} else {
				l.clock.Reset(wait)
			}
			due = l.clock.C
		}
		select {
		case <-l.wake:
		case <-due:
		case <-ctx.Done():
			return errWaitDone
		}
	}
	return nil
}
