package api_test

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"stead/api"
	"stead/api/wire"
	"stead/notify/notifytest"
)

// deepJSON is an array nested n deep.
func deepJSON(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// snapshot is what a refused request must not change: project A's runs,
// approvals, deployments, keys and a broker collection.
func (w *world) snapshot() string {
	w.t.Helper()
	var b strings.Builder
	for _, path := range []string{"/v1/runs?limit=500", "/v1/approvals?status=all", "/v1/deployments", "/v1/keys", "/v1/mcp-keys", "/v1/members?removed=true", "/v1/groups", "/v1/webhooks", "/v1/broker/notes?endUserId=alice"} {
		b.WriteString(path + " " + string(w.must(w.do("GET", path, w.owner, nil), 200).body))
	}
	return b.String()
}

// refused checks a 400 invalid_argument whose details name field (and, when
// set, whose message says what).
func refused(t *testing.T, resp *response, field, says string) {
	t.Helper()
	if resp.status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", resp.status, resp.body)
	}
	e := resp.apiErr()
	fields, _ := e.Details["fields"].([]any)
	var got string
	if len(fields) == 1 {
		got, _ = fields[0].(map[string]any)["field"].(string)
	}
	if e.Code != api.CodeInvalidArgument || len(fields) != 1 || got != field || !strings.Contains(e.Message, says) {
		t.Errorf("error %s %q (fields %v); want invalid_argument naming %q, saying %q", e.Code, e.Message, e.Details["fields"], field, says)
	}
}

// The requests of the issue: each is refused, naming the field, and starts
// or decides nothing.
func TestStrictBodiesChangeNothing(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	before := w.snapshot()
	runs := "/v1/agents/refunds/runs"
	approve := "/v1/approvals/" + run.Approval.ID + "/approve"

	for _, c := range []struct {
		name, path, body, field, says string
	}{
		{"case-variant endUserId", runs, `{"endUserId":"alice","ENDUSERID":"mallory","input":{"orderId":"o-1"}}`, "ENDUSERID", `names are case-sensitive: did you mean "endUserId"?`},
		{"duplicate endUserId", runs, `{"endUserId":"alice","endUserId":"mallory","input":{"orderId":"o-1"}}`, "endUserId", "appears more than once"},
		{"invalid UTF-8 endUserId", runs, "{\"endUserId\":\"eu\xff\",\"input\":{\"orderId\":\"o-1\"}}", "endUserId", "not valid UTF-8"},
		{"invalid UTF-8 in input", runs, "{\"endUserId\":\"alice\",\"input\":{\"orderId\":\"o-\xfe\"}}", "input.orderId", "not valid UTF-8"},
		{"invalid UTF-8 name in input", runs, "{\"endUserId\":\"alice\",\"input\":{\"order\xffId\":\"o-1\"}}", "input", "member name that is not valid UTF-8"},
		{"duplicate in input", runs, `{"endUserId":"alice","input":{"orderId":"o-1","orderId":"o-2"}}`, "input.orderId", "appears more than once"},
		{"half a surrogate pair", runs, `{"endUserId":"eu\udfff","input":{"orderId":"o-1"}}`, "endUserId", "surrogate"},
		{"nesting 10000 deep", runs, `{"endUserId":"alice","input":{"orderId":"o-1","x":` + deepJSON(10000) + `}}`, "input.x" + strings.Repeat("[0]", 61), "deeper than 64 levels"},
		{"approve with INPUT", approve, `{"INPUT":{"orderId":"o-1","amount":1}}`, "INPUT", `did you mean "input"?`},
		{"approve with Input and input", approve, `{"input":{"orderId":"o-1","amount":12},"Input":{"orderId":"o-1","amount":1}}`, "Input", "not a known field"},
		{"approve with a duplicate in input", approve, `{"input":{"orderId":"o-1","amount":12,"amount":1}}`, "input.amount", "appears more than once"},
		{"approve with invalid UTF-8 in input", approve, "{\"input\":{\"orderId\":\"o-\xff\",\"amount\":1}}", "input.orderId", "not valid UTF-8"},
		{"approve nesting 10000 deep", approve, `{"input":` + deepJSON(10000) + `}`, "input" + strings.Repeat("[0]", 62), "deeper than 64 levels"},
	} {
		t.Run(c.name, func(t *testing.T) {
			refused(t, w.do("POST", c.path, w.developer, c.body), c.field, c.says)
		})
	}
	if after := w.snapshot(); after != before {
		t.Errorf("refused requests changed state:\nbefore %s\nafter  %s", before, after)
	}
	var list wire.RunList
	w.must(w.do("GET", "/v1/runs?endUserId=mallory", w.owner, nil), 200).decode(&list)
	if len(list.Runs) != 0 {
		t.Errorf("mallory has runs: %+v", list.Runs)
	}
	var a wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+run.Approval.ID, w.owner, nil), 200).decode(&a)
	if a.Status != "pending" || a.DecidedBy != "" {
		t.Errorf("approval %s after refused decisions (by %q)", a.Status, a.DecidedBy)
	}
	// The same body, sent right, is taken: the refusals were for the JSON.
	w.must(w.do("POST", approve, w.developer, `{"input":{"orderId":"o-1","amount":1}}`), 200)
}

