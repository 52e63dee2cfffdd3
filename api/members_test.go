package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"stead/api"
	"stead/api/wire"
)

// A member added with a key decides in their own name: the approval, its
// trace and the run's error name them; a new name reaches their key at
// once; removing them stops their key.
func TestMembersDecideByName(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var ana wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana Diaz", "email": "ana@example.com", "role": "approver", "key": true}), 201).decode(&ana)
	if !strings.HasPrefix(ana.ID, "mem_") || ana.Role != "approver" || ana.Key == nil || !strings.HasPrefix(ana.Key.Key, api.KeyPrefix) {
		t.Fatalf("created member %+v", ana)
	}
	if ana.Key.MemberID != ana.ID || ana.Key.MemberName != "Ana Diaz" || ana.Key.Role != "approver" {
		t.Errorf("the member's key: %+v", ana.Key)
	}
	key := ana.Key.Key

	var me struct {
		Role, MemberID, MemberName string
	}
	w.must(w.do("GET", "/v1/me", key, nil), 200).decode(&me)
	if me.Role != "approver" || me.MemberID != ana.ID || me.MemberName != "Ana Diaz" {
		t.Errorf("/v1/me = %+v", me)
	}

	run := w.awaiting("alice")
	var a wire.Approval
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/deny", key, map[string]any{"note": "no"}), 200).decode(&a)
	if a.DecidedBy != ana.Key.ID || a.DecidedByName != "Ana Diaz" {
		t.Errorf("decided by %q (%q), want Ana Diaz's key", a.DecidedBy, a.DecidedByName)
	}
	done := w.wait(run.ID, "terminal")
	if done.Error == nil || !strings.Contains(done.Error.Message, "denied by Ana Diaz") {
		t.Errorf("run error %+v", done.Error)
	}
	var events wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.owner, nil), 200).decode(&events)
	found := false
	for _, e := range events.Events {
		if e.Type == "approval.denied" {
			found = strings.Contains(string(e.Data), `"byName":"Ana Diaz"`) && strings.Contains(string(e.Data), `"by":"`+ana.Key.ID+`"`)
		}
	}
	if !found {
		t.Error("the trace's approval.denied does not name Ana Diaz and her key")
	}

	// Renamed: her key says so at once.
	name := "Ana D."
	var renamed wire.Member
	w.must(w.do("PATCH", "/v1/members/"+ana.ID, w.owner, map[string]any{"name": name}), 200).decode(&renamed)
	w.must(w.do("GET", "/v1/me", key, nil), 200).decode(&me)
	if renamed.Name != name || me.MemberName != name {
		t.Errorf("after the rename: member %q, key's member %q", renamed.Name, me.MemberName)
	}
	var shown wire.Member
	w.must(w.do("GET", "/v1/members/"+ana.ID, w.owner, nil), 200).decode(&shown)
	if len(shown.Keys) != 1 || shown.Keys[0].ID != ana.Key.ID || shown.Keys[0].Key != "" {
		t.Errorf("GET member keys = %+v", shown.Keys)
	}

	// Removed: her key stops working; the list leaves her out unless asked.
	w.must(w.do("DELETE", "/v1/members/"+ana.ID, w.owner, nil), 200)
	w.must(w.do("GET", "/v1/me", key, nil), 401)
	var list wire.MemberList
	w.must(w.do("GET", "/v1/members", w.owner, nil), 200).decode(&list)
	for _, m := range list.Members {
		if m.ID == ana.ID {
			t.Errorf("a removed member is listed: %+v", m)
		}
	}
	w.must(w.do("GET", "/v1/members?removed=true", w.owner, nil), 200).decode(&list)
	if !containsMember(list.Members, ana.ID) {
		t.Error("removed=true leaves out the removed member")
	}
}

func containsMember(ms []wire.Member, id string) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}

