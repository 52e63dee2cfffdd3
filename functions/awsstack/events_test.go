package awsstack_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"stead/functions/awsstack"
	"stead/runtime/engine"
	"stead/store"
)

func badEvent(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "bad", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRunnerEvent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		payload string
		want    string // run id, or the error's telling part
		ok      bool
	}{
		{`{"runId":"run_01JX"}`, "run_01JX", true},
		{" \n{\"runId\": \"run_01JX\"}\n", "run_01JX", true},
		{string(badEvent(t, "runner-not-json.txt")), "the event is not JSON", false},
		{string(badEvent(t, "runner-wrong-field.json")), `unknown field "runID"`, false},
		{string(badEvent(t, "runner-missing-runid.json")), "runId is missing or empty", false},
		{string(badEvent(t, "runner-array.json")), "not a JSON object", false},
		{``, "the event is empty", false},
		{`null`, "not a JSON object", false},
		{`{"runId": 7}`, "runId must be a string", false},
		{`{"runId": ""}`, "runId is missing or empty", false},
		{`{"runId": "run 1; drop"}`, "is not a run id", false},
		{`{"runId": "run_1", "extra": true}`, `unknown field "extra"`, false},
		{`{"runId": "run_1"} {"runId": "run_2"}`, "not JSON", false},
		// Strict JSON: exact names, no duplicates, valid UTF-8, bounded depth.
		{`{"RUNID": "run_1"}`, `unknown field "RUNID"; names are case-sensitive: did you mean "runId"?`, false},
		{`{"runId": "run_1", "RunId": "run_2"}`, `unknown field "RunId"`, false},
		{`{"runId": "run_1", "runId": "run_2"}`, "runId: appears more than once", false},
		{`{"runId": "run_1", "\u0072unId": "run_2"}`, "runId: appears more than once", false},
		{"{\"runId\": \"run_\xff\"}", "runId: is not valid UTF-8", false},
		{`{"runId": "run_1", "x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "deeper than 64 levels", false},
		{`{"runId": null}`, "runId is missing or empty", false},
		// A run id is at most 128 characters.
		{`{"runId": "run_` + strings.Repeat("x", 124) + `"}`, "run_" + strings.Repeat("x", 124), true},
		{`{"runId": "run_` + strings.Repeat("x", 125) + `"}`, "is not a run id", false},
	} {
		ev, err := awsstack.ParseRunnerEvent([]byte(c.payload))
		switch {
		case c.ok && (err != nil || ev.RunID != c.want):
			t.Errorf("%q: %+v, %v; want run %s", c.payload, ev, err, c.want)
		case !c.ok:
			var ee *awsstack.EventError
			if !errors.As(err, &ee) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `the runner takes {"runId": "run_…"}`) {
				t.Errorf("%q: %v, want an EventError saying %q and the expected shape", c.payload, err, c.want)
			}
		}
	}
}

func TestRunnerHandler(t *testing.T) {
	t.Parallel()
	var calls []string
	var failWith error
	var logs bytes.Buffer
	h := awsstack.NewRunnerHandler(func(ctx context.Context, runID string) error {
		calls = append(calls, runID)
		return failWith
	}, nil, slog.New(slog.NewJSONHandler(&logs, nil)))
	invoke := func(payload string) (string, error) {
		out, err := lambda.NewHandler(h).Invoke(context.Background(), []byte(payload))
		return string(out), err
	}

	out, err := invoke(`{"runId":"run_1"}`)
	if err != nil || out != `{"runId":"run_1"}` || len(calls) != 1 || calls[0] != "run_1" {
		t.Fatalf("good event: %q %v, calls %v", out, err, calls)
	}
	for _, name := range []string{"runner-not-json.txt", "runner-wrong-field.json", "runner-missing-runid.json", "runner-array.json"} {
		if _, err := invoke(string(badEvent(t, name))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if len(calls) != 1 {
		t.Errorf("bad events reached Execute: %v", calls)
	}

	// An execution error fails the invocation, so Lambda retries it.
	failWith = fmt.Errorf("claim run_2: %w", errors.New("throttled"))
	if _, err := invoke(`{"runId":"run_2"}`); err == nil || !strings.Contains(err.Error(), "throttled") {
		t.Errorf("execute error: %v", err)
	}
	// A run that does not exist is named as such.
	failWith = fmt.Errorf("execute run_3: %w", store.ErrNotFound)
	_, err = invoke(string(badEvent(t, "runner-unknown-run.json")))
	var ee *awsstack.EventError
	if !errors.As(err, &ee) || !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "nothing to execute for run run_01JDOESNOTEXIST000000000000") {
		t.Errorf("unknown run: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"refused a Lambda event"`) || !strings.Contains(logs.String(), `"msg":"execute run"`) {
		t.Errorf("refusals and failures are not logged: %s", logs.String())
	}
}

