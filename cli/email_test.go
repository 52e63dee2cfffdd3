package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"stead/approvals"
	"stead/infra/mailpit"
	"stead/notify/email"
	"stead/store"
)

// newMailStack is a test stack that mails through mp, with its notifier
// running and its own address as the public URL of review links.
func newMailStack(t *testing.T, mp *mailpit.Server) *testStack {
	t.Helper()
	smtp, err := email.Plain(mp.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return newTestStack(t, func(c *StackConfig) { c.SMTP = &smtp })
}

// member adds a member with an email (and, with key, a key) and returns
// its id and key.
func (s *testStack) member(name, role string, key bool) (id, secret string) {
	s.t.Helper()
	args := []string{"members", "add", name, "--role", role, "--email", mailOf(name), "--json"}
	if key {
		args = append(args, "--key")
	}
	out := s.mustCLI(args...).stdout
	id = jsonField(s.t, out, "id")
	if key {
		secret = jsonField(s.t, out, "key.key")
	}
	return id, secret
}

func mailOf(name string) string { return strings.ToLower(strings.Fields(name)[0]) + "@example.com" }

// ownerMember gives the bootstrap owner member an email, and returns its id.
func (s *testStack) ownerMember() string {
	s.t.Helper()
	ctx := context.Background()
	keys, err := s.stack.Store.ListAPIKeys(ctx, s.project)
	if err != nil || len(keys) != 1 {
		s.t.Fatalf("keys %v %v", keys, err)
	}
	s.apiCall("PATCH", "/v1/members/"+keys[0].MemberID, s.key, map[string]any{"email": "owner@example.com"})
	return keys[0].MemberID
}

// apiCall calls the stack's API with key and fails the test unless it
// answers 200.
func (s *testStack) apiCall(method, path, key string, body any) {
	s.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		s.t.Fatal(err)
	}
	req, err := http.NewRequest(method, s.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("%s %s: %s %s", method, path, resp.Status, out)
	}
}

// mails waits for n mails, checks they went to exactly the addresses
// wanted, and returns them by address, with their text.
func mails(t *testing.T, mp *mailpit.Server, want ...string) map[string]mailpit.Message {
	t.Helper()
	got := map[string]mailpit.Message{}
	var to []string
	for _, m := range mp.WaitFor(t, len(want)) {
		full := mp.Message(t, m.ID)
		got[m.To[0].Address] = full
		to = append(to, m.To[0].Address)
	}
	slices.Sort(to)
	slices.Sort(want)
	if !slices.Equal(to, want) {
		t.Fatalf("mail went to %v, want %v", to, want)
	}
	return got
}

// deliveredTo lists the email deliveries of a run (all of its fan-outs
// wrote them at once, before any was sent) by member.
func (s *testStack) deliveredTo(runID string, members ...string) map[string]bool {
	s.t.Helper()
	out := map[string]bool{}
	for _, m := range members {
		page, err := s.stack.Store.ListDeliveries(context.Background(), s.project, email.EndpointID(m), "", 100)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, d := range page.Items {
			if d.RunID == runID {
				out[m] = true
			}
		}
	}
	return out
}

var reviewLink = regexp.MustCompile(`http://127\.0\.0\.1:\d+/review/rvw_[A-Za-z0-9_.-]+`)

// linkIn is the review link of a mail: the same in its text and HTML.
func linkIn(t *testing.T, public string, m mailpit.Message) string {
	t.Helper()
	text, html := reviewLink.FindString(m.Text), reviewLink.FindString(m.HTML)
	if text == "" || text != html || !strings.HasPrefix(text, public+"/review/") {
		t.Fatalf("the mail to %v has review links %q (text) and %q (HTML), want one under %s", m.To, text, html, public)
	}
	return text
}

