package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"stead/api/wire"
	"stead/approvals"
	"stead/runtime/engine"
	"stead/store"
)

// maxIDLen bounds end user ids and idempotency keys.
const maxIDLen = 256

type startRunRequest struct {
	Input     json.RawMessage `json:"input"`
	EndUserID string          `json:"endUserId"`
}

// startRun: POST /v1/agents/{agent}/runs {input, endUserId}.
//
// 202 with the new run. With an Idempotency-Key header, a repeat of the same
// request (same agent, input and end user) returns the run the first one
// created, with 200 and "Idempotent-Replayed: true"; the same key with a
// different request is 422 idempotency_key_reused and creates nothing.
// ?wait=30s (at most 60s) holds the response until the run is terminal or
// awaiting approval.
func (s *Server) startRun(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := newQuery(r)
	wait := q.wait()
	var problems []wire.FieldProblem
	idem := r.Header.Get("Idempotency-Key")
	if p := idempotencyKeyProblem(idem); p != "" {
		problems = append(problems, wire.FieldProblem{Field: "Idempotency-Key", Message: p})
	}
	problems = append(problems, q.problems...)
	var req startRunRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	if p := textProblem(req.EndUserID, true, maxIDLen); p != "" {
		problems = append(problems, wire.FieldProblem{Field: "endUserId", Message: p})
	}
	if isNull(req.Input) {
		req.Input = nil
	}
	if len(problems) > 0 {
		return invalid(problems...)
	}
	agentName := r.PathValue("agent")
	run, created, err := s.engine.StartRun(r.Context(), c.actor, engine.StartParams{
		Agent: agentName, Input: req.Input, EndUserID: req.EndUserID, IdempotencyKey: idem,
	})
	if errors.Is(err, store.ErrNotFound) {
		return notFound("agent %q is not in the latest deployment; list the deployed agents with stead agents (GET /v1/agents)", agentName)
	}
	if err != nil {
		return err
	}
	if wait > 0 {
		// The run exists now; a failed wait still answers with it.
		if waited, err := s.waitSettled(r.Context(), c.actor, run.ID, wait, settled); err == nil {
			run = waited
		}
	}
	out, err := s.showRun(r.Context(), c, run)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/runs/"+run.ID)
	status := http.StatusAccepted
	if !created {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, status, out)
	return nil
}

func idempotencyKeyProblem(k string) string {
	if k == "" {
		return ""
	}
	if len(k) > maxIDLen {
		return fmt.Sprintf("must be at most %d characters long", maxIDLen)
	}
	for i := range len(k) {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "must be printable ASCII without spaces"
		}
	}
	return ""
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// settled: the run ended or waits for a person.
func settled(r store.Run) bool { return r.Status.Terminal() || r.Status == store.RunAwaitingApproval }

func terminal(r store.Run) bool { return r.Status.Terminal() }

// waitSettled long-polls a run until done says so or the wait is over, and
// returns the run as it then stands.
func (s *Server) waitSettled(ctx context.Context, actor approvals.Actor, runID string, wait time.Duration, done func(store.Run) bool) (store.Run, error) {
	ctx, stop := s.untilClosing(ctx)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	run, err := s.engine.WaitFor(ctx, actor, runID, done)
	if err != nil {
		return store.Run{}, runError(runID, err)
	}
	return run, nil
}

// runError words a run lookup's not-found.
func runError(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound("run %s not found", id)
	}
	return err
}

