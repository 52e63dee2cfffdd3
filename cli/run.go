package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"stead/api/wire"
	"stead/store"
)

// Run statuses as the API spells them.
const (
	statusQueued           = "queued"
	statusRunning          = "running"
	statusAwaitingApproval = "awaiting-approval"
	statusSucceeded        = "succeeded"
	statusFailed           = "failed"
	statusCancelled        = "cancelled"
)

func terminalStatus(s string) bool {
	return s == statusSucceeded || s == statusFailed || s == statusCancelled
}

func settledStatus(s string) bool { return terminalStatus(s) || s == statusAwaitingApproval }

// Long-poll chunk of `run --wait`: a progress line is printed after each
// chunk the run did not settle in.
const waitChunk = 10 * time.Second

type runOptions struct {
	input          string
	endUser        string
	wait           bool
	follow         bool
	idempotencyKey string
}

func (a *app) runCommand() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run AGENT --end-user ID [--input JSON|@file] [--wait | --follow]",
		Short: "Start a run of an agent for an end user",
		Long: `Start a run of an agent of the latest deployment for an end user.

--input is the run's input: JSON, or @file to read it from a file (@- reads
standard input). --wait waits until the run ends or stops for an approval,
with progress on standard error, and says what to run next. --follow prints
the trace live until the run ends, through its approval waits (decide them
in another terminal, the console, mail or Slack); with --json, one JSON line
per event, then one with the run as it ended. Exit status 1 if the run
failed or was cancelled.`,
		Example: `  stead run refunds --input '{"orderId":"o-1001","reason":"damaged"}' --end-user demo-user --wait`,
		Args:    exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.run(cmd.Context(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.input, "input", "{}", "run input: JSON, or @file (@- for standard input)")
	f.StringVar(&o.endUser, "end-user", "", "the end user the run acts for (required)")
	f.BoolVar(&o.wait, "wait", false, "wait until the run ends or awaits approval")
	f.BoolVar(&o.follow, "follow", false, "print the run's trace live until it ends (through its approval waits)")
	f.StringVar(&o.idempotencyKey, "idempotency-key", "", "make the start repeatable: the same key and request return the same run")
	return cmd
}

func (a *app) run(ctx context.Context, agentName string, o runOptions) error {
	if o.endUser == "" {
		return usagef("--end-user is required: the end user the run acts for, e.g. --end-user demo-user")
	}
	if o.wait && o.follow {
		return usagef("use --wait or --follow, not both")
	}
	input, err := a.readJSONArg("--input", o.input)
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	req := request{
		method: http.MethodPost,
		path:   path("v1", "agents", agentName, "runs"),
		body:   map[string]any{"input": input, "endUserId": o.endUser},
	}
	if o.idempotencyKey != "" {
		req.header = http.Header{"Idempotency-Key": {o.idempotencyKey}}
	}
	var run wire.Run
	body, err := c.call(ctx, req, &run)
	var ae *apiError
	if errors.As(err, &ae) && o.input == "{}" && slices.ContainsFunc(fieldProblems(ae), func(p string) bool { return strings.HasPrefix(p, "input") }) {
		ae.Hint = "the input was {}, as no --input was given: pass the agent's input with --input JSON (or @file)"
	}
	if err != nil {
		return err
	}
	switch {
	case o.follow:
		return a.follow(ctx, c, run)
	case o.wait:
		fmt.Fprintf(a.stderr(), "started run %s (%s, deployment %d, end user %s); waiting…\n", run.ID, run.Agent, run.Deployment, run.EndUserID)
		run, body, err = a.waitSettled(ctx, c, run)
		if err != nil {
			return err
		}
	}
	if a.jsonFlag {
		if err := printJSON(a.stdout(), body); err != nil {
			return err
		}
		return runExit(run)
	}
	if !o.wait {
		fmt.Fprintf(a.stdout(), "run %s %s (%s, deployment %d, end user %s)\n", run.ID, run.Status, run.Agent, run.Deployment, run.EndUserID)
		if !settledStatus(run.Status) {
			fmt.Fprintf(a.stdout(), "follow it: stead trace %s\n", run.ID)
			return nil
		}
	}
	return a.printOutcome(run)
}