// page GETs or POSTs a review link like a browser: status and body.
func page(t *testing.T, method, link string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, link, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *testStack) approval(id string) approvals.Approval {
	s.t.Helper()
	a, err := s.stack.Store.GetApproval(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return a
}

// TestEmailReview: a gated run mails each member who may decide it — not
// the requester it is separated from, a viewer, a member without an
// address or a removed one; a GET of the mail's link shows the call and
// changes nothing; a POST from its form approves as the member and the run
// succeeds; afterwards the link, and the other member's, are refused.
func TestEmailReview(t *testing.T) {
	t.Parallel()
	mp := mailpit.Start(t, mailpit.Options{})
	s := newMailStack(t, mp)
	owner := s.ownerMember()
	ana, _ := s.member("Ana Diaz", "approver", false)
	bo, _ := s.member("Bo Li", "developer", false)
	cy, _ := s.member("Cy Ng", "viewer", false)
	ed, _ := s.member("Ed Ek", "approver", false)
	s.mustCLI("members", "rm", ed)
	s.mustCLI("members", "add", "Di Wu", "--role", "approver") // no address
	dir := writeExample(t, func(cfg string) string {
		out := strings.Replace(cfg, `"approvals": { "timeout": "15m", "noteToCustomer": true }`,
			`"approvals": { "timeout": "15m", "noteToCustomer": true, "separateFrom": "requester" }`, 1)
		if out == cfg {
			t.Fatal("the example's approvals changed: separateFrom was not set")
		}
		return out
	})
	s.mustCLI("deploy", dir)

	run := s.startAwaiting("o-1001") // by the owner: the requester
	got := mails(t, mp, "ana@example.com", "bo@example.com")
	if d := s.deliveredTo(run.ID, owner, ana, bo, cy, ed); !d[ana] || !d[bo] || len(d) != 2 {
		t.Errorf("email deliveries to %v, want Ana and Bo only", d)
	}
	m := got["ana@example.com"]
	if m.Subject != "Approval needed: refundOrder for refunds (end user demo-user)" || m.To[0].Name != "Ana Diaz" {
		t.Errorf("Ana's mail: %q to %+v", m.Subject, m.To)
	}
	for _, want := range []string{"refundOrder requires approval", "demo-user", `"orderId": "o-1001"`, run.ID,
		s.srv.URL + "/console/#/approvals/" + run.ApprovalID, "2026-11-29 12:15:00 UTC (in 15m)"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("Ana's mail does not say %q:\n%s", want, m.Text)
		}
	}
	link := linkIn(t, s.srv.URL, m)
	boLink := linkIn(t, s.srv.URL, got["bo@example.com"])

	// What a mail scanner does: fetch the link, twice. Nothing changes.
	for range 2 {
		status, body := page(t, "GET", link, nil)
		if status != 200 || !strings.Contains(body, "Review: refundOrder for refunds") || !strings.Contains(body, `name="decision" value="approve"`) {
			t.Fatalf("GET the link: %d\n%s", status, body)
		}
	}
	if a := s.approval(run.ApprovalID); a.Status != approvals.Pending {
		t.Fatalf("a GET of the link decided: %s", a.Status)
	}
	if r, _ := s.stack.Store.GetRun(context.Background(), run.ID); r.Status != store.RunAwaitingApproval {
		t.Fatalf("a GET of the link moved the run: %s", r.Status)
	}

	status, body := page(t, "POST", link, url.Values{"decision": {"approve"}, "note": {"from the mail"}})
	if status != 200 || !strings.Contains(body, "Approved") {
		t.Fatalf("POST approve: %d\n%s", status, body)
	}
	a := s.approval(run.ApprovalID)
	if a.Status != approvals.Approved || a.DecidedBy != "review:"+ana || a.DecidedByName != "Ana Diaz" || a.Note != "from the mail" {
		t.Errorf("the approval: %s by %s (%s), note %q", a.Status, a.DecidedBy, a.DecidedByName, a.Note)
	}
	if done := s.waitRun(run.ID, terminal); done.Status != store.RunSucceeded {
		t.Errorf("the run %s (%+v)", done.Status, done.Error)
	}
	trace := s.mustCLI("trace", run.ID, "--json").stdout
	if !strings.Contains(trace, `"by": "review:`+ana+`"`) || !strings.Contains(trace, `"byName": "Ana Diaz"`) {
		t.Errorf("the trace does not name Ana's review:\n%s", trace)
	}

	// Afterwards: refused, by GET and by POST, for Ana and for Bo.
	for _, l := range []string{link, boLink} {
		for _, method := range []string{"GET", "POST"} {
			var form url.Values
			if method == "POST" {
				form = url.Values{"decision": {"deny"}}
			}
			status, body := page(t, method, l, form)
			if status != 409 || !strings.Contains(body, "was already approved by Ana Diaz") || strings.Contains(body, "<form") {
				t.Errorf("%s a link after the decision: %d\n%s", method, status, body)
			}
		}
	}
	if a := s.approval(run.ApprovalID); a.Status != approvals.Approved || a.DecidedBy != "review:"+ana {
		t.Errorf("a refused link changed the approval: %+v", a)
	}
	if n := len(mp.Messages(t)); n != 2 {
		t.Errorf("mailpit has %d mails, want the 2 of the request", n)
	}
}

