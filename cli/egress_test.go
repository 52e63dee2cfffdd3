package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"stead/api"
	"stead/approvals"
	"stead/runtime/egress"
	"stead/runtime/engine"
	"stead/store"
)

// The stack's Egress reaches model requests: a model step whose baseUrl is
// a loopback server fails model-config on a strict stack and succeeds on
// one that allows loopback, as `stead dev` does by default.
func TestStackEgressGovernsModelBaseURL(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"hi there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	}))
	t.Cleanup(llm.Close)
	cfg := fmt.Sprintf(`{
  "models": { "local": { "provider": "openai", "baseUrl": %q, "model": "m" } },
  "agents": { "ask": { "steps": [ { "id": "s", "model": "local", "prompt": "hi" } ] } }
}`, llm.URL+"/v1")

	for _, c := range []struct {
		name   string
		policy egress.Policy
		status store.RunStatus
		hits   int32
	}{
		{"strict", egress.Policy{}, store.RunFailed, 0},
		{"loopback", egress.Policy{Allow: egress.Loopback}, store.RunSucceeded, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			hits.Store(0)
			r := runModelStep(t, StackConfig{Dir: filepath.Join(t.TempDir(), "data"), Workers: 1, NoSync: true, Egress: c.policy}, cfg)
			if r.Status != c.status {
				t.Fatalf("run %s, want %s (error %+v)", r.Status, c.status, r.Error)
			}
			if c.status == store.RunFailed && (r.Error.Code != engine.CodeModelConfig || !strings.Contains(r.Error.Message, "loopback address")) {
				t.Errorf("error %+v, want model-config naming the loopback address", r.Error)
			}
			if n := hits.Load(); n != c.hits {
				t.Errorf("the model server saw %d requests, want %d", n, c.hits)
			}
		})
	}
}

func runModelStep(t *testing.T, sc StackConfig, cfg string) store.Run {
	t.Helper()
	ctx := context.Background()
	st, err := OpenStack(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = st.Close(cctx)
	})
	proj, _, err := api.Bootstrap(ctx, st.Store, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	src, err := packExample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := approvals.Actor{ProjectID: proj.ID, Role: approvals.RoleOwner, ID: "test"}
	if _, err := st.Engine.Deploy(ctx, owner, engine.DeployParams{Bundle: src, Config: []byte(cfg)}); err != nil {
		t.Fatal(err)
	}
	r, _, err := st.Engine.StartRun(ctx, owner, engine.StartParams{Agent: "ask", Input: json.RawMessage(`{}`), EndUserID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	r, err = st.Engine.WaitFor(wctx, owner, r.ID, func(r store.Run) bool { return r.Status.Terminal() })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEgressLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		allow string
		want  string
	}{
		{"127.0.0.0/8,::1/128", "Loopback (127.0.0.0/8,::1/128) is allowed for handlers' fetch, models' baseUrl and webhooks"},
		{" 127.0.0.0/8 , ::1 ", "Loopback (127.0.0.0/8,::1/128) is allowed"},
		{"", "reach public addresses only"},
		{"10.0.0.0/8, 127.0.0.1", "may reach 10.0.0.0/8,127.0.0.1/32 besides public addresses"},
	} {
		allow, err := egress.ParseAllow(c.allow)
		if err != nil {
			t.Fatal(err)
		}
		if got := egressLine(egress.Policy{Allow: allow}); !strings.Contains(got, c.want) {
			t.Errorf("--egress-allow %q: %q lacks %q", c.allow, got, c.want)
		}
	}
}
