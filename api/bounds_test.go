package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
	"stead/approvals"
	"stead/notify/email"
)

// fieldProblems is an error's details.fields as "field: message" lines.
func fieldProblems(e api.Error) []string {
	var out []string
	list, _ := e.Details["fields"].([]any)
	for _, f := range list {
		m, _ := f.(map[string]any)
		out = append(out, fmt.Sprintf("%v: %v", m["field"], m["message"]))
	}
	return out
}

// wantInvalid fails the test unless r is a 400 invalid_argument whose
// only field problem is want ("field: message").
func wantInvalid(t *testing.T, r *response, want string) {
	t.Helper()
	if r.status != http.StatusBadRequest {
		t.Errorf("%s: status %d, want 400: %s", r.req, r.status, r.body)
		return
	}
	e := r.apiErr()
	if got := fieldProblems(e); e.Code != api.CodeInvalidArgument || len(got) != 1 || got[0] != want {
		t.Errorf("%s: %s %v, want invalid_argument [%s]", r.req, e.Code, got, want)
	}
}

// approvalAsOwner reads an approval as the owner sees it.
func (w *world) approvalAsOwner(id string) wire.Approval {
	w.t.Helper()
	var a wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+id, w.owner, nil), 200).decode(&a)
	return a
}

// A note is bounded in characters, not bytes: 2000 of them pass, whatever
// their encoding, and a 2001st is refused by approve and deny alike,
// deciding nothing. So are a zero remember, a stale inputDigest on a
// deny and an empty check-input; an explicit null
// input approves the input as asked.
func TestDecisionRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	id := run.Approval.ID
	long := strings.Repeat("x", 2001)

	for _, c := range []struct {
		name, path, key string
		body            any
		status          int
		code, field     string
		message         string
	}{
		{"approve, note of 2001", "/approve", w.owner, map[string]any{"note": long}, 400, api.CodeInvalidArgument, "note", "must be at most 2000 characters long"},
		{"deny, note of 2001", "/deny", w.owner, map[string]any{"note": long}, 400, api.CodeInvalidArgument, "note", "must be at most 2000 characters long"},
		{"remember for 0s", "/approve", w.owner, map[string]any{"remember": map[string]any{"for": "0s"}}, 400, api.CodeInvalidArgument, "remember.for",
			`must be a duration longer than 0, like "1h" or "24h" (got "0s")`},
		{"check-input without input", "/check-input", w.owner, map[string]any{}, 400, api.CodeInvalidArgument, "input", "is required: the edited input to check"},
		{"deny on a stale digest", "/deny", w.owner, map[string]any{"inputDigest": strings.Repeat("0", 64)}, 409, api.CodeApprovalChanged, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := w.do("POST", "/v1/approvals/"+id+c.path, c.key, c.body)
			if c.field != "" {
				wantInvalid(t, r, c.field+": "+c.message)
			} else if e := w.must(r, c.status).apiErr(); e.Code != c.code || (c.message != "" && e.Message != c.message) {
				t.Errorf("%s %q, want %s %q", e.Code, e.Message, c.code, c.message)
			}
			if a := w.approvalAsOwner(id); a.Status != "pending" || a.Note != "" {
				t.Errorf("after a refused request the approval is %s (note %q)", a.Status, a.Note)
			}
		})
	}

	// 2000 characters of two bytes each: 4000 bytes, and a valid note.
	note := strings.Repeat("é", 2000)
	var a wire.Approval
	w.must(w.do("POST", "/v1/approvals/"+id+"/approve", w.owner, map[string]any{"note": note, "input": nil}), 200).decode(&a)
	if a.Status != "approved" || a.Note != note || string(a.Input) != `{"amount":12,"orderId":"o-1"}` {
		t.Errorf("approved %s with a note of %d characters and input %s", a.Status, len([]rune(a.Note)), a.Input)
	}
	other := w.awaiting("bob")
	w.must(w.do("POST", "/v1/approvals/"+other.Approval.ID+"/deny", w.owner, map[string]any{"note": note}), 200).decode(&a)
	if a.Status != "denied" || a.Note != note {
		t.Errorf("denied %s with a note of %d characters", a.Status, len([]rune(a.Note)))
	}
}

