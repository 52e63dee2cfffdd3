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
	queue   chan string
	workers int
	onError func(runID string, err error)

	mu     sync.Mutex
	queued map[string]bool
	closed bool

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
	return &Pool{queue: make(chan string, q), workers: n, onError: onError, queued: map[string]bool{}}
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
	case p.queue <- runID:
		p.queued[runID] = true
		return nil
	default:
		return ErrQueueFull
	}
}

// Start runs the workers until Stop. exec is the engine's Execute.
func (p *Pool) Start(exec func(ctx context.Context, runID string) error) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for range p.workers {
		p.wg.Go(func() {
			for runID := range p.queue {
				p.mu.Lock()
				delete(p.queued, runID)
				stopping := p.closed
				p.mu.Unlock()
				if stopping || ctx.Err() != nil {
					continue // left queued in the store for the sweeper
				}
				if err := exec(ctx, runID); err != nil && p.onError != nil {
					p.onError(runID, err)
				}
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
