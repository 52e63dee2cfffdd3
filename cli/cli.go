// Package cli is the `stead` command: the local server (`stead dev`) and the
// client commands that drive Stead's HTTP API — deploy, run, runs, trace,
// approvals, approve, deny, cancel, keys, token, tokens, login, version.
//
// Settings come from flags (--url, --key), then the environment (STEAD_URL,
// STEAD_KEY), then the config file that `stead dev` and `stead login` write
// ($STEAD_CONFIG, else <user config dir>/stead/config.json). Every command
// prints people-readable output, or with --json the API's own JSON. Exit
// status: 0 ok, 1 error, 2 usage (bad flags or arguments).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"stead/api"
	"stead/store"
)

// Exit statuses.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Env is what a command touches outside itself. Tests replace any of it.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; os.Getenv when nil.
	Getenv func(string) string
	// Now is the clock for relative times; time.Now when nil.
	Now func() time.Time
	// HTTPClient talks to the API; a client without a global timeout when
	// nil (long-polls and event streams are bounded per request).
	HTTPClient *http.Client
}

func (e *Env) defaults() {
	if e.Stdin == nil {
		e.Stdin = strings.NewReader("")
	}
	if e.Stdout == nil {
		e.Stdout = io.Discard
	}
	if e.Stderr == nil {
		e.Stderr = io.Discard
	}
	if e.Getenv == nil {
		e.Getenv = os.Getenv
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	if e.HTTPClient == nil {
		e.HTTPClient = &http.Client{}
	}
}

// Main runs the stead command with args (without the program name) and
// returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return Run(context.Background(), Env{Stdin: stdin, Stdout: stdout, Stderr: stderr}, args)
}

// Run runs the stead command in env and returns the exit status. Errors are
// printed on env.Stderr.
func Run(ctx context.Context, env Env, args []string) int {
	env.defaults()
	a := &app{env: env, args: args}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	return a.report(cmd, err)
}

// app holds the global flags and the environment of one invocation.
type app struct {
	env Env
	// args are the arguments as given, for --json when the flags could
	// not be parsed.
	args []string

	urlFlag  string
	keyFlag  string
	jsonFlag bool
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "stead",
		Short: "Stead runs AI-agent tools that must not act without a person's approval",
		Long: `Stead runs AI-agent tools that must not act without a person's approval.

Start a local server with the example:  stead dev --example
Then:                                   stead run refunds --input '{"orderId":"o-1001","reason":"damaged"}' --end-user demo-user --wait
                                        stead approvals
                                        stead approve ID`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Args:              noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	root.Version = Version()
	root.SetVersionTemplate(versionLine() + "\n")
	root.SetFlagErrorFunc(a.flagError)
	pf := root.PersistentFlags()
	pf.StringVar(&a.urlFlag, "url", "", "Stead API URL (env STEAD_URL; default from the config file, else "+DefaultURL+")")
	pf.StringVar(&a.keyFlag, "key", "", "API key or customer token (env STEAD_KEY; default from the config file)")
	pf.BoolVar(&a.jsonFlag, "json", false, "print the API's JSON instead of text")

	root.AddCommand(
		a.devCommand(),
		a.initCommand(),
		a.loginCommand(),
		a.deployCommand(),
		a.agentsCommand(),
		a.deploymentsCommand(),
		a.runCommand(),
		a.runsCommand(),
		a.traceCommand(),
		a.cancelCommand(),
		a.approvalsCommand(),
		a.approvalCommand(),
		a.approveCommand(),
		a.denyCommand(),
		a.membersCommand(),
		a.notificationsCommand(),
		a.webhooksCommand(),
		a.rulesCommand(),
		a.groupsCommand(),
		a.keysCommand(),
		a.mcpKeysCommand(),
		a.tokenCommand(),
		a.tokensCommand(),
		a.brokerCommand(),
		a.versionCommand(),
	)
	return root
}

// usageError is a mistake in how a command was called: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErr(err error) error { return &usageError{err} }

