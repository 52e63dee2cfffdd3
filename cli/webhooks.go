package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"stead/api"
	"stead/api/wire"
	"stead/notify"
	"stead/store"
)

func (a *app) webhooksCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Webhook endpoints: where the project's events are POSTed, signed (owner key required)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("webhooks needs a subcommand: add, list, show, rm, rotate, ping, deliveries, retry or enable")
		},
	}
	var events, agents []string
	var includeInput bool
	add := &cobra.Command{
		Use:   "add URL [--events a,b] [--agent A]... [--include-input]",
		Short: "Add an endpoint; its signing secret is printed once",
		Long: `Add a webhook endpoint: the project's events are POSTed to URL, signed per the
Standard Webhooks spec with a secret printed this once. Without --events it
gets every event type (` + strings.Join(notify.Types, ", ") + `);
without --agent, every agent's. --include-input adds the tool's input to
approval events (inputs can hold personal data).`,
		Args: exactArgs("URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := notify.CheckTypes(events); err != nil {
				return usagef("--events: %s", err.Error())
			}
			body := map[string]any{"url": args[0]}
			if len(events) > 0 {
				body["events"] = events
			}
			if len(agents) > 0 {
				body["agents"] = agents
			}
			if includeInput {
				body["includeInput"] = true
			}
			return a.webhookCall(cmd.Context(), request{method: http.MethodPost, path: "/v1/webhooks", body: body}, "added")
		},
	}
	add.Flags().StringSliceVar(&events, "events", nil, "only these event types, comma-separated")
	add.Flags().StringArrayVar(&agents, "agent", nil, "only this agent's events (repeat for several)")
	add.Flags().BoolVar(&includeInput, "include-input", false, "approval events carry the tool's input")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the project's endpoints and their state",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.webhooksList(cmd.Context())
		},
	}
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show an endpoint: its filters, state, and failing or disabled since when",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.webhookCall(cmd.Context(), request{method: http.MethodGet, path: path("v1", "webhooks", args[0])}, "")
		},
	}
	rm := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove an endpoint and its delivery log",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.webhookCall(cmd.Context(), request{method: http.MethodDelete, path: path("v1", "webhooks", args[0])}, "removed")
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate ID",
		Short: "Make a new signing secret, printed once; the old one keeps signing beside it for 24h",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.webhookCall(cmd.Context(), request{method: http.MethodPost, path: path("v1", "webhooks", args[0], "rotate")}, "rotated the secret of")
		},
	}
	ping := &cobra.Command{
		Use:   "ping ID",
		Short: "Send the endpoint a webhook.ping now and print how it answered",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.webhookPing(cmd.Context(), args[0])
		},
	}
	var limit int
	var cursor string
	deliveries := &cobra.Command{
		Use:   "deliveries ID [--limit N] [--cursor C]",
		Short: "The endpoint's delivery log, newest first",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.webhookDeliveries(cmd.Context(), args[0], limit, cursor)
		},
	}
	deliveries.Flags().IntVar(&limit, "limit", store.DefaultLimit, fmt.Sprintf("how many to list (at most %d)", store.MaxLimit))
	deliveries.Flags().StringVar(&cursor, "cursor", "", "continue a previous list (its next cursor)")
	var delivery, since, until string
	retry := &cobra.Command{
		Use:   "retry ID [--delivery D | --since T [--until T]]",
		Short: "Send deliveries again now, under their webhook-ids (receivers dedupe by them)",
		Long: `Send one delivery (--delivery) or those made in a time range (--since, and
--until, which defaults to now) again now, at most 1000 at once. Each keeps its
webhook-id, so a receiver that already took one drops it as a duplicate.
T is an RFC 3339 time (2026-11-29T12:00:00Z) or a duration ago (2h).`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.webhookRetry(cmd.Context(), args[0], delivery, since, until)
		},
	}
	retry.Flags().StringVar(&delivery, "delivery", "", "the delivery (its webhook-id, msg_…)")
	retry.Flags().StringVar(&since, "since", "", "the deliveries made from this time on")
	retry.Flags().StringVar(&until, "until", "", "… up to this time (default now)")
	enable := &cobra.Command{
		Use:   "enable ID",
		Short: "Enable an endpoint again after it was disabled (a 410, or 5 days of failures)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.webhookCall(cmd.Context(), request{method: http.MethodPatch, path: path("v1", "webhooks", args[0]), body: map[string]any{"enabled": true}}, "enabled")
		},
	}
	cmd.AddCommand(add, list, show, rm, rotate, ping, deliveries, retry, enable)
	return cmd
}

