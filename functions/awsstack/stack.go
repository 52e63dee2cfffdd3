// Package awsstack wires Stead's AWS shape for the three Lambda functions:
// the DynamoDB store (dynamostore), bundles and spilled payloads in S3
// (s3blob), the handler runtime, the engine, the HTTP API, and dispatch by
// asynchronous Lambda Invoke of the runner. It is the AWS counterpart of
// cli.OpenStack, which wires the embedded shape of `stead dev`.
//
// A function's main reads its environment with FromEnv, opens a Stack and
// starts the stack's Handler:
//
//	cfg, err := awsstack.FromEnv(awsstack.RunnerFunction, os.Getenv)
//	…
//	stack, err := awsstack.Open(ctx, cfg, awsstack.Options{Logger: log})
//	…
//	lambda.Start(stack.Handler())
//
// Each function builds a Notifier over its store (Notifications), whose
// deliveries pass the owner's egress policy like handlers' fetch. The runner
// delivers after each execution that wrote a notification, the sweeper on
// every schedule (retries, leftovers, and decisions that dispatch no run),
// the API never (no response waits on a receiver): see Notifications.
// Beside webhooks, the environment may configure email (STEAD_SMTP_URL:
// the runner and the sweeper mail, with review links under
// STEAD_PUBLIC_URL that the API serves) and Slack (STEAD_SLACK_*, for one
// project: the runner and the sweeper post and update, the API takes the
// clicks).
//
// Nothing here reads the environment by itself but the model API keys that
// deployments name (apiKeyEnv; never a variable Lambda or Stead sets); the
// AWS SDK reads the region, the credentials and the endpoint overrides
// (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_S3,
// AWS_ENDPOINT_URL_LAMBDA).
package awsstack

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"stead/api"
	"stead/functions/apigw"
	"stead/notify"
	"stead/notify/email"
	"stead/notify/slack"
	"stead/runtime/egress"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/runtime/sandbox"
	"stead/store/dynamostore"
	"stead/store/s3blob"
)

// Options are what a test may set besides the environment.
type Options struct {
	// Logger hears the functions' logs; nothing is logged when nil. Mains
	// pass NewLogger(cfg).
	Logger *slog.Logger
	// AWS is the SDK configuration; config.LoadDefaultConfig with
	// Config.Region when nil.
	AWS *aws.Config
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// LookupEnv reads model API keys and MCP headers (the variables
	// deployments name in apiKeyEnv and headersFromEnv — never AWS_*,
	// LAMBDA_*, _* or STEAD_*: the engine parses every stored config by
	// the deploy's rules, which refuse those); os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
}

// Stack is one function's wiring.
type Stack struct {
	Config Config
	Store  *dynamostore.Store
	// Bundles holds deployed bundles by digest.
	Bundles *s3blob.Store
	Engine  *engine.Engine
	// Dispatch hands runs to the runner: a *Dispatcher, except in the
	// runner itself, whose engine never dispatches.
	Dispatch engine.Dispatcher
	// API is the HTTP API; nil except in the API function.
	API *api.Server
	// Notifications delivers webhook events: the engine flags and kicks,
	// the handler passes (Notifications says which function does).
	Notifications *Notifications
	// Channels are Notifications' channels beside webhooks, as the
	// environment configures them: Slack (every function), email (the
	// runner and the sweeper).
	Channels []notify.Channel

	log     *slog.Logger
	sandbox *sandbox.Pool
}

// Open builds the stack of cfg.Function. It makes no network calls: a
// missing table or bucket shows at the first request.
func Open(ctx context.Context, cfg Config, o Options) (*Stack, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	awsCfg, err := loadAWS(ctx, cfg, o.AWS)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(awsCfg)
	s3c := s3.NewFromConfig(awsCfg, func(so *s3.Options) { so.UsePathStyle = cfg.S3PathStyle })
	bundles, err := s3blob.New(s3c, s3blob.Options{Bucket: cfg.Bucket, Prefix: cfg.BundlePrefix})
	if err != nil {
		return nil, err
	}
	spill, err := s3blob.New(s3c, s3blob.Options{Bucket: cfg.Bucket, Prefix: cfg.SpillPrefix})
	if err != nil {
		return nil, err
	}
	st, err := dynamostore.New(db, dynamostore.Options{Table: cfg.Table, Blobs: spill})
	if err != nil {
		return nil, err
	}
	var dispatch engine.Dispatcher = noDispatch{}
	if cfg.Function != RunnerFunction {
		dispatch = NewDispatcher(awslambda.NewFromConfig(awsCfg), cfg.RunnerFunction, log)
	}
	// One owner allowlist for every deployment-chosen destination: fetch,
	// model requests and webhook endpoints.
	pol := egress.Policy{Allow: cfg.EgressAllow}
	hooks := pol.Client()
	hooks.Timeout = notify.Timeout
	channels, slackApp, err := openChannels(cfg, st, o.Now)
	if err != nil {
		return nil, err
	}
	notes := NewNotifications(notify.Config{Store: st, Client: hooks, Now: o.Now, PublicURL: cfg.PublicURL, Log: log, Channels: channels})
	sb, err := sandbox.New(sandboxOptions(cfg, o.Now))
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(engine.Config{
		Store:         st,
		Blobs:         bundles,
		Invoker:       sb,
		Dispatch:      dispatch,
		MaxBundle:     cfg.MaxBundleBytes,
		Now:           o.Now,
		WorkerID:      cfg.WorkerID,
		DispatchGrace: cfg.DispatchGrace,
		Models:        engine.ModelOptions{LookupEnv: o.LookupEnv, Egress: pol},
		Notifications: notes,
	})
	if err != nil {
		sb.Close()
		return nil, err
	}
	s := &Stack{Config: cfg, Store: st, Bundles: bundles, Engine: eng, Dispatch: dispatch, Notifications: notes, Channels: channels, log: log, sandbox: sb}
	if cfg.Function == APIFunction {
		apiCfg := api.Config{Engine: eng, Store: st, Now: o.Now, Logger: log, MaxBundle: cfg.MaxBundleBytes, MCPWait: cfg.MCPWait, Notifications: notes}
		if slackApp != nil {
			apiCfg.Slack = slackApp
		}
		s.API, err = api.New(apiCfg)
		if err != nil {
			sb.Close()
			return nil, err
		}
	}
	return s, nil
}