// bodyRoute is a route that takes a body, with a body it accepts.
type bodyRoute struct {
	pattern string
	path    string
	// fields is an accepted body's members, in order, as raw JSON values.
	// The first is a string field the hostile bodies play with.
	fields [][2]string
}

func (r bodyRoute) body(extra ...[2]string) string {
	var parts []string
	for _, f := range append(slices.Clone(r.fields), extra...) {
		parts = append(parts, `"`+f[0]+`":`+f[1])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Every route that takes a body refuses case variants, duplicate names,
// invalid UTF-8 and deep nesting with a 400 naming the field, and changes
// nothing.
func TestStrictBodiesEveryRoute(t *testing.T) {
	t.Parallel()
	rc := notifytest.NewReceiver(t, "/hooks/stead")
	var n *notifications
	w := setup(t, withNotifier(t, &n))
	run := w.awaiting("alice")
	hook := w.newWebhook(rc.URL).ID
	ping := w.ping(hook).ID
	var ana wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana Diaz", "role": "approver"}), 201).decode(&ana)
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance"}), 201)
	routes := []bodyRoute{
		{"POST /v1/deployments", "/v1/deployments", [][2]string{{"bundle", quote(testHandlers)}, {"config", testConfig}}},
		{"POST /v1/agents/{agent}/runs", "/v1/agents/plain/runs", [][2]string{{"endUserId", `"alice"`}, {"input", `{}`}}},
		{"POST /v1/runs/{id}/cancel", "/v1/runs/" + run.ID + "/cancel", nil},
		{"POST /v1/approvals/{id}/approve", "/v1/approvals/" + run.Approval.ID + "/approve", [][2]string{{"note", `"ok"`}, {"input", `{"orderId":"o-1","amount":1}`}}},
		{"POST /v1/approvals/{id}/deny", "/v1/approvals/" + run.Approval.ID + "/deny", [][2]string{{"note", `"no"`}}},
		{"POST /v1/approvals/{id}/check-input", "/v1/approvals/" + run.Approval.ID + "/check-input", [][2]string{{"input", `{"orderId":"o-1","amount":1}`}}},
		{"POST /v1/customer-tokens", "/v1/customer-tokens", [][2]string{{"endUserId", `"alice"`}, {"ttlSeconds", `60`}}},
		{"POST /v1/customer-tokens/revoke", "/v1/customer-tokens/revoke", [][2]string{{"endUserId", `"bob"`}}},
		{"PUT /v1/broker/{collection}/{key}", "/v1/broker/notes/n-1?endUserId=alice", [][2]string{{"value", `"hi"`}}},
		{"POST /v1/keys", "/v1/keys", [][2]string{{"name", `"ci"`}, {"role", `"developer"`}}},
		{"POST /v1/mcp-keys", "/v1/mcp-keys", [][2]string{{"agent", `"refunds"`}, {"endUserId", `"alice"`}, {"name", `"claude"`}}},
		{"POST /v1/members", "/v1/members", [][2]string{{"name", `"Bo Li"`}, {"role", `"approver"`}}},
		{"PATCH /v1/members/{id}", "/v1/members/" + ana.ID, [][2]string{{"name", `"Ana D."`}, {"notify", `{"email":"none"}`}}},
		{"PATCH /v1/me/notifications", "/v1/me/notifications", [][2]string{{"email", `"requests"`}}},
		{"POST /v1/groups", "/v1/groups", [][2]string{{"name", `"legal"`}, {"members", `["` + ana.ID + `"]`}}},
		{"PATCH /v1/groups/{name}", "/v1/groups/finance", [][2]string{{"description", `"Refunds"`}, {"add", `["` + ana.ID + `"]`}}},
		{"POST /v1/webhooks", "/v1/webhooks", [][2]string{{"url", quote(rc.URL)}, {"events", `["approval.requested"]`}, {"agents", `["refunds"]`}, {"includeInput", `true`}}},
		{"PATCH /v1/webhooks/{id}", "/v1/webhooks/" + hook, [][2]string{{"url", quote(rc.URL + "/v2")}, {"events", `[]`}, {"enabled", `true`}}},
		{"POST /v1/webhooks/{id}/rotate", "/v1/webhooks/" + hook + "/rotate", nil},
		{"POST /v1/webhooks/{id}/ping", "/v1/webhooks/" + hook + "/ping", nil},
		{"POST /v1/webhooks/{id}/retry", "/v1/webhooks/" + hook + "/retry", [][2]string{{"deliveryId", quote(ping)}}},
	}
	checkRouteTable(t, routes)
	before := w.snapshot()
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt.pattern, " ")
		type hostile struct{ name, body, field, says string }
		cases := []hostile{
			{"invalid UTF-8 name", "{\"n\xffte\":1}", "", "member name that is not valid UTF-8"},
			{"deep", `{"x":` + deepJSON(100) + `}`, "x" + strings.Repeat("[0]", 62), "deeper than 64 levels"},
			{"trailing", rt.body() + `{}`, "", "data after its JSON object"},
		}
		if len(rt.fields) > 0 {
			name, val := rt.fields[0][0], rt.fields[0][1]
			upper := strings.ToUpper(name)
			cases = append(cases,
				hostile{"case variant", rt.body([2]string{upper, val}), upper, "names are case-sensitive"},
				hostile{"case variant alone", `{"` + upper + `":` + val + `}`, upper, "names are case-sensitive"},
				hostile{"duplicate", rt.body(rt.fields[0]), name, "appears more than once"},
				hostile{"invalid UTF-8", "{\"" + name + "\":\"a\xff\"}", name, "not valid UTF-8"},
				hostile{"deep value", `{"` + name + `":` + deepJSON(64) + `}`, name + strings.Repeat("[0]", 62), "deeper than 64 levels"},
			)
		}
		for _, c := range cases {
			t.Run(rt.pattern+"/"+c.name, func(t *testing.T) {
				refused(t, w.do(method, rt.path, w.owner, c.body), c.field, c.says)
			})
		}
	}
	if after := w.snapshot(); after != before {
		t.Errorf("refused requests changed state:\nbefore %s\nafter  %s", before, after)
	}
	// Each good body is accepted: the refusals above were for the JSON alone.
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt.pattern, " ")
		if resp := w.do(method, rt.path, w.owner, rt.body()); resp.status >= 300 && resp.status != http.StatusConflict {
			t.Errorf("%s with %s: %d %s", rt.pattern, rt.body(), resp.status, resp.body)
		}
	}
}

// checkRouteTable fails when api.go registers a route with a body that the
// table does not cover.
func checkRouteTable(t *testing.T, routes []bodyRoute) {
	t.Helper()
	src, err := os.ReadFile("api.go")
	if err != nil {
		t.Fatal(err)
	}
	// POST /mcp takes JSON-RPC with an MCP key: TestMCPStrictBodies.
	covered := map[string]bool{"POST /mcp": true}
	for _, rt := range routes {
		covered[rt.pattern] = true
	}
	for _, m := range regexp.MustCompile(`s\.handle\("((?:POST|PUT|PATCH) [^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		if !covered[m[1]] {
			t.Errorf("route %s takes a body but TestStrictBodiesEveryRoute does not cover it", m[1])
		}
	}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteString(`\` + string(r))
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
