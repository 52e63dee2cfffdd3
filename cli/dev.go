package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"stead/api"
	"stead/approvals"
	"stead/examples/refunds"
	"stead/notify/email"
	"stead/notify/slack"
	"stead/runtime/bundle"
	"stead/runtime/egress"
	"stead/runtime/engine"
	"stead/runtime/sandbox"
	"stead/store"
)

type devOptions struct {
	addr          string
	data          string
	example       bool
	sweepInterval time.Duration
	retention     time.Duration
	workers       int
	logLevel      string
	verbose       bool
	shutdown      time.Duration
	mcpWait       time.Duration
	egressAllow   string
	egress        egress.Policy // egressAllow parsed
	slack         *slack.Config // from STEAD_SLACK_*; nil when Slack is off
	smtpAddr      string
	smtp          *email.Config // --smtp, else STEAD_SMTP_URL; nil when email is off
}

func (a *app) devCommand() *cobra.Command {
	var o devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run Stead locally: API, workers and sweeper in one process on an embedded store",
		Long: `Run Stead locally: the API, a worker pool and the approval sweeper in one
process, on a bbolt file and a bundle folder under --data.

On first start it creates a project and an owner key, prints them once, and
writes the CLI's config file so that the other commands work with no further
step. --example deploys the refunds example and seeds its demo orders.
SIGINT or SIGTERM stop it cleanly: runs in flight finish, or stay resumable.

Handlers' fetch and models' baseUrl reach public addresses and the ranges of
--egress-allow: loopback by default, for local services and model servers
(Ollama, vLLM). Other loopback, private and link-local addresses are refused
wherever a name resolves; stead.json cannot change this.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.dev(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8720", "address to listen on")
	f.StringVar(&o.data, "data", ".stead", "data folder (store, bundles, project)")
	f.BoolVar(&o.example, "example", false, "deploy examples/refunds and seed its demo orders")
	f.DurationVar(&o.sweepInterval, "sweep-interval", 5*time.Second, "how often due approvals expire and stalled runs are dispatched again")
	o.retention = defaultRetention
	f.Var(retentionValue{&o.retention}, "retention", "how long a finished run (its trace, steps and approvals), a settled notification and an expired remembered decision are kept before the sweeper deletes them: days (90d) or a duration (12h); 0 keeps everything")
	f.IntVar(&o.workers, "workers", DefaultWorkers, "how many runs execute at once (their handler calls share the sandbox's workers: 2 × cores + 2, half of them per project)")
	f.StringVar(&o.logLevel, "log-level", "warn", "log level on standard error: debug, info, warn, error")
	f.BoolVar(&o.verbose, "verbose", false, "log every request and the server's steps (--log-level info)")
	f.DurationVar(&o.shutdown, "shutdown-timeout", 10*time.Second, "how long runs in flight may take to finish on shutdown")
	f.DurationVar(&o.mcpWait, "mcp-wait", api.DefaultMCPWait, "how long an MCP client's tools/call waits for a gated call's approval before answering that it awaits one")
	f.StringVar(&o.smtpAddr, "smtp", "", "mail approvals to the members who may decide them through this SMTP server, HOST:PORT, plain (a local test server such as mailpit); STEAD_SMTP_URL configures TLS and credentials")
	f.StringVar(&o.egressAllow, "egress-allow", egress.Policy{Allow: egress.Loopback}.String(),
		`address ranges handlers' fetch and models' baseUrl may reach besides public ones, comma-separated CIDR ("" for public only)`)
	return cmd
}

// defaultRetention is how long `stead dev` keeps a finished run: as long as
// the AWS stack does (dynamostore.DefaultRetention).
const defaultRetention = 90 * 24 * time.Hour

// devGCPercent is the server's GOGC unless the environment sets GOGC. Its
// live heap is small (4 MB in BenchmarkDevRunCPU) and a run allocates some
// 100 KB, so at Go's default of 100 the collector ran every 40 runs or so:
// 144 collections and 750 ms of CPU for 6,064 runs (gctrace), 0.12 ms a
// run. At 400, 28 collections and 145 ms; the server's anonymous memory is
// some twice as large (34 MiB against 16 under that benchmark, 57–64 MiB
// against 22–31 in a soak; docs/performance.md).
const devGCPercent = 400

// tuneGC sets the collector for the server and returns what puts back the
// setting it found; with GOGC set it leaves the collector alone.
func tuneGC(getenv func(string) string) (restore func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	was := debug.SetGCPercent(devGCPercent)
	return func() { debug.SetGCPercent(was) }
}

// retentionValue is the --retention flag: a duration, or whole days ("90d"),
// which Go's durations lack; zero keeps everything.
type retentionValue struct{ d *time.Duration }

func (v retentionValue) String() string {
	if d := *v.d; d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return v.d.String()
}

func (v retentionValue) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseUint(n, 10, 16)
		if err != nil {
			return fmt.Errorf("%q is not a number of days (90d) or a duration (12h); 0 keeps everything", s)
		}
		*v.d = time.Duration(days) * 24 * time.Hour
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("%q is not a number of days (90d) or a duration (12h); 0 keeps everything", s)
	}
	*v.d = d
	return nil
}

func (retentionValue) Type() string { return "days|duration" }

// retentionPhrase says in the banner how long finished runs are kept.
func retentionPhrase(d time.Duration) string {
	switch day := 24 * time.Hour; {
	case d <= 0:
		return "finished runs kept for good"
	case d == day:
		return "finished runs kept 1 day"
	case d%day == 0:
		return fmt.Sprintf("finished runs kept %d days", d/day)
	default:
		return "finished runs kept " + d.String()
	}
}

// projectFile is DATA/project.json: the local project.
type projectFile struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

const (
	projectFileName  = "project.json"
	ownerKeyFileName = "owner.key"
)

func (a *app) dev(ctx context.Context, o devOptions) error {
	if !sandbox.Supported {
		return errors.New("stead dev runs handlers in sandbox worker processes, which need Linux or macOS: on Windows, run it inside WSL; the client commands (deploy, run, approvals, approve, …) work here")
	}
	if o.sweepInterval <= 0 {
		return usagef("--sweep-interval must be longer than 0 (got %s)", o.sweepInterval)
	}
	if o.workers <= 0 {
		return usagef("--workers must be at least 1 (got %d)", o.workers)
	}
	if o.mcpWait <= 0 || o.mcpWait > api.MaxWait {
		return usagef("--mcp-wait must be longer than 0 and at most %s (got %s)", api.MaxWait, o.mcpWait)
	}
	allow, err := egress.ParseAllow(o.egressAllow)
	if err != nil {
		return usagef("--egress-allow: %s", err.Error())
	}
	o.egress = egress.Policy{Allow: allow}
	if o.slack, err = slack.FromEnvLocal(a.env.Getenv); err != nil {
		return err
	}
	if o.smtp, err = devSMTP(o.smtpAddr, a.env.Getenv); err != nil {
		return err
	}
	var level slog.Level
	if o.verbose && o.logLevel == "warn" {
		o.logLevel = "info"
	}
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usagef("--log-level must be debug, info, warn or error (got %q)", o.logLevel)
	}
	log := slog.New(slog.NewTextHandler(a.stderr(), &slog.HandlerOptions{Level: level}))
	defer tuneGC(a.env.Getenv)()

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := checkAddr(o.addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: %w; is another `stead dev` running? pick another address with --addr", o.addr, err)
	}
	if err != nil {
		return fmt.Errorf("listen on %s: %w; pick another address with --addr (HOST:PORT, e.g. 127.0.0.1:8720)", o.addr, err)
	}
	defer ln.Close()
	baseURL := "http://" + dialable(ln.Addr().String())

	// The local project is ensured as the store opens: Slack serves it
	// unless STEAD_SLACK_PROJECT names another.
	var (
		proj    projectFile
		key     string
		created bool
	)
	ensure := func(s store.Store) (string, error) {
		var err error
		proj, key, created, err = ensureProject(ctx, s, o.data, time.Now)
		return proj.ID, err
	}
	st, err := OpenStack(StackConfig{Dir: o.data, Workers: o.workers, Retention: o.retention, Logger: log, Egress: o.egress, PublicURL: baseURL, Slack: o.slack, SMTP: o.smtp, EnsureProject: ensure, MCPWait: o.mcpWait})
	if err != nil {
		return err
	}
	closeStack := func() error {
		cctx, cancel := context.WithTimeout(context.Background(), o.shutdown)
		defer cancel()
		return st.Close(cctx)
	}
	defer func() { _ = closeStack() }()

	cfgPath, err := configPath(a.env.Getenv)
	if err != nil {
		return err
	}
	wrote, err := claimConfig(cfgPath, FileConfig{URL: baseURL, Key: key})
	if err != nil {
		return err
	}

	var kept *store.Deployment
	if o.example {
		if kept, err = deployExample(ctx, st, proj.ID, log); err != nil {
			return fmt.Errorf("set up the example: %w", err)
		}
	}
	st.StartSweeper(o.sweepInterval)
	st.StartNotifier()

	if err := a.printDevStarted(baseURL, o, proj, key, created, cfgPath, wrote, kept); err != nil {
		return err
	}

	srv := &http.Server{
		Handler: st.API,
		// No ReadTimeout or WriteTimeout: event streams and long-polls stay
		// open for minutes, and a read deadline would cancel their context.
		// The API bounds bodies and waits per request.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Event streams and long-polls never end on their own: at shutdown they
	// end at once (a long-poll answers with the run as it stands, a stream
	// just ends and its client resumes from Last-Event-ID elsewhere).
	srv.RegisterOnShutdown(st.API.CloseStreams)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	stop() // a second Ctrl-C kills the process
	if !a.jsonFlag {
		// One line: "Stopping… stopped." (runs in flight finish or stay
		// resumable in between).
		fmt.Fprint(a.stdout(), "\nStopping… ")
	}
	log.Info("shutting down")

	// Stop accepting requests; let those in flight finish.
	shutCtx, cancelShut := context.WithTimeout(context.Background(), o.shutdown)
	defer cancelShut()
	if shutErr := srv.Shutdown(shutCtx); shutErr != nil {
		_ = srv.Close()
		log.Warn("connections still open at shutdown were closed", "error", shutErr)
	}
	if err := closeStack(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	log.Info("stopped")
	if !a.jsonFlag {
		fmt.Fprintln(a.stdout(), "stopped.")
	}
	return nil
}

// checkAddr refuses a --addr that is not HOST:PORT with a port number.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if _, perr := strconv.ParseUint(port, 10, 16); err == nil && perr != nil {
		err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	if err != nil {
		return usagef("--addr must be HOST:PORT, e.g. 127.0.0.1:8720 (got %q: %v)", addr, err)
	}
	return nil
}

// dialable turns a listen address into one a client can dial: an
// unspecified host becomes loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// ensureProject returns the local project and its owner key, creating both
// on first start (no DATA/project.json, or a project the store no longer
// has). It reports whether it created them.
func ensureProject(ctx context.Context, st store.Store, dir string, now func() time.Time) (projectFile, string, bool, error) {
	pPath := filepath.Join(dir, projectFileName)
	kPath := filepath.Join(dir, ownerKeyFileName)
	var p projectFile
	b, err := os.ReadFile(pPath)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &p); err != nil || p.ID == "" {
			return p, "", false, fmt.Errorf("%s is not a project file; move it away to start a new project", pPath)
		}
		key, kerr := os.ReadFile(kPath)
		if kerr != nil {
			return p, "", false, fmt.Errorf("read the owner key: %w; restore %s, or move %s away to start a new project", kerr, kPath, dir)
		}
		_, gerr := st.GetProject(ctx, p.ID)
		if gerr == nil {
			return p, strings.TrimSpace(string(key)), false, nil
		}
		if !errors.Is(gerr, store.ErrNotFound) {
			return p, "", false, fmt.Errorf("get project %s: %w", p.ID, gerr)
		}
		// The store was removed but not the project file: start again.
	case !errors.Is(err, fs.ErrNotExist):
		return p, "", false, fmt.Errorf("read %s: %w", pPath, err)
	}
	proj, key, err := api.Bootstrap(ctx, st, "local", now())
	if err != nil {
		return p, "", false, fmt.Errorf("create the local project: %w", err)
	}
	p = projectFile{ID: proj.ID, Name: proj.Name, CreatedAt: proj.CreatedAt}
	pb, _ := json.MarshalIndent(p, "", "  ")
	if err := writeFileAtomic(pPath, append(pb, '\n'), 0o600); err != nil {
		return p, "", false, err
	}
	if err := writeFileAtomic(kPath, []byte(key+"\n"), 0o600); err != nil {
		return p, "", false, err
	}
	return p, key, true, nil
}

// exampleActor is who `stead dev --example` deploys as.
const exampleActor = "stead-dev-example"

// deployExample deploys examples/refunds when the project has no
// deployment yet, or when its latest deployment is an earlier version of
// the example (the code's example changed); a deployment of the project's
// own is left in place and returned as kept. It seeds the demo orders that
// are missing either way.
func deployExample(ctx context.Context, st *Stack, projectID string, log *slog.Logger) (kept *store.Deployment, err error) {
	actor := approvals.Actor{ProjectID: projectID, Role: approvals.RoleOwner, ID: exampleActor}
	src, err := packExample(ctx)
	if err != nil {
		return nil, err
	}
	latest, err := st.Store.LatestDeployment(ctx, projectID)
	deploy := errors.Is(err, store.ErrNotFound)
	switch {
	case deploy:
	case err != nil:
		return nil, fmt.Errorf("latest deployment: %w", err)
	case latest.CreatedBy != exampleActor:
		kept = &latest
	default: // deploy the example again when the code's example changed
		deploy = latest.Digest != bundle.Digest(src) || !sameJSON(latest.Config, refunds.Config)
	}
	if deploy {
		d, err := st.Engine.Deploy(ctx, actor, engine.DeployParams{Bundle: src, Config: refunds.Config})
		if err != nil {
			return nil, fmt.Errorf("deploy: %w", err)
		}
		log.Info("deployed the example", "version", d.Version, "agents", strings.Join(d.Agents, ","))
	}
	seed, err := refunds.DemoSeed()
	if err != nil {
		return nil, err
	}
	scope := store.BrokerScope{ProjectID: projectID, EndUserID: seed.EndUserID}
	added := 0
	for coll, recs := range seed.Records {
		for key, val := range recs {
			_, err := st.Store.GetBrokerRecord(ctx, scope, coll, key)
			if err == nil {
				continue
			}
			if !errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("read demo record %s/%s: %w", coll, key, err)
			}
			if err := st.Store.PutBrokerRecord(ctx, store.BrokerRecord{
				ProjectID: projectID, EndUserID: seed.EndUserID, Collection: coll, Key: key,
				Value: val, UpdatedAt: time.Now().UTC(),
			}); err != nil {
				return nil, fmt.Errorf("seed demo record %s/%s: %w", coll, key, err)
			}
			added++
		}
	}
	if added > 0 {
		log.Info("seeded demo data", "endUser", seed.EndUserID, "records", added)
	}
	return kept, nil
}

// packExample bundles the example's embedded handlers.js as `stead deploy`
// would.
func packExample(ctx context.Context) ([]byte, error) {
	dir, err := os.MkdirTemp("", "stead-example-*")
	if err != nil {
		return nil, fmt.Errorf("pack the example: %w", err)
	}
	defer os.RemoveAll(dir)
	entry := filepath.Join(dir, "handlers.js")
	if err := os.WriteFile(entry, refunds.Handlers, 0o600); err != nil {
		return nil, fmt.Errorf("pack the example: %w", err)
	}
	return bundle.Pack(ctx, entry, bundle.PackOptions{})
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xa, yb)
}

// printDevStarted tells where Stead runs, the owner key on first start, and
// what to do next. kept is the project's own deployment that --example
// left in place, if any.
func (a *app) printDevStarted(baseURL string, o devOptions, proj projectFile, key string, created bool, cfgPath string, wroteConfig bool, kept *store.Deployment) error {
	if a.jsonFlag {
		v := map[string]any{"url": baseURL, "projectId": proj.ID, "created": created, "data": o.data, "retention": retentionValue{&o.retention}.String(),
			"config": cfgPath, "configWritten": wroteConfig}
		if created {
			v["ownerKey"] = key
		}
		if kept != nil {
			v["keptDeployment"] = kept.Version
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout(), "%s\n", b)
		return err
	}
	out := a.stdout()
	fmt.Fprintf(out, "Stead is running at %s (data in %s, %s)\n", baseURL, o.data, retentionPhrase(o.retention))
	fmt.Fprintln(out, egressLine(o.egress))
	fmt.Fprintln(out, emailLine(o.smtp, baseURL))
	if o.slack != nil {
		project := o.slack.Project
		if project == "" {
			project = proj.ID
		}
		fmt.Fprintf(out, "Slack: the approvals of project %s are posted to %s; the app's Interactivity Request URL is %s/slack/interactivity (Slack must reach it: a public tunnel to this address)\n", project, o.slack.Channel, baseURL)
	}
	if created {
		fmt.Fprintf(out, "\nCreated project %s. Its owner key, printed only on this first start:\n\n    %s\n\n", proj.ID, key)
		fmt.Fprintf(out, "A copy is kept in %s so that restarts can set up the CLI again (local development only).\n", filepath.Join(o.data, ownerKeyFileName))
	} else {
		fmt.Fprintf(out, "Project %s\n", proj.ID)
	}
	if wroteConfig {
		fmt.Fprintf(out, "The CLI is set up to use it (%s).\n", a.tilde(cfgPath))
	} else {
		fmt.Fprintf(out, "The CLI config (%s) points at another Stead (stead login) and was left unchanged.\n"+
			"To use this server: export STEAD_URL=%s STEAD_KEY=$(cat %s)\n",
			a.tilde(cfgPath), baseURL, filepath.Join(o.data, ownerKeyFileName))
	}
	if kept != nil {
		fmt.Fprintf(out, "Deployment %d (by %s) is your own, so --example left it in place; `stead deploy examples/refunds --yes` (from the repository) brings the example back.\n",
			kept.Version, kept.CreatedBy)
	}
	switch {
	case o.example && kept == nil:
		fmt.Fprint(out, `
Next steps, in another terminal:
    stead run refunds --input '{"orderId":"o-1001","reason":"damaged"}' --end-user demo-user --wait
    stead approvals
    stead approve ID        (or: stead deny ID --note "why")
    stead trace RUN
`)
	case o.example:
		fmt.Fprint(out, `
Next steps, in another terminal:
    stead agents            (what your deployment runs)
    stead run AGENT --input JSON --end-user ID --wait
`)
	default:
		fmt.Fprint(out, `
Next steps, in another terminal:
    stead deploy DIR        (a folder with stead.json and your handlers)
    or restart with --example to try the refunds example
`)
	}
	fmt.Fprintln(out, "\nPress Ctrl-C to stop.")
	return nil
}

// devSMTP is the email configuration of stead dev: --smtp HOST:PORT
// (plain), else STEAD_SMTP_URL, else none.
func devSMTP(addr string, getenv func(string) string) (*email.Config, error) {
	if addr != "" {
		c, err := email.Plain(addr)
		if err != nil {
			return nil, usagef("%s", err.Error())
		}
		return &c, nil
	}
	c, ok, err := email.FromEnv(getenv)
	if err != nil || !ok {
		return nil, err
	}
	return &c, nil
}

// emailLine says at start whether approvals are mailed, and where.
func emailLine(c *email.Config, baseURL string) string {
	if c == nil {
		return "Email is off (--smtp HOST:PORT or STEAD_SMTP_URL mails approvals to the members who may decide them)."
	}
	return "Email: approvals are mailed to the members who may decide them through " + c.String() + "; review links open " + baseURL + "/review/…"
}

// egressLine says at start where fetch and model baseUrl may go.
func egressLine(p egress.Policy) string {
	switch allow := p.String(); allow {
	case "":
		return "Handlers' fetch, models' baseUrl and webhooks reach public addresses only (--egress-allow is empty)."
	case egress.Policy{Allow: egress.Loopback}.String():
		return "Loopback (" + allow + ") is allowed for handlers' fetch, models' baseUrl and webhooks, for local services, model servers and receivers; other private addresses are refused (--egress-allow changes this)."
	}
	return "Handlers' fetch, models' baseUrl and webhooks may reach " + p.String() + " besides public addresses (--egress-allow); other private addresses are refused."
}

// tilde shortens a path under the home folder to ~/….
func (a *app) tilde(p string) string {
	home := a.env.Getenv("HOME")
	if home == "" || !filepath.IsAbs(p) {
		return p
	}
	if rel, err := filepath.Rel(home, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "~" + string(filepath.Separator) + rel
	}
	return p
}

// claimConfig writes the CLI config for this dev server unless it points at
// another Stead that `stead login` set up: a config that is missing, names
// this server, or names a loopback address (an earlier `stead dev`) is
// rewritten. It reports whether it wrote.
func claimConfig(path string, c FileConfig) (bool, error) {
	old, err := readConfig(path)
	if err != nil {
		return false, err
	}
	if old.URL != "" && old.URL != c.URL && !loopbackURL(old.URL) {
		return false, nil
	}
	return true, writeConfig(path, c)
}

func loopbackURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