// A refused decision names the approval's state in details: an expired
// one reads as expired (the engine settles it on the spot), and the deny
// is worded as a deny; a decided one names who decided and when, with
// the input digest the decider saw.
func TestRefusedDecisionDetails(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	decided := w.awaiting("bob")
	var d wire.Approval
	w.must(w.do("POST", "/v1/approvals/"+decided.Approval.ID+"/approve", w.owner, nil), 200).decode(&d)
	e := w.must(w.do("POST", "/v1/approvals/"+decided.Approval.ID+"/deny", w.developer, nil), 409).apiErr()
	want := map[string]any{
		"approvalId": d.ID, "runId": decided.ID, "status": "approved", "inputDigest": d.InputDigest,
		"decidedBy": d.DecidedBy, "decidedByName": d.DecidedByName, "decidedAt": d.DecidedAt.Format(time.RFC3339Nano),
		"expiresAt": d.ExpiresAt.Format(time.RFC3339Nano),
	}
	if d.InputDigest == "" || d.DecidedBy == "" || d.DecidedByName == "" {
		t.Fatalf("the approved approval lacks what the details name: %+v", d)
	}
	if got, wantS := fmt.Sprint(e.Details), fmt.Sprint(want); got != wantS {
		t.Errorf("details of a decided approval:\n got %s\nwant %s", got, wantS)
	}

	expires := run.Approval.ExpiresAt
	w.clock.Advance(13 * time.Minute)
	e = w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/deny", w.owner, nil), 409).apiErr()
	msg := fmt.Sprintf("approval %s expired at %s (3m ago); it can no longer be denied", run.Approval.ID, expires.UTC().Format("15:04:05Z"))
	if e.Code != api.CodeApprovalExpired || e.Message != msg || e.Details["status"] != "expired" || e.Details["approvalId"] != run.Approval.ID {
		t.Errorf("deny past the deadline: %s %q %v, want %s %q with status expired", e.Code, e.Message, e.Details, api.CodeApprovalExpired, msg)
	}
}

// Starting a run: an Idempotency-Key and an end user id of exactly 256
// characters pass (the end user's counted in characters), one more is
// refused, as is a key with a byte outside printable ASCII; a refused start
// creates nothing and names every problem. A started run says where it
// lives.
func TestStartRunLimits(t *testing.T) {
	t.Parallel()
	w := setup(t)
	path := "/v1/agents/plain/runs"
	before := w.runCount()
	for _, c := range []struct {
		name, endUser, key, want string
	}{
		{"key of 257", "alice", strings.Repeat("k", 257), "Idempotency-Key: must be at most 256 characters long"},
		{"key with a non-ASCII byte", "alice", "clé-1", "Idempotency-Key: must be printable ASCII without spaces"},
		{"key with a space", "alice", "order 1", "Idempotency-Key: must be printable ASCII without spaces"},
		{"end user of 257", strings.Repeat("é", 257), "", "endUserId: must be at most 256 characters long"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantInvalid(t, w.do("POST", path, w.developer, map[string]any{"endUserId": c.endUser}, "Idempotency-Key", c.key), c.want)
		})
	}
	// Every problem at once, the first in the message.
	e := w.must(w.do("POST", path, w.developer, map[string]any{}, "Idempotency-Key", "a b"), 400).apiErr()
	if want := "Idempotency-Key: must be printable ASCII without spaces (and 1 more problem)"; e.Message != want ||
		fmt.Sprint(fieldProblems(e)) != "[Idempotency-Key: must be printable ASCII without spaces endUserId: is required]" {
		t.Errorf("two problems: %q %v, want %q", e.Message, fieldProblems(e), want)
	}
	if after := w.runCount(); after != before {
		t.Fatalf("refused starts created runs: %d → %d", before, after)
	}

	key, endUser := strings.Repeat("k", 256), strings.Repeat("é", 256)
	resp := w.must(w.do("POST", path, w.developer, map[string]any{"endUserId": endUser}, "Idempotency-Key", key), 202)
	var run wire.Run
	resp.decode(&run)
	if run.EndUserID != endUser || resp.header.Get("Location") != "/v1/runs/"+run.ID {
		t.Errorf("run for an end user of %d characters, Location %q", len([]rune(run.EndUserID)), resp.header.Get("Location"))
	}
	again := w.must(w.do("POST", path, w.developer, map[string]any{"endUserId": endUser}, "Idempotency-Key", key), 200)
	var same wire.Run
	again.decode(&same)
	if same.ID != run.ID || again.header.Get("Location") != "/v1/runs/"+run.ID {
		t.Errorf("replay gave %s at %q, want %s", same.ID, again.header.Get("Location"), run.ID)
	}
}

