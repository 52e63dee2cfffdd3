package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"stead/api"
	"stead/notify"
	"stead/notify/email"
	"stead/notify/slack"
	"stead/runtime/egress"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/runtime/sandbox"
	"stead/store"
	"stead/store/boltstore"
	"stead/store/fsblob"
)

// StackConfig wires the embedded stack: everything `stead dev` runs in one
// process. Tests build the same stack in a temporary folder.
type StackConfig struct {
	// Dir holds the data: Dir/stead.db (bbolt) and Dir/blobs (bundles).
	Dir string
	// Workers is the size of the worker pool, the runs executing at once;
	// DefaultWorkers when zero.
	Workers int
	// Now is the clock of the engine, the API and the handler runtime;
	// time.Now when nil.
	Now func() time.Time
	// Logger hears requests, failed executions and failed sweeps; nothing
	// is logged when nil.
	Logger *slog.Logger
	// Egress is the owner's allowlist for outbound requests whose
	// destination a deployment chooses: handlers' fetch and models'
	// baseUrl. One list for both, since the risk is one (a developer
	// pointing the server at an internal service): its ranges are added to
	// Fetch.Allow and are engine.ModelOptions.Egress. `stead dev` allows
	// loopback (--egress-allow); the zero value admits public addresses
	// only.
	Egress egress.Policy
	// Fetch is the rest of the handlers' fetch policy (limits; Allow adds
	// ranges for fetch alone).
	Fetch jsvm.FetchOptions
	// NoSync skips fsync on store commits (tests only).
	NoSync bool
	// Retention is how long a finished run, a settled notification or an
	// expired rule is kept; the sweeper deletes it afterwards
	// (boltstore.Options.Retention).
	// Zero keeps everything.
	Retention time.Duration
	// Entropy feeds ids in the engine; crypto/rand when nil.
	Entropy io.Reader
	// APIEntropy feeds key secrets and request ids in the API; crypto/rand
	// when nil.
	APIEntropy io.Reader
	// Heartbeat is the idle interval of event streams; the API's default
	// when zero.
	Heartbeat time.Duration
	// MCPWait is how long POST /mcp's tools/call waits for a gated call;
	// the API's default (20 s) when zero.
	MCPWait time.Duration
	// PublicURL is where people reach this Stead: the base of the console
	// links in notifications. `stead dev` uses its own address.
	PublicURL string
	// Slack, when set, posts approvals to Slack and takes clicks at POST
	// /slack/interactivity (slack.FromEnv reads it; Store and Now are
	// filled in here, and Project, when empty, from EnsureProject).
	Slack *slack.Config
	// EnsureProject, when set, is called with the opened store before the
	// channels are built and returns this Stead's project (`stead dev`
	// ensures its local project there): the project Slack serves unless
	// Slack.Project names one.
	EnsureProject func(st store.Store) (projectID string, err error)
	// SMTP, when set, mails the members who may decide each approval
	// (package notify/email), with review links under PublicURL.
	SMTP *email.Config
}

// Stack is a running embedded Stead: store, bundle compiler, handler
// runtime, engine, worker pool and API handler. Close it when done.
type Stack struct {
	Store  *boltstore.Store
	Engine *engine.Engine
	// API serves the HTTP API.
	API *api.Server
	// Notifier delivers webhook events (StartNotifier runs it).
	Notifier *notify.Notifier

	cfg     StackConfig
	log     *slog.Logger
	sandbox *sandbox.Pool
	pool    *engine.Pool

	sweepMu     sync.Mutex
	sweepCancel context.CancelFunc
	sweepDone   chan struct{}
	notifyStop  context.CancelFunc
	notifyDone  chan struct{}
	closeOnce   sync.Once
	closeErr    error
}

// DefaultWorkers is how many runs `stead dev` executes at once. Their
// handler calls share the sandbox's workers (2 × cores + 2, half of them
// per project) and wait for one without using up their timeout, so this
// bounds runs in progress — most of whose time goes to waiting on model
// calls, the sandbox and the disk — not CPU. Sixteen keep enough writes in
// flight for the store's group commit to share its fsyncs: with 4, a run
// cost 1.6–2.1 ms of CPU on the 2-core development machine, with 16 1.1–1.6 ms
// (BenchmarkDevRunCPU).
const DefaultWorkers = 16

