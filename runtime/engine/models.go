package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/runtime/egress"
	"stead/runtime/model"
	"stead/runtime/model/bedrock"
	"stead/runtime/model/openai"
	"stead/runtime/redact"
	"stead/store"
)

// Model error codes, stable for the API and CLI.
const (
	// CodeModelConfig: the model cannot be used as configured (its API key's
	// environment variable is not set, the provider cannot be set up, the
	// egress policy refused its baseUrl's address).
	CodeModelConfig = "model-config"
	// CodeModelError: the provider refused the request (HTTP 4xx other than
	// 408/409/429: a bad request, a wrong key, an unknown model).
	CodeModelError = "model-error"
	// CodeModelUnavailable: rate limits, server errors or timeouts outlasted
	// the retries or the model's timeoutMs.
	CodeModelUnavailable = "model-unavailable"
	// CodeEmptyResponse: the model answered with neither text nor tool calls.
	CodeEmptyResponse = "empty-response"
	// CodeMaxTurns: an agent step's model still called tools after maxTurns
	// answers.
	CodeMaxTurns = "max-turns"
	// CodeConversationTooLarge: an agent step's saved conversation outgrew
	// what a run can keep (Config.MaxOutputInline).
	CodeConversationTooLarge = "conversation-too-large"
)

// DefaultMaxToolResult bounds the text of one tool result sent back to a
// model, in bytes: 60,000, enough for a long page of text and small
// enough to leave most of a model's context for the conversation.
const DefaultMaxToolResult = 60_000

// ModelOptions configure how model and agent steps reach model providers.
// The zero value works: real HTTP to public addresses, the process
// environment, real sleeps.
type ModelOptions struct {
	// Egress is the destination policy of model requests whose endpoint
	// the deployment chooses: every openai-compatible request, and Bedrock
	// requests when the model sets a baseUrl (the regional endpoint is
	// AWS's). Each connection is checked as dialled, redirects included;
	// a refused one fails the step with CodeModelConfig and is not
	// retried. Egress.Allow is an owner setting (`stead dev
	// --egress-allow`, the runner's STEAD_EGRESS_ALLOW), never stead.json.
	Egress egress.Policy
	// HTTPClient, when set, replaces Egress.Client() for every model
	// request, regional Bedrock included (tests). Either way no client has
	// an overall timeout: every request has its own, requestTimeoutMs.
	HTTPClient *http.Client
	// LookupEnv reads the API keys named by apiKeyEnv; os.LookupEnv when nil.
	LookupEnv func(name string) (string, bool)
	// Sleep waits between retries, returning early with ctx's error; a timer
	// when nil. Tests inject one that returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0, 1) that spreads retry waits;
	// math/rand/v2 when nil.
	Jitter func() float64
	// Open, when set, replaces the built-in providers: it gets the model's
	// config and its API key ("" when apiKeyEnv is not set).
	Open func(ctx context.Context, m *agent.Model, apiKey string) (model.Provider, error)
	// MaxToolResult bounds the text of one tool result sent to a model, in
	// bytes; DefaultMaxToolResult when zero. The full result is in the
	// trace.
	MaxToolResult int

	// egressClient sends the requests Egress governs: HTTPClient, or
	// Egress.Client().
	egressClient *http.Client
}