// ?wait= takes whole seconds too, and 60s (MaxWait) itself; until= is
// settled or terminal, nothing else. A settled run answers at once.
func TestLongPollValues(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	for _, q := range []string{"?wait=1", "?wait=60s", "?wait=60", "?wait=1s&until=settled"} {
		var got wire.Run
		w.must(w.do("GET", "/v1/runs/"+run.ID+q, w.developer, nil), 200).decode(&got)
		if got.ID != run.ID || got.Status != "awaiting-approval" {
			t.Errorf("%s: run %s %s", q, got.ID, got.Status)
		}
	}
	wantInvalid(t, w.do("GET", "/v1/runs/"+run.ID+"?wait=1s&until=soon", w.developer, nil), `until: must be settled or terminal (got "soon")`)
	wantInvalid(t, w.do("GET", "/v1/runs/"+run.ID+"?wait=61", w.developer, nil), `wait: must be from 0s to 1m0s (got "61")`)
	before := w.runCount()
	wantInvalid(t, w.do("POST", "/v1/agents/plain/runs?wait=61s", w.developer, map[string]any{"endUserId": "alice"}), `wait: must be from 0s to 1m0s (got "61s")`)
	var started wire.Run
	w.must(w.do("POST", "/v1/agents/plain/runs?wait=60", w.developer, map[string]any{"endUserId": "alice"}), 202).decode(&started)
	if started.Status != "succeeded" {
		t.Errorf("a plain run after ?wait=60 is %s, want succeeded", started.Status)
	}
	if after := w.runCount(); after != before+1 {
		t.Errorf("runs %d → %d, want one more", before, after)
	}
}

// A customer token lists its own end user's runs, with or without naming
// it, and is refused another's.
func TestCustomerListsOnlyItsOwnRuns(t *testing.T) {
	t.Parallel()
	w := setup(t)
	mine := w.wait(w.start("plain", "alice", nil).ID, "terminal")
	w.wait(w.start("plain", "bob", nil).ID, "terminal")
	for _, q := range []string{"", "?endUserId=alice"} {
		var l wire.RunList
		w.must(w.do("GET", "/v1/runs"+q, w.customer, nil), 200).decode(&l)
		if len(l.Runs) != 1 || l.Runs[0].ID != mine.ID {
			t.Errorf("customer GET /v1/runs%s: %+v, want alice's run alone", q, l.Runs)
		}
	}
	e := w.must(w.do("GET", "/v1/runs?endUserId=bob", w.customer, nil), 403).apiErr()
	if e.Code != api.CodeForbidden || e.Message != "a customer token reads only its own end user's runs" {
		t.Errorf("customer listing bob's runs: %s %q", e.Code, e.Message)
	}
}

// streamRequest is a GET of a run's event stream, sent through the
// harness so that a refusal reads as a response.
func (w *world) streamRequest(path, key string, headers ...string) *response {
	w.t.Helper()
	return w.do("GET", path, key, nil, append([]string{"Accept", "text/event-stream"}, headers...)...)
}