// waitSettled long-polls until the run ends or awaits approval, printing a
// progress line on stderr whenever a chunk passes without that.
func (a *app) waitSettled(ctx context.Context, c *client, run wire.Run) (wire.Run, []byte, error) {
	start := a.now()
	last := run.Status
	var body []byte
	for !settledStatus(run.Status) {
		q := url.Values{"wait": {waitChunk.String()}}
		var next wire.Run
		b, err := c.call(ctx, request{method: http.MethodGet, path: path("v1", "runs", run.ID), query: q}, &next)
		if err != nil {
			return run, nil, fmt.Errorf("wait for run %s: %w", run.ID, err)
		}
		run, body = next, b
		if settledStatus(run.Status) {
			break
		}
		elapsed := a.now().Sub(start).Round(time.Second)
		if run.Status != last {
			fmt.Fprintf(a.stderr(), "run %s is %s (%s)…\n", run.ID, run.Status, elapsed)
		} else {
			fmt.Fprintf(a.stderr(), "still %s after %s…\n", run.Status, elapsed)
		}
		last = run.Status
	}
	if body == nil {
		var err error
		body, err = json.Marshal(run)
		if err != nil {
			return run, nil, err
		}
	}
	return run, body, nil
}

// printOutcome describes a settled run and returns the exit error for a
// failed or cancelled one.
func (a *app) printOutcome(run wire.Run) error {
	w := a.stdout()
	switch run.Status {
	case statusSucceeded:
		fmt.Fprintf(w, "run %s succeeded (%s, end user %s)\n", run.ID, run.Agent, run.EndUserID)
		fmt.Fprintf(w, "output:\n%s\n", pretty(run.Output, "  "))
	case statusAwaitingApproval:
		fmt.Fprintf(w, "run %s is awaiting approval (%s, end user %s)\n", run.ID, run.Agent, run.EndUserID)
		if ap := run.Approval; ap != nil {
			if ap.Reason != "" {
				fmt.Fprintf(w, "reason: %s; expires in %s (at %s)\n", ap.Reason, until(a.now(), ap.ExpiresAt), clock(ap.ExpiresAt))
			}
			fmt.Fprintln(w, waitingLine(ap.ID, ap.Tool))
		}
	case statusFailed, statusCancelled:
		fmt.Fprintf(w, "run %s %s (%s, end user %s)\n", run.ID, run.Status, run.Agent, run.EndUserID)
	default:
		fmt.Fprintf(w, "run %s is %s (%s, end user %s)\n", run.ID, run.Status, run.Agent, run.EndUserID)
	}
	return runExit(run)
}

// waitingLine tells exactly what to run to decide an approval.
func waitingLine(id, tool string) string {
	return fmt.Sprintf("waiting for approval %s (%s): stead approve %s or stead deny %s", id, tool, id, id)
}

// runError is a run that failed or was cancelled: exit status 1. traced
// says its trace was just printed (run --follow, trace --follow), so the
// error does not send the user to `stead trace` for it.
type runError struct {
	run    wire.Run
	traced bool
}

// Error is one line: "run R failed: approval-denied: refundOrder was denied
// …", "run R cancelled by key_…" — the status said once.
func (e *runError) Error() string {
	r := e.run
	msg := "run " + r.ID + " " + r.Status
	if re := r.Error; re != nil {
		switch {
		case re.Message == r.Status || re.Message == "":
		case strings.HasPrefix(re.Message, r.Status+" "):
			msg = "run " + r.ID + " " + re.Message
		case re.Code == r.Status || re.Code == "":
			msg += ": " + re.Message
		default:
			msg += ": " + re.Code + ": " + re.Message
		}
	}
	if !e.traced {
		msg += "; see `stead trace " + r.ID + "`"
	}
	return msg
}

