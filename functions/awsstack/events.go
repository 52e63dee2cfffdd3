package awsstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/go-json-experiment/json/jsontext"

	"stead/runtime/engine"
	"stead/store"
	"stead/strictjson"
)

// RunnerEvent is the runner function's event: {"runId": "run_…"}.
type RunnerEvent struct {
	RunID string `json:"runId"`
}

// RunnerResult is what the runner answers.
type RunnerResult struct {
	RunID string `json:"runId"`
}

// EventError is an event a function cannot take. It fails the invocation
// with errorType "EventError" and a message that says what was expected.
type EventError struct {
	Function Function
	Problem  string
	// Err is the underlying error, if any.
	Err error
}

func (e *EventError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s function: %s: %s", e.Function, e.Problem, e.Err.Error())
	}
	return fmt.Sprintf("%s function: %s", e.Function, e.Problem)
}

func (e *EventError) Unwrap() error { return e.Err }

// runIDPattern is what a run id may look like: ids are "run_" and a ULID,
// but anything the store could hold as a key is accepted and looked up.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

const runnerShape = `the runner takes {"runId": "run_…"}`

// ParseRunnerEvent decodes and checks a runner event, strictly
// (strictjson): runId is the one field, matched exactly; a duplicate name,
// invalid UTF-8 or deep nesting is refused.
func ParseRunnerEvent(payload []byte) (RunnerEvent, error) {
	var ev RunnerEvent
	bad := func(format string, args ...any) (RunnerEvent, error) {
		return RunnerEvent{}, &EventError{Function: RunnerFunction, Problem: fmt.Sprintf(format, args...) + "; " + runnerShape}
	}
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) == 0 {
		return bad("the event is empty")
	}
	if trimmed[0] != '{' {
		if strictjson.Check(trimmed) == nil {
			return bad("the event is not a JSON object")
		}
		return bad("the event is not JSON (it starts %q)", prefix(trimmed, 20))
	}
	if err := strictjson.Unmarshal(trimmed, &ev); err != nil {
		var se *strictjson.Error
		if !errors.As(err, &se) {
			return bad("the event is not JSON: %s", err.Error())
		}
		switch se.Reason {
		case strictjson.Unknown:
			name := jsontext.Pointer(se.Pointer).LastToken()
			return bad("unknown field %q%s", prefix([]byte(name), 40), strings.TrimPrefix(se.Message, "is not a known field"))
		case strictjson.WrongType:
			return bad("runId must be a string")
		case strictjson.Syntax, strictjson.Trailing:
			return bad("the event is not JSON (it starts %q): %s", prefix(trimmed, 20), se.Error())
		}
		return bad("the event is not valid: %s", se.Error())
	}
	switch {
	case ev.RunID == "":
		return bad("runId is missing or empty")
	case !runIDPattern.MatchString(ev.RunID):
		return bad("runId %q is not a run id", prefix([]byte(ev.RunID), 40))
	}
	return ev, nil
}

// RunnerHandler is the runner function's handler: it executes the run its event
// names (claim, steps until the run ends or waits for approval, release),
// then delivers the notifications written meanwhile.
// A run that cannot be claimed — another invocation holds it, it awaits a
// decision, it ended — is left alone: a duplicate delivery changes nothing.
type RunnerHandler struct {
	execute func(ctx context.Context, runID string) error
	notify  func(ctx context.Context) error
	log     *slog.Logger
	// reserve is kept back from the invocation's deadline so that an
	// execution cut short stops cleanly before Lambda stops the process.
	reserve time.Duration
}

// NewRunnerHandler returns the runner's handler over execute
// (Engine.Execute). notify (Notifications.PassIfKicked; nil for none) runs
// after each execution, failed or not, before the invocation returns.
func NewRunnerHandler(execute func(ctx context.Context, runID string) error, notify func(ctx context.Context) error, log *slog.Logger) *RunnerHandler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &RunnerHandler{execute: execute, notify: notify, log: log, reserve: 2 * time.Second}
}

var _ lambda.Handler = (*RunnerHandler)(nil)