// Where an event page or stream starts: Last-Event-ID is a stream's, and
// there wins over ?after=; a JSON page ignores it. A bad Last-Event-ID and
// another project's run are refused before the stream starts.
func TestEventCursors(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	w.must(w.do("POST", "/v1/runs/"+run.ID+"/cancel", w.owner, nil), 200)
	var all wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.developer, nil), 200).decode(&all)
	total := len(all.Events)
	if total < 5 {
		t.Fatalf("only %d events", total)
	}

	var page wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events?limit=2", w.developer, nil, "Last-Event-ID", "3"), 200).decode(&page)
	if len(page.Events) != 2 || page.Events[0].Seq != 1 || page.NextAfter != 2 {
		t.Errorf("a JSON page with Last-Event-ID 3: %+v, want events 1 and 2", page)
	}

	got := seqs(w.stream("/v1/runs/"+run.ID+"/events?after=1", w.developer, "Last-Event-ID", "3").rest())
	want := make([]string, 0, total)
	for i := 4; i <= total; i++ {
		want = append(want, fmt.Sprint(i))
	}
	if got != strings.Join(want, ",") {
		t.Errorf("stream with ?after=1 and Last-Event-ID 3: %s, want %s", got, strings.Join(want, ","))
	}

	for _, id := range []string{"-1", "x"} {
		wantInvalid(t, w.streamRequest("/v1/runs/"+run.ID+"/events", w.developer, "Last-Event-ID", id),
			fmt.Sprintf("Last-Event-ID: must be a sequence number (got %q)", id))
	}
	for _, path := range []string{"/v1/runs/" + run.ID + "/events", "/v1/runs/run_01AAAAAAAAAAAAAAAAAAAAAAAA/events"} {
		r := w.must(w.streamRequest(path, w.other, "Last-Event-ID", "1"), 404)
		if e := r.apiErr(); e.Code != api.CodeNotFound || !strings.HasPrefix(e.Message, "run run_") || !strings.HasSuffix(e.Message, " not found") {
			t.Errorf("stream of %s for another project: %s %q", path, e.Code, e.Message)
		}
	}
}