// listRuns: GET /v1/runs?status=&agent=&endUserId=&cursor=&limit= (status
// as store.ParseRunStatus reads it).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := newQuery(r)
	f := store.RunFilter{
		Agent:     q.str("agent"),
		EndUserID: q.str("endUserId"),
		Cursor:    q.str("cursor"),
		Limit:     q.limit(),
	}
	var err error
	f.Status, err = store.ParseRunStatus(q.str("status"))
	q.check(err)
	if err := q.err(); err != nil {
		return err
	}
	if c.kind == customerCred && f.EndUserID != "" && f.EndUserID != c.actor.EndUserID {
		return forbidden("a customer token reads only its own end user's runs")
	}
	page, err := s.engine.ListRuns(r.Context(), c.actor, f)
	if err != nil {
		return err
	}
	out := wire.RunList{Runs: make([]wire.Run, 0, len(page.Items)), NextCursor: page.NextCursor}
	for _, run := range page.Items {
		v, err := s.showRun(r.Context(), c, run)
		if err != nil {
			return err
		}
		out.Runs = append(out.Runs, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getRun: GET /v1/runs/{id}[?wait=30s[&until=settled|terminal]].
//
// With wait, the response is held until the run is settled (terminal or
// awaiting approval; the default) or, with until=terminal, until it ended.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := newQuery(r)
	wait := q.wait()
	done := settled
	switch u := q.str("until"); u {
	case "", "settled":
	case "terminal":
		done = terminal
	default:
		q.bad("until", "must be settled or terminal (got %q)", u)
	}
	if err := q.err(); err != nil {
		return err
	}
	id := r.PathValue("id")
	var run store.Run
	var err error
	if wait > 0 {
		run, err = s.waitSettled(r.Context(), c.actor, id, wait, done)
	} else {
		run, err = s.engine.GetRun(r.Context(), c.actor, id)
	}
	if err != nil {
		return runError(id, err)
	}
	out, err := s.showRun(r.Context(), c, run)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// cancelRun: POST /v1/runs/{id}/cancel. 200 with the cancelled run; 409
// conflict if it already ended.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req struct{}
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	id := r.PathValue("id")
	run, err := s.engine.Cancel(r.Context(), c.actor, id)
	if errors.Is(err, engine.ErrRunFinished) {
		return conflict("run %s already %s; there is nothing to cancel", id, run.Status)
	}
	if err != nil {
		return runError(id, err)
	}
	out, err := s.showRun(r.Context(), c, run)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// Event pages.
const (
	defaultEventLimit = 100
	streamPage        = 200
)

// runEvents: GET /v1/runs/{id}/events.
//
// As JSON: ?after=<seq>&limit=<n> → {events, nextAfter}; pass nextAfter as
// after for the next page. With Accept: text/event-stream, a Server-Sent
// Events stream: each event as "id: <seq>", "event: <type>", "data: <event
// JSON>"; it resumes after Last-Event-ID (or ?after=), sends a comment line
// when idle for the heartbeat interval, and ends once the run is terminal
// and every event has been sent.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := newQuery(r)
	var after int64
	if a := q.str("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			q.bad("after", "must be a sequence number (0 or more; got %q)", a)
		}
		after = n
	}
	stream := r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	if id := r.Header.Get("Last-Event-ID"); stream && id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n < 0 {
			q.bad("Last-Event-ID", "must be a sequence number (got %q)", id)
		}
		after = n
	}
	limit := q.limit()
	if err := q.err(); err != nil {
		return err
	}
	id := r.PathValue("id")
	if stream {
		return s.streamEvents(w, r, c, id, after)
	}
	if limit == 0 {
		limit = defaultEventLimit
	}
	events, err := s.engine.Events(r.Context(), c.actor, id, after, limit)
	if err != nil {
		return runError(id, err)
	}
	out := wire.EventList{Events: make([]wire.Event, 0, len(events)), NextAfter: after}
	for _, e := range events {
		out.NextAfter = e.Seq
		if ev, ok := eventFor(c, e); ok {
			out.Events = append(out.Events, ev)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// streamEvents serves the SSE stream. Errors before the first byte are
// ordinary JSON errors; after it, the stream just ends.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, c *caller, id string, after int64) error {
	ctx, stop := s.untilClosing(r.Context())
	defer stop()
	run, err := s.engine.GetRun(ctx, c.actor, id)
	if err != nil {
		return runError(id, err)
	}
	rc := http.NewResponseController(w)
	// A stream outlives any server write timeout meant for ordinary
	// responses.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return nil
	}
	if rc.Flush() != nil {
		return nil
	}
	// A stream lives no longer than its credential: a revoked key, or a
	// revoked or expired customer token, ends it within Recheck.
	checked, wrote := time.Now(), time.Now()
	for {
		if time.Since(checked) >= s.cfg.Recheck {
			if err := s.recheck(r, anyOf(approvals.ReadOwnRuns, approvals.ReadApprovalRuns)); err != nil {
				return nil
			}
			checked = time.Now()
		}
		// The run is read before its events: if it was terminal then, the
		// events read after hold everything it will ever have.
		events, err := s.engine.Events(ctx, c.actor, id, after, streamPage)
		if err != nil {
			s.streamFailed(ctx, r, err)
			return nil
		}
		for _, e := range events {
			after = e.Seq
			ev, ok := eventFor(c, e)
			if !ok {
				continue
			}
			b, err := json.Marshal(ev)
			if err != nil {
				s.streamFailed(ctx, r, err)
				return nil
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, sseField(e.Type), b); err != nil {
				return nil
			}
			wrote = time.Now()
		}
		if len(events) > 0 && rc.Flush() != nil {
			return nil
		}
		if len(events) == streamPage {
			if run, err = s.engine.GetRun(ctx, c.actor, id); err != nil {
				s.streamFailed(ctx, r, err)
				return nil
			}
			continue
		}
		if run.Status.Terminal() && after >= run.LastSeq {
			return nil
		}
		// Sleep until the run changes, the credential is due for a check or
		// the heartbeat is due.
		wctx, cancel := context.WithTimeout(ctx, min(s.cfg.Heartbeat, s.cfg.Recheck))
		next, err := s.engine.WaitRun(wctx, c.actor, id, run.Version)
		idle := wctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !idle:
			s.streamFailed(ctx, r, err)
			return nil
		case idle && (err != nil || next.Version <= run.Version) && time.Since(wrote) >= s.cfg.Heartbeat:
			// The heartbeat deadline may also cut a store read short.
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return nil
			}
			if rc.Flush() != nil {
				return nil
			}
			wrote = time.Now()
		}
		if err == nil && next.ID != "" {
			run = next
		}
	}
}

func (s *Server) streamFailed(ctx context.Context, r *http.Request, err error) {
	if ctx.Err() != nil {
		return
	}
	s.log.ErrorContext(r.Context(), "event stream failed", "path", r.URL.Path, "error", err)
}

// sseField keeps a value on one SSE line.
func sseField(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}
