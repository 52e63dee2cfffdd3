package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
)

func TestMCPKeys(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var k wire.MCPKey
	w.must(w.do("POST", "/v1/mcp-keys", w.owner, map[string]any{"agent": "refunds", "endUserId": "alice", "name": "claude desktop"}), 201).decode(&k)
	if !strings.HasPrefix(k.Key, api.MCPKeyPrefix) || !strings.HasPrefix(k.ID, "mck_") || !strings.HasPrefix(k.Key, k.Prefix) || len(k.Prefix) < 8 ||
		k.Agent != "refunds" || k.EndUserID != "alice" || k.Name != "claude desktop" || k.CreatedBy == "" || !k.CreatedAt.Equal(w.clock.Now()) {
		t.Fatalf("created %+v", k)
	}
	// The secret is shown once: never in a list, and no hash anywhere.
	resp := w.must(w.do("GET", "/v1/mcp-keys", w.owner, nil), 200)
	if strings.Contains(string(resp.body), k.Key) || strings.Contains(string(resp.body), "hash") {
		t.Errorf("MCP key list leaks secrets: %s", resp.body)
	}
	var list wire.MCPKeyList
	resp.decode(&list)
	if len(list.Keys) != 1 || list.Keys[0].ID != k.ID || list.Keys[0].Key != "" || !list.Keys[0].RevokedAt.IsZero() {
		t.Fatalf("list %+v", list.Keys)
	}
	resp.lacks([]string{"keys", "0"}, "key", "revokedAt")
	// It is no API key: the REST API refuses it, naming what it is for.
	resp = w.must(w.do("GET", "/v1/runs", k.Key, nil), 403)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "refunds") || !strings.Contains(msg, "alice") || !strings.Contains(msg, k.Prefix) {
		t.Errorf("message %q", msg)
	}
	w.must(w.do("POST", "/v1/approvals/"+w.awaiting("alice").Approval.ID+"/approve", k.Key, nil), 403)
	// Nor do other projects see it.
	var other wire.MCPKeyList
	w.must(w.do("GET", "/v1/mcp-keys", w.other, nil), 200).decode(&other)
	if len(other.Keys) != 0 {
		t.Errorf("another project lists %+v", other.Keys)
	}
	w.must(w.do("DELETE", "/v1/mcp-keys/"+k.ID, w.other, nil), 404)

	// Revoked, it stops working at once.
	w.clock.Advance(time.Minute)
	var revoked wire.MCPKey
	w.must(w.do("DELETE", "/v1/mcp-keys/"+k.ID, w.owner, nil), 200).decode(&revoked)
	if !revoked.RevokedAt.Equal(w.clock.Now()) || revoked.Key != "" {
		t.Errorf("revoked %+v", revoked)
	}
	resp = w.must(w.do("GET", "/v1/runs", k.Key, nil), 401)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "revoked") || !strings.Contains(msg, k.Prefix) {
		t.Errorf("message %q", msg)
	}
	w.must(w.do("DELETE", "/v1/mcp-keys/mck_nope", w.owner, nil), 404)
	w.must(w.do("GET", "/v1/runs", "stm_nope", nil), 401)
}

func TestMCPKeyValidation(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, tc := range []struct {
		name        string
		body        map[string]any
		field, says string
	}{
		{"no agent", map[string]any{"endUserId": "alice"}, "agent", "agent: is required"},
		{"an agent not deployed", map[string]any{"agent": "nope", "endUserId": "alice"}, "agent", `agent "nope" is not in the latest deployment (1)`},
		{"no end user", map[string]any{"agent": "refunds"}, "endUserId", "endUserId: is required"},
		{"an end user too long", map[string]any{"agent": "refunds", "endUserId": strings.Repeat("a", 257)}, "endUserId", "endUserId:"},
		{"a name too long", map[string]any{"agent": "refunds", "endUserId": "alice", "name": strings.Repeat("n", 101)}, "name", "name:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := w.must(w.do("POST", "/v1/mcp-keys", w.owner, tc.body), 400).apiErr()
			if e.Code != api.CodeInvalidArgument || !strings.Contains(fmt.Sprint(e.Details["fields"]), "field:"+tc.field+" ") || !strings.Contains(e.Message, tc.says) {
				t.Errorf("error %+v, want one naming %s and saying %q", e, tc.field, tc.says)
			}
		})
	}
	w.must(w.do("POST", "/v1/mcp-keys", w.owner, map[string]any{"agent": "refunds", "endUserId": "alice", "extra": 1}), 400)
	var list wire.MCPKeyList
	w.must(w.do("GET", "/v1/mcp-keys", w.owner, nil), 200).decode(&list)
	if len(list.Keys) != 0 {
		t.Errorf("refused creates left keys: %+v", list.Keys)
	}
}

// An end user id and a name at their limits are taken.
func TestMCPKeyAtTheLimits(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var k wire.MCPKey
	w.must(w.do("POST", "/v1/mcp-keys", w.owner, map[string]any{"agent": "refunds", "endUserId": strings.Repeat("a", 256), "name": strings.Repeat("n", 100)}), 201).decode(&k)
	if len(k.EndUserID) != 256 || len(k.Name) != 100 {
		t.Errorf("created %+v", k)
	}
}

// A project with no deployment has no agent to make an MCP key for: a 400
// on agent that says to deploy, not an internal error. Revoking a key that
// does not exist is a 404 that says how to list them.
func TestMCPKeyWithoutADeployment(t *testing.T) {
	t.Parallel()
	w := setup(t)
	_, key, err := api.Bootstrap(t.Context(), w.store, "empty", w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := w.must(w.do("POST", "/v1/mcp-keys", key, map[string]any{"agent": "refunds", "endUserId": "alice"}), 400).apiErr()
	if e.Code != api.CodeInvalidArgument || e.Message != `agent: no agent "refunds": the project has no deployment yet (deploy with stead deploy)` {
		t.Errorf("error %s %q", e.Code, e.Message)
	}
	e = w.must(w.do("DELETE", "/v1/mcp-keys/mck_nope", key, nil), 404).apiErr()
	if e.Message != "MCP key mck_nope not found (list them with stead mcp-keys list, or GET /v1/mcp-keys)" {
		t.Errorf("revoking an unknown key says %q", e.Message)
	}
}
