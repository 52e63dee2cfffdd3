package awsstack

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"stead/notify/email"
	"stead/notify/slack"
	"stead/runtime/bundle"
	"stead/runtime/egress"
)

// Function names one of Stead's three Lambda functions. What a function
// needs from its environment depends on it.
type Function string

// The functions.
const (
	APIFunction     Function = "api"
	RunnerFunction  Function = "runner"
	SweeperFunction Function = "sweeper"
)

// Environment variables the functions read (template.yaml sets them; a test
// checks that it sets exactly these). The SDK reads the standard AWS ones
// itself: AWS_REGION, credentials, and the endpoint overrides
// AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_S3 and
// AWS_ENDPOINT_URL_LAMBDA that tests point at emulators.
const (
	// EnvTable is the DynamoDB table's name. Required.
	EnvTable = "STEAD_TABLE"
	// EnvBucket is the S3 bucket of bundles and spilled payloads. Required.
	EnvBucket = "STEAD_BUCKET"
	// EnvBundlePrefix is the key prefix of bundles; DefaultBundlePrefix.
	EnvBundlePrefix = "STEAD_BUNDLE_PREFIX"
	// EnvSpillPrefix is the key prefix of payloads too large for a table
	// item; DefaultSpillPrefix.
	EnvSpillPrefix = "STEAD_SPILL_PREFIX"
	// EnvRunnerFunction is the runner's function name or ARN, which the API
	// and the sweeper invoke asynchronously. Required by those two.
	EnvRunnerFunction = "STEAD_RUNNER_FUNCTION"
	// EnvMaxBundleBytes bounds a deployed bundle; DefaultMaxBundleBytes.
	EnvMaxBundleBytes = "STEAD_MAX_BUNDLE_BYTES"
	// EnvDispatchGrace is how long a queued run may wait for the runner
	// before the sweeper dispatches it again (a Go duration); 30s.
	EnvDispatchGrace = "STEAD_DISPATCH_GRACE"
	// EnvMCPWait is how long the API function's POST /mcp tools/call waits
	// for a gated call's approval before answering that it awaits one (a Go
	// duration, 1s to 25s, inside API Gateway's 29 s); 20s.
	EnvMCPWait = "STEAD_MCP_WAIT"
	// EnvS3PathStyle makes the S3 client address buckets by path ("true"):
	// for S3 emulators on loopback, never needed on AWS.
	EnvS3PathStyle = "STEAD_S3_PATH_STYLE"
	// EnvEgressAllow lists the address ranges, comma-separated CIDR
	// ("10.0.0.0/8,fd00::/8"), that handlers' fetch, models' baseUrl and
	// webhook endpoints may reach besides public addresses: a model server,
	// service or receiver in the functions' VPC. Empty by default:
	// loopback, private and link-local destinations are refused. The
	// owner's setting (a template parameter), never a deployment's.
	EnvEgressAllow = "STEAD_EGRESS_ALLOW"
	// EnvPublicURL is where people reach Stead ("https://…", no query):
	// the base of the console links that notifications carry. The template
	// sets it from the API's URL (or its PublicUrl parameter, for a custom
	// domain) on the runner and the sweeper, which deliver notifications.
	// Optional: without it links are paths alone ("/console/#/…").
	EnvPublicURL = "STEAD_PUBLIC_URL"
	// EnvSMTPURL configures the SMTP server that mails approvals to the
	// members who may decide them (package notify/email:
	// smtp://user:pass@host:587?tls=starttls&from=stead@example.com). Read
	// by the runner and the sweeper, which deliver; it needs EnvPublicURL,
	// the base of the mails' review links (/review/{token}, which the API
	// serves). Optional: without it nobody is mailed. The template's
	// SmtpUrl parameter (NoEcho).
	EnvSMTPURL = email.EnvURL
	// EnvSlackBotToken, EnvSlackSigningSecret, EnvSlackChannel and
	// EnvSlackProject configure the Slack app (package notify/slack), all
	// or none: the runner and the sweeper post the approvals of the one
	// project EnvSlackProject names to EnvSlackChannel and update the
	// messages; the API takes clicks at POST /slack/interactivity; every
	// function keeps the outbox of its writes for it. Optional: without
	// them Slack is off. The token and the secret are the template's
	// NoEcho parameters SlackBotToken and SlackSigningSecret.
	EnvSlackBotToken      = slack.EnvBotToken
	EnvSlackSigningSecret = slack.EnvSigningSecret
	EnvSlackChannel       = slack.EnvChannel
	EnvSlackProject       = slack.EnvProject
	// EnvSlackAPIURL overrides Slack's Web API URL: for a stand-in in
	// tests, never needed on AWS.
	EnvSlackAPIURL = slack.EnvAPIURL
)

