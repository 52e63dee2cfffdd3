package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"stead/api/wire"
	"stead/store"
)

type approvalsOptions struct {
	status, order, cursor string
	limit                 int
}

func (a *app) approvalsCommand() *cobra.Command {
	var o approvalsOptions
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List approvals (pending ones by default)",
		Long: `List approvals: id, agent, tool, run, when it was requested, how long it
stays open, and why it was asked. Pending ones by default, newest first.
Review an approval's exact input with stead approval ID before deciding.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.approvals(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.status, "status", string(store.DefaultApprovalStatus), store.Choices(store.ApprovalStatusChoices()...))
	f.StringVar(&o.order, "order", string(store.NewestFirst), "newest (requested last first) or expiring (soonest deadline first)")
	f.IntVar(&o.limit, "limit", store.DefaultLimit, fmt.Sprintf("how many approvals to list (at most %d)", store.MaxLimit))
	f.StringVar(&o.cursor, "cursor", "", "continue a previous list (its next cursor)")
	return cmd
}

func (a *app) approvals(ctx context.Context, o approvalsOptions) error {
	_, statusErr := store.ParseApprovalStatus(o.status)
	_, orderErr := store.ParseApprovalOrder(o.order)
	if err := filterFlags(statusErr, orderErr, store.CheckLimit(o.limit)); err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	q := url.Values{"status": {o.status}, "order": {o.order}, "limit": {strconv.Itoa(o.limit)}}
	if o.cursor != "" {
		q.Set("cursor", o.cursor)
	}
	var list wire.ApprovalList
	body, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/approvals", query: q}, &list)
	if err != nil {
		return err
	}
	if a.jsonFlag {
		return printJSON(a.stdout(), body)
	}
	if len(list.Approvals) == 0 {
		if o.status == "all" {
			fmt.Fprintln(a.stdout(), "no approvals")
		} else {
			fmt.Fprintf(a.stdout(), "no %s approvals\n", o.status)
		}
		return nil
	}
	now := a.now()
	header := []string{"ID", "AGENT", "TOOL", "RUN", "REQUESTED", "EXPIRES IN", "REASON"}
	withStatus := o.status != "pending"
	if withStatus {
		header = append(header[:4], append([]string{"STATUS"}, header[4:]...)...)
	}
	withVotes := slices.ContainsFunc(list.Approvals, func(ap wire.Approval) bool { return len(ap.Approvers) > 0 })
	if withVotes {
		header = append(header[:len(header)-1], "VOTES", "REASON")
	}
	t := newTable(a.stdout(), header...)
	for _, ap := range list.Approvals {
		expires := until(now, ap.ExpiresAt)
		if ap.Status != "pending" {
			expires = "-"
		}
		row := []string{ap.ID, ap.Agent, ap.Tool, ap.RunID, ago(now, ap.RequestedAt), expires, truncate(ap.Reason, 60)}
		if withStatus {
			row = append(row[:4], append([]string{ap.Status}, row[4:]...)...)
		}
		if withVotes {
			row = append(row[:len(row)-1], votesShort(ap), row[len(row)-1])
		}
		t.row(row...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if list.NextCursor != "" {
		fmt.Fprintf(a.stdout(), "more: stead approvals --status %s --cursor %s\n", o.status, list.NextCursor)
	}
	if o.status == "pending" {
		fmt.Fprintln(a.stdout(), "review one: stead approval ID · decide: stead approve ID or stead deny ID")
	}
	return nil
}

func (a *app) approvalCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "approval ID",
		Short: "Show an approval: the exact input, reason, run and expiry",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ap wire.Approval
			if done, err := a.callOrPrint(cmd.Context(), request{method: http.MethodGet, path: path("v1", "approvals", args[0])}, &ap); done || err != nil {
				return err
			}
			a.printApproval(ap)
			return nil
		},
	}
}

func (a *app) printApproval(ap wire.Approval) {
	w := a.stdout()
	now := a.now()
	fmt.Fprintf(w, "approval %s  %s\n", ap.ID, ap.Status)
	t := newTable(w, "  tool", fmt.Sprintf("%s (agent %s, step %s)", ap.Tool, ap.Agent, ap.StepID))
	t.row("  run", fmt.Sprintf("%s (end user %s, deployment %d)", ap.RunID, ap.EndUserID, ap.Deployment))
	t.row("  reason", orDash(ap.Reason))
	t.row("  requested", fmt.Sprintf("%s (%s)", stamp(ap.RequestedAt), ago(now, ap.RequestedAt)))
	switch {
	case ap.Status != "pending":
		t.row("  expires", stamp(ap.ExpiresAt))
	case now.Before(ap.ExpiresAt):
		t.row("  expires", fmt.Sprintf("%s (in %s)", stamp(ap.ExpiresAt), until(now, ap.ExpiresAt)))
	default:
		t.row("  expires", fmt.Sprintf("%s (expired %s)", stamp(ap.ExpiresAt), ago(now, ap.ExpiresAt)))
	}
	if ap.DecidedBy != "" || !ap.DecidedAt.IsZero() {
		t.row("  decided", fmt.Sprintf("%s by %s (%s)", stamp(ap.DecidedAt), orDash(named(ap.DecidedBy, ap.DecidedByName)), ago(now, ap.DecidedAt)))
	}
	if ap.Note != "" {
		t.row("  note", ap.Note)
	}
	if ap.Progress != "" {
		t.row("  approvers", ap.Progress)
		for _, v := range ap.Votes {
			t.row("  vote", fmt.Sprintf("%s by %s (%s)", stamp(v.At), named(v.By, v.Name), ago(now, v.At)))
		}
	}
	_ = t.flush()
	fmt.Fprintf(w, "  input:\n%s\n", pretty(ap.Input, "    "))
	if len(ap.OriginalInput) > 0 {
		fmt.Fprintf(w, "  originally asked:\n%s\n", pretty(ap.OriginalInput, "    "))
	}
	if ap.Status == "pending" && now.Before(ap.ExpiresAt) {
		fmt.Fprintf(w, "decide: stead approve %s or stead deny %s\n", ap.ID, ap.ID)
	}
}

type decideOptions struct {
	note  string
	input string
	// remember, exact and when: approve's --remember DURATION,
	// --exact-input and --when SCHEMA.
	remember string
	exact    bool
	when     string
}

func (a *app) approveCommand() *cobra.Command {
	var o decideOptions
	cmd := &cobra.Command{
		Use:   "approve ID... [--note TEXT] [--input JSON|@file] [--remember DURATION [--exact-input | --when JSON|@file]]",
		Short: "Approve pending approvals; their runs resume",
		Long: `Approve one or more pending approvals. Each run resumes with exactly the
approved input. --input (only with one ID) replaces the call's input; it is
checked against the tool's input schema first and recorded in the trace.
--remember 24h also allows the same tool for the same end user again, without
asking, for that long (where the tool's approvals.remember allows it): any
input, only this one (--exact-input), or inputs matching a JSON Schema
(--when). A remember that cannot be made decides nothing. See and revoke
remembered decisions with stead rules.
Prints one line per approval; exit status 1 if any was refused.`,
		Args: minArgs(1, "approval ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.decide(cmd.Context(), args, true, o)
		},
	}
	cmd.Flags().StringVar(&o.note, "note", "", "a note recorded with the decision")
	cmd.Flags().StringVar(&o.input, "input", "", "approve with this input instead: JSON, or @file (one ID only)")
	cmd.Flags().StringVar(&o.remember, "remember", "", "also allow matching calls again for this long, like 1h or 24h")
	cmd.Flags().BoolVar(&o.exact, "exact-input", false, "with --remember: only this exact input")
	cmd.Flags().StringVar(&o.when, "when", "", "with --remember: only inputs matching this JSON Schema (JSON, or @file)")
	return cmd
}

func (a *app) denyCommand() *cobra.Command {
	var o decideOptions
	cmd := &cobra.Command{
		Use:   "deny ID [--note TEXT]",
		Short: "Deny a pending approval; its run fails with approval-denied",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 && slices.ContainsFunc(args[1:], func(a string) bool { return strings.HasPrefix(a, "apr_") }) {
				return usagef("stead deny takes one ID (got %d arguments): deny each with its own stead deny ID --note TEXT", len(args))
			}
			if len(args) > 1 { // stead deny apr_… "why": the reason goes in --note
				return usagef("stead deny takes one ID (got %d arguments); give the reason with --note, e.g. stead deny %s --note %q",
					len(args), args[0], strings.Join(args[1:], " "))
			}
			return exactArgs("ID")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.decide(cmd.Context(), args, false, o)
		},
	}
	cmd.Flags().StringVar(&o.note, "note", "", "why; recorded with the decision and in the run's error")
	return cmd
}

func (a *app) decide(ctx context.Context, ids []string, approve bool, o decideOptions) error {
	body := map[string]any{}
	if o.note != "" {
		body["note"] = o.note
	}
	if o.input != "" {
		if len(ids) != 1 {
			return usagef("--input edits one approval's input; pass exactly one ID with it (got %d)", len(ids))
		}
		in, err := a.readJSONArg("--input", o.input)
		if err != nil {
			return err
		}
		body["input"] = in
	}
	if o.remember == "" && (o.exact || o.when != "") {
		return usagef("--exact-input and --when narrow --remember; add --remember DURATION")
	}
	if o.remember != "" {
		rem := map[string]any{"for": o.remember}
		if o.exact {
			rem["exact"] = true
		}
		if o.when != "" {
			schema, err := a.readJSONArg("--when", o.when)
			if err != nil {
				return err
			}
			rem["when"] = schema
		}
		body["remember"] = rem
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	verb := "deny"
	if approve {
		verb = "approve"
	}
	ids = unique(ids) // stead approve A A decides A once
	for _, id := range ids {
		if strings.HasPrefix(id, "run_") {
			return usagef("%s is a run id; approval ids start with apr_ (list them with stead approvals, or see the run's with stead trace %s)", id, id)
		}
	}
	var jsonOut []json.RawMessage
	failed := 0
	for _, id := range ids {
		var out struct {
			wire.Approval
			RememberedRule *wire.Rule `json:"rememberedRule"`
		}
		resp, err := c.call(ctx, request{method: http.MethodPost, path: path("v1", "approvals", id, verb), body: body}, &out)
		ap := out.Approval
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || (len(ids) == 1 && !a.jsonFlag) {
				return err
			}
			failed++
			if a.jsonFlag {
				jsonOut = append(jsonOut, ae.Body)
			}
			if msg := err.Error(); strings.Contains(msg, id) {
				fmt.Fprintf(a.stderr(), "error: %s\n", msg)
			} else {
				fmt.Fprintf(a.stderr(), "error: %s: %s\n", id, msg)
			}
			continue
		}
		if a.jsonFlag {
			jsonOut = append(jsonOut, resp)
			continue
		}
		switch ap.Status {
		case "pending":
			fmt.Fprintf(a.stdout(), "voted to approve %s (%s, run %s): %s; the run waits for the rest\n", ap.ID, ap.Tool, ap.RunID, ap.Progress)
		case "approved":
			edited := ""
			if len(ap.OriginalInput) > 0 {
				edited = " with the edited input"
			}
			if ap.Progress != "" {
				edited += ": " + ap.Progress
			}
			fmt.Fprintf(a.stdout(), "approved %s (%s, run %s)%s; the run resumes: stead trace %s\n", ap.ID, ap.Tool, ap.RunID, edited, ap.RunID)
			if r := out.RememberedRule; r != nil {
				fmt.Fprintf(a.stdout(), "remembered as %s: %s for end user %s is allowed without asking (inputs: %s) until %s (in %s); revoke: stead rules revoke %s\n",
					r.ID, r.Tool, r.EndUserID, ruleScope(*r, false), stamp(r.ExpiresAt), until(a.now(), r.ExpiresAt), r.ID)
			}
		default:
			fmt.Fprintf(a.stdout(), "denied %s (%s, run %s); the run fails with approval-denied\n", ap.ID, ap.Tool, ap.RunID)
		}
	}
	if a.jsonFlag {
		// One shape however many ids: an array, in their order, of each
		// approval as decided or the API's error document for it.
		if err := printValue(a.stdout(), jsonOut); err != nil {
			return err
		}
	}
	if failed > 0 {
		if failed < len(ids) {
			fmt.Fprintf(a.stderr(), "%d of %d approvals could not be %s\n", failed, len(ids), pastTense(verb))
		}
		return errReported
	}
	return nil
}

// unique is ids without repeats, in the order they came.
func unique(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
		dup := seen[id]
		seen[id] = true
		return dup
	})
}

// votesShort is an approval's quorum in a table cell: "1/2 finance",
// "-" for one without approvers.
func votesShort(ap wire.Approval) string {
	if len(ap.Approvers) == 0 {
		return "-"
	}
	parts := make([]string, len(ap.Approvers))
	for i, t := range ap.Approvers {
		parts[i] = fmt.Sprintf("%d/%d %s", len(t.Counted), t.Min, t.Group)
		if t.Short {
			parts[i] += " (cannot be met)"
		}
	}
	return strings.Join(parts, ", ")
}

func pastTense(verb string) string {
	if verb == "approve" {
		return "approved"
	}
	return "denied"
}