func (o *ModelOptions) defaults() {
	o.egressClient = o.HTTPClient
	if o.egressClient == nil {
		o.egressClient = o.Egress.Client()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	if o.MaxToolResult <= 0 {
		o.MaxToolResult = DefaultMaxToolResult
	}
}

// modelConfigError is a model that cannot be opened as configured.
type modelConfigError struct{ msg string }

func (e *modelConfigError) Error() string { return e.msg }

// openedModel is a provider ready for calls, with the secret to redact.
type openedModel struct {
	provider model.Provider
	apiKey   string
}

// modelCache keeps the providers of one deployment, opened on first use.
type modelCache struct {
	mu     sync.Mutex
	opened map[string]openedModel
}

// model returns the provider of a configured model, opening it on first use,
// and registers its API key for redaction.
func (x *execution) model(ctx context.Context, m *agent.Model) (model.Provider, error) {
	mc := x.dep.models
	mc.mu.Lock()
	om, ok := mc.opened[m.Name]
	mc.mu.Unlock()
	if !ok {
		var err error
		om, err = x.e.openModel(ctx, m)
		if err != nil {
			return nil, err
		}
		mc.mu.Lock()
		if mc.opened == nil {
			mc.opened = map[string]openedModel{}
		}
		mc.opened[m.Name] = om
		mc.mu.Unlock()
	}
	x.secrets.add(om.apiKey)
	return om.provider, nil
}

func (e *Engine) openModel(ctx context.Context, m *agent.Model) (openedModel, error) {
	o := e.cfg.Models
	key := ""
	if m.APIKeyEnv != "" {
		v, ok := o.LookupEnv(m.APIKeyEnv)
		if !ok || v == "" {
			return openedModel{}, &modelConfigError{fmt.Sprintf(
				"model %q: environment variable %s is not set; set it to the API key where Stead runs (stead dev, or the runner's environment on AWS)", m.Name, m.APIKeyEnv)}
		}
		key = v
	}
	var (
		p   model.Provider
		err error
	)
	switch {
	case o.Open != nil:
		p, err = o.Open(ctx, m, key)
	case m.Provider == agent.OpenAI:
		p, err = openai.New(openai.Options{BaseURL: m.BaseURL, Model: m.Model, APIKey: key, HTTPClient: o.egressClient, Now: e.cfg.Now})
	case m.Provider == agent.Bedrock:
		hc := o.HTTPClient // nil: the SDK's, for AWS's regional endpoint
		if m.BaseURL != "" {
			hc = o.egressClient
		}
		p, err = bedrock.New(ctx, bedrock.Options{ModelID: m.ModelID, Region: m.Region, BaseEndpoint: m.BaseURL, HTTPClient: hc})
	default:
		err = fmt.Errorf("provider %q is not supported", m.Provider)
	}
	if err != nil {
		return openedModel{}, &modelConfigError{redact.String(fmt.Sprintf("model %q: %v", m.Name, err), key)}
	}
	return openedModel{provider: p, apiKey: key}, nil
}

// egressFix ends the error of a model request the egress policy refused.
const egressFix = "a model's baseUrl reaches loopback, private and link-local addresses only where the owner allows their range " +
	"(`stead dev --egress-allow`, or STEAD_EGRESS_ALLOW on the runner on AWS); stead.json cannot allow them"

// modelCall is one model answer and what it cost.
type modelCall struct {
	resp     model.Response
	costs    store.Costs
	attempts int
	took     time.Duration
}

// ask asks the model, with the model's retry policy, and records the
// usage as the step's cost. Failures end the run (the error is errStop or
// a store error); ctx ending is errStop. turn is the agent step's turn
// number, 0 for a model step.
func (x *execution) ask(ctx context.Context, s *agent.Step, m *agent.Model, req model.Request, turn int) (modelCall, error) {
	p, err := x.model(ctx, m)
	if err != nil {
		return modelCall{}, x.fail(ctx, s.ID, CodeModelConfig, err.Error())
	}
	req.MaxTokens, req.Temperature = m.MaxTokens, m.Temperature
	pol := model.RetryPolicy{
		MaxRetries:     m.MaxRetries,
		Timeout:        m.Timeout,
		RequestTimeout: m.RequestTimeout,
		Now:            x.e.cfg.Now,
		Sleep:          x.e.cfg.Models.Sleep,
		Jitter:         x.e.cfg.Models.Jitter,
		OnRetry: func(ri model.RetryInfo) {
			data := map[string]any{"model": m.Name, "attempt": ri.Attempt, "waitMs": ri.Wait.Milliseconds(), "error": x.secrets.redact(ri.Err.Error())}
			var pe *model.Error
			if errors.As(ri.Err, &pe) && pe.Status != 0 {
				data["status"] = pe.Status
			}
			if turn > 0 {
				data["turn"] = turn
			}
			x.emit("model.retried", s.ID, data)
		},
	}
	started := x.e.now()
	resp, attempts, err := model.Complete(ctx, p, req, pol)
	if ctx.Err() != nil {
		return modelCall{}, errStop
	}
	if err != nil {
		code := CodeModelError
		var gu *model.GiveUpError
		if errors.As(err, &gu) || model.IsRetryable(err) {
			code = CodeModelUnavailable
		}
		msg := fmt.Sprintf("model %q: %v", m.Name, err)
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			code = CodeModelConfig
			msg += "; " + egressFix
		}
		return modelCall{}, x.fail(ctx, s.ID, code, x.secrets.redact(msg))
	}
	mc := modelCall{resp: resp, attempts: attempts, took: x.e.now().Sub(started)}
	mc.costs = x.recordModel(s, m, resp.Usage, turn)
	return mc, nil
}