// signReviewLink signs a review link for an approval as project A's email
// channel would, with the token's own deadline.
func (w *world) signReviewLink(a approvals.Approval, memberID string, expires time.Time) string {
	w.t.Helper()
	tok, err := email.SignReview(w.project.SigningKey, email.Review{
		ProjectID: w.project.ID, ApprovalID: a.ID, MemberID: memberID, InputDigest: a.InputDigest, ExpiresAt: expires,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return "/review/" + tok
}

// A review link decides nothing past either deadline, its own or the
// approval's, from the deadline's very instant; nor for an approval of
// another project, though signed with this project's key; nor with a form
// past 64 KiB.
func TestReviewLinkLimits(t *testing.T) {
	t.Parallel()
	w := setup(t)
	ana := w.addMailedMember("Ana Diaz", "approver")
	run := w.awaiting("alice")
	a := w.approvalStatus(run.Approval.ID)
	start := w.clock.Now()

	// Another project's approval, named in a link signed with this one's key.
	var theirs wire.Run
	w.must(w.do("POST", "/v1/agents/refunds/runs?wait=10s", w.other, map[string]any{"input": map[string]any{"orderId": "o-1", "amount": 1}, "endUserId": "alice"}), 202).decode(&theirs)
	if theirs.Approval == nil {
		t.Fatalf("the other project's run is %s", theirs.Status)
	}
	foreign := w.signReviewLink(w.approvalStatus(theirs.Approval.ID), ana.ID, a.ExpiresAt)
	wantPage(t, w.do("GET", foreign, "", nil), 404, "This review link is not valid")
	wantPage(t, w.postForm(foreign, "decision=approve"), 404, "This review link is not valid")
	if got := w.approvalStatus(theirs.Approval.ID); got.Status != approvals.Pending {
		t.Errorf("a link naming another project's approval decided it (%s)", got.Status)
	}

	link := w.reviewLink(a.ID, ana.ID, "")
	big := "decision=approve&note=" + strings.Repeat("x", 64<<10)
	wantPage(t, w.postForm(link, big), 400, "The form is larger than 64 KiB; nothing was decided.")

	early := w.signReviewLink(a, ana.ID, start.Add(time.Minute))
	late := w.signReviewLink(a, ana.ID, a.ExpiresAt.Add(time.Hour))
	w.clock.Advance(time.Minute) // the token's deadline, not the approval's
	wantPage(t, w.do("GET", early, "", nil), 410, "This approval has expired")
	wantPage(t, w.postForm(early, "decision=approve"), 410, "This approval has expired")
	wantPage(t, w.do("GET", late, "", nil), 200, "You decide as Ana Diaz")
	w.clock.Advance(a.ExpiresAt.Sub(w.clock.Now())) // the approval's deadline, not the token's
	wantPage(t, w.do("GET", late, "", nil), 410, "This approval has expired")
	wantPage(t, w.postForm(late, "decision=approve"), 410, "This approval has expired")
	if got := w.approvalStatus(a.ID); got.Status != approvals.Pending {
		t.Errorf("links past a deadline decided: %s", got.Status)
	}
}

// With a quorum, a link of someone outside the group is refused, the first
// vote is counted and says what it still waits on, and the voter's link
// is refused afterwards.
func TestReviewQuorum(t *testing.T) {
	t.Parallel()
	w := setup(t)
	ana := w.addMailedMember("Ana Diaz", "approver")
	bo := w.addMailedMember("Bo Li", "approver")
	cy := w.addMailedMember("Cy Ito", "approver")
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance", "members": []string{ana.ID, bo.ID}}), 201)
	cfg := strings.Replace(testConfig, `"approvals": { "timeout": "10m" },`,
		`"approvals": { "timeout": "10m", "approvers": { "group": "finance", "min": 2 } },`, 1)
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201)
	run := w.awaiting("alice")
	id := run.Approval.ID

	outsider := w.reviewLink(id, cy.ID, "")
	wantPage(t, w.do("GET", outsider, "", nil), 403, "You are not among its approvers")
	wantPage(t, w.postForm(outsider, "decision=approve"), 403, "You are not among its approvers")

	link := w.reviewLink(id, ana.ID, "")
	wantPage(t, w.postForm(link, "decision=approve"), 200, "Your approval is counted", "The approval still waits on others: 1 of 2 from finance — waiting on Bo Li.")
	for _, r := range []*response{w.do("GET", link, "", nil), w.postForm(link, "decision=approve")} {
		wantPage(t, r, 409, "You have already approved")
		if hasForm(r) {
			t.Errorf("%s: a refused page has a form", r.req)
		}
	}
	if a := w.approvalStatus(id); a.Status != approvals.Pending || len(a.Votes) != 1 {
		t.Errorf("after one vote and refused links: %s with %d votes", a.Status, len(a.Votes))
	}
}

// A customer's page moves past events it does not see: a page holding
// only a log line is empty, and its nextAfter is past that line, so that
// paging goes on instead of stopping there or reading it again.
func TestCustomerPagesPastHiddenEvents(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.wait(w.start("plain", "alice", nil).ID, "terminal")
	var full wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.developer, nil), 200).decode(&full)
	var logSeq int64
	for _, e := range full.Events {
		if e.Type == "log" {
			logSeq = e.Seq
		}
	}
	if logSeq == 0 || logSeq == full.NextAfter {
		t.Fatalf("fixture: want a log line before the last event: %+v", full.Events)
	}
	var page wire.EventList
	w.must(w.do("GET", fmt.Sprintf("/v1/runs/%s/events?after=%d&limit=1", run.ID, logSeq-1), w.customer, nil), 200).decode(&page)
	if len(page.Events) != 0 || page.NextAfter != logSeq {
		t.Errorf("the customer's page of the log line: %+v, want no events and nextAfter %d", page, logSeq)
	}
	w.must(w.do("GET", fmt.Sprintf("/v1/runs/%s/events?after=%d&limit=1", run.ID, logSeq), w.customer, nil), 200).decode(&page)
	if len(page.Events) != 1 || page.Events[0].Seq != logSeq+1 {
		t.Errorf("the customer's next page: %+v, want event %d", page, logSeq+1)
	}
}

