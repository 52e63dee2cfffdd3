package engine_test

import (
	"net"
	"net/url"
	"strings"
	"testing"

	"stead/runtime/egress"
	"stead/runtime/engine"
	"stead/store"
)

// egressConfig has one model step per way of naming the scripted server:
// its loopback IP, and "localhost", which resolves to it (the check is on
// the address dialled, so a name is no way around it).
const egressConfig = `{
  "models": {
    "ip":   { "provider": "openai", "baseUrl": "%IP%", "model": "m", "maxRetries": 3, "apiKeyEnv": "TEST_LLM_KEY" },
    "name": { "provider": "openai", "baseUrl": "%NAME%", "model": "m", "maxRetries": 3, "apiKeyEnv": "TEST_LLM_KEY" }
  },
  "agents": {
    "ip":   { "steps": [ { "id": "s", "model": "ip", "prompt": "hi" } ] },
    "name": { "steps": [ { "id": "s", "model": "name", "prompt": "hi" } ] }
  }
}`

func setupEgress(t *testing.T, p *egress.Policy) (*harness, *llm) {
	t.Helper()
	h := setup(t, func(o *options) { o.modelEgress = p })
	l := newLLM(t, testKey)
	h.env["TEST_LLM_KEY"] = testKey
	u, _ := url.Parse(l.url())
	_, port, _ := net.SplitHostPort(u.Host)
	cfg := strings.ReplaceAll(egressConfig, "%IP%", l.url())
	cfg = strings.ReplaceAll(cfg, "%NAME%", "http://localhost:"+port+"/v1")
	h.deploy(h.owner, handlers, cfg)
	return h, l
}

func TestModelBaseURLRefusedByEgressPolicy(t *testing.T) {
	t.Parallel()
	h, l := setupEgress(t, &egress.Policy{})
	for _, name := range []string{"ip", "name"} {
		r := h.start(name, `{}`)
		wantStatus(t, r, store.RunFailed, engine.CodeModelConfig)
		msg := r.Error.Message
		if !strings.Contains(msg, "is refused: it is a loopback address") || !strings.Contains(msg, "STEAD_EGRESS_ALLOW") ||
			!strings.Contains(msg, "--egress-allow") || !strings.Contains(msg, `model "`+name+`"`) {
			t.Errorf("%s: error %q, want the refused address, the model and the owner's allowlist", name, msg)
		}
		if (!strings.Contains(msg, "destination 127.0.0.1") && !strings.Contains(msg, "destination ::1")) ||
			(name == "name" && !strings.Contains(msg, "http://localhost:")) {
			t.Errorf("%s: error %q does not name the address and URL", name, msg)
		}
		for _, e := range h.events(r.ID) {
			if e.Type == "model.retried" {
				t.Errorf("%s: a refused destination was retried: %s", name, e.Data)
			}
		}
		noSecret(t, h, r.ID)
	}
	if n := l.count(); n != 0 {
		t.Errorf("the model server saw %d requests", n)
	}
	if w := h.sleeps.all(); len(w) != 0 {
		t.Errorf("retry waits %v, want none", w)
	}
}

func TestModelBaseURLAllowedByOwner(t *testing.T) {
	t.Parallel()
	h, l := setupEgress(t, &egress.Policy{Allow: egress.Loopback})
	l.then(answer("by IP", 1, 1), answer("by name", 1, 1))
	for _, name := range []string{"ip", "name"} {
		r := h.start(name, `{}`)
		wantStatus(t, r, store.RunSucceeded, "")
	}
	l.done()
}
