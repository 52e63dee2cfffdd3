package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"stead/api/wire"
	"stead/runtime/agent"
	"stead/runtime/bundle"
)

func (a *app) deployCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "deploy [DIR]",
		Short: "Bundle and deploy DIR's handlers with its stead.json",
		Long: `Deploy a new version: read DIR/stead.json (DIR defaults to the current
folder), bundle the handlers entry it names under "handlers" (a bundle or a
source entry — .js, .mjs, .ts — with its imports and node_modules) with
esbuild, and upload both. Problems are shown one per line, each where it
is: stead.json:line:column: <JSON pointer>: <message> for the config and
file:line:column: <message> for the code.

A deployment that drops agents the latest one has asks first on a terminal;
in a script, pass --yes (without it the deploy is refused, naming them).`,
		Args: maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return a.deploy(cmd.Context(), dir, yes)
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "deploy even if it removes agents the latest deployment has")
	return cmd
}

// problemsError lists problems one per line under a headline.
type problemsError struct {
	headline string
	lines    []string
	// api is the API's refusal, when it came from the API.
	api *apiError
}

func (e *problemsError) Error() string {
	return e.headline + ":\n  " + strings.Join(e.lines, "\n  ")
}

func (e *problemsError) Unwrap() error {
	if e.api == nil {
		return nil
	}
	return e.api
}

func (a *app) deploy(ctx context.Context, dir string, yes bool) error {
	cfgPath := filepath.Join(dir, "stead.json")
	config, err := os.ReadFile(cfgPath)
	if err != nil {
		return fmt.Errorf("read %s: %w; deploy a folder that holds a stead.json", cfgPath, err)
	}
	var head struct {
		Handlers json.RawMessage            `json:"handlers"`
		Agents   map[string]json.RawMessage `json:"agents"`
	}
	if err := json.Unmarshal(config, &head); err != nil {
		// Placed as the server would place it: the same parser, the same lines.
		var lines []string
		if _, perr := agent.Parse(config); perr != nil {
			if ce, ok := errors.AsType[*agent.ConfigError](perr); ok {
				for _, p := range ce.Problems {
					lines = append(lines, configLine(p.Pointer, p.Message, p.Line, p.Column))
				}
			}
		}
		if len(lines) == 0 {
			lines = []string{fmt.Sprintf("stead.json: %v", err)}
		}
		return &problemsError{headline: "stead.json is not valid JSON", lines: lines}
	}
	var entry string
	if len(head.Handlers) == 0 || json.Unmarshal(head.Handlers, &entry) != nil || entry == "" {
		return &problemsError{headline: "stead.json does not name the handlers", lines: []string{
			`stead.json: /handlers: must name the handlers' bundle or source entry, relative to stead.json, e.g. "handlers": "handlers.js"`,
		}}
	}
	entryPath := filepath.Join(dir, filepath.FromSlash(entry))
	if _, err := os.Stat(entryPath); err != nil {
		return &problemsError{headline: "stead.json names handlers that are not there", lines: []string{
			fmt.Sprintf("stead.json: /handlers: %s: %v", entryPath, errors.Unwrap(err)),
		}}
	}
	src, err := bundle.Pack(ctx, entryPath, bundle.PackOptions{Root: dir})
	if err != nil {
		if be, ok := bundle.AsError(err); ok {
			return &problemsError{headline: "the handlers could not be bundled", lines: bundleLines(be, dir, filepath.Dir(entryPath))}
		}
		return fmt.Errorf("bundle %s: %w", entryPath, err)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	removed, err := a.confirmRemovals(ctx, c, head.Agents, yes)
	if err != nil {
		return err
	}
	var d wire.Deployment
	body, err := c.call(ctx, request{
		method: http.MethodPost, path: "/v1/deployments",
		// The config goes as text so that problems point into the file.
		body: map[string]any{"bundle": string(src), "config": string(config)},
	}, &d)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			if lines := deployProblems(ae); len(lines) > 0 {
				what := "the bundle was refused"
				if ae.Details["field"] == "config" {
					what = "stead.json was refused"
				}
				return &problemsError{fmt.Sprintf("deployment refused: %s (%d %s)", what, len(lines), plural(len(lines), "problem", "problems")), lines, ae}
			}
		}
		return err
	}
	if a.jsonFlag {
		return printJSON(a.stdout(), body)
	}
	w := a.stdout()
	fmt.Fprintf(w, "deployed version %d\n", d.Version)
	fmt.Fprintf(w, "  bundle  %s (from %s), sha256:%s\n", bundle.FormatSize(d.BundleSize), filepath.ToSlash(entry), d.Digest)
	fmt.Fprintf(w, "  agents  %s\n", strings.Join(d.Agents, ", "))
	for _, p := range d.MCPTools {
		change := p.Change
		if change == "" {
			change = "unchanged"
		}
		fmt.Fprintf(w, "  mcp     %s/%s pinned %s (%s)\n", p.Server, p.Tool, shortFingerprint(p.Fingerprint), change)
	}
	if removed != nil {
		fmt.Fprintf(w, "  removed %s (deployment %d had them)\n", strings.Join(removed.agents, ", "), removed.version)
	}
	for _, p := range d.Warnings {
		fmt.Fprintf(w, "warning: stead.json: %s: %s\n", orRoot(p.Pointer), p.Message)
	}
	return nil
}