// paddedRunBody is a plain run's body padded to exactly n bytes.
func paddedRunBody(t *testing.T, n int) []byte {
	t.Helper()
	head, tail := `{"endUserId": "alice", "input": {"pad": "`, `"}}`
	if n < len(head)+len(tail) {
		t.Fatalf("paddedRunBody: %d bytes is too short", n)
	}
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// A body of exactly MaxBody bytes passes, declared or chunked; one byte
// more is refused with the limit in words, as is a bundle past MaxBundle.
// A body that is not an object is refused in words.
func TestBodyLimits(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.MaxBody, c.MaxBundle = 2<<10, 1<<10 })
	path := "/v1/agents/plain/runs"
	chunked := func(body []byte) *http.Request {
		r := w.request("POST", path, w.developer, body)
		r.ContentLength = -1
		r.Body = unsizedBody(body)
		return r
	}
	bundle := testHandlers + "\n//" + strings.Repeat("x", 1<<10-len(testHandlers)-4) + "\n"
	for _, c := range []struct {
		name   string
		req    *http.Request
		status int
		msg    string
	}{
		{"exactly the limit", w.request("POST", path, w.developer, paddedRunBody(t, 2<<10)), 202, ""},
		{"exactly the limit, chunked", chunked(paddedRunBody(t, 2<<10)), 202, ""},
		{"a byte more", w.request("POST", path, w.developer, paddedRunBody(t, 2<<10+1)), 413, "request body is 2049 bytes; the limit is 2 KiB"},
		{"a byte more, chunked", chunked(paddedRunBody(t, 2<<10+1)), 413, "request body is larger than 2 KiB"},
		{"a bundle a byte over", w.request("POST", "/v1/deployments", w.owner, map[string]any{"bundle": bundle + "x", "config": json.RawMessage(testConfig)}),
			413, "bundle is 1025 bytes; the limit is 1 KiB"},
		{"an array", w.request("POST", path, w.developer, `[{"endUserId": "alice"}]`), 400, "the body must be a JSON object"},
		{"a string", w.request("POST", path, w.developer, `"alice"`), 400, "the body must be a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := w.send(c.req)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if c.msg != "" {
				if e := r.apiErr(); e.Message != c.msg {
					t.Errorf("message %q, want %q", e.Message, c.msg)
				}
			}
		})
	}
}

// unsizedBody is a body of unknown length (sent chunked).
func unsizedBody(b []byte) io.ReadCloser {
	return io.NopCloser(io.MultiReader(bytes.NewReader(b)))
}