func usagef(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

// errReported means the command already printed what went wrong; exit 1.
var errReported = errors.New("reported")

// report prints err, from cmd, and returns the exit status it stands for.
func (a *app) report(cmd *cobra.Command, err error) int {
	if errors.Is(err, errReported) {
		return ExitError
	}
	var (
		ue *usageError
		ae *apiError
		re *runError
		ne *unreachableError
	)
	usage := errors.As(err, &ue) || isCobraUsage(err)
	if a.jsonFlag {
		// Scripts get an error document on standard output, in the API's
		// shape: the API's own, else one of the CLI's codes (usage,
		// unreachable, cli_error). A failed run was printed already.
		switch {
		case errors.As(err, &ae) && len(ae.Body) > 0:
			_ = printJSON(a.env.Stdout, ae.Body)
		case errors.As(err, &re):
		default:
			code := "cli_error"
			switch {
			case usage:
				code = "usage"
			case errors.As(err, &ne):
				code = "unreachable"
			}
			_ = printValue(a.env.Stdout, api.ErrorBody{Error: api.Error{Code: code, Message: err.Error()}})
		}
	}
	if usage {
		help := "stead"
		if cmd != nil {
			help = cmd.CommandPath()
		}
		fmt.Fprintf(a.env.Stderr, "error: %s\nRun '%s --help' for usage.\n", err, help)
		return ExitUsage
	}
	fmt.Fprintf(a.env.Stderr, "error: %s\n", err)
	return ExitError
}

// flagError is a flag that could not be parsed: a usage error that says
// what the flag takes. Parsing stopped there, so --json, if it comes
// later, is read from the arguments as given.
func (a *app) flagError(_ *cobra.Command, err error) error {
	if jsonRequested(a.args) {
		a.jsonFlag = true
	}
	var ive *pflag.InvalidValueError
	if errors.As(err, &ive) {
		return flagValueError(ive)
	}
	return usageErr(err)
}

// flagValueError says what a flag takes, instead of the Go parser's words
// (`strconv.ParseInt: parsing "abc": invalid syntax`). A value of the
// CLI's own (--retention, --ttl) says so in its error already.
func flagValueError(e *pflag.InvalidValueError) error {
	f, v, cause := e.GetFlag(), e.GetValue(), e.Unwrap()
	var num *strconv.NumError
	switch typ := f.Value.Type(); {
	case f.Name == "limit":
		if _, err := store.ParseLimit(v); err != nil {
			return filterFlags(err)
		}
	case errors.As(cause, &num) && typ == "bool":
		return usagef("--%s is true or false (got %q)", f.Name, v)
	case errors.As(cause, &num):
		return usagef("--%s must be a whole number (got %q)", f.Name, v)
	case typ == "duration" && strings.HasPrefix(cause.Error(), "time: "):
		return usagef("--%s must be a duration such as 30s, 5m or 2h (got %q)", f.Name, v)
	}
	return usagef("--%s: %w", f.Name, cause)
}

// jsonRequested says whether args ask for --json: the last --json or
// --json=BOOL before "--".
func jsonRequested(args []string) bool {
	on := false
	for _, arg := range args {
		if arg == "--" {
			break
		}
		if arg == "--json" {
			on = true
		} else if v, ok := strings.CutPrefix(arg, "--json="); ok {
			if b, err := strconv.ParseBool(v); err == nil {
				on = b
			}
		}
	}
	return on
}

// isCobraUsage recognises the usage errors cobra makes itself.
func isCobraUsage(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command ") ||
		strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") ||
		strings.HasPrefix(msg, "required flag(s)")
}

// Argument validators that report usage errors (exit status 2).

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2 // cobra's own default
			}
			if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
				return usagef("unknown command %q for %q; did you mean %s?", args[0], cmd.CommandPath(), strings.Join(near, " or "))
			}
			return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
		}
		return usagef("%s takes no arguments (got %q)", cmd.CommandPath(), args[0])
	}
	return nil
}

func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usagef("%s needs %s (got %d %s)", cmd.CommandPath(), argList(names), len(args), plural(len(args), "argument", "arguments"))
		}
		return nil
	}
}

func minArgs(n int, name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s needs at least one %s", cmd.CommandPath(), name)
		}
		return nil
	}
}

func maxArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("%s takes at most %d %s (got %d)", cmd.CommandPath(), n, plural(n, "argument", "arguments"), len(args))
		}
		return nil
	}
}

func argList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// stdout and stderr are the command's output streams.
// stdout is standard output; a *termOut when it is a terminal, so that tables
// fit its width and colour their status.
func (a *app) stdout() io.Writer {
	f, ok := a.env.Stdout.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return a.env.Stdout
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 0
	}
	colour := !a.jsonFlag && a.env.Getenv("NO_COLOR") == "" && a.env.Getenv("TERM") != "dumb"
	return &termOut{Writer: f, width: width, colour: colour}
}
func (a *app) stderr() io.Writer { return a.env.Stderr }

func (a *app) now() time.Time { return a.env.Now() }