// removal is the agents a deployment drops that the latest one has.
type removal struct {
	version int
	agents  []string
}

// confirmRemovals finds the agents of the latest deployment that the new
// config drops (new runs of them would be refused) and has them confirmed:
// by --yes, else by a "y" on a terminal; without either the deploy is
// refused. It returns nil when nothing is removed.
func (a *app) confirmRemovals(ctx context.Context, c *client, agents map[string]json.RawMessage, yes bool) (*removal, error) {
	var page wire.DeploymentList
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/deployments", query: url.Values{"limit": {"1"}}}, &page); err != nil {
		return nil, fmt.Errorf("read the latest deployment's agents: %w", err)
	}
	if len(page.Deployments) == 0 {
		return nil, nil
	}
	prev := page.Deployments[0]
	r := &removal{version: prev.Version}
	for _, name := range prev.Agents {
		if _, ok := agents[name]; !ok {
			r.agents = append(r.agents, name)
		}
	}
	if len(r.agents) == 0 {
		return nil, nil
	}
	slices.Sort(r.agents)
	names := strings.Join(r.agents, ", ")
	what := fmt.Sprintf("this deployment removes %s %s, which deployment %d has: new runs of %s will be refused",
		plural(len(r.agents), "agent", "agents"), names, prev.Version, plural(len(r.agents), "it", "them"))
	switch {
	case yes:
		return r, nil
	case !isTerminal(a.env.Stdin):
		return nil, fmt.Errorf("%s; pass --yes to deploy anyway (nothing was deployed)", what)
	}
	fmt.Fprintf(a.env.Stderr, "%s.\nDeploy anyway? [y/N] ", what)
	answer, _ := bufio.NewReader(a.env.Stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return nil, errors.New("deploy cancelled; nothing was deployed")
	}
	return r, nil
}

// isTerminal reports whether r is a terminal a person types into (a
// script's stdin is a pipe, a file or /dev/null). A reader may say so
// itself (IsTerminal() bool), as tests' do.
func isTerminal(r io.Reader) bool {
	if t, ok := r.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// bundleLines renders bundle problems as file:line:col: message, with file
// paths relative to DIR.
func bundleLines(be *bundle.Error, dir, entryDir string) []string {
	var lines []string
	for _, e := range append([]*bundle.Error{be}, be.More...) {
		f := e.File
		if f != "" && !filepath.IsAbs(f) {
			if rel, err := filepath.Rel(dir, filepath.Join(entryDir, f)); err == nil {
				f = filepath.ToSlash(rel)
			}
		}
		lines = append(lines, position(f, e.Line, e.Column)+e.Message)
	}
	return lines
}

func position(file string, line, col int) string {
	switch {
	case file != "" && line > 0:
		return fmt.Sprintf("%s:%d:%d: ", file, line, col)
	case file != "":
		return file + ": "
	}
	return ""
}

// deployProblems renders a refused deployment's details: config problems as
// stead.json: <pointer>: <message>, bundle problems as file:line:col.
func deployProblems(ae *apiError) []string {
	raw, ok := ae.Details["problems"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var lines []string
	switch ae.Details["field"] {
	case "config":
		var ps []wire.ConfigProblem
		if json.Unmarshal(b, &ps) != nil {
			return nil
		}
		for _, p := range ps {
			lines = append(lines, configLine(p.Pointer, p.Message, p.Line, p.Column))
		}
	case "bundle":
		var ps []wire.BundleProblem
		if json.Unmarshal(b, &ps) != nil {
			return nil
		}
		for _, p := range ps {
			lines = append(lines, position(p.File, p.Line, p.Column)+p.Message)
		}
	}
	return lines
}

// configLine renders a stead.json problem as the code's are rendered, so
// that editors and terminals can open it at its place:
// stead.json:18:11: /agents/refunds/tools/refundOrder/effect: must be …
// A problem of the whole file that has a place (a syntax error) needs no
// "(root)".
func configLine(pointer, message string, line, col int) string {
	if pointer == "" && line > 0 {
		return position("stead.json", line, col) + message
	}
	return position("stead.json", line, col) + orRoot(pointer) + ": " + message
}

func orRoot(ptr string) string {
	if ptr == "" {
		return "(root)"
	}
	return ptr
}

// shortFingerprint is "sha256:" and the first 12 hex digits.
func shortFingerprint(f string) string {
	if len(f) > len("sha256:")+12 {
		return f[:len("sha256:")+12]
	}
	return f
}