// Variables Lambda (and the Runtime Interface Emulator) sets, read for
// naming only.
const (
	envRegion       = "AWS_REGION"
	envFunctionName = "AWS_LAMBDA_FUNCTION_NAME"
	envLogStream    = "AWS_LAMBDA_LOG_STREAM_NAME"
	envLogLevel     = "AWS_LAMBDA_LOG_LEVEL"
	envMemory       = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"
)

// Defaults.
const (
	DefaultBundlePrefix   = "bundles/"
	DefaultSpillPrefix    = "spill/"
	DefaultMaxBundleBytes = bundle.DefaultMaxSize
	DefaultDispatchGrace  = 30 * time.Second
	// MaxBundleBytesLimit is the largest EnvMaxBundleBytes: a synchronous
	// Lambda invocation carries at most 6 MB, API Gateway's envelope
	// included.
	MaxBundleBytesLimit = 5<<20 + 512<<10
)

// EnvVars lists every variable of Stead's own that a function reads.
func EnvVars() []string {
	return []string{
		EnvTable, EnvBucket, EnvBundlePrefix, EnvSpillPrefix, EnvRunnerFunction,
		EnvMaxBundleBytes, EnvDispatchGrace, EnvMCPWait, EnvS3PathStyle, EnvEgressAllow, EnvPublicURL,
		EnvSMTPURL, EnvSlackBotToken, EnvSlackSigningSecret, EnvSlackChannel, EnvSlackProject, EnvSlackAPIURL,
	}
}

// Required lists the variables fn cannot start without.
func Required(fn Function) []string {
	if fn == RunnerFunction {
		return []string{EnvTable, EnvBucket}
	}
	return []string{EnvTable, EnvBucket, EnvRunnerFunction}
}

// Config is one function's configuration, read from its environment by
// FromEnv.
type Config struct {
	Function Function
	// Region is AWS_REGION.
	Region string
	Table  string
	Bucket string
	// BundlePrefix and SpillPrefix are key prefixes in Bucket, each ending
	// in "/".
	BundlePrefix string
	SpillPrefix  string
	// RunnerFunction is what Dispatch invokes; empty in the runner itself.
	RunnerFunction string
	MaxBundleBytes int64
	DispatchGrace  time.Duration
	// MCPWait is EnvMCPWait; zero for the API's default.
	MCPWait     time.Duration
	S3PathStyle bool
	// EgressAllow is EnvEgressAllow parsed: the ranges admitted for fetch,
	// model requests and webhook deliveries; none by default.
	EgressAllow []netip.Prefix
	// PublicURL is EnvPublicURL without a trailing "/"; "" when unset.
	PublicURL string
	// SMTP is EnvSMTPURL parsed, in the runner and the sweeper; nil when
	// unset (and always in the API, which mails nobody).
	SMTP *email.Config
	// Slack is the STEAD_SLACK_* settings (Store, Client and Now are
	// Open's to fill in); nil when Slack is off.
	Slack *slack.Config
	// WorkerID names this execution environment in run leases.
	WorkerID string
	// LogLevel is AWS_LAMBDA_LOG_LEVEL (set from the template's
	// LoggingConfig.ApplicationLogLevel); INFO when unset.
	LogLevel string
	// MemoryMB is AWS_LAMBDA_FUNCTION_MEMORY_SIZE, the function's memory,
	// which bounds the function and its sandbox worker together; 0 when
	// unset (outside Lambda).
	MemoryMB int
}

