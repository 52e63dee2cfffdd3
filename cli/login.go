package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"stead"
	"stead/approvals"
)

func (a *app) loginCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "login --url URL --key KEY",
		Short: "Check an API key against a Stead server and save both for the CLI",
		Long: `Check an API key against a Stead server and save the URL and key in the
CLI's config file ($STEAD_CONFIG, else <user config dir>/stead/config.json,
mode 0600). Flags and STEAD_URL / STEAD_KEY still take precedence over it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key := a.keyFlag
			if key == "" {
				key = a.env.Getenv(EnvKey)
			}
			if key == "" {
				return usagef("login needs --key (or %s): a project API key (stk_…)", EnvKey)
			}
			u := a.urlFlag
			if u == "" {
				u = a.env.Getenv(EnvURL)
			}
			if u == "" {
				u = DefaultURL
			}
			u = strings.TrimRight(u, "/")
			if _, err := url.ParseRequestURI(u); err != nil || !strings.HasPrefix(u, "http") {
				return usagef("--url %q is not an http(s) URL; use e.g. %s", u, DefaultURL)
			}
			c := a.clientOf(settings{URL: u, URLFrom: "--url", Key: key, KeyFrom: "--key"})
			var me struct {
				ProjectID string `json:"projectId"`
				Role      string `json:"role"`
				ID        string `json:"id"`
				KeyName   string `json:"keyName"`
			}
			if _, err := c.call(cmd.Context(), request{method: http.MethodGet, path: "/v1/me"}, &me); err != nil {
				return fmt.Errorf("check the key: %w", err)
			}
			// The CLI's commands need a project key: a customer token or a
			// run's broker token would fail them all.
			if !approvals.Role(me.Role).IsKeyRole() {
				return fmt.Errorf("check the key: it is a %s credential; the CLI needs a project API key (stk_…)", me.Role)
			}
			p, err := configPath(a.env.Getenv)
			if err != nil {
				return err
			}
			if err := writeConfig(p, FileConfig{URL: u, Key: key}); err != nil {
				return err
			}
			if a.jsonFlag {
				return printValue(a.stdout(), map[string]string{"url": u, "config": p, "projectId": me.ProjectID, "role": me.Role, "keyId": me.ID})
			}
			fmt.Fprintf(a.stdout(), "logged in to %s as %s (%s of project %s); settings saved in %s\n", u, me.ID, me.Role, me.ProjectID, p)
			return nil
		},
	}
}

// version, when set at build time (-ldflags "-X stead/cli.version=…"),
// overrides the product's version.
var version = ""

// Version is the CLI's version: the product's (the VERSION file, package
// stead), or the one set at build time.
func Version() string {
	if version != "" {
		return version
	}
	return stead.Version()
}

// revision is the VCS revision the binary was built from, "+dirty" when
// the tree had changes; "" when unknown (a build outside a checkout).
func revision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the CLI's version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.jsonFlag {
				return printValue(a.stdout(), map[string]string{"version": Version(), "revision": revision(), "go": runtime.Version()})
			}
			fmt.Fprintln(a.stdout(), versionLine())
			return nil
		},
	}
}

// versionLine is what `stead version` and `stead --version` print.
func versionLine() string {
	extra := runtime.Version()
	if rev := revision(); rev != "" {
		extra += ", " + rev
	}
	return "stead " + Version() + " (" + extra + ")"
}