// OpenStack opens the store under cfg.Dir and starts the worker pool.
func OpenStack(cfg StackConfig) (*Stack, error) {
	if cfg.Dir == "" {
		return nil, errors.New("stack config: Dir is required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	st, err := boltstore.Open(filepath.Join(cfg.Dir, "stead.db"), boltstore.Options{NoSync: cfg.NoSync, Timeout: 2 * time.Second, Retention: cfg.Retention})
	if err != nil {
		if errors.Is(err, boltstore.ErrLocked) {
			return nil, fmt.Errorf("%w: is another `stead dev` using the data folder %s? stop it, or give this one another folder with --data", err, cfg.Dir)
		}
		return nil, err
	}
	blobs, err := fsblob.Open(filepath.Join(cfg.Dir, "blobs"))
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	fetch := cfg.Fetch
	fetch.Allow = append(slices.Clone(cfg.Egress.Allow), fetch.Allow...)
	sb, err := sandbox.New(sandbox.Options{Fetch: fetch, Now: cfg.Now})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	// Webhook targets pass the same egress policy as handlers' fetch.
	hooks := cfg.Egress.Client()
	hooks.Timeout = notify.Timeout
	var (
		channels []notify.Channel
		slackApp *slack.App
	)
	var project string
	if cfg.EnsureProject != nil {
		if project, err = cfg.EnsureProject(st); err != nil {
			sb.Close()
			_ = st.Close()
			return nil, err
		}
	}
	if cfg.Slack != nil {
		sc := *cfg.Slack
		sc.Store, sc.Now = st, cfg.Now
		if sc.Project == "" {
			sc.Project = project
		}
		if slackApp, err = slack.New(sc); err != nil {
			sb.Close()
			_ = st.Close()
			return nil, err
		}
		channels = append(channels, slackApp)
	}
	if cfg.SMTP != nil {
		mail, err := email.New(email.Options{SMTP: *cfg.SMTP, Store: st, PublicURL: cfg.PublicURL, Now: cfg.Now})
		if err != nil {
			sb.Close()
			_ = st.Close()
			return nil, err
		}
		channels = append(channels, mail)
	}
	notifier := notify.New(notify.Config{Store: st, Client: hooks, Now: cfg.Now, PublicURL: cfg.PublicURL, Log: log, Channels: channels})
	pool := engine.NewPool(cfg.Workers, 0, func(runID string, err error) {
		log.Error("execute run", "run", runID, "error", err)
	})
	eng, err := engine.New(engine.Config{
		Store:    st,
		Blobs:    blobs,
		Invoker:  sb,
		Dispatch: pool,
		Now:      cfg.Now,
		Entropy:  cfg.Entropy,
		WorkerID: workerID(),
		Models:   engine.ModelOptions{Egress: cfg.Egress},
		Purger:   st,
		// bbolt's lock keeps every other process out of the store.
		SoleWriter: true,

		Notifications: notifier,
	})
	if err != nil {
		sb.Close()
		_ = st.Close()
		return nil, err
	}
	apiCfg := api.Config{
		Engine:    eng,
		Store:     st,
		Now:       cfg.Now,
		Logger:    log,
		Entropy:   cfg.APIEntropy,
		Heartbeat: cfg.Heartbeat,
		MCPWait:   cfg.MCPWait,

		Notifications: notifier,
	}
	if slackApp != nil {
		apiCfg.Slack = slackApp
	}
	srv, err := api.New(apiCfg)
	if err != nil {
		sb.Close()
		_ = st.Close()
		return nil, err
	}
	pool.Start(eng.Execute)
	return &Stack{Store: st, Engine: eng, API: srv, Notifier: notifier, cfg: cfg, log: log, sandbox: sb, pool: pool}, nil
}

// workerID names this process in run leases.
func workerID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "local"
	}
	return fmt.Sprintf("dev-%s-%d", host, os.Getpid())
}

// StartSweeper sweeps once now (runs a previous process left queued or
// running are dispatched again, due approvals expire) and then every
// interval, until Close.
func (s *Stack) StartSweeper(interval time.Duration) {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	if s.sweepCancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.sweepCancel = cancel
	s.sweepDone = make(chan struct{})
	onErr := func(err error) { s.log.Error("sweep", "error", err) }
	go func() {
		defer close(s.sweepDone)
		if res, err := s.Engine.Sweep(ctx); err != nil && ctx.Err() == nil {
			onErr(err)
		} else if res.Expired+res.Redispatched+res.Purged > 0 {
			s.log.Info("sweep", "expired", res.Expired, "redispatched", res.Redispatched, "purged", res.Purged)
		}
		s.Engine.SweepEvery(ctx, interval, onErr)
	}()
}

// StartNotifier delivers webhook events until Close: what the outbox holds
// now (a previous process may have left some), then as the engine kicks.
func (s *Stack) StartNotifier() {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	if s.notifyStop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.notifyStop, s.notifyDone = cancel, make(chan struct{})
	go func() {
		defer close(s.notifyDone)
		s.Notifier.Run(ctx)
	}()
}

// Close stops the sweeper and the worker pool — executions in flight finish,
// or are interrupted when ctx ends and resume in a later process — then
// closes the handler runtime and the store.
func (s *Stack) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.sweepMu.Lock()
		if s.sweepCancel != nil {
			s.sweepCancel()
			<-s.sweepDone
		}
		if s.notifyStop != nil {
			s.notifyStop()
			<-s.notifyDone
		}
		s.sweepMu.Unlock()
		s.pool.Stop(ctx)
		s.sandbox.Close()
		s.closeErr = s.Store.Close()
	})
	return s.closeErr
}