// webhookCall makes a request that answers with an endpoint and prints it;
// done, if set, is the verb of the first line ("added"). A secret in the
// answer is printed once, with what to do with it.
func (a *app) webhookCall(ctx context.Context, req request, done string) error {
	var h wire.Webhook
	if done, err := a.callOrPrint(ctx, req, &h); done || err != nil {
		return err
	}
	w := a.stdout()
	now := a.now()
	if done != "" {
		fmt.Fprintf(w, "%s webhook %s  %s\n", done, h.ID, h.URL)
	} else {
		fmt.Fprintf(w, "webhook %s  %s\n", h.ID, h.URL)
	}
	t := newTable(w, "  events", orAll(h.Events, "every event type"))
	t.row("  agents", orAll(h.Agents, "every agent"))
	input := "not sent"
	if h.IncludeInput {
		input = "sent with approval events"
	}
	t.row("  tool input", input)
	t.row("  state", webhookState(now, h, true))
	if !h.PreviousSecretUntil.IsZero() && h.Secret == "" {
		t.row("  old secret", "signs beside the current one until "+stamp(h.PreviousSecretUntil))
	}
	t.row("  added", fmt.Sprintf("%s (%s)", stamp(h.CreatedAt), ago(now, h.CreatedAt)))
	if err := t.flush(); err != nil {
		return err
	}
	if h.Secret == "" {
		if done == "removed" {
			fmt.Fprintln(w, "Its delivery log is deleted with it.")
		}
		return nil
	}
	fmt.Fprintf(w, "\n    %s\n\n", h.Secret)
	fmt.Fprintln(w, "This is the only time the secret is shown: give it to the receiver now, through a secret manager.")
	fmt.Fprintln(w, "The receiver checks each delivery's webhook-signature with it (Standard Webhooks).")
	if !h.PreviousSecretUntil.IsZero() {
		fmt.Fprintf(w, "The old secret keeps signing beside it until %s (%s): deliveries carry both signatures until then.\n",
			stamp(h.PreviousSecretUntil), until(now, h.PreviousSecretUntil))
	} else {
		fmt.Fprintf(w, "Check it with stead webhooks ping %s\n", h.ID)
	}
	return nil
}

// orAll lists items, or says all when there are none.
func orAll(items []string, all string) string {
	if len(items) == 0 {
		return all
	}
	return strings.Join(items, ", ")
}

// webhookState words an endpoint's state: enabled, failing since when, or
// disabled since when (and, long, why).
func webhookState(now time.Time, h wire.Webhook, long bool) string {
	switch {
	case h.State == api.WebhookDisabled && long:
		return fmt.Sprintf("disabled %s (%s): %s; enable it again with stead webhooks enable %s", stamp(h.DisabledAt), ago(now, h.DisabledAt), h.DisabledReason, h.ID)
	case h.State == api.WebhookDisabled:
		return "disabled " + ago(now, h.DisabledAt)
	case !h.FailingSince.IsZero() && long:
		return fmt.Sprintf("enabled, every delivery failing since %s (%s); disabled after %s of that", stamp(h.FailingSince), ago(now, h.FailingSince), failingLimitText)
	case !h.FailingSince.IsZero():
		return "failing since " + ago(now, h.FailingSince)
	}
	return h.State
}

// failingLimitText words notify.FailingLimit.
var failingLimitText = strconv.Itoa(int(notify.FailingLimit/(24*time.Hour))) + " days"

func (a *app) webhooksList(ctx context.Context) error {
	var list wire.WebhookList
	if done, err := a.callOrPrint(ctx, request{method: http.MethodGet, path: "/v1/webhooks"}, &list); done || err != nil {
		return err
	}
	w := a.stdout()
	if len(list.Webhooks) == 0 {
		fmt.Fprintln(w, "no webhooks (add one with stead webhooks add URL)")
		return nil
	}
	now := a.now()
	t := newTable(w, "ID", "URL", "EVENTS", "AGENTS", "STATE", "ADDED")
	for _, h := range list.Webhooks {
		t.row(h.ID, h.URL, orAll(h.Events, "all"), orAll(h.Agents, "all"), webhookState(now, h, false), ago(now, h.CreatedAt))
	}
	return t.flush()
}

func (a *app) webhookPing(ctx context.Context, id string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	var d wire.WebhookDelivery
	body, err := c.call(ctx, request{method: http.MethodPost, path: path("v1", "webhooks", id, "ping")}, &d)
	if err != nil {
		return err
	}
	ok := d.Status == string(store.DeliveryDelivered)
	if a.jsonFlag {
		if err := printJSON(a.stdout(), body); err != nil || ok {
			return err
		}
		return errReported
	}
	if len(d.Attempts) == 0 {
		return fmt.Errorf("ping of webhook %s made no attempt (delivery %s is %s)", id, d.ID, d.Status)
	}
	at := d.Attempts[len(d.Attempts)-1]
	if ok {
		fmt.Fprintf(a.stdout(), "ping %s: %d %s in %dms (webhook-id %s)\n", id, at.Status, http.StatusText(at.Status), at.LatencyMs, d.ID)
		return nil
	}
	return fmt.Errorf("ping of webhook %s failed: %s (webhook-id %s); see stead webhooks deliveries %s", id, attemptText(at, 200), d.ID, id)
}