// parentMemoryMB is the part of a function's memory left to the function's
// own process (and the kernel) beside its sandbox worker.
const parentMemoryMB = 128

// FromEnv reads fn's configuration with getenv (os.Getenv in a main) and
// validates it. The error names every variable that is missing or wrong,
// and what it should hold.
func FromEnv(fn Function, getenv func(string) string) (Config, error) {
	switch fn {
	case APIFunction, RunnerFunction, SweeperFunction:
	default:
		return Config{}, fmt.Errorf("unknown function %q (want api, runner or sweeper)", fn)
	}
	c := Config{
		Function:       fn,
		Region:         strings.TrimSpace(getenv(envRegion)),
		Table:          strings.TrimSpace(getenv(EnvTable)),
		Bucket:         strings.TrimSpace(getenv(EnvBucket)),
		BundlePrefix:   strings.TrimSpace(getenv(EnvBundlePrefix)),
		SpillPrefix:    strings.TrimSpace(getenv(EnvSpillPrefix)),
		RunnerFunction: strings.TrimSpace(getenv(EnvRunnerFunction)),
		MaxBundleBytes: DefaultMaxBundleBytes,
		DispatchGrace:  DefaultDispatchGrace,
		LogLevel:       strings.TrimSpace(getenv(envLogLevel)),
	}
	if v := strings.TrimSpace(getenv(envMemory)); v != "" {
		c.MemoryMB, _ = strconv.Atoi(v) // Lambda's own; a bad value keeps the defaults
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if c.Region == "" {
		bad("%s is not set (Lambda sets it; elsewhere set it to the stack's region, e.g. us-east-1)", envRegion)
	}
	for _, name := range Required(fn) {
		if strings.TrimSpace(getenv(name)) == "" {
			bad("%s is not set: %s", name, meaning(name))
		}
	}
	if fn == RunnerFunction {
		c.RunnerFunction = "" // the runner never dispatches
	}
	if c.BundlePrefix == "" {
		c.BundlePrefix = DefaultBundlePrefix
	}
	if c.SpillPrefix == "" {
		c.SpillPrefix = DefaultSpillPrefix
	}
	for _, p := range []struct{ name, value string }{{EnvBundlePrefix, c.BundlePrefix}, {EnvSpillPrefix, c.SpillPrefix}} {
		if !strings.HasSuffix(p.value, "/") || strings.HasPrefix(p.value, "/") {
			bad("%s must be a key prefix such as %q: no leading \"/\", a trailing \"/\" (got %q)", p.name, "bundles/", p.value)
		}
	}
	if strings.HasPrefix(c.BundlePrefix, c.SpillPrefix) || strings.HasPrefix(c.SpillPrefix, c.BundlePrefix) {
		bad("%s (%q) and %s (%q) must not overlap", EnvBundlePrefix, c.BundlePrefix, EnvSpillPrefix, c.SpillPrefix)
	}
	if v := strings.TrimSpace(getenv(EnvMaxBundleBytes)); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			bad("%s must be a number of bytes (got %q)", EnvMaxBundleBytes, v)
		case n < 1024 || n > MaxBundleBytesLimit:
			bad("%s must be between 1024 and %d bytes, what one Lambda invocation can carry (got %d)", EnvMaxBundleBytes, MaxBundleBytesLimit, n)
		default:
			c.MaxBundleBytes = n
		}
	}
	if v := strings.TrimSpace(getenv(EnvDispatchGrace)); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			bad("%s must be a duration such as \"30s\" (got %q)", EnvDispatchGrace, v)
		case d < time.Second || d > time.Hour:
			bad("%s must be between 1s and 1h (got %q)", EnvDispatchGrace, v)
		default:
			c.DispatchGrace = d
		}
	}
	if v := strings.TrimSpace(getenv(EnvMCPWait)); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			bad("%s must be a duration such as \"20s\" (got %q)", EnvMCPWait, v)
		case d < time.Second || d > 25*time.Second:
			bad("%s must be between 1s and 25s, inside API Gateway's 29 s (got %q)", EnvMCPWait, v)
		default:
			c.MCPWait = d
		}
	}
	if v := strings.TrimSpace(getenv(EnvS3PathStyle)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("%s must be true or false (got %q)", EnvS3PathStyle, v)
		}
		c.S3PathStyle = b
	}
	if v := getenv(EnvEgressAllow); strings.TrimSpace(v) != "" {
		allow, err := egress.ParseAllow(v)
		if err != nil {
			bad("%s must list address ranges such as 10.0.0.0/8,fd00::/8: %s", EnvEgressAllow, err.Error())
		}
		c.EgressAllow = allow
	}
	if v := strings.TrimSpace(getenv(EnvPublicURL)); v != "" {
		if p := publicURLProblem(v); p != "" {
			bad("%s must be where people reach Stead, an absolute http or https URL such as https://stead.example.com: %s (got %q)", EnvPublicURL, p, v)
		}
		c.PublicURL = strings.TrimSuffix(v, "/")
	}
	if fn != APIFunction {
		mail, ok, err := email.FromEnv(getenv)
		switch {
		case err != nil:
			bad("%s", err.Error()) // names EnvSMTPURL, never its password
		case ok && c.PublicURL == "":
			bad("%s is set but %s is not: the review links in the mail are built on it; set it to the API's URL (the template does)", EnvSMTPURL, EnvPublicURL)
		case ok:
			c.SMTP = &mail
		}
	}
	sc, err := slack.FromEnv(getenv)
	if err != nil {
		bad("%s", err.Error()) // names the variable
	}
	c.Slack = sc
	if len(problems) > 0 {
		return Config{}, &ConfigError{Function: fn, Problems: problems}
	}
	c.WorkerID = workerID(fn, getenv)
	return c, nil
}

