package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"stead/api/wire"
	"stead/store"
)

func (a *app) notificationsCommand() *cobra.Command {
	var email string
	cmd := &cobra.Command{
		Use:   "notifications [--email all|requests|none]",
		Short: "Show, or set, which approval mail you get (your key's member)",
		Long: `Show, or set, which approval mail you get: the settings of the member
your key belongs to.

  --email all       every approval you may decide, with its reminders,
                    escalations and expiry warnings (the default)
  --email requests  each approval's request only
  --email none      no mail

Slack messages go to a channel and are not affected. An owner sets another
member's with PATCH /v1/members/{id} {"notify": {"email": …}}.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("email") && (email == "" || !store.EmailLevel(email).Valid()) {
				return usagef("--email must be all, requests or none (got %q)", email)
			}
			return a.notifications(cmd.Context(), email, cmd.Flags().Changed("email"))
		},
	}
	cmd.Flags().StringVar(&email, "email", "", "all, requests or none")
	return cmd
}

// emailLevelText says what each email level mails.
var emailLevelText = map[string]string{
	string(store.EmailAll):      "every approval you may decide, with its reminders, escalations and expiry warnings",
	string(store.EmailRequests): "each approval's request only",
	string(store.EmailNone):     "no mail",
}

// notifications prints the caller's notification settings, after setting
// the email level when set.
func (a *app) notifications(ctx context.Context, email string, set bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	var n wire.NotifySettings
	var body []byte
	if set {
		body, err = c.call(ctx, request{method: http.MethodPatch, path: "/v1/me/notifications", body: map[string]any{"email": email}}, &n)
	} else {
		var me struct {
			Notify *wire.NotifySettings `json:"notify"`
		}
		if _, err = c.call(ctx, request{method: http.MethodGet, path: "/v1/me"}, &me); err == nil {
			if me.Notify == nil {
				return errors.New("this credential belongs to no member, so it has no notification settings; use a member's API key")
			}
			n = *me.Notify
			body, err = json.Marshal(n)
		}
	}
	if err != nil {
		return err
	}
	if a.jsonFlag {
		return printJSON(a.stdout(), body)
	}
	verb := "email:"
	if set {
		verb = "email set to"
	}
	_, err = fmt.Fprintf(a.stdout(), "%s %s (%s)\n", verb, n.Email, emailLevelText[n.Email])
	return err
}