func runExit(run wire.Run) error {
	if run.Status == statusFailed || run.Status == statusCancelled {
		return &runError{run: run}
	}
	return nil
}

// follow streams the run's trace until the run ends — through its
// approval waits, saying at each what to run to decide it — resuming
// after the last event seen when the stream drops. With --json it prints
// NDJSON: one line per event, then one with the run as it ended.
func (a *app) follow(ctx context.Context, c *client, run wire.Run) error {
	if !a.jsonFlag {
		fmt.Fprintf(a.stdout(), "run %s (%s, deployment %d, end user %s)\n", run.ID, agentLabel(run), run.Deployment, run.EndUserID)
	}
	tw := newTraceWriter(a.stdout(), a.now, a.jsonFlag)
	var lastSeq int64
	failures := 0
	for {
		s, err := a.streamOnce(ctx, c, run.ID, lastSeq, tw)
		lastSeq = s.lastSeq
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ae *apiError
		if errors.As(err, &ae) {
			return err
		}
		if err == nil {
			// The server ends a stream once the run is terminal and every
			// event was sent; check, and carry on from the last event if
			// it ended for another reason.
			var cur wire.Run
			body, gerr := c.call(ctx, request{method: http.MethodGet, path: path("v1", "runs", run.ID)}, &cur)
			switch {
			case errors.As(gerr, &ae):
				return gerr
			case gerr != nil:
				err = gerr
			case terminalStatus(cur.Status) && s.closed:
				return a.followDone(cur, body)
			default:
				failures = 0
				continue
			}
		}
		failures++
		if failures > 10 {
			return fmt.Errorf("follow run %s: %w; see its trace so far with `stead trace %s`", run.ID, err, run.ID)
		}
		fmt.Fprintf(a.stderr(), "event stream dropped (%v); resuming after event %d…\n", err, lastSeq)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(failures) * 250 * time.Millisecond):
		}
	}
}

// followDone prints how a followed run ended; its trace is on the screen
// already, so a failed run's error does not point at `stead trace`.
func (a *app) followDone(run wire.Run, body []byte) error {
	var err error
	if a.jsonFlag {
		fmt.Fprintf(a.stdout(), "%s\n", compact(body))
		err = runExit(run)
	} else {
		err = a.printOutcome(run)
	}
	if re := (*runError)(nil); errors.As(err, &re) {
		re.traced = true
	}
	return err
}

// streamState is how one event stream ended.
type streamState struct {
	lastSeq int64
	// closed: the server ended the stream (it does once the run is
	// terminal and every event was sent).
	closed bool
}

// streamOnce reads the run's event stream after lastSeq, printing each
// event, until the server ends it or it fails.
// An error answer is an *apiError; anything else a dropped stream.
func (a *app) streamOnce(ctx context.Context, c *client, runID string, lastSeq int64, tw *traceWriter) (streamState, error) {
	st := streamState{lastSeq: lastSeq}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := http.Header{"Accept": {"text/event-stream"}}
	if lastSeq > 0 {
		h.Set("Last-Event-ID", strconv.FormatInt(lastSeq, 10))
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: path("v1", "runs", runID, "events"), header: h})
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return st, c.errorOf(resp.StatusCode, b)
	}
	var data strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var ev wire.Event
			if err := json.Unmarshal([]byte(data.String()), &ev); err != nil {
				return st, fmt.Errorf("decode event: %w", err)
			}
			data.Reset()
			if ev.Seq <= st.lastSeq {
				continue
			}
			st.lastSeq = ev.Seq
			tw.event(ev)
			if ev.Type == "approval.requested" && !tw.json {
				fmt.Fprintln(a.stdout(), waitingLine(dataString(ev.Data, "approvalId"), dataString(ev.Data, "tool")))
			}
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
		// Comments (heartbeats), id:, event: and retry: lines carry nothing
		// the data does not.
	}
	if err := sc.Err(); err != nil {
		return st, err
	}
	st.closed = true
	return st, nil
}