// publicURLProblem says why v cannot be the base of links; "" if it can.
func publicURLProblem(v string) string {
	u, err := url.Parse(v)
	switch {
	case err != nil:
		return "it does not parse"
	case u.Scheme != "http" && u.Scheme != "https":
		return "the scheme is not http or https"
	case u.Host == "" || u.Hostname() == "":
		return "it names no host"
	case u.User != nil:
		return "it carries a user name or password"
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(v, "?") || strings.HasSuffix(v, "#"):
		return "links are built by appending to it, so it takes no query or fragment"
	}
	return ""
}

// ConfigError lists what is wrong with a function's environment.
type ConfigError struct {
	Function Function
	Problems []string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s function configuration: %s", e.Function, strings.Join(e.Problems, "; "))
}

// meaning says what a required variable holds.
func meaning(name string) string {
	switch name {
	case EnvTable:
		return "set it to the DynamoDB table's name (the stack's TableName output)"
	case EnvBucket:
		return "set it to the S3 bucket's name (the stack's BucketName output)"
	case EnvRunnerFunction:
		return "set it to the runner function's name or ARN, which this function invokes asynchronously"
	}
	return "required"
}

// workerID names the execution environment: function name and log stream
// (one per environment), so a lease says which sandbox holds a run.
func workerID(fn Function, getenv func(string) string) string {
	name := getenv(envFunctionName)
	if name == "" {
		name = string(fn)
	}
	if stream := getenv(envLogStream); stream != "" {
		return name + "/" + stream
	}
	return name
}

var errNoRunner = errors.New("the runner function does not dispatch runs")