// Invoke handles one event. An execution error fails the invocation, and
// Lambda retries it (then sends it to the on-failure destination): the run
// is left claimable for the retry or the sweeper. A notifications error is
// logged and does not: the run is fine, and the sweeper's next pass
// delivers what this one could not.
func (r *RunnerHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	ev, err := ParseRunnerEvent(payload)
	if err != nil {
		r.log.ErrorContext(ctx, "refused a Lambda event", "error", err)
		return nil, err
	}
	ctx, cancel := withReserve(ctx, r.reserve)
	defer cancel()
	err = r.execute(ctx, ev.RunID)
	if r.notify != nil {
		if nerr := r.notify(ctx); nerr != nil {
			r.log.WarnContext(ctx, "deliver notifications; the sweeper delivers them later", "run", ev.RunID, "error", nerr)
		}
	}
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = &EventError{Function: RunnerFunction, Problem: fmt.Sprintf("nothing to execute for run %s (is the event for another stack?)", ev.RunID), Err: err}
		}
		r.log.ErrorContext(ctx, "execute run", "run", ev.RunID, "error", err)
		return nil, err
	}
	return json.Marshal(RunnerResult(ev))
}

// SweeperHandler is the sweeper function's handler: on each scheduled event it
// expires due approvals (their runs fail approval-expired) and dispatches
// again the runs nobody is working on (a lost dispatch, an approval decided
// but not resumed, a runner that died), then delivers notifications: those
// the sweep wrote, the decisions that dispatched no run, what a runner
// left, and the retries that are due.
type SweeperHandler struct {
	sweep  func(ctx context.Context) (engine.SweepResult, error)
	notify func(ctx context.Context) error
	log    *slog.Logger
	// reserve is kept back from the invocation's deadline for the
	// notifications pass, so that it ends before Lambda stops the process.
	reserve time.Duration
}

// NewSweeperHandler returns the sweeper's handler over sweep (Engine.Sweep).
// notify (Notifications.Pass; nil for none) runs after each sweep, failed
// or not, before the invocation returns.
func NewSweeperHandler(sweep func(ctx context.Context) (engine.SweepResult, error), notify func(ctx context.Context) error, log *slog.Logger) *SweeperHandler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &SweeperHandler{sweep: sweep, notify: notify, log: log, reserve: 2 * time.Second}
}

var _ lambda.Handler = (*SweeperHandler)(nil)

// Invoke sweeps once, then makes a notifications pass; an error of either
// fails the invocation (the next schedule tries again). The event's content
// is not used, but it must be a JSON object (the schedule's input, or an
// EventBridge event) or empty.
func (s *SweeperHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		// Not Stead's shape (EventBridge's, or the schedule's input): any
		// names, but strict JSON (strictjson).
		var problem string
		var se *strictjson.Error
		switch err := strictjson.Check(trimmed); {
		case trimmed[0] != '{', errors.As(err, &se) && (se.Reason == strictjson.Syntax || se.Reason == strictjson.Trailing):
			problem = fmt.Sprintf("the event is not a JSON object (it starts %q)", prefix(trimmed, 20))
		case err != nil:
			problem = "the event is not strict JSON: " + err.Error()
		}
		if problem != "" {
			err := &EventError{Function: SweeperFunction, Problem: problem + "; the sweeper takes its schedule's input, e.g. {}"}
			s.log.ErrorContext(ctx, "refused a Lambda event", "error", err)
			return nil, err
		}
	}
	res, err := s.sweep(ctx)
	if err != nil {
		err = fmt.Errorf("sweep (expired %d, redispatched %d before the error): %w", res.Expired, res.Redispatched, err)
		s.log.ErrorContext(ctx, "sweep", "error", err)
	}
	if s.notify != nil {
		nctx, cancel := withReserve(ctx, s.reserve)
		nerr := s.notify(nctx)
		cancel()
		if nerr != nil {
			nerr = fmt.Errorf("deliver notifications: %w", nerr)
			s.log.ErrorContext(ctx, "deliver notifications", "error", nerr)
			err = errors.Join(err, nerr)
		}
	}
	if err != nil {
		return nil, err
	}
	if res.Expired+res.Redispatched > 0 {
		s.log.InfoContext(ctx, "sweep", "expired", res.Expired, "redispatched", res.Redispatched)
	}
	return json.Marshal(res)
}

// withReserve shortens ctx's deadline by d when it has one far enough out.
func withReserve(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > 2*d {
		return context.WithDeadline(ctx, dl.Add(-d))
	}
	return context.WithCancel(ctx)
}

func prefix(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
