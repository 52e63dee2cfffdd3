package api_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"stead/api/wire"
	"stead/approvals"
	"stead/console"
	"stead/notify/email"
)

// reviewLink signs a review link as the email channel does.
func (w *world) reviewLink(approvalID, memberID, digest string) string {
	w.t.Helper()
	a, err := w.store.GetApproval(context.Background(), approvalID)
	if err != nil {
		w.t.Fatal(err)
	}
	if digest == "" {
		digest = a.InputDigest
	}
	tok, err := email.SignReview(w.project.SigningKey, email.Review{
		ProjectID: a.ProjectID, ApprovalID: a.ID, MemberID: memberID, InputDigest: digest, ExpiresAt: a.ExpiresAt,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return "/review/" + tok
}

// postForm posts a review form; body is sent as is.
func (w *world) postForm(path, body string) *response {
	w.t.Helper()
	return w.do("POST", path, "", body, "Content-Type", "application/x-www-form-urlencoded")
}

func (w *world) approvalStatus(id string) approvals.Approval {
	w.t.Helper()
	a, err := w.store.GetApproval(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

func (w *world) addMailedMember(name, role string) wire.Member {
	w.t.Helper()
	var m wire.Member
	w.must(w.do("POST", "/v1/members", w.owner, map[string]any{"name": name, "email": strings.ToLower(strings.Fields(name)[0]) + "@example.com", "role": role}), 201).decode(&m)
	return m
}

// wantPage checks a review page: its status, the strict page headers, and
// words it must say.
func wantPage(t *testing.T, r *response, status int, says ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d:\n%s", r.req, r.status, status, r.body)
	}
	for k, v := range map[string]string{
		"Content-Security-Policy": console.ContentSecurityPolicy, "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
		"Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "Content-Type": "text/html; charset=utf-8",
	} {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s: %s is %q, want %q", r.req, k, got, v)
		}
	}
	body := string(r.body)
	for _, s := range says {
		if !strings.Contains(body, s) {
			t.Errorf("%s: the page does not say %q:\n%s", r.req, s, body)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, " style=") {
		t.Errorf("%s: the page has script or inline style, which its CSP refuses", r.req)
	}
}

func hasForm(r *response) bool {
	return strings.Contains(string(r.body), `<form class="review__card" method="post">`)
}

// TestReviewPage: a GET shows the call and a form and changes nothing; a
// POST decides as the link's member (named in the record as
// review:<memberId>); afterwards the link is refused. A tampered link,
// another project's, a removed member, a role that can no longer decide, a
// changed input, the deadline and a bad form are refused in words, and
// decide nothing. The token never reaches the request log.
func TestReviewPage(t *testing.T) {
	t.Parallel()
	w := setup(t)
	ana := w.addMailedMember("Ana Diaz", "approver")
	run := w.awaiting("alice")
	apr := run.Approval.ID
	link := w.reviewLink(apr, ana.ID, "")

	for _, method := range []string{"GET", "HEAD"} {
		r := w.do(method, link, "", nil)
		if method == "GET" {
			wantPage(t, r, 200, "Review: refundOrder for refunds", "alice", `&#34;orderId&#34;: &#34;o-1&#34;`, apr, run.ID,
				`name="decision" value="approve"`, `name="decision" value="deny"`, "You decide as Ana Diaz (approver)")
			if !hasForm(r) {
				t.Error("the page has no form")
			}
		} else if r.status != 200 || len(r.body) != 0 {
			t.Errorf("HEAD: %d %q", r.status, r.body)
		}
		if a := w.approvalStatus(apr); a.Status != approvals.Pending {
			t.Fatalf("a %s decided: the approval is %s", method, a.Status)
		}
	}

	// Links that are not this project's.
	other := strings.Replace(link, "/review/rvw_", "/review/rvw_x", 1)
	wantPage(t, w.do("GET", other, "", nil), 404, "This review link is not valid")
	tok, _ := email.SignReview(make([]byte, 32), email.Review{ProjectID: w.project.ID, ApprovalID: apr, MemberID: ana.ID, InputDigest: "d", ExpiresAt: w.clock.Now().Add(time.Hour)})
	wantPage(t, w.postForm("/review/"+tok, "decision=approve"), 404, "This review link is not valid")
	wantPage(t, w.do("GET", w.reviewLink(apr, "mem_nobody", ""), "", nil), 404, "This review link is not valid")

	// A form that is not the page's decides nothing.
	for body, says := range map[string]string{
		"decision=maybe":                 `decision must be approve or deny (got &#34;maybe&#34;)`,
		"":                               `decision must be approve or deny (got &#34;&#34;)`,
		"decision=approve&decision=deny": "The form gives decision 2 times",
		"decision=approve&input=%7B%7D":  "The form has a field &#34;input&#34;",
		"decision=approve&note=" + strings.Repeat("x", 2001): "The note must be at most 2000 characters long",
		"decision=approve&note=%ff":                          "The note is not valid UTF-8",
	} {
		wantPage(t, w.postForm(link, body), 400, says, "nothing was decided")
	}
	wantPage(t, w.do("POST", link, "", `{"decision":"approve"}`), 400, "Send the page&#39;s form")

	// Demoted to viewer: refused while so, not after.
	w.must(w.do("PATCH", "/v1/members/"+ana.ID, w.owner, map[string]any{"role": "viewer"}), 200)
	wantPage(t, w.do("GET", link, "", nil), 403, "Ana Diaz is now a viewer of this project")
	wantPage(t, w.postForm(link, "decision=approve"), 403, "a viewer may not approve or deny")
	w.must(w.do("PATCH", "/v1/members/"+ana.ID, w.owner, map[string]any{"role": "approver"}), 200)

	// A link that showed another input decides nothing.
	stale := w.reviewLink(apr, ana.ID, strings.Repeat("0", 64))
	wantPage(t, w.do("GET", stale, "", nil), 409, "edited this call&#39;s input after this mail was sent")
	wantPage(t, w.postForm(stale, "decision=approve"), 409, "The input was edited")
	if a := w.approvalStatus(apr); a.Status != approvals.Pending {
		t.Fatalf("refused requests decided: the approval is %s", a.Status)
	}

	// The page's own form, as a browser sends it.
	r := w.postForm(link, url.Values{"decision": {"approve"}, "note": {"looks right\r\nto me"}}.Encode())
	wantPage(t, r, 200, "Approved", "the run continues with exactly the input shown below", "<dt>Status</dt><dd>approved by Ana Diaz (review:"+ana.ID+") at 2026-11-29 12:00:00 UTC</dd>")
	if hasForm(r) {
		t.Error("the page after a decision still has a form")
	}
	a := w.approvalStatus(apr)
	if a.Status != approvals.Approved || a.DecidedBy != "review:"+ana.ID || a.DecidedBy != email.ReviewActorID(ana.ID) ||
		a.DecidedByName != "Ana Diaz" || a.Note != "looks right\nto me" {
		t.Errorf("decided %+v, want approved by review:%s (Ana Diaz) with the note", a, ana.ID)
	}
	if done := w.wait(run.ID, "terminal"); done.Status != "succeeded" {
		t.Errorf("the run %s", done.Status)
	}
	// Afterwards the link is refused, and says who decided.
	for _, r := range []*response{w.do("GET", link, "", nil), w.postForm(link, "decision=deny")} {
		wantPage(t, r, 409, "Already approved", "was already approved by Ana Diaz (review:"+ana.ID+")")
		if hasForm(r) {
			t.Errorf("%s: a refused page has a form", r.req)
		}
	}

	// Removed: refused, and shown nothing of the call.
	run2 := w.awaiting("alice")
	link2 := w.reviewLink(run2.Approval.ID, ana.ID, "")
	w.must(w.do("DELETE", "/v1/members/"+ana.ID, w.owner, nil), 200)
	for _, r := range []*response{w.do("GET", link2, "", nil), w.postForm(link2, "decision=approve")} {
		wantPage(t, r, 403, "Ana Diaz was removed from this project")
		if strings.Contains(string(r.body), "o-1") {
			t.Errorf("%s: a removed member is shown the input", r.req)
		}
	}

	// Past the deadline, not yet swept: refused by GET and by POST.
	bo := w.addMailedMember("Bo Li", "developer")
	link3 := w.reviewLink(run2.Approval.ID, bo.ID, "")
	w.clock.Advance(11 * time.Minute)
	wantPage(t, w.do("GET", link3, "", nil), 410, "This approval has expired")
	if a := w.approvalStatus(run2.Approval.ID); a.Status != approvals.Pending {
		t.Errorf("a GET past the deadline settled it: %s", a.Status)
	}
	wantPage(t, w.postForm(link3, "decision=approve"), 410, "This approval has expired")

	if logs := w.logs.String(); strings.Contains(logs, email.ReviewPrefix) || !strings.Contains(logs, "path=/review/…") {
		t.Errorf("the request log shows review tokens, or no review request:\n%s", logs)
	}
}

// TestReviewDenyAndSeparation: a deny from the page fails the run with the
// note and names the member; a link for the member an approval is
// separated from decides nothing.
func TestReviewDenyAndSeparation(t *testing.T) {
	t.Parallel()
	w := setup(t)
	bo := w.addMailedMember("Bo Li", "developer")
	run := w.awaiting("alice")
	link := w.reviewLink(run.Approval.ID, bo.ID, "")
	wantPage(t, w.postForm(link, "decision=deny&note=not+this+one"), 200, "Denied", "the call will not run")
	done := w.wait(run.ID, "terminal")
	if done.Status != "failed" || done.Error == nil || !strings.Contains(done.Error.Message, "denied by Bo Li: not this one") {
		t.Errorf("run %s %+v", done.Status, done.Error)
	}

	// The requester, under separateFrom: a link made for them anyway
	// (the channel never mails one) decides nothing.
	separated := strings.Replace(testConfig, `"approvals": { "timeout": "10m" }`, `"approvals": { "timeout": "10m", "separateFrom": "requester" }`, 1)
	if separated == testConfig {
		t.Fatal("the test config changed: separateFrom was not set")
	}
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(separated)}), 201)
	var key wire.APIKey
	w.must(w.do("POST", "/v1/keys", w.owner, map[string]any{"name": "bo", "member": bo.ID}), 201).decode(&key)
	var run2 wire.Run
	w.must(w.do("POST", "/v1/agents/refunds/runs", key.Key, map[string]any{"input": map[string]any{"orderId": "o-1", "amount": 1}, "endUserId": "alice"}), 202).decode(&run2)
	run2 = w.wait(run2.ID, "settled")
	if run2.Approval == nil {
		t.Fatalf("run %s is %s", run2.ID, run2.Status)
	}
	if a := w.approvalStatus(run2.Approval.ID); a.SeparateFrom != bo.ID {
		t.Fatalf("the approval is separated from %q, want Bo (%s)", a.SeparateFrom, bo.ID)
	}
	link2 := w.reviewLink(run2.Approval.ID, bo.ID, "")
	wantPage(t, w.do("GET", link2, "", nil), 403, "You started this run")
	wantPage(t, w.postForm(link2, "decision=approve"), 403, "You started this run")
	if a := w.approvalStatus(run2.Approval.ID); a.Status != approvals.Pending {
		t.Errorf("the requester's link decided: %s", a.Status)
	}
}