// The runner's execution ends a little before Lambda's deadline, so that a
// run cut short stops cleanly.
func TestRunnerDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var got time.Time
		var notified time.Time
		h := awsstack.NewRunnerHandler(func(ctx context.Context, runID string) error {
			got, _ = ctx.Deadline()
			return nil
		}, func(ctx context.Context) error {
			notified, _ = ctx.Deadline()
			return nil
		}, nil)
		deadline := time.Now().Add(15 * time.Minute)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if _, err := h.Invoke(ctx, []byte(`{"runId":"run_1"}`)); err != nil {
			t.Fatal(err)
		}
		if want := deadline.Add(-2 * time.Second); !got.Equal(want) || !notified.Equal(want) {
			t.Errorf("execution deadline %s, notifications deadline %s; want %s for both", got, notified, want)
		}

		// With less than twice the reserve left, none is kept back: the
		// execution gets what there is.
		deadline = time.Now().Add(3 * time.Second)
		ctx, cancel = context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if _, err := h.Invoke(ctx, []byte(`{"runId":"run_2"}`)); err != nil {
			t.Fatal(err)
		}
		if !got.Equal(deadline) || !notified.Equal(deadline) {
			t.Errorf("3s left: execution deadline %s, notifications deadline %s; want %s for both", got, notified, deadline)
		}
	})
}

