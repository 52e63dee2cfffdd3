package engine

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrQueueFull: the pool's queue is full. The run stays queued and the
// sweeper dispatches it again.
var ErrQueueFull = errors.New("worker queue is full")

// Pool is the embedded Dispatcher: an in-process queue served by workers
// that call Execute. It is what `stead dev` uses; on AWS an async Lambda
// invoke takes its place.
type Pool struct {
	queue   chan task
	workers int
	onError func(runID string, err error)

	mu     sync.Mutex
	queued map[string]bool
	closed bool
	// busy counts workers executing a task, reserved the slots handed out
	// and not yet used (see reserve).
	busy, reserved int

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

var _ Dispatcher = (*Pool)(nil)

// NewPool returns a pool of n workers with a queue of size q. onError, if
// set, hears about executions that returned an error.
func NewPool(n, q int, onError func(runID string, err error)) *Pool {
	if n <= 0 {
		n = 4
	}
	if q <= 0 {
		q = 1024
	}
	return &Pool{queue: make(chan task, q), workers: n, onError: onError, queued: map[string]bool{}}
}

// task is a run for a worker: dispatched by id (the worker calls Execute),
// or created already claimed by this process (the worker calls run).
type task struct {
	runID string
	run   func(ctx context.Context) error
}

// Dispatch queues a run. A run already waiting in the queue is not queued
// twice.
func (p *Pool) Dispatch(_ context.Context, runID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("worker pool is stopped")
	}
	if p.queued[runID] {
		return nil
	}
	select {
	case p.queue <- task{runID: runID}:
		p.queued[runID] = true
		return nil
	default:
		return ErrQueueFull
	}
}

// slot is a worker of the pool kept free for one run (see Engine.handOff).
type slot struct{ p *Pool }

// reserve returns a slot when a worker is idle and nothing waits in the
// queue, so that a run created claimed by this process starts at once
// rather than queue behind others while its lease runs; nil otherwise. A
// slot is used by run or given back by release.
func (p *Pool) reserve() *slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.busy+p.reserved+len(p.queue) >= min(p.workers, cap(p.queue)) {
		return nil
	}
	p.reserved++
	return &slot{p: p}
}

func (s *slot) release() {
	s.p.mu.Lock()
	s.p.reserved--
	s.p.mu.Unlock()
}

// run hands fn, the execution of the claimed run runID, to a worker. It
// reports false when the pool has stopped meanwhile, or dispatches have
// filled its queue (they do not wait on slots): the run then stays claimed
// until its lease runs out, and the sweeper dispatches it again.
func (s *slot) run(runID string, fn func(ctx context.Context) error) bool {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reserved--
	if p.closed {
		return false
	}
	select {
	case p.queue <- task{runID: runID, run: fn}:
		return true
	default:
		return false
	}
}

// Start runs the workers until Stop. exec is the engine's Execute.
func (p *Pool) Start(exec func(ctx context.Context, runID string) error) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for range p.workers {
		p.wg.Go(func() {
			for t := range p.queue {
				p.mu.Lock()
				if t.run == nil {
					delete(p.queued, t.runID)
				}
				stopping := p.closed
				p.busy++
				p.mu.Unlock()
				var err error
				switch {
				case stopping || ctx.Err() != nil:
					// Left in the store for the sweeper: queued, or claimed
					// until the claim's lease runs out (a claimed run's
					// execution, called with a context already ended, only
					// lets go of it).
					if t.run != nil {
						ended, end := context.WithCancel(ctx)
						end()
						err = t.run(ended)
					}
				case t.run != nil:
					err = t.run(ctx)
				default:
					err = exec(ctx, t.runID)
				}
				if err != nil && p.onError != nil {
					p.onError(t.runID, err)
				}
				p.mu.Lock()
				p.busy--
				p.mu.Unlock()
			}
		})
	}
}

// Stop stops taking work and waits for executions in flight to finish. When
// ctx ends first they are interrupted; their runs stay claimable and resume
// after their lease runs out. Runs still queued stay queued in the store and
// are dispatched by the next process's sweeper.
func (p *Pool) Stop(ctx context.Context) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.queue)
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	if p.cancel == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
		p.cancel()
		<-done
	}
	p.cancel()
}

// SweepEvery calls Sweep every interval until ctx ends. onError hears about
// failed sweeps.
func (e *Engine) SweepEvery(ctx context.Context, interval time.Duration, onError func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := e.Sweep(ctx); err != nil && onError != nil && ctx.Err() == nil {
				onError(err)
			}
		}
	}
}