// TestEmailQuorum: an approval of two of finance mails only finance's
// members (not another approver, not the requester, who is in the group);
// a vote from a link counts and says who it waits on; the link then says
// it has voted; after another member's edit, a link that showed the old
// input is refused.
func TestEmailQuorum(t *testing.T) {
	t.Parallel()
	mp := mailpit.Start(t, mailpit.Options{})
	s := newMailStack(t, mp)
	owner := s.ownerMember()
	ana, _ := s.member("Ana Diaz", "approver", false)
	bo, boKey := s.member("Bo Li", "approver", true)
	cy, _ := s.member("Cy Ng", "approver", true)
	di, _ := s.member("Di Wu", "approver", false)
	s.mustCLI("groups", "create", "finance", "--member", "Ana Diaz", "--member", "Bo Li", "--member", "Di Wu", "--member", owner)
	s.mustCLI("deploy", filepath.Join("..", "examples", "finance"), "--yes")

	out := s.mustCLI("run", "refunds", "--input", `{"orderId":"o-9","amount":900}`, "--end-user", "demo-user", "--json").stdout
	run := s.waitRun(jsonField(t, out, "id"), func(r store.Run) bool { return r.Status == store.RunAwaitingApproval || r.Status.Terminal() })
	got := mails(t, mp, "ana@example.com", "bo@example.com", "di@example.com")
	if d := s.deliveredTo(run.ID, owner, ana, bo, cy, di); len(d) != 3 || d[owner] || d[cy] {
		t.Errorf("email deliveries to %v, want finance less the requester", d)
	}
	m := got["ana@example.com"]
	if !strings.Contains(m.Text, "0 of 2 from finance — waiting on") || !strings.Contains(m.HTML, "0 of 2 from finance") {
		t.Errorf("Ana's mail does not show the quorum:\n%s", m.Text)
	}
	link, diLink := linkIn(t, s.srv.URL, m), linkIn(t, s.srv.URL, got["di@example.com"])

	status, body := page(t, "POST", link, url.Values{"decision": {"approve"}})
	if status != 200 || !strings.Contains(body, "Your approval is counted") || !strings.Contains(body, "1 of 2 from finance") {
		t.Fatalf("Ana's vote: %d\n%s", status, body)
	}
	if a := s.approval(run.ApprovalID); a.Status != approvals.Pending || !a.Voted(ana) {
		t.Fatalf("after Ana's vote: %s, voted %v", a.Status, a.Voted(ana))
	}
	if status, body := page(t, "GET", link, nil); status != 409 || !strings.Contains(body, "You have already approved") {
		t.Errorf("Ana's link after her vote: %d\n%s", status, body)
	}

	// Bo approves an edited input with his key: the votes start again,
	// and Di's link, made for the old input, decides nothing.
	digest := s.approval(run.ApprovalID).InputDigest
	s.apiCall("POST", "/v1/approvals/"+run.ApprovalID+"/approve", boKey,
		map[string]any{"input": map[string]any{"orderId": "o-9", "amount": 800}, "inputDigest": digest})
	for _, method := range []string{"GET", "POST"} {
		var form url.Values
		if method == "POST" {
			form = url.Values{"decision": {"approve"}}
		}
		if status, body := page(t, method, diLink, form); status != 409 || !strings.Contains(body, "The input was edited") {
			t.Errorf("%s Di's link after the edit: %d\n%s", method, status, body)
		}
	}
	a := s.approval(run.ApprovalID)
	if a.Status != approvals.Pending || a.Voted(di) || len(a.Votes) != 1 || a.Votes[0].Member != bo {
		t.Errorf("after the edit and Di's refused link: %s, votes %+v", a.Status, a.Votes)
	}
}
