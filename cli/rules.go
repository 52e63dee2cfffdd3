package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"stead/api"
	"stead/api/wire"
	"stead/store"
)

func (a *app) rulesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Remembered decisions: calls a person allowed again for a while, from an approval",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("rules needs a subcommand: list, show or revoke")
		},
	}
	var o rulesOptions
	list := &cobra.Command{
		Use:   "list [--agent A] [--tool T] [--end-user U] [--all]",
		Short: "List remembered decisions in force (--all: expired and revoked ones too)",
		Long: `List remembered decisions, newest first: what each lets through (agent, tool,
end user, which inputs), who made it from which approval, and when it expires.
A decision a deployment ended (the tool's posture or the agent's policy
changed) is listed until it expires, as ended.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.rulesList(cmd.Context(), o)
		},
	}
	f := list.Flags()
	f.StringVar(&o.agent, "agent", "", "only this agent's")
	f.StringVar(&o.tool, "tool", "", "only this tool's")
	f.StringVar(&o.endUser, "end-user", "", "only this end user's")
	f.BoolVar(&o.all, "all", false, "include expired and revoked ones")
	f.IntVar(&o.limit, "limit", store.DefaultLimit, fmt.Sprintf("how many to list (at most %d)", store.MaxLimit))
	f.StringVar(&o.cursor, "cursor", "", "continue a previous list (its next cursor)")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a remembered decision: its scope, who made it, from which approval, until when",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.ruleCall(cmd.Context(), request{method: http.MethodGet, path: path("v1", "rules", args[0])}, false)
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a remembered decision: the calls it let through ask again, from now on",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.ruleCall(cmd.Context(), request{method: http.MethodDelete, path: path("v1", "rules", args[0])}, true)
		},
	}
	cmd.AddCommand(list, show, revoke)
	return cmd
}

type rulesOptions struct {
	agent, tool, endUser string
	all                  bool
	limit                int
	cursor               string
}

func (a *app) rulesList(ctx context.Context, o rulesOptions) error {
	if err := filterFlags(store.CheckLimit(o.limit)); err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(o.limit)}}
	for k, v := range map[string]string{"agent": o.agent, "tool": o.tool, "endUserId": o.endUser, "cursor": o.cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.all {
		q.Set("status", store.RulesAll)
	}
	var list wire.RuleList
	body, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/rules", query: q}, &list)
	if err != nil {
		return err
	}
	if a.jsonFlag {
		return printJSON(a.stdout(), body)
	}
	w := a.stdout()
	if len(list.Rules) == 0 {
		if o.all {
			fmt.Fprintln(w, "no remembered decisions")
		} else {
			fmt.Fprintln(w, "no remembered decisions in force (--all lists expired and revoked ones)")
		}
		return nil
	}
	now := a.now()
	t := newTable(w, "ID", "AGENT", "TOOL", "END USER", "INPUTS", "MADE BY", "FROM APPROVAL", "EXPIRES")
	for _, r := range list.Rules {
		t.row(r.ID, r.Agent, r.Tool, r.EndUserID, ruleScope(r, false), ruleMaker(r), r.ApprovalID, ruleExpiry(now, r))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if list.NextCursor != "" {
		fmt.Fprintf(w, "more: stead rules list --cursor %s\n", list.NextCursor)
	}
	return nil
}

// ruleCall makes a request that answers with a rule and prints it;
// revoked says the request revoked it.
func (a *app) ruleCall(ctx context.Context, req request, revoked bool) error {
	var r wire.Rule
	if done, err := a.callOrPrint(ctx, req, &r); done || err != nil {
		return err
	}
	w := a.stdout()
	now := a.now()
	if revoked {
		fmt.Fprintf(w, "revoked %s: calls of %s for %s ask for approval again\n", r.ID, r.Tool, r.EndUserID)
	} else {
		fmt.Fprintf(w, "rule %s  %s/%s for %s\n", r.ID, r.Agent, r.Tool, r.EndUserID)
	}
	state := ruleExpiry(now, r)
	if r.State == "active" {
		state = "active, expires " + state
	}
	t := newTable(w, "  state", state)
	t.row("  inputs", ruleScope(r, true))
	t.row("  made by", fmt.Sprintf("%s, %s (%s)", ruleMaker(r), stamp(r.CreatedAt), ago(now, r.CreatedAt)))
	t.row("  from", fmt.Sprintf("approval %s of run %s (deployment %d)", r.ApprovalID, r.RunID, r.Deployment))
	t.row("  expires", stamp(r.ExpiresAt))
	if !r.RevokedAt.IsZero() {
		by := r.RevokedBy
		if r.RevokedByName != "" {
			by = r.RevokedByName + " (" + r.RevokedBy + ")"
		}
		t.row("  revoked", fmt.Sprintf("%s (%s) by %s", stamp(r.RevokedAt), ago(now, r.RevokedAt), by))
	}
	if r.Ended != "" {
		t.row("  ended", r.Ended)
	}
	return t.flush()
}

// ruleMaker names who made a rule: the member, else the key.
func ruleMaker(r wire.Rule) string {
	if r.CreatedByName != "" {
		return r.CreatedByName + " (" + r.CreatedBy + ")"
	}
	return r.CreatedBy
}

// ruleScope says which inputs a rule lets through; long adds the digest or
// the schema.
func ruleScope(r wire.Rule, long bool) string {
	switch r.Scope {
	case api.RuleScopeExact:
		if long {
			return "the approved input only (digest " + r.InputDigest + ")"
		}
		return "exact"
	case api.RuleScopeSchema:
		if long {
			return "matching " + compact(r.When)
		}
		return "schema"
	}
	return "any"
}

// ruleExpiry is where a rule stands: "in 23h", "expired 2h ago", "revoked
// 5m ago", "ended by deployment 4".
func ruleExpiry(now time.Time, r wire.Rule) string {
	switch r.State {
	case "revoked":
		return "revoked " + ago(now, r.RevokedAt)
	case "expired":
		return "expired " + ago(now, r.ExpiresAt)
	case "ended":
		if r.EndedBy > 0 {
			return fmt.Sprintf("ended by deployment %d", r.EndedBy)
		}
		return "ended: posture changed"
	}
	return "in " + until(now, r.ExpiresAt)
}
