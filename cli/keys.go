package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"stead/api/wire"
	"stead/approvals"
)

func (a *app) keysCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage the project's API keys (owner key required)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("keys needs a subcommand: create, list or revoke")
		},
	}
	var role, name string
	create := &cobra.Command{
		Use:   "create [--role owner|developer|approver|viewer] [--name NAME]",
		Short: "Create an API key; its secret is shown only once",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRole(role); err != nil {
				return err
			}
			return a.keysCreate(cmd.Context(), role, name)
		},
	}
	create.Flags().StringVar(&role, "role", "developer", "owner (everything, including keys), developer (deploy, run, decide), approver (read and decide approvals) or viewer (read only)")
	create.Flags().StringVar(&name, "name", "", "a name to recognise the key by")
	list := &cobra.Command{
		Use:   "list",
		Short: "List API keys (never their secrets)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.keysList(cmd.Context())
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API key; it stops working at once",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var k wire.APIKey
			if done, err := a.callOrPrint(cmd.Context(), request{method: http.MethodDelete, path: path("v1", "keys", args[0])}, &k); done || err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "revoked key %s (%s, %s…)\n", k.ID, k.Role, k.Prefix)
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func (a *app) keysCreate(ctx context.Context, role, name string) error {
	var k wire.APIKey
	if done, err := a.callOrPrint(ctx, request{method: http.MethodPost, path: "/v1/keys", body: map[string]string{"role": role, "name": name}}, &k); done || err != nil {
		return err
	}
	w := a.stdout()
	fmt.Fprintf(w, "created %s key %s", k.Role, k.ID)
	if k.Name != "" {
		fmt.Fprintf(w, " (%s)", k.Name)
	}
	fmt.Fprintf(w, "\n\n    %s\n\n", k.Key)
	fmt.Fprintln(w, "This is the only time the key is shown: store it in a secret manager now.")
	fmt.Fprintf(w, "Use it with STEAD_KEY=… or --key; revoke it with stead keys revoke %s\n", k.ID)
	return nil
}

func (a *app) keysList(ctx context.Context) error {
	var list wire.KeyList
	if done, err := a.callOrPrint(ctx, request{method: http.MethodGet, path: "/v1/keys"}, &list); done || err != nil {
		return err
	}
	now := a.now()
	t := newTable(a.stdout(), "ID", "NAME", "ROLE", "PREFIX", "CREATED", "REVOKED")
	for _, k := range list.Keys {
		revoked := "-"
		if !k.RevokedAt.IsZero() {
			revoked = ago(now, k.RevokedAt)
		}
		t.row(k.ID, orDash(k.Name), k.Role, k.Prefix+"…", ago(now, k.CreatedAt), revoked)
	}
	return t.flush()
}

func (a *app) tokenCommand() *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "token END_USER [--ttl 1h]",
		Short: "Issue a customer token: reads one end user's runs, nothing else",
		Long: `Issue a customer token for a customer UI: it can read that end user's runs
and their events (GET or SSE) until it expires, and nothing else. It can
never decide an approval. The token alone is printed on standard output.`,
		Args: exactArgs("END_USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ttl < time.Second || ttl > 24*time.Hour {
				return usagef("--ttl must be from 1s to 24h (got %s)", ttlValue{&ttl})
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var tok wire.CustomerToken
			body, err := c.call(cmd.Context(), request{
				method: http.MethodPost, path: "/v1/customer-tokens",
				body: map[string]any{"endUserId": args[0], "ttlSeconds": int64(ttl / time.Second)},
			}, &tok)
			if err != nil {
				return err
			}
			if a.jsonFlag {
				return printJSON(a.stdout(), body)
			}
			fmt.Fprintln(a.stdout(), tok.Token)
			fmt.Fprintf(a.stderr(), "customer token for end user %s, expires at %s (in %s)\n", tok.EndUserID, stamp(tok.ExpiresAt), until(a.now(), tok.ExpiresAt))
			return nil
		},
	}
	ttl = time.Hour
	cmd.Flags().Var(ttlValue{&ttl}, "ttl", "how long the token is valid: a duration (30m, 12h) or days (1d), at most 24h")
	return cmd
}

// ttlValue is token's --ttl: what --retention of stead dev takes (a
// duration, or whole days), shown as people write it ("1h", not "1h0m0s").
type ttlValue struct{ d *time.Duration }

func (v ttlValue) String() string {
	if d := *v.d; d > 0 && d%(24*time.Hour) == 0 {
		return retentionValue(v).String() // "1d"
	}
	return humanDuration(v.d.String())
}

func (v ttlValue) Set(s string) error {
	if err := retentionValue(v).Set(s); err != nil {
		return fmt.Errorf("%q is not a duration (30m, 12h) or a number of days (1d); a token lasts from 1s to 24h", s)
	}
	return nil
}

func (ttlValue) Type() string { return "duration" }

func (a *app) tokensCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Manage customer tokens (revoke)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("tokens needs a subcommand: revoke")
		},
	}
	var token, endUser string
	revoke := &cobra.Command{
		Use:   "revoke --token TOKEN | --end-user END_USER",
		Short: "Revoke a customer token, or every token of an end user, before it expires",
		Long: `Revoke one customer token (--token), or every customer token of an end user
issued until now (--end-user). A revoked token is refused from its next
request on, and an event stream it opened ends within seconds. Tokens issued
after an end user's revocation work.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body := map[string]string{}
			switch {
			case token != "" && endUser != "":
				return usagef("give --token or --end-user, not both")
			case token != "":
				body["token"] = token
			case endUser != "":
				body["endUserId"] = endUser
			default:
				return usagef("tokens revoke needs --token TOKEN (one token) or --end-user END_USER (every token of that end user)")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var rev wire.CustomerTokenRevocation
			raw, err := c.call(cmd.Context(), request{method: http.MethodPost, path: "/v1/customer-tokens/revoke", body: body}, &rev)
			if err != nil {
				return err
			}
			if a.jsonFlag {
				return printJSON(a.stdout(), raw)
			}
			w := a.stdout()
			now := a.now()
			switch {
			case rev.TokenID == "":
				fmt.Fprintf(w, "revoked every customer token of end user %s issued before %s\n", rev.EndUserID, stamp(rev.IssuedBefore))
			case !rev.ExpiresAt.After(now):
				fmt.Fprintf(w, "customer token %s of end user %s had already expired at %s; nothing to revoke\n", rev.TokenID, rev.EndUserID, stamp(rev.ExpiresAt))
			default:
				fmt.Fprintf(w, "revoked customer token %s of end user %s (it would have expired at %s, in %s)\n", rev.TokenID, rev.EndUserID, stamp(rev.ExpiresAt), until(now, rev.ExpiresAt))
			}
			return nil
		},
	}
	revoke.Flags().StringVar(&token, "token", "", "the customer token to revoke (stc_…)")
	revoke.Flags().StringVar(&endUser, "end-user", "", "revoke every token of this end user issued until now")
	cmd.AddCommand(revoke)
	return cmd
}

// checkRole refuses a --role no key or member may have.
func checkRole(role string) error {
	if !approvals.Role(role).IsKeyRole() {
		return usagef("--role must be owner, developer, approver or viewer (got %q)", role)
	}
	return nil
}
