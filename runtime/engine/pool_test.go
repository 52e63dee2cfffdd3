package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"stead/runtime/engine"
)

func TestPoolRunsEachQueuedRunOnceAndStopsCleanly(t *testing.T) {
	t.Parallel()
	p := engine.NewPool(2, 3, nil)
	release := make(chan struct{})
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	started := make(chan string, 10)
	p.Start(func(ctx context.Context, id string) error {
		mu.Lock()
		seen[id]++
		mu.Unlock()
		started <- id
		<-release
		return nil
	})
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if err := p.Dispatch(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	<-started // both workers busy
	// Queued: c, and c again (not queued twice), d, e; then the queue (3) is full.
	for _, id := range []string{"c", "c", "d", "e"} {
		if err := p.Dispatch(ctx, id); err != nil {
			t.Fatalf("dispatch %s: %v", id, err)
		}
	}
	if err := p.Dispatch(ctx, "f"); !errors.Is(err, engine.ErrQueueFull) {
		t.Fatalf("dispatch past the queue's size: %v", err)
	}
	close(release)
	stopped := make(chan struct{})
	go func() {
		p.Stop(context.Background())
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return after the executions in flight finished")
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("run %s executed %d times", id, n)
		}
	}
	if seen["a"] != 1 || seen["b"] != 1 {
		t.Errorf("executions in flight did not finish: %v", seen)
	}
	if err := p.Dispatch(ctx, "g"); err == nil {
		t.Error("a stopped pool accepted a run")
	}
}

func TestPoolStopInterruptsAtItsDeadline(t *testing.T) {
	t.Parallel()
	p := engine.NewPool(1, 1, nil)
	started := make(chan struct{})
	var interrupted bool
	p.Start(func(ctx context.Context, id string) error {
		close(started)
		<-ctx.Done() // a handler that only ends when interrupted
		interrupted = true
		return ctx.Err()
	})
	if err := p.Dispatch(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the shutdown deadline has passed
	p.Stop(ctx)
	if !interrupted {
		t.Error("Stop returned without interrupting the execution in flight")
	}
}

// A run dispatched again once a worker has taken it is queued again, not
// taken for the dispatch already in progress: that execution may have read
// the run before the change the new dispatch announces.
func TestPoolRunsARunDispatchedWhileItExecutes(t *testing.T) {
	t.Parallel()
	p := engine.NewPool(1, 4, nil)
	started := make(chan string, 4)
	release := make(chan struct{})
	p.Start(func(_ context.Context, id string) error {
		started <- id
		<-release
		return nil
	})
	ctx := context.Background()
	if err := p.Dispatch(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := p.Dispatch(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	close(release)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the run dispatched while it executed did not run again")
	}
	p.Stop(context.Background())
}
