package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
	"stead/notify/notifytest"
)

// principals of the authorization matrix, in column order.
var principals = []string{"owner", "developer", "customer", "no key", "revoked key", "other project", "approver", "viewer", "mcp key", "revoked mcp key"}

func (w *world) credentialOf(p string) string {
	switch p {
	case "owner":
		return w.owner
	case "developer":
		return w.developer
	case "customer":
		return w.customer
	case "revoked key":
		return w.revoked
	case "other project":
		return w.other
	case "approver":
		return w.approver
	case "viewer":
		return w.viewer
	case "mcp key":
		return w.mcp
	case "revoked mcp key":
		return w.mcpRevoked
	}
	return ""
}

// matrixFixture holds records of project A the matrix reads. Routes that
// change something make their own fresh record per cell.
type matrixFixture struct {
	aliceRun  wire.Run // awaiting approval, end user alice
	aliceDone wire.Run // succeeded, end user alice
	bobRun    wire.Run // succeeded, end user bob
	member    string   // a member of project A
	group     string   // a group of project A
	webhook   string   // a webhook endpoint of project A
	delivery  string   // a delivery of webhook (a ping)
}

// newMember adds a viewer member to project A and returns its id.
func (w *world) newMember(name string) string {
	w.t.Helper()
	var m wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": name, "role": "viewer"}), 201).decode(&m)
	return m.ID
}

// groupSeq numbers the groups newGroup makes.
var groupSeq atomic.Int64

// newGroup adds a group of project A with the members and returns its
// name.
func (w *world) newGroup(members ...string) string {
	w.t.Helper()
	var g wire.Group
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": fmt.Sprintf("group-%d", groupSeq.Add(1)), "members": members}), 201).decode(&g)
	return g.Name
}

