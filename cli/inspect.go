package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"stead/api/wire"
	"stead/runtime/bundle"
	"stead/store"
)

// agents, deployments and broker: what is deployed, and the data handlers
// keep.

func (a *app) agentsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "agents",
		Short: "List the agents of the latest deployment, with their tools' posture",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list wire.AgentList
			if done, err := a.callOrPrint(cmd.Context(), request{method: http.MethodGet, path: "/v1/agents"}, &list); done || err != nil {
				return err
			}
			w := a.stdout()
			if list.Deployment == 0 {
				fmt.Fprintln(w, "nothing is deployed yet: stead deploy DIR (stead init DIR starts a project)")
				return nil
			}
			fmt.Fprintf(w, "deployment %d\n", list.Deployment)
			t := newTable(w, "AGENT", "TOOL", "EFFECT", "SOURCE", "APPROVAL", "STEPS")
			for _, ag := range list.Agents {
				steps := make([]string, 0, len(ag.Steps))
				for _, s := range ag.Steps {
					steps = append(steps, s.ID)
				}
				for i, tl := range ag.Tools {
					approval := "-"
					if tl.RequiresApproval {
						approval = "required, " + humanDuration(tl.ApprovalTimeout)
					}
					name, stepList := ag.Name, strings.Join(steps, " → ")
					if i > 0 {
						name, stepList = "", ""
					}
					t.row(name, tl.Name, tl.Effect, tl.Source, approval, stepList)
				}
			}
			return t.flush()
		},
	}
}

// humanDuration renders a Go duration ("15m0s") as people write it ("15m").
func humanDuration(d string) string {
	for _, suffix := range []string{"m0s", "h0m"} {
		if strings.HasSuffix(d, suffix) {
			d = strings.TrimSuffix(d, suffix[1:])
		}
	}
	return d
}

func (a *app) deploymentsCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "deployments [--limit N]",
		Short: "List the project's deployments, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := filterFlags(store.CheckLimit(limit)); err != nil {
				return err
			}
			var list wire.DeploymentList
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if done, err := a.callOrPrint(cmd.Context(), request{method: http.MethodGet, path: "/v1/deployments", query: q}, &list); done || err != nil {
				return err
			}
			now := a.now()
			t := newTable(a.stdout(), "VERSION", "DIGEST", "BUNDLE", "AGENTS", "BY", "CREATED")
			for _, d := range list.Deployments {
				t.row(strconv.Itoa(d.Version), "sha256:"+d.Digest[:min(12, len(d.Digest))], bundle.FormatSize(d.BundleSize),
					strings.Join(d.Agents, ", "), d.CreatedBy, ago(now, d.CreatedAt))
			}
			return t.flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, fmt.Sprintf("how many deployments to list (at most %d)", store.MaxLimit))
	return cmd
}

func (a *app) brokerCommand() *cobra.Command {
	var endUser string
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Read and change the data handlers keep (context.broker) for an end user",
		Long: `Read and change the broker: the data a project's handlers keep per end user
(context.broker in a handler). Values are JSON.

  stead broker list COLLECTION --end-user U
  stead broker get COLLECTION KEY --end-user U
  stead broker put COLLECTION KEY VALUE --end-user U    (VALUE: JSON, @file, @- for stdin)
  stead broker rm COLLECTION KEY --end-user U`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("broker needs a subcommand: list, get, put or rm")
		},
	}
	cmd.PersistentFlags().StringVar(&endUser, "end-user", "", "the end user whose data it is (required)")
	scoped := func(run func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			if endUser == "" {
				return usagef("--end-user is required: the end user whose data it is, e.g. --end-user demo-user")
			}
			return run(cmd.Context(), args)
		}
	}
	q := func() url.Values { return url.Values{"endUserId": {endUser}} }
	list := &cobra.Command{
		Use:   "list COLLECTION --end-user U",
		Short: "List a collection's records in key order",
		Args:  exactArgs("COLLECTION"),
		RunE: scoped(func(ctx context.Context, args []string) error {
			var page wire.BrokerList
			if done, err := a.callOrPrint(ctx, request{method: http.MethodGet, path: path("v1", "broker", args[0]), query: q()}, &page); done || err != nil {
				return err
			}
			now := a.now()
			t := newTable(a.stdout(), "KEY", "VALUE", "UPDATED")
			for _, r := range page.Records {
				t.row(r.Key, truncate(compact(r.Value), 80), ago(now, r.UpdatedAt))
			}
			return t.flush()
		}),
	}
	get := &cobra.Command{
		Use:   "get COLLECTION KEY --end-user U",
		Short: "Print one record's value",
		Args:  exactArgs("COLLECTION", "KEY"),
		RunE: scoped(func(ctx context.Context, args []string) error {
			var rec wire.BrokerRecord
			if done, err := a.callOrPrint(ctx, request{method: http.MethodGet, path: path("v1", "broker", args[0], args[1]), query: q()}, &rec); done || err != nil {
				return err
			}
			return printJSON(a.stdout(), rec.Value)
		}),
	}
	put := &cobra.Command{
		Use:   "put COLLECTION KEY VALUE --end-user U",
		Short: "Store a JSON value (VALUE, @file or @- for standard input)",
		Args:  exactArgs("COLLECTION", "KEY", "VALUE"),
		RunE: scoped(func(ctx context.Context, args []string) error {
			value, err := a.readJSONArg("VALUE", args[2])
			if err != nil {
				return err
			}
			if !json.Valid(value) {
				return usagef("VALUE is not JSON: quote a string as JSON ('\"text\"') or give @file")
			}
			var rec wire.BrokerRecord
			req := request{method: http.MethodPut, path: path("v1", "broker", args[0], args[1]), query: q(), body: map[string]json.RawMessage{"value": value}}
			if done, err := a.callOrPrint(ctx, req, &rec); done || err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "stored %s/%s for end user %s\n", rec.Collection, rec.Key, rec.EndUserID)
			return nil
		}),
	}
	rm := &cobra.Command{
		Use:   "rm COLLECTION KEY --end-user U",
		Short: "Remove a record",
		Args:  exactArgs("COLLECTION", "KEY"),
		RunE: scoped(func(ctx context.Context, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if _, err := c.call(ctx, request{method: http.MethodDelete, path: path("v1", "broker", args[0], args[1]), query: q()}, nil); err != nil {
				return err
			}
			if a.jsonFlag {
				return printValue(a.stdout(), map[string]any{"collection": args[0], "key": args[1], "endUserId": endUser, "deleted": true})
			}
			fmt.Fprintf(a.stdout(), "removed %s/%s for end user %s\n", args[0], args[1], endUser)
			return nil
		}),
	}
	cmd.AddCommand(list, get, put, rm)
	return cmd
}
