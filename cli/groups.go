package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"stead/api/wire"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) groupsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "Groups of members: whom stead.json's approvers name (\"group\": \"finance\")",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("groups needs a subcommand: create, add, rm, list, show or delete")
		},
	}
	var description string
	var members []string
	create := &cobra.Command{
		Use:   "create NAME [--description D] [--member M]...",
		Short: "Create a group (owner key required); a member is named by id (mem_…), exact name or email",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			ids, err := c.memberIDs(ctx, members, false)
			if err != nil {
				return err
			}
			body := map[string]any{"name": args[0], "members": ids}
			if description != "" {
				body["description"] = description
			}
			return a.groupCall(ctx, c, request{method: http.MethodPost, path: "/v1/groups", body: body}, "created group ", false)
		},
	}
	create.Flags().StringVar(&description, "description", "", "what the group is for, in one line")
	create.Flags().StringArrayVar(&members, "member", nil, "a member to add (repeat it for more): an id (mem_…), a name or an email")
	change := func(use, short, field string, withRemoved bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " GROUP MEMBER...",
			Short: short,
			Args: func(cmd *cobra.Command, args []string) error {
				if len(args) < 2 {
					return usagef("%s needs GROUP and at least one MEMBER (an id, a name or an email)", cmd.CommandPath())
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx := cmd.Context()
				c, err := a.client()
				if err != nil {
					return err
				}
				ids, err := c.memberIDs(ctx, args[1:], withRemoved)
				if err != nil {
					return err
				}
				req := request{method: http.MethodPatch, path: path("v1", "groups", args[0]), body: map[string]any{field: ids}}
				return a.groupCall(ctx, c, req, "", false)
			},
		}
	}
	add := change("add", "Add members to a group (owner key required)", "add", false)
	rm := change("rm", "Take members out of a group (owner key required); they stay members of the project", "remove", true)
	list := &cobra.Command{
		Use:   "list",
		Short: "List the groups and who is in them",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.groupsList(cmd.Context())
		},
	}
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a group and its members",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return a.groupCall(cmd.Context(), c, request{method: http.MethodGet, path: path("v1", "groups", args[0])}, "", true)
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a group (owner key required); approvals that stead.json asks of it then have no one to ask",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return a.groupCall(cmd.Context(), c, request{method: http.MethodDelete, path: path("v1", "groups", args[0])}, "deleted group ", false)
		},
	}
	cmd.AddCommand(create, add, rm, list, show, del)
	return cmd
}

// memberIDs resolves members as people name them — an id (mem_…), or a
// member's exact name or email — to ids, from GET /v1/members (removed
// members too, withRemoved). A name that matches no member, or several,
// is an error that lists what there is.
func (c *client) memberIDs(ctx context.Context, names []string, withRemoved bool) ([]string, error) {
	if len(names) == 0 {
		return []string{}, nil
	}
	p := "/v1/members"
	if withRemoved {
		p += "?removed=true"
	}
	var list wire.MemberList
	if _, err := c.call(ctx, request{method: http.MethodGet, path: p}, &list); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(names))
	for _, n := range names {
		var found []wire.Member
		for _, m := range list.Members {
			if m.ID == n {
				found = []wire.Member{m}
				break
			}
			if m.Name == n || (m.Email != "" && m.Email == n) {
				found = append(found, m)
			}
		}
		switch len(found) {
		case 0:
			return nil, fmt.Errorf("no member %q in this project (by id, name or email); list them with stead members list", n)
		case 1:
			ids = append(ids, found[0].ID)
		default:
			var b strings.Builder
			for _, m := range found {
				fmt.Fprintf(&b, "\n  %s  %s  %s  %s", m.ID, m.Name, m.Role, orDash(m.Email))
			}
			return nil, fmt.Errorf("%q names %d members; name one by its id:%s", n, len(found), b.String())
		}
	}
	return ids, nil
}

// groupCall makes a request that answers with a group and prints it as
// one line that done starts ("created group "), and with detail its
// description, times and members.
func (a *app) groupCall(ctx context.Context, c *client, req request, done string, detail bool) error {
	var g wire.Group
	body, err := c.call(ctx, req, &g)
	if err != nil {
		return err
	}
	if a.jsonFlag {
		return printJSON(a.stdout(), body)
	}
	w := a.stdout()
	fmt.Fprintln(w, done+groupLine(g))
	if !detail {
		return nil
	}
	now := a.now()
	t := newTable(w, "  description", orDash(g.Description))
	t.row("  created", fmt.Sprintf("%s (%s)", stamp(g.CreatedAt), ago(now, g.CreatedAt)))
	t.row("  changed", fmt.Sprintf("%s (%s), version %d", stamp(g.UpdatedAt), ago(now, g.UpdatedAt), g.Version))
	if err := t.flush(); err != nil {
		return err
	}
	return memberTable(w, g.Members)
}

// memberTable lists a group's members with their ids and roles.
func memberTable(w io.Writer, ms []wire.GroupMember) error {
	if len(ms) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w, "  ID", "NAME", "ROLE", "REMOVED")
	for _, m := range ms {
		removed := "-"
		if m.Removed {
			removed = "removed"
		}
		t.row("  "+m.ID, m.Name, m.Role, removed)
	}
	return t.flush()
}

// groupLine is a group as one line: "finance: Ana Diaz, Bo Li".
func groupLine(g wire.Group) string {
	return g.Name + ": " + memberNames(g.Members)
}

// memberNames names a group's members, in the API's order (by name); a
// member removed from the project is marked.
func memberNames(ms []wire.GroupMember) string {
	if len(ms) == 0 {
		return "no members"
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
		if m.Removed {
			out[i] += " (removed)"
		}
	}
	return strings.Join(out, ", ")
}

func (a *app) groupsList(ctx context.Context) error {
	var list wire.GroupList
	if done, err := a.callOrPrint(ctx, request{method: http.MethodGet, path: "/v1/groups"}, &list); done || err != nil {
		return err
	}
	w := a.stdout()
	if len(list.Groups) == 0 {
		fmt.Fprintln(w, "no groups yet; create one with stead groups create NAME --member M")
		return nil
	}
	for _, g := range list.Groups {
		line := groupLine(g)
		if g.Description != "" {
			line += "  — " + g.Description
		}
		fmt.Fprintln(w, line)
	}
	return nil
}
