package cli

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"stead/api/wire"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) membersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "members",
		Short: "The project's members: the people who decide, and their keys",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("members needs a subcommand: add, list, show, set-role, rm, link-slack or unlink-slack")
		},
	}
	var email, role string
	var withKey bool
	add := &cobra.Command{
		Use:   "add NAME --role ROLE [--email E] [--key]",
		Short: "Add a member (owner key required); --key also creates their first key, shown once",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRole(role); err != nil {
				return err
			}
			body := map[string]any{"name": args[0], "role": role, "key": withKey}
			if email != "" {
				body["email"] = email
			}
			return a.memberCall(cmd.Context(), request{method: http.MethodPost, path: "/v1/members", body: body}, did("added"))
		},
	}
	add.Flags().StringVar(&role, "role", "", "owner, developer, approver (reads and decides approvals) or viewer (reads)")
	add.Flags().StringVar(&email, "email", "", "their email address")
	add.Flags().BoolVar(&withKey, "key", false, "also create an API key for them and print it once")
	var all bool
	list := &cobra.Command{
		Use:   "list [--all]",
		Short: "List members (--all: removed ones too)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.membersList(cmd.Context(), all)
		},
	}
	list.Flags().BoolVar(&all, "all", false, "include removed members")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a member and their keys",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.memberCall(cmd.Context(), request{method: http.MethodGet, path: path("v1", "members", args[0])}, nil)
		},
	}
	rm := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove a member: their keys stop working at once; traces keep their name",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.memberCall(cmd.Context(), request{method: http.MethodDelete, path: path("v1", "members", args[0])}, did("removed"))
		},
	}
	var newRole string
	setRole := &cobra.Command{
		Use:   "set-role NAME|ID --role ROLE",
		Short: "Change a member's role (owner key required): their keys have it at once",
		Long: `Change a member's role (owner key required). The member is named by id
(mem_…), exact name or email, as for link-slack. Their keys have the new role
at once: an approver decides approvals, a viewer only reads. The project keeps
at least one owner: to change or remove the last one, make another member an
owner first (stead members set-role NAME --role owner).`,
		Args: exactArgs("NAME|ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if newRole == "" {
				return usagef("set-role needs --role: owner, developer, approver or viewer")
			}
			if err := checkRole(newRole); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ids, err := c.memberIDs(cmd.Context(), []string{args[0]}, false)
			if err != nil {
				return err
			}
			req := request{method: http.MethodPatch, path: path("v1", "members", ids[0]), body: map[string]any{"role": newRole}}
			return a.memberCall(cmd.Context(), req, func(m wire.Member) string {
				return fmt.Sprintf("%s (%s) is now %s %s", m.Name, m.ID, article(m.Role), m.Role)
			})
		},
	}
	setRole.Flags().StringVar(&newRole, "role", "", "owner, developer, approver (reads and decides approvals) or viewer (reads)")
	var team, user string
	link := &cobra.Command{
		Use:   "link-slack ID --team T --user U",
		Short: "Link a member to their Slack account by team and user id (owner key required): their clicks in Slack then decide as them",
		Long: `Link a member to their Slack account, by the ids Slack gives the workspace
(T…) and the user (U…): the Approve and Deny buttons of Stead's Slack
messages then decide as this member, with their role. Never a display name
or @handle, which anyone can change. In Slack, the person's profile → ⋮ →
Copy member ID gives the user id; a refused click names both ids too. A
member has one Slack account per workspace: linking another replaces it.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if team == "" || user == "" {
				return usagef("link-slack needs --team T… and --user U… (the Slack ids; a refused click in Slack names both)")
			}
			return a.linkSlack(cmd.Context(), args[0], func(chat []wire.ChatIdentity) []wire.ChatIdentity {
				return append(slices.DeleteFunc(chat, func(c wire.ChatIdentity) bool { return c.Kind == "slack" && c.Team == team }),
					wire.ChatIdentity{Kind: "slack", Team: team, User: user})
			}, did("linked Slack account of"))
		},
	}
	link.Flags().StringVar(&team, "team", "", "the Slack workspace's id (T…)")
	link.Flags().StringVar(&user, "user", "", "the member's Slack user id (U…), never a name")
	var unlinkTeam string
	unlink := &cobra.Command{
		Use:   "unlink-slack ID [--team T]",
		Short: "Unlink a member's Slack account (of one workspace with --team): their clicks decide nothing any more",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.linkSlack(cmd.Context(), args[0], func(chat []wire.ChatIdentity) []wire.ChatIdentity {
				return slices.DeleteFunc(chat, func(c wire.ChatIdentity) bool {
					return c.Kind == "slack" && (unlinkTeam == "" || c.Team == unlinkTeam)
				})
			}, did("unlinked Slack account of"))
		},
	}
	unlink.Flags().StringVar(&unlinkTeam, "team", "", "only the account of this Slack workspace (T…)")
	cmd.AddCommand(add, list, show, setRole, rm, link, unlink)
	return cmd
}

// linkSlack changes a member's chat accounts with change and prints the
// member (PATCH /v1/members/{id} with chat).
func (a *app) linkSlack(ctx context.Context, member string, change func([]wire.ChatIdentity) []wire.ChatIdentity, done func(wire.Member) string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ids, err := c.memberIDs(ctx, []string{member}, false)
	if err != nil {
		return err
	}
	var m wire.Member
	if _, err := c.call(ctx, request{method: http.MethodGet, path: path("v1", "members", ids[0])}, &m); err != nil {
		return err
	}
	chat := change(slices.Clone(m.Chat))
	if chat == nil {
		chat = []wire.ChatIdentity{}
	}
	return a.memberCall(ctx, request{method: http.MethodPatch, path: path("v1", "members", ids[0]), body: map[string]any{"chat": chat}}, done)
}

// did is the first line of memberCall for a verb: "added approver Ana
// Diaz (mem_…)".
func did(verb string) func(wire.Member) string {
	return func(m wire.Member) string { return fmt.Sprintf("%s %s %s (%s)", verb, m.Role, m.Name, m.ID) }
}

// article is "an" before a role that starts with a vowel, else "a".
func article(role string) string {
	if role != "" && strings.ContainsRune("aeiou", rune(role[0])) {
		return "an"
	}
	return "a"
}

// memberCall makes a request that answers with a member and prints it;
// first, if set, makes the first line (did), else it names the member.
func (a *app) memberCall(ctx context.Context, req request, first func(wire.Member) string) error {
	var m wire.Member
	if done, err := a.callOrPrint(ctx, req, &m); done || err != nil {
		return err
	}
	w := a.stdout()
	now := a.now()
	if first != nil {
		fmt.Fprintln(w, first(m))
	} else {
		fmt.Fprintf(w, "member %s  %s\n", m.ID, m.Name)
	}
	t := newTable(w, "  role", m.Role)
	t.row("  email", orDash(m.Email))
	for _, c := range m.Chat {
		t.row("  "+c.Kind, fmt.Sprintf("team %s, user %s", c.Team, c.User))
	}
	t.row("  added", fmt.Sprintf("%s (%s)", stamp(m.CreatedAt), ago(now, m.CreatedAt)))
	if !m.RemovedAt.IsZero() {
		t.row("  removed", fmt.Sprintf("%s (%s)", stamp(m.RemovedAt), ago(now, m.RemovedAt)))
	}
	for _, k := range m.Keys {
		state := "active"
		if !k.RevokedAt.IsZero() {
			state = "revoked " + ago(now, k.RevokedAt)
		}
		t.row("  key", fmt.Sprintf("%s %s… %s", k.ID, k.Prefix, state))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if m.Key != nil {
		fmt.Fprintf(w, "\n    %s\n\n", m.Key.Key)
		fmt.Fprintln(w, "This is the only time the key is shown: hand it to them through a secret manager now.")
		fmt.Fprintf(w, "Revoke it with stead keys revoke %s, or remove the member with stead members rm %s\n", m.Key.ID, m.ID)
	}
	return nil
}

func (a *app) membersList(ctx context.Context, all bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	p := "/v1/members"
	if all {
		p += "?removed=true"
	}
	var list wire.MemberList
	body, err := c.call(ctx, request{method: http.MethodGet, path: p}, &list)
	if err != nil {
		return err
	}
	if a.jsonFlag {
		return printJSON(a.stdout(), body)
	}
	now := a.now()
	t := newTable(a.stdout(), "ID", "NAME", "ROLE", "EMAIL", "ADDED", "REMOVED")
	for _, m := range list.Members {
		removed := "-"
		if !m.RemovedAt.IsZero() {
			removed = ago(now, m.RemovedAt)
		}
		t.row(m.ID, m.Name, m.Role, orDash(m.Email), ago(now, m.CreatedAt), removed)
	}
	return t.flush()
}