// Keys made before members read as members named after the key; the last
// owner cannot be removed or demoted; bad requests name the field.
func TestMembersRules(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var list wire.MemberList
	w.must(w.do("GET", "/v1/members", w.developer, nil), 200).decode(&list)
	var owner wire.Member
	for _, m := range list.Members {
		if m.Name == "owner" && m.Role == "owner" {
			owner = m
		}
	}
	if owner.ID == "" {
		t.Fatalf("the owner key's member is not listed: %+v", list.Members)
	}
	if e := w.must(w.do("DELETE", "/v1/members/"+owner.ID, w.owner, nil), 409).apiErr(); !strings.Contains(e.Message, "last owner") {
		t.Errorf("removing the last owner: %s", e.Message)
	}
	w.must(w.do("PATCH", "/v1/members/"+owner.ID, w.owner, map[string]any{"role": "developer"}), 409)

	refused(t, w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Bo", "role": "admin"}), "role", "must be")
	refused(t, w.do("POST", "/v1/members", w.owner, map[string]any{"role": "viewer"}), "name", "")
	refused(t, w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Bo", "role": "viewer", "email": "not an address"}), "email", "email address")
	w.must(w.do("GET", "/v1/members/mem_nope", w.owner, nil), 404)
	w.must(w.do("POST", "/v1/members", w.developer, map[string]any{"name": "Bo", "role": "viewer"}), 403)

	// A key for an existing member takes the member's role.
	var bo wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Bo Li", "role": "viewer"}), 201).decode(&bo)
	var k wire.APIKey
	w.must(w.do("POST", "/v1/keys", w.owner, map[string]any{"name": "bo's laptop", "member": bo.ID}), 201).decode(&k)
	if k.MemberID != bo.ID || k.Role != "viewer" || k.MemberName != "Bo Li" {
		t.Errorf("key for a member: %+v", k)
	}
	refused(t, w.do("POST", "/v1/keys", w.owner, map[string]any{"member": bo.ID, "role": "owner"}), "role", "its member's role")
	refused(t, w.do("POST", "/v1/keys", w.owner, map[string]any{"member": "mem_nope"}), "member", "no member")
}

// separateFrom "requester": the member who started a run may not approve
// or deny its approvals; another member may. The refusal names the setting.
func TestSeparationOfDuties(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cfg := strings.Replace(testConfig, `"approvals": { "timeout": "10m" },`, `"approvals": { "timeout": "10m", "separateFrom": "requester" },`, 1)
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201)
	var ana wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana Diaz", "role": "developer", "key": true}), 201).decode(&ana)
	var run wire.Run
	w.must(w.do("POST", "/v1/agents/refunds/runs?wait=10s", ana.Key.Key, map[string]any{"endUserId": "alice", "input": map[string]any{"orderId": "o-1", "amount": 5}}), 202).decode(&run)
	if run.Status != "awaiting-approval" || run.Approval == nil {
		t.Fatalf("run %s (%+v)", run.Status, run.Approval)
	}
	var a wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+run.Approval.ID, w.owner, nil), 200).decode(&a)
	if a.SeparatedBy != `separateFrom "requester" on agent refunds` {
		t.Errorf("separatedBy = %q", a.SeparatedBy)
	}
	for _, verb := range []string{"approve", "deny"} {
		e := w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/"+verb, ana.Key.Key, map[string]any{}), 403).apiErr()
		if !strings.Contains(e.Message, "you started this run") || !strings.Contains(e.Message, `separateFrom "requester" on agent refunds`) {
			t.Errorf("%s by the requester: %s", verb, e.Message)
		}
	}
	// A second key of the same member is the same person.
	var second wire.APIKey
	w.must(w.do("POST", "/v1/keys", w.owner, map[string]any{"member": ana.ID}), 201).decode(&second)
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", second.Key, map[string]any{}), 403)
	// Another member decides.
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", w.owner, map[string]any{}), 200)
	if done := w.wait(run.ID, "terminal"); done.Status != "succeeded" {
		t.Errorf("run %s after another member approved", done.Status)
	}
}

// A deny note reaches the customer only where the tool's approvals say
// noteToCustomer; the approval says so, for the console's note field.
func TestCustomerSeesANoteOnlyWhenTheToolSaysSo(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cfg := strings.Replace(testConfig, `"approvals": { "timeout": "10m" },`, `"approvals": { "timeout": "10m", "noteToCustomer": true },`, 1)
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201)
	run := w.awaiting("alice")
	var a wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+run.Approval.ID, w.owner, nil), 200).decode(&a)
	if !a.NoteToCustomer {
		t.Errorf("the approval does not say its note reaches the customer: %+v", a)
	}
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/deny", w.owner, map[string]any{"note": "not eligible"}), 200)
	w.wait(run.ID, "terminal")
	var seen wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.customer, nil), 200).decode(&seen)
	shown := false
	for _, e := range seen.Events {
		if e.Type == "approval.denied" {
			shown = string(e.Data) == `{"approvalId":"`+run.Approval.ID+`","note":"not eligible","tool":"refundOrder"}`
		}
	}
	if !shown {
		t.Errorf("the customer's approval.denied lacks the note: %+v", seen.Events)
	}
}