// readJSONArg reads a JSON flag value: JSON text, @file, or @- for stdin.
func (a *app) readJSONArg(flag, v string) (json.RawMessage, error) {
	var b []byte
	switch {
	case v == "@-":
		var err error
		if b, err = io.ReadAll(a.env.Stdin); err != nil {
			return nil, fmt.Errorf("read %s from standard input: %w", flag, err)
		}
	case strings.HasPrefix(v, "@"):
		var err error
		if b, err = os.ReadFile(v[1:]); err != nil {
			return nil, usagef("read %s file: %w", flag, err)
		}
	default:
		b = []byte(v)
	}
	if !json.Valid(b) {
		var x any
		err := json.Unmarshal(b, &x)
		return nil, usagef("%s is not valid JSON (%v); pass JSON such as '{\"orderId\":\"o-1001\"}', or @file", flag, err)
	}
	return json.RawMessage(strings.TrimSpace(string(b))), nil
}

// --- runs ---

type runsOptions struct {
	status, agent, endUser, cursor string
	limit                          int
}

func (a *app) runsCommand() *cobra.Command {
	var o runsOptions
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runs(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.status, "status", "", "only runs in this status: "+store.Choices(store.RunStatuses...))
	f.StringVar(&o.agent, "agent", "", "only runs of this agent")
	f.StringVar(&o.endUser, "end-user", "", "only runs of this end user")
	f.IntVar(&o.limit, "limit", 20, fmt.Sprintf("how many runs to list (at most %d)", store.MaxLimit))
	f.StringVar(&o.cursor, "cursor", "", "continue a previous list (its next cursor)")
	return cmd
}

