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

// hub wakes goroutines waiting for a run to change in this process, and
// hands them the run as the write that changed it stored it (each write
// returns the run as stored, the store's contract), so that a waiter reads
// nothing back. Writes by other processes are seen by polling.
type hub struct {
	mu      sync.Mutex
	waiters map[string][]chan struct{}
	// latest is the newest run a write in this process stored, kept while
	// someone waits for that run.
	latest map[string]store.Run
	// fresh, when keepFresh, are runs created in this process and not yet
	// waited for, with the newest run a write here stored (see creating):
	// a wait that begins right after the create (POST …/runs?wait=) then
	// reads nothing back. The oldest of more than maxFresh are dropped.
	keepFresh  bool
	fresh      map[string]store.Run
	freshOrder []string
}

// maxFresh bounds hub.fresh: runs started in the last moments, whose
// creators may wait for them.
const maxFresh = 1024

// newHub returns a hub; keepFresh only when this process makes every
// write of its runs (Config.SoleWriter; see creating).
func newHub(keepFresh bool) *hub {
	return &hub{
		waiters: map[string][]chan struct{}{}, latest: map[string]store.Run{},
		keepFresh: keepFresh, fresh: map[string]store.Run{},
	}
}

func (h *hub) subscribe(runID string) chan struct{} {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.waiters[runID] = append(h.waiters[runID], ch)
	if r, ok := h.fresh[runID]; ok && r.Version > 0 {
		delete(h.fresh, runID)
		if cur, ok := h.latest[runID]; !ok || r.Version > cur.Version {
			h.latest[runID] = r
		}
	}
	h.mu.Unlock()
	return ch
}

// creating makes runID, about to be created, a fresh run: the publish of
// its create's write, or of a later one that lands first (a cancel by
// someone who listed it), fills it in. A hub keeps fresh runs only when
// its process makes every write of its runs (Config.SoleWriter), so what
// one holds is the run as stored, never an older state; notCreated
// forgets a run whose create failed.
func (h *hub) creating(runID string) {
	if !h.keepFresh {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.freshOrder) >= maxFresh {
		delete(h.fresh, h.freshOrder[0])
		h.freshOrder = h.freshOrder[1:]
	}
	h.fresh[runID] = store.Run{} // answers no one before its create's publish
	h.freshOrder = append(h.freshOrder, runID)
}

func (h *hub) notCreated(runID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.fresh, runID)
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
		delete(h.latest, runID)
	} else {
		h.waiters[runID] = list
	}
}

// forgetFresh drops every fresh run.
func (h *hub) forgetFresh() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.fresh)
	h.freshOrder = nil
}

// publish tells the run's waiters that a write stored r.
func (h *hub) publish(r store.Run) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.fresh[r.ID]; ok && r.Version > cur.Version {
		h.fresh[r.ID] = r
	}
	list := h.waiters[r.ID]
	if len(list) == 0 {
		return
	}
	if cur, ok := h.latest[r.ID]; !ok || r.Version > cur.Version {
		h.latest[r.ID] = r
	}
	for _, ch := range list {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// newer returns the run as the newest write in this process stored it, if
// that is newer than version.
func (h *hub) newer(runID string, version int64) (store.Run, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.latest[runID]
	return r, ok && r.Version > version
}

// WaitRun blocks until the run's Version exceeds afterVersion (or ctx ends)
// and returns the run as it then stands. A run changed in this process wakes
// the waiter at once; changes by other processes are seen within the poll
// interval. When ctx ends, WaitRun answers with the run as it last read it:
// a wait running out is not an error.
func (e *Engine) WaitRun(ctx context.Context, actor approvals.Actor, runID string, afterVersion int64) (store.Run, error) {
	ch := e.watch.subscribe(runID)
	defer e.watch.unsubscribe(runID, ch)
	return e.waitRun(ctx, actor, runID, ch, afterVersion, nil)
}

// waitRun is WaitRun on the subscription ch. last is the run as the caller
// read it under ch, if it did: then every write since has signalled ch, and
// waitRun waits before it reads.
func (e *Engine) waitRun(ctx context.Context, actor approvals.Actor, runID string, ch <-chan struct{}, afterVersion int64, last *store.Run) (store.Run, error) {
	t := time.NewTicker(e.cfg.PollInterval)
	defer t.Stop()
	for read := last == nil; ; {
		if last != nil && ctx.Err() != nil {
			return *last, nil
		}
		if read {
			readCtx := ctx
			if last == nil {
				// The first read happens even if the wait is already over,
				// so that there is always a run to answer with.
				readCtx = context.WithoutCancel(ctx)
			}
			r, err := e.readRun(readCtx, actor, runID, afterVersion)
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
		}
		select {
		case <-ctx.Done():
			read = true
		case <-t.C:
			read = true
		case <-ch:
			// A signal of a write already seen (it landed between the
			// subscription and the last read) needs no read.
			_, read = e.watch.newer(runID, afterVersion)
		}
	}
}

// readRun is GetRun, answered from what a write in this process published
// when that is newer than afterVersion.
func (e *Engine) readRun(ctx context.Context, actor approvals.Actor, runID string, afterVersion int64) (store.Run, error) {
	if r, ok := e.watch.newer(runID, afterVersion); ok {
		if visible, err := e.canSee(ctx, actor, r); err == nil && visible {
			return r, nil
		}
	}
	return e.GetRun(ctx, actor, runID)
}

// WaitFor blocks until done(run) is true or ctx ends, returning the run as it
// last stood (also when ctx ended). One subscription serves the whole wait,
// so a run moved by writes in this process is read from the store once.
func (e *Engine) WaitFor(ctx context.Context, actor approvals.Actor, runID string, done func(store.Run) bool) (store.Run, error) {
	ch := e.watch.subscribe(runID)
	defer e.watch.unsubscribe(runID, ch)
	var (
		version int64 = -1
		last    *store.Run
	)
	for {
		r, err := e.waitRun(ctx, actor, runID, ch, version, last)
		if err != nil || done(r) || ctx.Err() != nil {
			return r, err
		}
		version, last = r.Version, &r
	}
}