// A bundle is held to MaxBundle in bytes of its text, not of its JSON
// string (a bundle of quotes takes twice its size in the body); a config
// to MaxBody; an empty bundle is missing. Warnings of a config that
// deploys come back with it.
func TestDeployLimits(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.MaxBundle, c.MaxBody = 8<<10, 4<<10 })
	count := func() int {
		var list wire.DeploymentList
		w.must(w.do("GET", "/v1/deployments", w.owner, nil), 200).decode(&list)
		return len(list.Deployments)
	}
	before := count()
	// Quotes in a comment: each is two bytes in the JSON string.
	quoted := func(n int) string {
		head := testHandlers + "\n// "
		return head + strings.Repeat(`"`, n-len(head)-1) + "\n"
	}
	r := w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": quoted(8 << 10), "config": json.RawMessage(testConfig)}), 201)
	var d wire.Deployment
	r.decode(&d)
	if d.BundleSize != 8<<10 || d.Version != 2 {
		t.Errorf("a bundle of exactly the limit: %+v", d)
	}
	for _, c := range []struct {
		name string
		body map[string]any
		msg  string
	}{
		{"bundle a byte over", map[string]any{"bundle": quoted(8<<10 + 1), "config": json.RawMessage(testConfig)}, "bundle is 8193 bytes; the limit is 8 KiB"},
		{"config text over", map[string]any{"bundle": testHandlers, "config": testConfig + strings.Repeat(" ", 4<<10)}, ""},
	} {
		e := w.must(w.do("POST", "/v1/deployments", w.owner, c.body), 413).apiErr()
		want := c.msg
		if want == "" {
			want = fmt.Sprintf("config is %d bytes; the limit is 4 KiB", len(testConfig)+4<<10)
		}
		if e.Code != api.CodePayloadTooLarge || e.Message != want {
			t.Errorf("%s: %s %q, want %q", c.name, e.Code, e.Message, want)
		}
	}
	wantInvalid(t, w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": "", "config": json.RawMessage(testConfig)}),
		"bundle: is required: the ESM bundle's source text, as a string")
	wantInvalid(t, w.do("GET", "/v1/deployments?limit=0", w.owner, nil), "limit: must be a whole number from 1 to 500 (got \"0\")")
	if after := count(); after != before+1 {
		t.Errorf("deployments %d → %d, want one more", before, after)
	}

	// remember on the agent never applies to a tool with approvers: a
	// warning, and the deployment goes through.
	fin := w.addMailedMember("Fay Ng", "approver")
	w.must(w.do("POST", "/v1/groups", w.owner, map[string]any{"name": "finance", "members": []string{fin.ID}}), 201)
	cfg := strings.Replace(testConfig, `"approvals": { "timeout": "10m" },`, `"approvals": { "timeout": "10m", "remember": { "max": "24h" } },`, 1)
	cfg = strings.Replace(cfg, `"refundOrder": { "effect": "write", "requiresApproval": true, "timeoutMs": 5000,`,
		`"refundOrder": { "effect": "write", "requiresApproval": true, "timeoutMs": 5000, "approvals": { "approvers": { "group": "finance" } },`, 1)
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201).decode(&d)
	if len(d.Warnings) != 1 || d.Warnings[0].Pointer == "" || !strings.Contains(d.Warnings[0].Message, "remember never applies to refundOrder") {
		t.Errorf("warnings %+v", d.Warnings)
	}
}

// A broker key is checked as a handler's is, and a record's value may not
// be null; a list pages by ?limit=.
func TestBrokerKeysAndPages(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, key := range []string{"a%01b", strings.Repeat("k", 513)} {
		r := w.do("PUT", "/v1/broker/orders/"+key+"?endUserId=alice", w.owner, map[string]any{"value": 1})
		if e := w.must(r, 400).apiErr(); e.Code != api.CodeInvalidArgument || len(fieldProblems(e)) != 1 || !strings.HasPrefix(fieldProblems(e)[0], "key: key must") {
			t.Errorf("key %.12q: %s %v", key, e.Code, fieldProblems(e))
		}
	}
	wantInvalid(t, w.do("PUT", "/v1/broker/orders/o-1?endUserId=alice", w.owner, `{"value": null}`),
		"value: is required: any JSON value but null (DELETE removes a record)")
	var page wire.BrokerList
	w.must(w.do("GET", "/v1/broker/orders?endUserId=alice", w.owner, nil), 200).decode(&page)
	if len(page.Records) != 0 {
		t.Fatalf("refused puts stored %+v", page.Records)
	}
	for _, k := range []string{"o-1", "o-2"} {
		w.must(w.do("PUT", "/v1/broker/orders/"+k+"?endUserId=alice", w.owner, map[string]any{"value": k}), 200)
	}
	w.must(w.do("GET", "/v1/broker/orders?endUserId=alice&limit=1", w.owner, nil), 200).decode(&page)
	if len(page.Records) != 1 || page.Records[0].Key != "o-1" || page.NextCursor == "" {
		t.Fatalf("first page of one: %+v", page)
	}
	w.must(w.do("GET", "/v1/broker/orders?endUserId=alice&limit=1&cursor="+url.QueryEscape(page.NextCursor), w.owner, nil), 200).decode(&page)
	if len(page.Records) != 1 || page.Records[0].Key != "o-2" {
		t.Errorf("second page: %+v", page)
	}
}