func (a *app) runs(ctx context.Context, o runsOptions) error {
	_, statusErr := store.ParseRunStatus(o.status)
	if err := filterFlags(statusErr, store.CheckLimit(o.limit)); err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(o.limit)}}
	for k, v := range map[string]string{"status": o.status, "agent": o.agent, "endUserId": o.endUser, "cursor": o.cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var list wire.RunList
	body, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/runs", query: q}, &list)
	if err != nil {
		return err
	}
	if a.jsonFlag {
		return printJSON(a.stdout(), body)
	}
	if len(list.Runs) == 0 {
		fmt.Fprintln(a.stdout(), "no runs")
		return nil
	}
	now := a.now()
	t := newTable(a.stdout(), "ID", "AGENT", "END USER", "STATUS", "CREATED", "DETAIL")
	for _, r := range list.Runs {
		t.row(r.ID, agentLabel(r), r.EndUserID, r.Status, ago(now, r.CreatedAt), runDetail(r))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if list.NextCursor != "" {
		fmt.Fprintf(a.stdout(), "more: stead runs --cursor %s\n", list.NextCursor)
	}
	return nil
}

// filterFlags turns the first list filter that package store refused (a
// *store.FilterError) into a usage error that names its flag: the flags of
// a list are named like the API's query parameters.
func filterFlags(errs ...error) error {
	for _, err := range errs {
		if fe := (*store.FilterError)(nil); errors.As(err, &fe) {
			return usagef("--%s %s", fe.Field, fe.Problem())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runDetail is the short "why" of a run's status.
func runDetail(r wire.Run) string {
	switch {
	case r.Approval != nil:
		return fmt.Sprintf("%s (%s)", r.Approval.ID, r.Approval.Tool)
	case r.Error != nil:
		return truncate(r.Error.Code+": "+r.Error.Message, 70)
	}
	return ""
}

// --- trace ---

func (a *app) traceCommand() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "trace RUN [--follow]",
		Short: "Show a run's trace: one line per event",
		Long: `Show a run's trace: time, event, step and a summary per line.
With --json: {"run": …, "events": [...]}.
--follow prints the trace so far, then live until the run ends (through its
approval waits); with --json, one JSON line per event, then one with the
run as it ended. Exit status 1 if the run failed or was cancelled.`,
		Args: exactArgs("RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if follow {
				return a.traceFollow(cmd.Context(), args[0])
			}
			return a.trace(cmd.Context(), args[0])
		},
	}
	cmd.Flags().BoolVar(&follow, "follow", false, "print the trace live until the run ends")
	return cmd
}

// traceFollow is trace --follow.
func (a *app) traceFollow(ctx context.Context, id string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	var run wire.Run
	if _, err := c.call(ctx, request{method: http.MethodGet, path: path("v1", "runs", id)}, &run); err != nil {
		return err
	}
	return a.follow(ctx, c, run)
}

// agentLabel names what a run runs: its agent, or, for an MCP client's
// one-call run, the agent's tool and the key it came through
// ("refunds.refundOrder via mcp:mck_…").
func agentLabel(r wire.Run) string {
	if r.Tool == "" {
		return r.Agent
	}
	label := r.Agent + "." + r.Tool
	if r.Via != "" {
		label += " via " + r.Via
	}
	return label
}

func (a *app) trace(ctx context.Context, id string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	var run wire.Run
	runBody, err := c.call(ctx, request{method: http.MethodGet, path: path("v1", "runs", id)}, &run)
	if err != nil {
		return err
	}
	events, err := allEvents(ctx, c, id)
	if err != nil {
		return err
	}
	if a.jsonFlag {
		evs, err := json.Marshal(events)
		if err != nil {
			return err
		}
		return printValue(a.stdout(), map[string]json.RawMessage{"run": runBody, "events": evs})
	}
	w := a.stdout()
	fmt.Fprintf(w, "run %s · %s · end user %s · deployment %d · %s\n", run.ID, agentLabel(run), run.EndUserID, run.Deployment, run.Status)
	tw := newTraceWriter(w, a.now, false)
	tw.table = newTable(w, "TIME", "EVENT", "STEP", "SUMMARY")
	for _, ev := range events {
		tw.event(ev)
	}
	if err := tw.table.flush(); err != nil {
		return err
	}
	switch {
	case run.Error != nil:
		fmt.Fprintf(w, "%s: %s: %s\n", run.Status, run.Error.Code, run.Error.Message)
		printThrown(w, events)
	case run.Approval != nil:
		fmt.Fprintln(w, waitingLine(run.Approval.ID, run.Approval.Tool))
	}
	return nil
}

// thrownData is where a failed handler threw, as its run.failed event
// carries it.
type thrownData struct {
	Stack  string `json:"stack"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// printThrown prints where the run's handler threw ("  thrown at
// handlers.ts:12:5") and the frames of its stack, when its run.failed event
// says.
func printThrown(w io.Writer, events []wire.Event) {
	var t thrownData
	for _, ev := range events {
		if ev.Type == "run.failed" {
			_ = json.Unmarshal(ev.Data, &t)
		}
	}
	if t.File != "" && t.Line > 0 {
		fmt.Fprintf(w, "  thrown at %s:%d:%d\n", t.File, t.Line, t.Column)
	}
	for l := range strings.Lines(t.Stack) {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "at ") || l == "…" {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

// allEvents reads every event of a run, page by page.
func allEvents(ctx context.Context, c *client, id string) ([]wire.Event, error) {
	events := []wire.Event{}
	var after int64
	for {
		q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {"500"}}
		var page wire.EventList
		if _, err := c.call(ctx, request{method: http.MethodGet, path: path("v1", "runs", id, "events"), query: q}, &page); err != nil {
			return nil, err
		}
		events = append(events, page.Events...)
		if len(page.Events) == 0 || page.NextAfter <= after {
			return events, nil
		}
		after = page.NextAfter
	}
}

// --- cancel ---

func (a *app) cancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN",
		Short: "Cancel a run (a pending approval is settled as cancelled)",
		Args:  exactArgs("RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var run wire.Run
			if done, err := a.callOrPrint(cmd.Context(), request{method: http.MethodPost, path: path("v1", "runs", args[0], "cancel")}, &run); done || err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "run %s cancelled (%s, end user %s)\n", run.ID, run.Agent, run.EndUserID)
			return nil
		},
	}
}