// A member chooses their own email notifications (PATCH
// /v1/me/notifications), GET /v1/me shows them, and an owner sets anyone's
// through PATCH /v1/members/{id}; a bad level is refused naming the
// field, and changes nothing.
func TestMemberNotifications(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var ana wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana Diaz", "email": "ana@example.com", "role": "approver", "key": true}), 201).decode(&ana)
	key := ana.Key.Key
	type me struct {
		MemberID string               `json:"memberId"`
		Notify   *wire.NotifySettings `json:"notify"`
	}
	myEmail := func(cred string) string {
		t.Helper()
		var m me
		w.must(w.do("GET", "/v1/me", cred, nil), 200).decode(&m)
		if m.Notify == nil {
			t.Fatalf("GET /v1/me shows no notification settings")
		}
		return m.Notify.Email
	}
	if got := myEmail(key); got != "all" {
		t.Errorf("a new member's email setting is %q, want all", got)
	}

	var set wire.NotifySettings
	w.must(w.do("PATCH", "/v1/me/notifications", key, map[string]any{"email": "requests"}), 200).decode(&set)
	if set.Email != "requests" || myEmail(key) != "requests" {
		t.Errorf("after PATCH /v1/me/notifications: answered %q, GET /v1/me says %q; want requests", set.Email, myEmail(key))
	}
	var got wire.Member
	w.must(w.do("GET", "/v1/members/"+ana.ID, w.owner, nil), 200).decode(&got)
	if got.Notify == nil || got.Notify.Email != "requests" {
		t.Errorf("the owner reads Ana's settings as %+v, want requests", got.Notify)
	}
	var asApprover wire.Member
	w.must(w.do("GET", "/v1/members/"+ana.ID, key, nil), 200).decode(&asApprover)
	if asApprover.Notify != nil {
		t.Errorf("an approver reads a member's settings: %+v", asApprover.Notify)
	}

	for _, bad := range []string{"weekly", "", "ALL"} {
		refused(t, w.do("PATCH", "/v1/me/notifications", key, map[string]any{"email": bad}), "email", `must be "all", "requests" or "none"`)
		refused(t, w.do("PATCH", "/v1/members/"+ana.ID, w.owner, map[string]any{"notify": map[string]any{"email": bad}}), "notify.email", `must be "all", "requests" or "none"`)
	}
	refused(t, w.do("PATCH", "/v1/members/"+ana.ID, w.owner, map[string]any{"notify": map[string]any{"mail": "none"}}), "notify.mail", "")
	if got := myEmail(key); got != "requests" {
		t.Errorf("refused changes left %q, want requests", got)
	}

	// An owner sets it for her; other fields stay.
	got = wire.Member{}
	w.must(w.do("PATCH", "/v1/members/"+ana.ID, w.owner, map[string]any{"notify": map[string]any{"email": "none"}}), 200).decode(&got)
	if got.Notify == nil || got.Notify.Email != "none" || got.Email != "ana@example.com" || got.Role != "approver" || myEmail(key) != "none" {
		t.Errorf("after the owner's PATCH: %+v (Ana's GET /v1/me says %q)", got, myEmail(key))
	}
	// An empty body changes nothing and answers the settings.
	w.must(w.do("PATCH", "/v1/me/notifications", key, map[string]any{}), 200).decode(&set)
	if set.Email != "none" {
		t.Errorf("PATCH {} answered %q, want none", set.Email)
	}

	// The bootstrap owner's key is a member of its own (an older key): its
	// first change stores that member.
	w.must(w.do("PATCH", "/v1/me/notifications", w.owner, map[string]any{"email": "requests"}), 200)
	if got := myEmail(w.owner); got != "requests" {
		t.Errorf("the owner's setting is %q, want requests", got)
	}
	// A customer token is no member's.
	w.must(w.do("PATCH", "/v1/me/notifications", w.customer, map[string]any{"email": "none"}), 403)
	var cust me
	w.must(w.do("GET", "/v1/me", w.customer, nil), 200).decode(&cust)
	if cust.Notify != nil {
		t.Errorf("a customer token has notification settings: %+v", cust.Notify)
	}
}