// attemptText words an attempt: its status and latency and the start of
// the response, or why there was no response; at most n characters of
// the response or error.
func attemptText(at wire.WebhookAttempt, n int) string {
	if at.Status == 0 {
		return "no response: " + truncate(orDash(at.Error), n)
	}
	s := fmt.Sprintf("%d %s in %dms", at.Status, http.StatusText(at.Status), at.LatencyMs)
	if r := strings.TrimSpace(at.Response); r != "" {
		s += ": " + truncate(r, n)
	}
	return s
}

func (a *app) webhookDeliveries(ctx context.Context, id string, limit int, cursor string) error {
	if err := filterFlags(store.CheckLimit(limit)); err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var list wire.WebhookDeliveryList
	body, err := c.call(ctx, request{method: http.MethodGet, path: path("v1", "webhooks", id, "deliveries"), query: q}, &list)
	if err != nil {
		return err
	}
	if a.jsonFlag {
		return printJSON(a.stdout(), body)
	}
	w := a.stdout()
	if len(list.Deliveries) == 0 {
		fmt.Fprintf(w, "no deliveries to webhook %s yet (send one with stead webhooks ping %s)\n", id, id)
		return nil
	}
	now := a.now()
	t := newTable(w, "ID", "TIME", "TYPE", "STATUS", "TRIES", "LAST ATTEMPT")
	for _, d := range list.Deliveries {
		status := d.Status
		if d.Status == string(store.DeliveryPending) && !d.NextAt.IsZero() {
			status += ", next " + nextIn(now, d.NextAt)
		}
		last := "-"
		if n := len(d.Attempts); n > 0 {
			last = attemptText(d.Attempts[n-1], 40)
		}
		t.row(d.ID, stamp(d.CreatedAt), d.Type, status, strconv.Itoa(d.Tries), last)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if list.NextCursor != "" {
		fmt.Fprintf(w, "more: stead webhooks deliveries %s --cursor %s\n", id, list.NextCursor)
	}
	return nil
}

// nextIn words when a pending delivery is tried next: "now" or "in 5m".
func nextIn(now, t time.Time) string {
	if !now.Before(t) {
		return "now"
	}
	return "in " + until(now, t)
}

func (a *app) webhookRetry(ctx context.Context, id, delivery, since, until string) error {
	body := map[string]any{}
	now := a.now()
	switch {
	case delivery != "" && (since != "" || until != ""):
		return usagef("retry takes --delivery, or --since (and --until), not both")
	case delivery != "":
		body["deliveryId"] = delivery
	case since == "" && until != "":
		return usagef("--until needs --since: the range is from --since to --until")
	case since == "":
		return usagef("retry needs --delivery D, or --since T (and --until T) for a time range")
	default:
		t, err := pointInTime("since", since, now)
		if err != nil {
			return err
		}
		body["since"] = t
		if until != "" {
			if t, err = pointInTime("until", until, now); err != nil {
				return err
			}
			body["until"] = t
		}
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	var out wire.WebhookRetry
	raw, err := c.call(ctx, request{method: http.MethodPost, path: path("v1", "webhooks", id, "retry"), body: body}, &out)
	if err != nil {
		return err
	}
	if a.jsonFlag {
		return printJSON(a.stdout(), raw)
	}
	w := a.stdout()
	if out.Retried == 0 {
		fmt.Fprintf(w, "nothing to retry: webhook %s made no deliveries in that range (see stead webhooks deliveries %s)\n", id, id)
		return nil
	}
	fmt.Fprintf(w, "retrying %d %s of webhook %s now, each under its webhook-id (a receiver that has one drops it as a duplicate)\n",
		out.Retried, plural(out.Retried, "delivery", "deliveries"), id)
	fmt.Fprintf(w, "Follow them with stead webhooks deliveries %s\n", id)
	return nil
}

// pointInTime reads a --since or --until: an RFC 3339 time, or a
// duration ago ("2h"); it returns RFC 3339.
func pointInTime(flag, v string, now time.Time) (string, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC().Format(time.RFC3339Nano), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d).UTC().Format(time.RFC3339Nano), nil
	}
	return "", usagef("--%s %q is neither an RFC 3339 time (2026-11-29T12:00:00Z) nor a duration ago (2h)", flag, v)
}
