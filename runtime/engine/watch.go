package engine

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"stead/approvals"
	"stead/store"
)

var zeroTime time.Time

// event builds a trace event; the store assigns its sequence number.
func event(typ string, at time.Time, step string, data map[string]any) store.Event {
	ev := store.Event{Type: typ, At: at, Step: step}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"error": "event data not encodable: " + err.Error()})
		}
		ev.Data = b
	}
	return ev
}

// decode parses JSON into the plain Go values the agent package works on.
func decode(raw json.RawMessage) (any, error) {
	var v any
	if len(raw) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// hub wakes goroutines waiting for a run to change in this process. Writes
// by other processes are seen by polling.
type hub struct {
	mu      sync.Mutex
	waiters map[string][]chan struct{}
}

func newHub() *hub { return &hub{waiters: map[string][]chan struct{}{}} }

func (h *hub) subscribe(runID string) chan struct{} {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.waiters[runID] = append(h.waiters[runID], ch)
	h.mu.Unlock()
	return ch
}

func (h *hub) unsubscribe(runID string, ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.waiters[runID]
	for i, c := range list {
		if c == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(h.waiters, runID)
	} else {
		h.waiters[runID] = list
	}
}

func (h *hub) notify(runID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range h.waiters[runID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// WaitRun blocks until the run's Version exceeds afterVersion (or ctx ends)
// and returns the run as it then stands. A run changed in this process wakes
// the waiter at once; changes by other processes are seen within the poll
// interval. When ctx ends, WaitRun answers with the run as it last read it:
// a wait running out is not an error.
func (e *Engine) WaitRun(ctx context.Context, actor approvals.Actor, runID string, afterVersion int64) (store.Run, error) {
	return e.waitRun(ctx, actor, runID, afterVersion, nil)
}

// waitRun is WaitRun with the run as the caller last read it, if any.
func (e *Engine) waitRun(ctx context.Context, actor approvals.Actor, runID string, afterVersion int64, last *store.Run) (store.Run, error) {
	ch := e.watch.subscribe(runID)
	defer e.watch.unsubscribe(runID, ch)
	t := time.NewTicker(e.cfg.PollInterval)
	defer t.Stop()
	for {
		if last != nil && ctx.Err() != nil {
			return *last, nil
		}
		readCtx := ctx
		if last == nil {
			// The first read happens even if the wait is already over, so
			// that there is always a run to answer with.
			readCtx = context.WithoutCancel(ctx)
		}
		r, err := e.GetRun(readCtx, actor, runID)
		if err != nil {
			if last != nil && ctx.Err() != nil {
				return *last, nil // the read lost the race with the deadline
			}
			return r, err
		}
		if r.Version > afterVersion {
			return r, nil
		}
		last = &r
		select {
		case <-ctx.Done():
		case <-ch:
		case <-t.C:
		}
	}
}

// WaitFor blocks until done(run) is true or ctx ends, returning the run as it
// last stood (also when ctx ended).
func (e *Engine) WaitFor(ctx context.Context, actor approvals.Actor, runID string, done func(store.Run) bool) (store.Run, error) {
	var (
		version int64 = -1
		last    *store.Run
	)
	for {
		r, err := e.waitRun(ctx, actor, runID, version, last)
		if err != nil || done(r) || ctx.Err() != nil {
			return r, err
		}
		version, last = r.Version, &r
	}
}