// A second member with a member's name, or email in any case, is a 409
// member_exists naming the member that has it and the command that changes
// it, and writes nothing; so is a rename to one. A removed member's name
// and email are free again.
func TestMembersUniqueNamesAndEmails(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var ana wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana", "role": "approver", "email": "ana@example.com"}), 201).decode(&ana)
	exists := func(r *response, field, says string) {
		t.Helper()
		e := w.must(r, 409).apiErr()
		if e.Code != api.CodeMemberExists || e.Details["memberId"] != ana.ID || e.Details["field"] != field || !strings.Contains(e.Message, says) {
			t.Errorf("error %s %q %v; want member_exists of the %s of %s, saying %q", e.Code, e.Message, e.Details, field, ana.ID, says)
		}
	}
	before := w.snapshot()
	exists(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana", "role": "approver", "email": "ana@example.com"}), "name",
		"member "+ana.ID+` is already named "Ana", and a name or an email names one member of a project; `+
			"change that member instead (stead members set-role "+ana.ID+" --role ROLE, or PATCH /v1/members/"+ana.ID+"), or choose another name")
	exists(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana Diaz", "role": "approver", "email": "ANA@example.com"}), "email",
		"member "+ana.ID+" (Ana) already has the email ANA@example.com")
	exists(w.do("POST", "/v1/members", w.owner, map[string]any{"name": " Ana ", "role": "viewer", "key": true}), "name", "already named")
	if after := w.snapshot(); after != before {
		t.Errorf("refused creates changed state:\nbefore %s\nafter  %s", before, after)
	}

	var bo wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Bo", "role": "approver"}), 201).decode(&bo)
	exists(w.do("PATCH", "/v1/members/"+bo.ID, w.owner, map[string]any{"name": "Ana"}), "name", "already named")
	exists(w.do("PATCH", "/v1/members/"+bo.ID, w.owner, map[string]any{"email": "Ana@Example.com"}), "email", "already has the email")
	w.must(w.do("PATCH", "/v1/members/"+ana.ID, w.owner, map[string]any{"name": "Ana", "email": "ana@example.com", "role": "developer"}), 200)

	w.must(w.do("DELETE", "/v1/members/"+ana.ID, w.owner, nil), 200)
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": "Ana", "role": "approver", "email": "ana@example.com"}), 201)
}

// Messages that point at a list name the CLI's command as well as the
// route: the CLI, the console and API clients show the same message.
func TestMessagesNameTheCommandAndTheRoute(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		says         string
	}{
		{"GET", "/v1/members/mem_nope", nil, 404, "member mem_nope not found (list them with stead members list, or GET /v1/members)"},
		{"POST", "/v1/keys", map[string]any{"member": "mem_nope"}, 400, "no member mem_nope in this project (list them with stead members list, or GET /v1/members)"},
		{"PATCH", "/v1/members/mem_nope", map[string]any{"key": true}, 400, "stead members add NAME --key; POST /v1/members"},
		{"GET", "/v1/rules/rul_nope", nil, 404, "rule rul_nope not found (list them with stead rules list --all, or GET /v1/rules?status=all)"},
		{"GET", "/v1/groups/nope", nil, 404, `group "nope" not found (list them with stead groups list, or GET /v1/groups)`},
		{"POST", "/v1/groups", map[string]any{"name": "legal", "members": []string{"mem_nope"}}, 400, "listed by stead members list (GET /v1/members)"},
		{"POST", "/v1/agents/nope/runs", map[string]any{"endUserId": "alice"}, 404, "list the deployed agents with stead agents (GET /v1/agents)"},
		{"POST", "/v1/mcp-keys", map[string]any{"agent": "nope", "endUserId": "alice"}, 400, "list the deployed agents with stead agents (GET /v1/agents)"},
		{"DELETE", "/v1/mcp-keys/mcp_nope", nil, 404, "MCP key mcp_nope not found (list them with stead mcp-keys list, or GET /v1/mcp-keys)"},
		{"GET", "/v1/webhooks/whe_nope", nil, 404, "webhook whe_nope not found (list them with stead webhooks list, or GET /v1/webhooks)"},
		{"POST", "/v1/customer-tokens/revoke", map[string]any{"token": "stc_garbage"}, 400, "as stead token END_USER or POST /v1/customer-tokens issued it"},
	} {
		if e := w.must(w.do(c.method, c.path, w.owner, c.body), c.status).apiErr(); !strings.Contains(e.Message, c.says) {
			t.Errorf("%s %s: %q, want it to say %q", c.method, c.path, e.Message, c.says)
		}
	}
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance"}), 201)
	if e := w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance"}), 409).apiErr(); !strings.Contains(e.Message, "stead groups add or rm (PATCH /v1/groups/finance)") {
		t.Errorf("a taken group name: %s", e.Message)
	}
}