// The runner delivers the notifications an execution wrote before its
// invocation returns, after a failed execution too; a delivery problem is
// logged, and fails neither the invocation nor the run.
func TestRunnerHandlerNotifies(t *testing.T) {
	t.Parallel()
	var order []string
	var execErr, passErr error
	var logs bytes.Buffer
	h := awsstack.NewRunnerHandler(func(ctx context.Context, runID string) error {
		order = append(order, "execute "+runID)
		return execErr
	}, func(ctx context.Context) error {
		order = append(order, "notify")
		return passErr
	}, slog.New(slog.NewJSONHandler(&logs, nil)))
	invoke := func(payload string) error {
		_, err := lambda.NewHandler(h).Invoke(context.Background(), []byte(payload))
		return err
	}

	if err := invoke(`{"runId":"run_1"}`); err != nil {
		t.Fatal(err)
	}
	execErr = errors.New("throttled")
	if err := invoke(`{"runId":"run_2"}`); err == nil || !strings.Contains(err.Error(), "throttled") {
		t.Errorf("execute error: %v", err)
	}
	execErr, passErr = nil, errors.New("list outbox: throttled")
	if err := invoke(`{"runId":"run_3"}`); err != nil {
		t.Errorf("a failed notifications pass failed the invocation: %v", err)
	}
	_ = invoke(`{"runID":"run_4"}`) // refused: neither executed nor notified
	if want := []string{"execute run_1", "notify", "execute run_2", "notify", "execute run_3", "notify"}; !slices.Equal(order, want) {
		t.Errorf("calls %v, want %v", order, want)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"deliver notifications; the sweeper delivers them later","run":"run_3","error":"list outbox: throttled"`) {
		t.Errorf("the failed pass is not logged: %s", logs.String())
	}
}

func TestSweeperHandler(t *testing.T) {
	t.Parallel()
	var sweeps int
	var res engine.SweepResult
	var failWith error
	var passes int
	var passErr error
	h := awsstack.NewSweeperHandler(func(ctx context.Context) (engine.SweepResult, error) {
		sweeps++
		return res, failWith
	}, func(ctx context.Context) error {
		if passes++; passes != sweeps {
			t.Errorf("pass %d after sweep %d: want one pass after each sweep", passes, sweeps)
		}
		return passErr
	}, nil)
	res = engine.SweepResult{Expired: 2, Redispatched: 1}
	for _, payload := range []string{`{"source":"stead.sweeper"}`, `{}`, ``, `null`,
		`{"version":"0","detail-type":"Scheduled Event","source":"aws.scheduler","detail":{}}`} {
		out, err := lambda.NewHandler(h).Invoke(context.Background(), []byte(payload))
		if err != nil || string(out) != `{"expired":2,"redispatched":1}` {
			t.Errorf("%q: %s %v", payload, out, err)
		}
	}
	before := sweeps
	for _, payload := range []string{string(badEvent(t, "sweeper-string.json")), `[{}]`, `{"a":`} {
		_, err := lambda.NewHandler(h).Invoke(context.Background(), []byte(payload))
		var ee *awsstack.EventError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "not a JSON object") {
			t.Errorf("%q: %v, want an EventError", payload, err)
		}
	}
	// An EventBridge event may carry any fields, but as strict JSON.
	for payload, says := range map[string]string{
		`{"source":"aws.scheduler","source":"stead"}`:                          "source: appears more than once",
		"{\"detail\":\"\xff\"}":                                                "detail: is not valid UTF-8",
		`{"detail":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`: "deeper than 64 levels",
	} {
		_, err := lambda.NewHandler(h).Invoke(context.Background(), []byte(payload))
		var ee *awsstack.EventError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want an EventError saying %q", payload, err, says)
		}
	}
	if sweeps != before || passes != before {
		t.Errorf("a bad event swept (%d) or notified (%d)", sweeps-before, passes-before)
	}
	// A failed pass fails the invocation (the next schedule tries again).
	passErr = errors.New("list due deliveries: throttled")
	if _, err := h.Invoke(context.Background(), []byte(`{}`)); err == nil || err.Error() != "deliver notifications: list due deliveries: throttled" {
		t.Errorf("pass error: %v", err)
	}
	// A failed sweep still makes its pass; both errors are the answer.
	failWith = errors.New("list due approvals: throttled")
	res = engine.SweepResult{Expired: 1}
	before = passes
	_, err := h.Invoke(context.Background(), []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "expired 1, redispatched 0 before the error") || !strings.Contains(err.Error(), "deliver notifications") || passes != before+1 {
		t.Errorf("sweep and pass errors: %v (%d passes)", err, passes-before)
	}
}

// The sweeper's pass ends a little before Lambda's deadline.
func TestSweeperDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var swept, notified time.Time
		h := awsstack.NewSweeperHandler(func(ctx context.Context) (engine.SweepResult, error) {
			swept, _ = ctx.Deadline()
			return engine.SweepResult{}, nil
		}, func(ctx context.Context) error {
			notified, _ = ctx.Deadline()
			return nil
		}, nil)
		deadline := time.Now().Add(50 * time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if _, err := h.Invoke(ctx, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if !swept.Equal(deadline) || !notified.Equal(deadline.Add(-2*time.Second)) {
			t.Errorf("sweep deadline %s, notifications deadline %s; want %s and 2s before", swept, notified, deadline)
		}
	})
}

// AWS_LAMBDA_LOG_LEVEL's six levels map onto slog's four.
func TestLoggerLevels(t *testing.T) {
	t.Parallel()
	for level, want := range map[string]slog.Level{
		"TRACE": slog.LevelDebug, "DEBUG": slog.LevelDebug, "INFO": slog.LevelInfo, "": slog.LevelInfo,
		"WARN": slog.LevelWarn, "ERROR": slog.LevelError, "FATAL": slog.LevelError, " fatal ": slog.LevelError,
	} {
		log := awsstack.NewLogger(io.Discard, awsstack.APIFunction, level)
		if !log.Enabled(context.Background(), want) || (want > slog.LevelDebug && log.Enabled(context.Background(), want-4)) {
			t.Errorf("AWS_LAMBDA_LOG_LEVEL=%q: want slog level %s", level, want)
		}
	}
}

func TestLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := awsstack.NewLogger(&buf, awsstack.RunnerFunction, "WARN")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	log.InfoContext(ctx, "hidden")
	log.With("run", "run_1").WarnContext(ctx, "shown")
	got := strings.TrimSpace(buf.String())
	if strings.Count(got, "\n") != 0 || !strings.Contains(got, `"level":"WARN"`) || !strings.Contains(got, `"function":"runner"`) ||
		!strings.Contains(got, `"run":"run_1"`) || !strings.Contains(got, `"requestId":"req-1"`) {
		t.Errorf("log %s", got)
	}

	b := awsstack.Broken(log, errors.New("STEAD_TABLE is not set"))
	if _, err := b.Invoke(ctx, []byte(`{}`)); err == nil || err.Error() != "STEAD_TABLE is not set" {
		t.Errorf("broken function: %v", err)
	}
}