// openChannels builds the channels beside webhooks that cfg configures:
// Slack in every function, email in those that deliver (FromEnv reads
// EnvSMTPURL in the runner and the sweeper only). The API never makes a
// pass, so its channels send nothing; Slack is among them so that its
// writes — a decision, a vote, a cancel — keep their notifications in the
// outbox for the runner and the sweeper to update the message with
// (notify.Notifier.Notifies), and it is the API's interactivity app.
func openChannels(cfg Config, st *dynamostore.Store, now func() time.Time) ([]notify.Channel, *slack.App, error) {
	var (
		channels []notify.Channel
		app      *slack.App
	)
	if cfg.Slack != nil {
		sc := *cfg.Slack
		sc.Store, sc.Now = st, now
		var err error
		if app, err = slack.New(sc); err != nil {
			return nil, nil, err
		}
		channels = append(channels, app)
	}
	if cfg.SMTP != nil && cfg.Function != APIFunction {
		mail, err := email.New(email.Options{SMTP: *cfg.SMTP, Store: st, PublicURL: cfg.PublicURL, Now: now})
		if err != nil {
			return nil, nil, err
		}
		channels = append(channels, mail)
	}
	return channels, app, nil
}

// loadAWS returns the SDK configuration: the given one, or the default
// chain (environment, shared files, the Lambda role's credentials).
func loadAWS(ctx context.Context, cfg Config, given *aws.Config) (aws.Config, error) {
	if given != nil {
		return *given, nil
	}
	c, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region))
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	return c, nil
}

// Handler returns the Lambda handler of the stack's function.
func (s *Stack) Handler() lambda.Handler {
	switch s.Config.Function {
	case APIFunction:
		return apigw.New(s.API, apigw.Options{Logger: s.log})
	case RunnerFunction:
		return NewRunnerHandler(s.Engine.Execute, s.Notifications.PassIfKicked, s.log)
	default:
		return NewSweeperHandler(s.Engine.Sweep, s.Notifications.Pass, s.log)
	}
}

// Close releases the handler runtime.
func (s *Stack) Close() { s.sandbox.Close() }

// noDispatch is the runner's dispatcher: the engine only dispatches when a
// run starts, is approved or is swept, none of which the runner does.
type noDispatch struct{}

func (noDispatch) Dispatch(context.Context, string) error { return errNoRunner }

// Main is the whole of a function's main: read and check the environment,
// open the stack and serve fn's events. A bad environment or a stack that
// cannot open still starts a handler, which answers every event with the
// reason, so the error shows in the function's logs and invocation results.
func Main(fn Function) {
	sandbox.Main() // a sandbox worker started by this function's runner
	cfg, err := FromEnv(fn, os.Getenv)
	log := NewLogger(os.Stdout, fn, cfg.LogLevel)
	RouteStdLog(log)
	if err != nil {
		lambda.Start(Broken(log, err))
		return
	}
	stack, err := Open(context.Background(), cfg, Options{Logger: log})
	if err != nil {
		lambda.Start(Broken(log, err))
		return
	}
	lambda.Start(stack.Handler())
}

// sandboxOptions are the function's sandbox: fetch under the owner's
// allowlist, and memory that fits the function (the sandbox's defaults when
// MemoryMB is unknown or small) — the worker gets what the function's own
// process does not need, and a call half of that, so a handler meets the
// sandbox's memory-limit well before Lambda would end the whole invocation.
func sandboxOptions(cfg Config, now func() time.Time) sandbox.Options {
	o := sandbox.Options{Fetch: jsvm.FetchOptions{Allow: cfg.EgressAllow}, Now: now}
	if cfg.MemoryMB > parentMemoryMB {
		o.WorkerMemory = int64(cfg.MemoryMB-parentMemoryMB) << 20
		o.MemoryLimit = o.WorkerMemory / 2
	}
	return o
}
