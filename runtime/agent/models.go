package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Model defaults and limits.
const (
	// DefaultModelTimeout is how long one model call may take, retries
	// included, when timeoutMs is not set.
	DefaultModelTimeout = 2 * time.Minute
	// DefaultModelRequestTimeout bounds one request when requestTimeoutMs is
	// not set (or timeoutMs, if smaller).
	DefaultModelRequestTimeout = time.Minute
	// DefaultModelRetries is maxRetries when not set.
	DefaultModelRetries = 3
	// DefaultMaxTurns is an agent step's maxTurns when not set.
	DefaultMaxTurns = 8
)

// Provider says how a model is reached.
type Provider string

// The providers.
const (
	// OpenAI is any OpenAI-compatible chat-completions endpoint.
	OpenAI Provider = "openai"
	// Bedrock is AWS Bedrock's Converse API.
	Bedrock Provider = "bedrock"
)

// Model is one entry of "models".
type Model struct {
	// Name is the key in models; steps refer to it.
	Name     string
	Provider Provider
	// BaseURL is an openai model's API root; for bedrock, an optional
	// endpoint that replaces the regional one.
	BaseURL string
	// Model is an openai model's name; APIKeyEnv the environment variable
	// holding its API key ("" for none).
	Model, APIKeyEnv string
	// ModelID and Region locate a bedrock model.
	ModelID, Region string
	// Prices are the USD prices per million tokens; nil when not set.
	Prices *Prices
	// Timeout bounds one model call, retries included (timeoutMs, default
	// 2m); RequestTimeout one request (requestTimeoutMs, default 1m, at
	// most Timeout).
	Timeout, RequestTimeout time.Duration
	// MaxRetries is how often a retryable failure is retried (default 3).
	MaxRetries int
	// MaxTokens bounds an answer; 0 leaves the provider's default.
	MaxTokens int
	// Temperature is sent when set.
	Temperature *float64
}

// Prices are USD per million tokens.
type Prices struct {
	Input, Output float64
}

// Cost prices token counts; 0 without prices.
func (m *Model) Cost(tokensInput, tokensOutput int64) float64 {
	if m.Prices == nil {
		return 0
	}
	return (float64(tokensInput)*m.Prices.Input + float64(tokensOutput)*m.Prices.Output) / 1e6
}

// ModelNames returns the declared model names, sorted.
func (c *Config) ModelNames() []string { return slices.Sorted(maps.Keys(c.Models)) }

// Model returns the model with the given name.
func (c *Config) Model(name string) (*Model, bool) {
	m, ok := c.Models[name]
	return m, ok
}

// providerKeys lists the keys that belong to one provider only.
var providerKeys = map[string]Provider{
	"model": OpenAI, "apiKeyEnv": OpenAI,
	"modelId": Bedrock, "region": Bedrock,
}

func (p *parser) models(doc map[string]any) map[string]*Model {
	out := map[string]*Model{}
	models, _ := doc["models"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(models)) {
		mm, ok := models[name].(map[string]any)
		if !ok {
			continue
		}
		out[name] = p.model(name, mm, jsonPointer("models", name))
	}
	return out
}

func (p *parser) model(name string, m map[string]any, ptr string) *Model {
	md := &Model{
		Name: name, Timeout: DefaultModelTimeout, RequestTimeout: DefaultModelRequestTimeout,
		MaxRetries: DefaultModelRetries,
	}
	if s, ok := m["provider"].(string); ok {
		md.Provider = Provider(s)
	}
	md.BaseURL, _ = m["baseUrl"].(string)
	md.Model, _ = m["model"].(string)
	md.APIKeyEnv, _ = m["apiKeyEnv"].(string)
	md.ModelID, _ = m["modelId"].(string)
	md.Region, _ = m["region"].(string)
	if md.Provider == OpenAI || md.Provider == Bedrock {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if owner, ok := providerKeys[k]; ok && owner != md.Provider {
				p.report(child(ptr, k), fmt.Sprintf("%q is a setting of provider %q; this model's provider is %q", k, owner, md.Provider))
			}
		}
	}
	if ReservedEnv(md.APIKeyEnv) {
		p.report(child(ptr, "apiKeyEnv"), fmt.Sprintf(
			"%q is a variable the platform or Stead sets (AWS_…, LAMBDA_…, STEAD_…, _…), never a model key: a config could send the server's own credentials to its baseUrl; put the key in a variable of your own, e.g. OPENAI_API_KEY", md.APIKeyEnv))
	}
	if md.BaseURL != "" {
		if u, err := url.Parse(md.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.report(child(ptr, "baseUrl"), fmt.Sprintf("must be an http or https URL such as https://api.openai.com/v1 (got %q)", md.BaseURL))
		} else if u.User != nil {
			p.report(child(ptr, "baseUrl"), "must not hold credentials; name the environment variable that holds the API key in apiKeyEnv")
		}
	}
	if pm, ok := m["prices"].(map[string]any); ok {
		in, inOK := number(pm["input"])
		out, outOK := number(pm["output"])
		if inOK && outOK && in >= 0 && out >= 0 {
			md.Prices = &Prices{Input: in, Output: out}
		}
	}
	setTimeout := func(key string, into *time.Duration) bool {
		if n, ok := integer(m[key], MaxToolTimeout.Milliseconds()); ok {
			*into = time.Duration(n) * time.Millisecond
			return true
		}
		return false
	}
	setTimeout("timeoutMs", &md.Timeout)
	if setTimeout("requestTimeoutMs", &md.RequestTimeout) {
		if md.RequestTimeout > md.Timeout {
			p.report(child(ptr, "requestTimeoutMs"), fmt.Sprintf("must be at most timeoutMs (%d), which bounds the whole call", md.Timeout.Milliseconds()))
		}
	} else {
		md.RequestTimeout = min(md.RequestTimeout, md.Timeout)
	}
	if n, ok := integer(m["maxRetries"], 10); ok {
		md.MaxRetries = int(n)
	}
	if n, ok := integer(m["maxTokens"], 1_000_000); ok {
		md.MaxTokens = int(n)
	}
	if f, ok := number(m["temperature"]); ok {
		md.Temperature = &f
	}
	return md
}

// integer reads a json.Number the schema accepted as an integer in
// [0, limit]; false for anything else.
func integer(v any, limit int64) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	r, ok := new(big.Rat).SetString(n.String())
	if !ok || !r.IsInt() || r.Sign() < 0 || r.Cmp(big.NewRat(limit, 1)) > 0 {
		return 0, false
	}
	return r.Num().Int64(), true
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// modelRefs checks references to declared models.
type modelRefs map[string]*Model

func (r modelRefs) missing(name string) string {
	if _, ok := r[name]; ok {
		return ""
	}
	list := "no models are declared; add a \"models\" section"
	if len(r) > 0 {
		list = "declared: " + strings.Join(slices.Sorted(maps.Keys(r)), ", ")
	}
	return fmt.Sprintf("model %q is not declared in /models (%s)", name, list)
}

// ReservedEnv reports whether an environment variable is one a platform
// (AWS Lambda) or Stead sets: never a model API key. A deployment names both
// the variable and where its value is sent, so these are refused.
func ReservedEnv(name string) bool {
	u := strings.ToUpper(name)
	for _, p := range []string{"AWS_", "_", "LAMBDA_", "STEAD_"} {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}
