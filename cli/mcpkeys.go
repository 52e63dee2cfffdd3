package cli

import (
	"context"
	"fmt"
	"net/http"
	"stead/api/wire"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) mcpKeysCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp-keys",
		Short: "Manage MCP keys: an MCP client's credential for one agent and end user (owner key required)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("mcp-keys needs a subcommand: create, list or revoke")
		},
	}
	var agentName, endUser, name string
	create := &cobra.Command{
		Use:   "create --agent AGENT --end-user END_USER [--name NAME]",
		Short: "Create an MCP key; its secret is shown only once",
		Long: `Create an MCP key for one agent of the latest deployment and one end user.
An MCP client holding it may call that agent's tools for that end user and
nothing else: it can never decide an approval, deploy or manage keys. A
client that needs two agents holds two keys.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agentName == "" || endUser == "" {
				return usagef("mcp-keys create needs --agent AGENT and --end-user END_USER")
			}
			return a.mcpKeysCreate(cmd.Context(), agentName, endUser, name)
		},
	}
	create.Flags().StringVar(&agentName, "agent", "", "the agent whose tools the key may call")
	create.Flags().StringVar(&endUser, "end-user", "", "the end user the key's calls are made for")
	create.Flags().StringVar(&name, "name", "", "a name to recognise the key by (the client: claude-desktop)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List MCP keys (never their secrets)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.mcpKeysList(cmd.Context())
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an MCP key; it stops working at once",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var k wire.MCPKey
			if done, err := a.callOrPrint(cmd.Context(), request{method: http.MethodDelete, path: path("v1", "mcp-keys", args[0])}, &k); done || err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "revoked MCP key %s (agent %s, end user %s, %s…)\n", k.ID, k.Agent, k.EndUserID, k.Prefix)
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func (a *app) mcpKeysCreate(ctx context.Context, agentName, endUser, name string) error {
	var k wire.MCPKey
	if done, err := a.callOrPrint(ctx, request{method: http.MethodPost, path: "/v1/mcp-keys", body: map[string]string{"agent": agentName, "endUserId": endUser, "name": name}}, &k); done || err != nil {
		return err
	}
	w := a.stdout()
	fmt.Fprintf(w, "created MCP key %s for agent %s and end user %s", k.ID, k.Agent, k.EndUserID)
	if k.Name != "" {
		fmt.Fprintf(w, " (%s)", k.Name)
	}
	fmt.Fprintf(w, "\n\n    %s\n\n", k.Key)
	fmt.Fprintln(w, "This is the only time the key is shown: store it in a secret manager now.")
	endpoint := "/mcp"
	if c, err := a.client(); err == nil {
		endpoint = strings.TrimSuffix(c.set.URL, "/") + "/mcp"
	}
	fmt.Fprintf(w, "MCP endpoint (Streamable HTTP): %s\n", endpoint)
	fmt.Fprintf(w, "The MCP client sends the key as Authorization: Bearer …; revoke it with stead mcp-keys revoke %s\n", k.ID)
	return nil
}

func (a *app) mcpKeysList(ctx context.Context) error {
	var list wire.MCPKeyList
	if done, err := a.callOrPrint(ctx, request{method: http.MethodGet, path: "/v1/mcp-keys"}, &list); done || err != nil {
		return err
	}
	now := a.now()
	t := newTable(a.stdout(), "ID", "NAME", "AGENT", "END USER", "PREFIX", "CREATED", "REVOKED")
	for _, k := range list.Keys {
		revoked := "-"
		if !k.RevokedAt.IsZero() {
			revoked = ago(now, k.RevokedAt)
		}
		t.row(k.ID, orDash(k.Name), k.Agent, k.EndUserID, k.Prefix+"…", ago(now, k.CreatedAt), revoked)
	}
	return t.flush()
}