// A handler's failure reaches a customer token as a code and fixed words:
// never the handler's message, on the run, in its trace or on its stream.
func TestCustomerSeesNoHandlerMessage(t *testing.T) {
	t.Parallel()
	w := setup(t)
	const secret = "db password hunter2 rejected"
	var cfg map[string]any
	if err := json.Unmarshal([]byte(testConfig), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["agents"].(map[string]any)["broken"] = map[string]any{
		"tools": map[string]any{"explode": map[string]any{"effect": "read"}},
		"steps": []any{map[string]any{"id": "boom", "tool": "explode"}},
	}
	bundle := testHandlers + "\nexport async function explode() { throw new Error(\"" + secret + "\"); }\n"
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": bundle, "config": cfg}), 201)
	run := w.wait(w.start("broken", "alice", nil).ID, "terminal")
	if run.Status != "failed" || run.Error == nil || !strings.Contains(run.Error.Message, secret) {
		t.Fatalf("fixture: the operators' run is %s with %+v, want failed with the handler's message", run.Status, run.Error)
	}
	code := run.Error.Code

	var seen wire.Run
	w.must(w.do("GET", "/v1/runs/"+run.ID, w.customer, nil), 200).decode(&seen)
	if seen.Error == nil || *seen.Error != (wire.RunError{Code: code, Message: "something went wrong; the action may not have happened"}) {
		t.Errorf("the customer's run error %+v, want code %s and the fixed words", seen.Error, code)
	}
	check := func(how string, events []wire.Event) {
		t.Helper()
		failed := 0
		for _, e := range events {
			if strings.Contains(string(e.Data), "hunter2") {
				t.Errorf("%s: customer event %s shows the handler's message: %s", how, e.Type, e.Data)
			}
			if e.Type == "step.failed" || e.Type == "run.failed" {
				failed++
				if want := `{"code":"` + code + `"}`; string(e.Data) != want {
					t.Errorf("%s: customer %s %s, want %s", how, e.Type, e.Data, want)
				}
			}
		}
		if failed != 2 {
			t.Errorf("%s: the customer sees %d failure events, want step.failed and run.failed", how, failed)
		}
	}
	var list wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.customer, nil), 200).decode(&list)
	check("list", list.Events)
	var streamed []wire.Event
	for _, e := range w.stream("/v1/runs/"+run.ID+"/events", w.customer).rest() {
		streamed = append(streamed, e.data)
	}
	check("stream", streamed)
}

// A decision remembered with "when" is a schema rule, and reads as one.
func TestRememberWhenIsASchemaRule(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cfg := strings.Replace(testConfig, `"approvals": { "timeout": "10m" },`, `"approvals": { "timeout": "10m", "remember": { "max": "24h" } },`, 1)
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": json.RawMessage(cfg)}), 201)
	run := w.awaiting("alice")
	var got struct {
		wire.Approval
		RememberedRule *wire.Rule `json:"rememberedRule"`
	}
	when := map[string]any{"type": "object", "properties": map[string]any{"amount": map[string]any{"maximum": 20}}}
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", w.owner, map[string]any{"remember": map[string]any{"for": "1h", "when": when}}), 200).decode(&got)
	r := got.RememberedRule
	if r == nil || r.Scope != api.RuleScopeSchema || r.InputDigest != "" || len(r.When) == 0 {
		t.Fatalf("rule %+v, want scope schema", r)
	}
	var one wire.Rule
	w.must(w.do("GET", "/v1/rules/"+r.ID, w.owner, nil), 200).decode(&one)
	if one.Scope != api.RuleScopeSchema {
		t.Errorf("GET /v1/rules/%s: scope %q, want schema", r.ID, one.Scope)
	}
}