func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	// The revoked key fails on every route: this test is not about limits.
	rc := notifytest.NewReceiver(t, "/hooks/stead")
	var hooks *notifications
	w := setup(t, func(c *api.Config) { c.AuthLimit = api.AuthLimit{PerAddress: -1, PerKey: -1} }, withNotifier(t, &hooks))
	f := &matrixFixture{
		aliceRun:  w.awaiting("alice"),
		aliceDone: w.wait(w.start("plain", "alice", nil).ID, "terminal"),
		bobRun:    w.wait(w.start("plain", "bob", nil).ID, "terminal"),
	}
	f.member = w.newMember("Ana Diaz")
	f.group = w.newGroup(w.addMember("Gus Ek", "approver")) // a viewer is in no group
	f.webhook = w.newWebhook(rc.URL).ID
	f.delivery = w.ping(f.webhook).ID
	w.approver, w.viewer = w.newKey("approver").Key, w.newKey("viewer").Key
	w.mcp = w.newMCPKey("refunds", "alice").Key
	revokedMCP := w.newMCPKey("refunds", "alice")
	w.must(w.do("DELETE", "/v1/mcp-keys/"+revokedMCP.ID, w.owner, nil), 200)
	w.mcpRevoked = revokedMCP.Key
	w.must(w.do("PUT", "/v1/broker/orders/o-1?endUserId=alice", w.owner, map[string]any{"value": map[string]any{"id": "o-1", "amount": 12}}), 200)
	names := 0
	freshName := func(name string) string { // members' names are unique
		names++
		return fmt.Sprintf("%s %d", name, names)
	}
	groups := 0
	freshGroup := func() string {
		groups++
		return fmt.Sprintf("fresh-%d", groups)
	}
	n := 0
	freshRecord := func() string {
		n++
		key := fmt.Sprintf("r-%d", n)
		w.must(w.do("PUT", "/v1/broker/tmp/"+key+"?endUserId=alice", w.owner, map[string]any{"value": n}), 200)
		return key
	}

	type route struct {
		name string
		req  func(cred string) *http.Request
		// want is the status for each principal, in principals order.
		want [10]int
	}
	get := func(path string) func(string) *http.Request {
		return func(cred string) *http.Request { return w.request("GET", path, cred, nil) }
	}
	deployBody := map[string]any{"bundle": testHandlers, "config": json.RawMessage(testConfig)}
	routes := []route{
		{"GET /healthz", get("/healthz"), [10]int{200, 200, 200, 200, 200, 200, 200, 200, 200, 200}},
		{"GET /v1/openapi.json", get("/v1/openapi.json"), [10]int{200, 200, 200, 200, 200, 200, 200, 200, 200, 200}},
		{"POST /v1/deployments", func(c string) *http.Request { return w.request("POST", "/v1/deployments", c, deployBody) },
			[10]int{201, 201, 403, 401, 401, 201, 403, 403, 403, 401}},
		{"GET /v1/deployments", get("/v1/deployments"), [10]int{200, 200, 403, 401, 401, 200, 403, 200, 403, 401}},
		{"GET /v1/agents", get("/v1/agents"), [10]int{200, 200, 403, 401, 401, 200, 403, 200, 403, 401}},
		{"POST /v1/agents/{agent}/runs", func(c string) *http.Request {
			return w.request("POST", "/v1/agents/plain/runs", c, map[string]any{"endUserId": "alice"})
		}, [10]int{202, 202, 403, 401, 401, 202, 403, 403, 403, 401}},
		{"GET /v1/me", get("/v1/me"), [10]int{200, 200, 200, 401, 401, 200, 200, 200, 403, 401}},
		{"PATCH /v1/me/notifications", func(c string) *http.Request {
			return w.request("PATCH", "/v1/me/notifications", c, map[string]any{"email": "requests"})
		}, [10]int{200, 200, 403, 401, 401, 200, 200, 200, 403, 401}},
		{"GET /v1/runs", get("/v1/runs"), [10]int{200, 200, 200, 401, 401, 200, 403, 200, 403, 401}},
		{"GET /v1/runs/{id}", get("/v1/runs/" + f.aliceRun.ID), [10]int{200, 200, 200, 401, 401, 404, 200, 200, 403, 401}},
		{"GET /v1/runs/{id} (another end user's)", get("/v1/runs/" + f.bobRun.ID), [10]int{200, 200, 404, 401, 401, 404, 404, 200, 403, 401}},
		{"GET /v1/runs/{id}/events", get("/v1/runs/" + f.aliceRun.ID + "/events"), [10]int{200, 200, 200, 401, 401, 404, 200, 200, 403, 401}},
		{"GET /v1/runs/{id}/events (another end user's)", get("/v1/runs/" + f.bobRun.ID + "/events"), [10]int{200, 200, 404, 401, 401, 404, 404, 200, 403, 401}},
		{"GET /v1/runs/{id}/events (SSE)", func(c string) *http.Request {
			return w.request("GET", "/v1/runs/"+f.aliceDone.ID+"/events", c, nil, "Accept", "text/event-stream")
		}, [10]int{200, 200, 200, 401, 401, 404, 404, 200, 403, 401}},
		{"POST /v1/runs/{id}/cancel", func(c string) *http.Request {
			return w.request("POST", "/v1/runs/"+w.awaiting("alice").ID+"/cancel", c, nil)
		}, [10]int{200, 200, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"GET /v1/approvals", get("/v1/approvals"), [10]int{200, 200, 403, 401, 401, 200, 200, 200, 403, 401}},
		{"GET /v1/approvals/{id}", get("/v1/approvals/" + f.aliceRun.Approval.ID), [10]int{200, 200, 403, 401, 401, 404, 200, 200, 403, 401}},
		{"POST /v1/approvals/{id}/approve", func(c string) *http.Request {
			return w.request("POST", "/v1/approvals/"+w.awaiting("alice").Approval.ID+"/approve", c, map[string]any{"note": "ok"})
		}, [10]int{200, 200, 403, 401, 401, 404, 200, 403, 403, 401}},
		{"POST /v1/approvals/{id}/deny", func(c string) *http.Request {
			return w.request("POST", "/v1/approvals/"+w.awaiting("alice").Approval.ID+"/deny", c, map[string]any{"note": "no"})
		}, [10]int{200, 200, 403, 401, 401, 404, 200, 403, 403, 401}},
		{"POST /v1/approvals/{id}/check-input", func(c string) *http.Request {
			return w.request("POST", "/v1/approvals/"+f.aliceRun.Approval.ID+"/check-input", c, map[string]any{"input": map[string]any{"orderId": "o-1", "amount": 1}})
		}, [10]int{200, 200, 403, 401, 401, 404, 200, 403, 403, 401}},
		{"POST /v1/customer-tokens", func(c string) *http.Request {
			return w.request("POST", "/v1/customer-tokens", c, map[string]any{"endUserId": "alice"})
		}, [10]int{201, 201, 403, 401, 401, 201, 403, 403, 403, 401}},
		{"POST /v1/customer-tokens/revoke", func(c string) *http.Request {
			return w.request("POST", "/v1/customer-tokens/revoke", c, map[string]any{"endUserId": "zed"})
		}, [10]int{200, 200, 403, 401, 401, 200, 403, 403, 403, 401}},
		{"GET /v1/broker/{collection}", get("/v1/broker/orders?endUserId=alice"), [10]int{200, 200, 403, 401, 401, 200, 403, 403, 403, 401}},
		{"GET /v1/broker/{collection}/{key}", get("/v1/broker/orders/o-1?endUserId=alice"), [10]int{200, 200, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"PUT /v1/broker/{collection}/{key}", func(c string) *http.Request {
			return w.request("PUT", "/v1/broker/notes/n-1?endUserId=alice", c, map[string]any{"value": "hi"})
		}, [10]int{200, 200, 403, 401, 401, 200, 403, 403, 403, 401}},
		{"DELETE /v1/broker/{collection}/{key}", func(c string) *http.Request {
			return w.request("DELETE", "/v1/broker/tmp/"+freshRecord()+"?endUserId=alice", c, nil)
		}, [10]int{204, 204, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"POST /v1/members", func(c string) *http.Request {
			return w.request("POST", "/v1/members", c, map[string]any{"name": "Cy Ng", "role": "viewer"})
		}, [10]int{201, 403, 403, 401, 401, 201, 403, 403, 403, 401}},
		{"GET /v1/members", get("/v1/members"), [10]int{200, 200, 403, 401, 401, 200, 200, 200, 403, 401}},
		{"GET /v1/members/{id}", get("/v1/members/" + f.member), [10]int{200, 200, 403, 401, 401, 404, 200, 200, 403, 401}},
		{"PATCH /v1/members/{id}", func(c string) *http.Request {
			return w.request("PATCH", "/v1/members/"+f.member, c, map[string]any{"email": "ana@example.com"})
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"DELETE /v1/members/{id}", func(c string) *http.Request {
			return w.request("DELETE", "/v1/members/"+w.newMember(freshName("Dee")), c, nil)
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"POST /v1/groups", func(c string) *http.Request {
			return w.request("POST", "/v1/groups", c, map[string]any{"name": freshGroup()})
		}, [10]int{201, 403, 403, 401, 401, 201, 403, 403, 403, 401}},
		{"GET /v1/groups", get("/v1/groups"), [10]int{200, 200, 403, 401, 401, 200, 200, 200, 403, 401}},
		{"GET /v1/groups/{name}", get("/v1/groups/" + f.group), [10]int{200, 200, 403, 401, 401, 404, 200, 200, 403, 401}},
		{"PATCH /v1/groups/{name}", func(c string) *http.Request {
			return w.request("PATCH", "/v1/groups/"+f.group, c, map[string]any{"description": "changed"})
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"DELETE /v1/groups/{name}", func(c string) *http.Request {
			return w.request("DELETE", "/v1/groups/"+w.newGroup(), c, nil)
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"POST /v1/keys", func(c string) *http.Request {
			return w.request("POST", "/v1/keys", c, map[string]any{"name": "ci", "role": "developer"})
		}, [10]int{201, 403, 403, 401, 401, 201, 403, 403, 403, 401}},
		{"GET /v1/keys", get("/v1/keys"), [10]int{200, 403, 403, 401, 401, 200, 403, 403, 403, 401}},
		{"DELETE /v1/keys/{id}", func(c string) *http.Request {
			return w.request("DELETE", "/v1/keys/"+w.newKey("developer").ID, c, nil)
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"POST /v1/mcp-keys", func(c string) *http.Request {
			return w.request("POST", "/v1/mcp-keys", c, map[string]any{"agent": "refunds", "endUserId": "alice"})
		}, [10]int{201, 403, 403, 401, 401, 201, 403, 403, 403, 401}},
		{"GET /v1/mcp-keys", get("/v1/mcp-keys"), [10]int{200, 403, 403, 401, 401, 200, 403, 403, 403, 401}},
		{"DELETE /v1/mcp-keys/{id}", func(c string) *http.Request {
			return w.request("DELETE", "/v1/mcp-keys/"+w.newMCPKey("plain", "bob").ID, c, nil)
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"POST /mcp", func(c string) *http.Request {
			return w.request("POST", "/mcp", c, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, "Accept", "application/json, text/event-stream")
		}, [10]int{403, 403, 403, 401, 401, 403, 403, 403, 200, 401}},
		{"GET /v1/rules", get("/v1/rules"), [10]int{200, 200, 403, 401, 401, 200, 200, 200, 403, 401}},
		{"GET /v1/rules/{id}", get("/v1/rules/" + w.newRule("alice").ID), [10]int{200, 200, 403, 401, 401, 404, 200, 200, 403, 401}},
		{"DELETE /v1/rules/{id}", func(c string) *http.Request {
			return w.request("DELETE", "/v1/rules/"+w.newRule("alice").ID, c, nil)
		}, [10]int{200, 200, 403, 401, 401, 404, 200, 403, 403, 401}},
		{"POST /v1/webhooks", func(c string) *http.Request {
			return w.request("POST", "/v1/webhooks", c, map[string]any{"url": rc.URL})
		}, [10]int{201, 403, 403, 401, 401, 201, 403, 403, 403, 401}},
		{"GET /v1/webhooks", get("/v1/webhooks"), [10]int{200, 403, 403, 401, 401, 200, 403, 403, 403, 401}},
		{"GET /v1/webhooks/{id}", get("/v1/webhooks/" + f.webhook), [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"PATCH /v1/webhooks/{id}", func(c string) *http.Request {
			return w.request("PATCH", "/v1/webhooks/"+f.webhook, c, map[string]any{"includeInput": true})
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"DELETE /v1/webhooks/{id}", func(c string) *http.Request {
			return w.request("DELETE", "/v1/webhooks/"+w.newWebhook(rc.URL).ID, c, nil)
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"POST /v1/webhooks/{id}/rotate", func(c string) *http.Request {
			return w.request("POST", "/v1/webhooks/"+f.webhook+"/rotate", c, nil)
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"POST /v1/webhooks/{id}/ping", func(c string) *http.Request {
			return w.request("POST", "/v1/webhooks/"+f.webhook+"/ping", c, nil)
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"GET /v1/webhooks/{id}/deliveries", get("/v1/webhooks/" + f.webhook + "/deliveries"), [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"GET /v1/webhooks/{id}/deliveries/{deliveryId}", get("/v1/webhooks/" + f.webhook + "/deliveries/" + f.delivery), [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
		{"POST /v1/webhooks/{id}/retry", func(c string) *http.Request {
			return w.request("POST", "/v1/webhooks/"+f.webhook+"/retry", c, map[string]any{"deliveryId": f.delivery})
		}, [10]int{200, 403, 403, 401, 401, 404, 403, 403, 403, 401}},
	}
	// Every route api.go registers has its row (a name may add a case:
	// "GET /v1/runs/{id} (another end user's)").
	src, err := os.ReadFile("api.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`s\.(?:handle|mux\.HandleFunc)\("([A-Z]+ [^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		if !slices.ContainsFunc(routes, func(rt route) bool { return rt.name == m[1] || strings.HasPrefix(rt.name, m[1]+" (") }) {
			t.Errorf("route %s has no row in the authorization matrix", m[1])
		}
	}
	for _, rt := range routes {
		for i, p := range principals {
			t.Run(rt.name+"/"+p, func(t *testing.T) {
				prev := w.t
				w.t = t
				defer func() { w.t = prev }()
				resp := w.send(rt.req(w.credentialOf(p)))
				if resp.status != rt.want[i] {
					t.Fatalf("%s as %s: status %d, want %d; body: %s", rt.name, p, resp.status, rt.want[i], resp.body)
				}
				wantCode := map[int]string{401: api.CodeUnauthenticated, 403: api.CodeForbidden, 404: api.CodeNotFound}[resp.status]
				if wantCode != "" {
					if got := resp.apiErr().Code; got != wantCode {
						t.Errorf("error code %q, want %q", got, wantCode)
					}
				}
			})
		}
	}
}

func TestCustomerCannotApprove(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	resp := w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", w.customer, nil), 403)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "Customers cannot approve their own actions") {
		t.Errorf("message %q", msg)
	}
	var a wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+run.Approval.ID, w.owner, nil), 200).decode(&a)
	if a.Status != "pending" {
		t.Errorf("approval is %s after a customer's attempt, want pending", a.Status)
	}
}

func TestCustomerTokenScope(t *testing.T) {
	t.Parallel()
	w := setup(t)
	alice := w.awaiting("alice")
	bob := w.wait(w.start("plain", "bob", nil).ID, "terminal")

	var list wire.RunList
	w.must(w.do("GET", "/v1/runs", w.customer, nil), 200).decode(&list)
	if len(list.Runs) != 1 || list.Runs[0].ID != alice.ID {
		t.Fatalf("customer lists %+v, want only %s", list.Runs, alice.ID)
	}
	w.must(w.do("GET", "/v1/runs?endUserId=bob", w.customer, nil), 403)

	var run wire.Run
	w.must(w.do("GET", "/v1/runs/"+alice.ID, w.customer, nil), 200).decode(&run)
	if run.Status != "awaiting-approval" || run.Approval == nil || run.Approval.Tool != "refundOrder" {
		t.Errorf("customer sees %+v, want awaiting-approval on refundOrder", run)
	}
	w.must(w.do("GET", "/v1/runs/"+bob.ID, w.customer, nil), 404)

	// EventSource cannot set headers: the token may come as access_token.
	s := w.stream("/v1/runs/"+bob.ID+"/events?access_token="+w.customerToken("bob", 60), "")
	if evs := s.rest(); len(evs) == 0 || evs[len(evs)-1].event != "run.succeeded" {
		t.Errorf("bob's stream: %v", evs)
	}
	// Only customer tokens travel in the URL.
	w.must(w.do("GET", "/v1/runs?access_token="+w.owner, "", nil), 401)

	// A token expires.
	short := w.customerToken("alice", 60)
	w.must(w.do("GET", "/v1/runs/"+alice.ID, short, nil), 200)
	w.clock.Advance(61 * time.Second)
	resp := w.must(w.do("GET", "/v1/runs/"+alice.ID, short, nil), 401)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "expired") {
		t.Errorf("message %q", msg)
	}

	// A forged or tampered token is refused.
	forged := w.customer[:len(w.customer)-2] + "xx"
	w.must(w.do("GET", "/v1/runs", forged, nil), 401)
	w.must(w.do("GET", "/v1/runs", "stc_garbage", nil), 401)

	// TTL limits.
	w.must(w.do("POST", "/v1/customer-tokens", w.owner, map[string]any{"endUserId": "alice", "ttlSeconds": 90000}), 400)
	w.must(w.do("POST", "/v1/customer-tokens", w.owner, map[string]any{"ttlSeconds": 60}), 400)
	var tok wire.CustomerToken
	w.must(w.do("POST", "/v1/customer-tokens", w.owner, map[string]any{"endUserId": "carol"}), 201).decode(&tok)
	if want := w.clock.Now().Add(time.Hour); !tok.ExpiresAt.Equal(want) || tok.EndUserID != "carol" {
		t.Errorf("token %+v, want default expiry %s", tok, want)
	}
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var k wire.APIKey
	resp := w.must(w.do("POST", "/v1/keys", w.owner, map[string]any{"name": "ci"}), 201)
	resp.decode(&k)
	if !strings.HasPrefix(k.Key, api.KeyPrefix) || k.Role != "developer" || !strings.HasPrefix(k.Key, k.Prefix) || len(k.Prefix) < 8 {
		t.Fatalf("created %+v", k)
	}
	// The secret is shown once: never in a list, and no hash anywhere.
	list := w.must(w.do("GET", "/v1/keys", w.owner, nil), 200)
	if strings.Contains(string(list.body), k.Key) || strings.Contains(string(list.body), "hash") {
		t.Errorf("key list leaks secrets: %s", list.body)
	}
	var listed wire.KeyList
	list.decode(&listed)
	for i, lk := range listed.Keys {
		list.lacks([]string{"keys", strconv.Itoa(i)}, "key")
		if lk.RevokedAt.IsZero() {
			list.lacks([]string{"keys", strconv.Itoa(i)}, "revokedAt")
		}
	}
	w.must(w.do("GET", "/v1/agents", k.Key, nil), 200)
	w.must(w.do("DELETE", "/v1/keys/"+k.ID, w.owner, nil), 200)
	resp = w.must(w.do("GET", "/v1/agents", k.Key, nil), 401)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "revoked") || !strings.Contains(msg, k.Prefix) {
		t.Errorf("message %q", msg)
	}
	w.must(w.do("POST", "/v1/keys", w.owner, map[string]any{"role": "admin"}), 400)
	w.must(w.do("DELETE", "/v1/keys/key_nope", w.owner, nil), 404)

	// The last owner key cannot be revoked.
	var keys wire.KeyList
	w.must(w.do("GET", "/v1/keys", w.owner, nil), 200).decode(&keys)
	var ownerID string
	for _, k := range keys.Keys {
		if k.Role == "owner" {
			ownerID = k.ID
		}
	}
	resp = w.must(w.do("DELETE", "/v1/keys/"+ownerID, w.owner, nil), 409)
	if got := resp.apiErr().Code; got != api.CodeConflict {
		t.Errorf("code %q", got)
	}
	w.must(w.do("GET", "/v1/keys", w.owner, nil), 200)

	// Unknown credentials and malformed headers.
	w.must(w.do("GET", "/v1/runs", "stk_nope", nil), 401)
	w.must(w.do("GET", "/v1/runs", "sk-something", nil), 401)
	w.must(w.send(func() *http.Request {
		r := w.request("GET", "/v1/runs", "", nil)
		r.Header.Set("Authorization", "Basic "+w.owner)
		return r
	}()), 401)
}

func TestBrokerToken(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.start("leak", "alice", nil)
	run = w.wait(run.ID, "settled")
	if run.Status != "awaiting-approval" {
		t.Fatalf("leak run is %s", run.Status)
	}
	var rec wire.BrokerRecord
	w.must(w.do("GET", "/v1/broker/secrets/token?endUserId=alice", w.owner, nil), 200).decode(&rec)
	var reversed string
	if err := json.Unmarshal(rec.Value, &reversed); err != nil {
		t.Fatal(err)
	}
	r := []rune(reversed)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	token := string(r)
	if !strings.HasPrefix(token, api.BrokerTokenPrefix) {
		t.Fatalf("token %q", token)
	}

	// Its own scope, while the run is active.
	w.must(w.do("PUT", "/v1/broker/orders/o-9", token, map[string]any{"value": map[string]any{"id": "o-9"}}), 200)
	w.must(w.do("GET", "/v1/broker/orders/o-9?endUserId=alice", w.owner, nil), 200)
	var page wire.BrokerList
	w.must(w.do("GET", "/v1/broker/orders", token, nil), 200).decode(&page)
	if len(page.Records) != 1 || page.Records[0].Key != "o-9" || page.Records[0].EndUserID != "alice" {
		t.Errorf("broker list %+v", page.Records)
	}
	w.must(w.do("GET", "/v1/broker/orders?endUserId=bob", token, nil), 403)
	// Nothing else.
	for _, path := range []string{"/v1/runs", "/v1/runs/" + run.ID, "/v1/approvals", "/v1/agents", "/v1/keys"} {
		w.must(w.do("GET", path, token, nil), 403)
	}
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", token, nil), 403)
	// A tampered token is refused.
	w.must(w.do("GET", "/v1/broker/orders", token+"x", nil), 401)
	// Once the run ended, the token is dead.
	w.must(w.do("POST", "/v1/runs/"+run.ID+"/cancel", w.owner, nil), 200)
	w.must(w.do("GET", "/v1/broker/orders", token, nil), 401)
}

func TestBrokerRoutes(t *testing.T) {
	t.Parallel()
	w := setup(t)
	w.must(w.do("GET", "/v1/broker/orders", w.owner, nil), 400)
	resp := w.must(w.do("GET", "/v1/broker/bad%20name/k?endUserId=alice", w.owner, nil), 400)
	if f := resp.apiErr().Details["fields"]; !strings.Contains(fmt.Sprint(f), "collection") {
		t.Errorf("details %v", f)
	}
	w.must(w.do("PUT", "/v1/broker/orders/o-1?endUserId=alice", w.owner, map[string]any{}), 400)
	w.must(w.do("PUT", "/v1/broker/orders/o-1?endUserId=alice", w.owner, map[string]any{"value": map[string]any{"amount": 5}}), 200)
	// End users are separate.
	w.must(w.do("GET", "/v1/broker/orders/o-1?endUserId=bob", w.owner, nil), 404)
	var rec wire.BrokerRecord
	w.must(w.do("GET", "/v1/broker/orders/o-1?endUserId=alice", w.developer, nil), 200).decode(&rec)
	if string(rec.Value) != `{"amount":5}` || rec.Collection != "orders" || rec.Key != "o-1" {
		t.Errorf("record %+v", rec)
	}
	w.must(w.do("DELETE", "/v1/broker/orders/o-1?endUserId=alice", w.owner, nil), 204)
	w.must(w.do("DELETE", "/v1/broker/orders/o-1?endUserId=alice", w.owner, nil), 404)
	// Keys follow the same rule as in handlers: whatever a handler can store,
	// the API can read and delete.
	for _, key := range []string{"ann@example.com", "orders%2F2026%2Fo-1"} {
		w.must(w.do("PUT", "/v1/broker/contacts/"+key+"?endUserId=alice", w.owner, map[string]any{"value": 1}), 200)
		w.must(w.do("GET", "/v1/broker/contacts/"+key+"?endUserId=alice", w.owner, nil), 200)
		w.must(w.do("DELETE", "/v1/broker/contacts/"+key+"?endUserId=alice", w.owner, nil), 204)
	}
}