// recordModel adds a model answer's usage to the run's costs: tokens as the
// provider reported them, costUsd as the provider or gateway reported it, or
// else from the model's prices. Handler costs are recorded separately
// (record), so each cost is counted once.
func (x *execution) recordModel(s *agent.Step, m *agent.Model, u model.Usage, turn int) store.Costs {
	costs := store.Costs{TokensInput: u.InputTokens, TokensOutput: u.OutputTokens}
	priced := "prices"
	switch {
	case u.CostUSD != nil:
		costs.CostUSD, priced = *u.CostUSD, "provider"
	case m.Prices != nil:
		costs.CostUSD = m.Cost(u.InputTokens, u.OutputTokens)
	default:
		priced = "none"
	}
	if costs.IsZero() {
		return costs
	}
	x.run.Costs = x.run.Costs.Add(costs)
	data := map[string]any{"source": "model", "model": m.Name, "costUsdFrom": priced, "costs": costs, "runCosts": x.run.Costs}
	if turn > 0 {
		data["turn"] = turn
	}
	x.emit("cost.recorded", s.ID, data)
	return costs
}

// usageData is a model answer's usage for the trace.
func usageData(u model.Usage) map[string]any {
	d := map[string]any{"tokensInput": u.InputTokens, "tokensOutput": u.OutputTokens}
	if u.CostUSD != nil {
		d["reportedCostUsd"] = *u.CostUSD
	}
	return d
}

// secretSet holds the API keys to redact from what an execution records.
type secretSet struct {
	vals []string
	set  redact.Set
}

func (s *secretSet) add(v string) {
	if v != "" && !slices.Contains(s.vals, v) {
		s.vals = append(s.vals, v)
		s.set = redact.New(s.vals...)
	}
}

func (s *secretSet) list() []string { return s.vals }

func (s *secretSet) redact(v string) string { return s.set.String(v) }

func (s *secretSet) redactRaw(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	return s.set.JSON(raw)
}

// redactCommit removes the secrets from everything a commit records: the
// run's error, output and step state, the steps' outputs and the events.
// The approval's input is bound by its digest and left as is; its
// approval.requested event is redacted.
func (s *secretSet) redactCommit(r *store.Run, steps []store.Step, _ *approvals.Approval, events []store.Event) {
	if len(s.vals) == 0 {
		return
	}
	if r.Error != nil {
		e := *r.Error
		e.Message = s.redact(e.Message)
		e.Stack, e.File = s.redact(e.Stack), s.redact(e.File)
		r.Error = &e
	}
	r.Output = s.redactRaw(r.Output)
	r.StepState = s.redactRaw(r.StepState)
	for i := range steps {
		steps[i].Output = s.redactRaw(steps[i].Output)
	}
	for i := range events {
		events[i].Data = s.redactRaw(events[i].Data)
	}
}

// stripFences removes a Markdown code fence around a JSON answer
// ("```json … ```"), which models asked for JSON without a structured mode
// often add.
func stripFences(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return s
	}
	t = strings.TrimSuffix(t[3:], "```")
	if i := strings.IndexByte(t, '\n'); i >= 0 && !strings.ContainsAny(t[:i], "{[\"") {
		t = t[i+1:]
	}
	return strings.TrimSpace(t)
}
