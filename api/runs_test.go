package api_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
)

func TestStartRunLongPoll(t *testing.T) {
	t.Parallel()
	w := setup(t)
	resp := w.must(w.do("POST", "/v1/agents/refunds/runs?wait=5s", w.developer,
		map[string]any{"input": map[string]any{"orderId": "o-1", "amount": 12}, "endUserId": "alice"}), 202)
	var run wire.Run
	resp.decode(&run)
	if run.Status != "awaiting-approval" {
		t.Fatalf("after ?wait=5s the run is %s, want awaiting-approval", run.Status)
	}
	a := run.Approval
	if a == nil || a.ID == "" || a.Tool != "refundOrder" || a.Reason == "" || a.RequestedAt.IsZero() || !a.ExpiresAt.Equal(a.RequestedAt.Add(10*60e9)) {
		t.Fatalf("approval %+v", a)
	}
	if run.Agent != "refunds" || run.EndUserID != "alice" || run.Deployment != 1 || run.Trust != "trusted" ||
		string(run.Input) != `{"amount":12,"orderId":"o-1"}` || run.Output != nil || run.Error != nil {
		t.Errorf("run %+v", run)
	}
	for _, internal := range []string{"leaseOwner", "leaseUntil", "requestDigest", "stepState", "projectId", "version", "cursor", "attempts", "idempotencyKey"} {
		if strings.Contains(string(resp.body), `"`+internal+`"`) {
			t.Errorf("run JSON has internal field %s: %s", internal, resp.body)
		}
	}
	// GET with wait returns at once for a settled run, and ?until=terminal
	// waits out the approval.
	w.must(w.do("GET", "/v1/runs/"+run.ID+"?wait=5s", w.developer, nil), 200).decode(&run)
	if run.Status != "awaiting-approval" {
		t.Errorf("GET ?wait: %s", run.Status)
	}
	w.must(w.do("POST", "/v1/approvals/"+a.ID+"/approve", w.owner, nil), 200)
	run = w.wait(run.ID, "terminal")
	if run.Status != "succeeded" || run.Approval != nil || run.FinishedAt.IsZero() ||
		!strings.Contains(string(run.Output), `"refunded":12`) {
		t.Errorf("after approval: %+v (output %s)", run, run.Output)
	}
	// Bad wait values change nothing.
	before := w.runCount()
	for _, q := range []string{"?wait=2m", "?wait=soon", "?wait=-1s"} {
		resp := w.must(w.do("POST", "/v1/agents/refunds/runs"+q, w.developer,
			map[string]any{"input": map[string]any{"orderId": "o-1"}, "endUserId": "alice"}), 400)
		if !strings.Contains(string(resp.body), `"field":"wait"`) {
			t.Errorf("%s: %s", q, resp.body)
		}
	}
	if after := w.runCount(); after != before {
		t.Errorf("refused requests created runs: %d → %d", before, after)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	w := setup(t)
	body := map[string]any{"input": map[string]any{"orderId": "o-1", "amount": 3}, "endUserId": "alice"}
	first := w.must(w.do("POST", "/v1/agents/refunds/runs", w.developer, body, "Idempotency-Key", "order-o-1"), 202)
	var a, b wire.Run
	first.decode(&a)
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("first request marked replayed")
	}
	// The same request again, spelled differently: the same run.
	again := w.must(w.do("POST", "/v1/agents/refunds/runs", w.developer,
		`{ "endUserId": "alice", "input": {"amount": 3, "orderId": "o-1"} }`, "Idempotency-Key", "order-o-1"), 200)
	again.decode(&b)
	if b.ID != a.ID || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat gave run %s (replayed %q), want %s", b.ID, again.header.Get("Idempotent-Replayed"), a.ID)
	}
	count := w.runCount()
	// The same key with another body: 422, and no run.
	body["input"] = map[string]any{"orderId": "o-2", "amount": 3}
	resp := w.must(w.do("POST", "/v1/agents/refunds/runs", w.developer, body, "Idempotency-Key", "order-o-1"), 422)
	if got := resp.apiErr().Code; got != api.CodeIdempotencyKeyReused {
		t.Errorf("code %q", got)
	}
	if n := w.runCount(); n != count {
		t.Errorf("runs %d → %d after a reused key", count, n)
	}
	// Keys are per project: another project may use the same key.
	w.must(w.do("POST", "/v1/agents/plain/runs", w.other, map[string]any{"endUserId": "alice"}, "Idempotency-Key", "order-o-1"), 202)
	w.must(w.do("POST", "/v1/agents/plain/runs", w.developer, map[string]any{"endUserId": "alice"}, "Idempotency-Key", "has space"), 400)
	w.must(w.do("POST", "/v1/agents/plain/runs", w.developer, map[string]any{"endUserId": "alice"}, "Idempotency-Key", strings.Repeat("k", 300)), 400)
}

func TestStartRunRefusals(t *testing.T) {
	t.Parallel()
	w := setup(t)
	before := w.runCount()
	resp := w.must(w.do("POST", "/v1/agents/refunds/runs", w.developer, map[string]any{"input": map[string]any{"amount": "x"}, "endUserId": "alice"}), 400)
	e := resp.apiErr()
	fields := fmt.Sprint(e.Details["fields"])
	if e.Code != api.CodeInvalidArgument || !strings.Contains(fields, "field:input.orderId message:is required") ||
		!strings.Contains(fields, "field:input.amount message:must be a number") {
		t.Errorf("error %+v", e)
	}
	resp = w.must(w.do("POST", "/v1/agents/refunds/runs", w.developer, map[string]any{"input": map[string]any{"orderId": "o"}}), 400)
	if !strings.Contains(string(resp.body), `{"field":"endUserId","message":"is required"}`) {
		t.Errorf("missing end user: %s", resp.body)
	}
	resp = w.must(w.do("POST", "/v1/agents/nope/runs", w.developer, map[string]any{"endUserId": "alice"}), 404)
	if msg := resp.apiErr().Message; !strings.Contains(msg, `"nope"`) {
		t.Errorf("message %q", msg)
	}
	w.must(w.do("POST", "/v1/agents/refunds/runs", w.developer, `{"input": {"orderId": "o"}, "endUserId": 7}`), 400)
	if after := w.runCount(); after != before {
		t.Errorf("refused requests created runs: %d → %d", before, after)
	}
}

func TestListRuns(t *testing.T) {
	t.Parallel()
	w := setup(t)
	done := w.wait(w.start("plain", "bob", nil).ID, "terminal")
	waiting := w.awaiting("alice")
	w.wait(w.start("plain", "alice", nil).ID, "terminal")

	list := func(q string) wire.RunList {
		t.Helper()
		var l wire.RunList
		w.must(w.do("GET", "/v1/runs"+q, w.owner, nil), 200).decode(&l)
		return l
	}
	if l := list("?status=awaiting-approval"); len(l.Runs) != 1 || l.Runs[0].ID != waiting.ID || l.Runs[0].Approval == nil {
		t.Errorf("awaiting: %+v", l.Runs)
	}
	if l := list("?endUserId=bob"); len(l.Runs) != 1 || l.Runs[0].ID != done.ID {
		t.Errorf("bob: %+v", l.Runs)
	}
	if l := list("?agent=plain&status=succeeded"); len(l.Runs) != 2 {
		t.Errorf("plain succeeded: %+v", l.Runs)
	}
	// Paging, newest first.
	seen := map[string]bool{}
	cursor := ""
	for range 5 {
		l := list("?limit=1&cursor=" + cursor)
		for _, r := range l.Runs {
			seen[r.ID] = true
		}
		if cursor = l.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 3 {
		t.Errorf("paged through %d runs, want 3", len(seen))
	}
	for _, q := range []string{"?status=done", "?limit=0", "?limit=501", "?limit=x", "?cursor=bogus"} {
		resp := w.must(w.do("GET", "/v1/runs"+q, w.owner, nil), 400)
		if resp.apiErr().Code != api.CodeInvalidArgument {
			t.Errorf("%s: %s", q, resp.body)
		}
	}
}

func TestEventPages(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", w.owner, nil), 200)
	w.wait(run.ID, "terminal")

	var all []wire.Event
	after := int64(0)
	for range 50 {
		var page wire.EventList
		w.must(w.do("GET", "/v1/runs/"+run.ID+"/events?limit=2&after="+strconv.FormatInt(after, 10), w.developer, nil), 200).decode(&page)
		if len(page.Events) == 0 {
			if page.NextAfter != after {
				t.Errorf("empty page moved nextAfter %d → %d", after, page.NextAfter)
			}
			break
		}
		if len(page.Events) > 2 {
			t.Fatalf("page of %d events with limit=2", len(page.Events))
		}
		all = append(all, page.Events...)
		after = page.NextAfter
	}
	for i, e := range all {
		if e.Seq != int64(i+1) || e.Type == "" || e.At.IsZero() || len(e.Data) == 0 {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	types := make([]string, len(all))
	for i, e := range all {
		types[i] = e.Type
	}
	joined := strings.Join(types, " ")
	for _, want := range []string{"run.created", "approval.requested", "approval.approved", "run.succeeded"} {
		if !strings.Contains(joined, want) {
			t.Errorf("trace %s lacks %s", joined, want)
		}
	}
	if all[len(all)-1].Type != "run.succeeded" {
		t.Errorf("last event %s", all[len(all)-1].Type)
	}
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events?after=-1", w.developer, nil), 400)
}

func TestSSEResume(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", w.owner, nil), 200)
	w.wait(run.ID, "terminal")
	var page wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events?limit=500", w.developer, nil), 200).decode(&page)
	total := len(page.Events)
	if total < 6 {
		t.Fatalf("only %d events", total)
	}

	s := w.stream("/v1/runs/"+run.ID+"/events", w.developer)
	var first []sseEvent
	for range 3 {
		ev, ok := s.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		if ev.id != strconv.FormatInt(ev.data.Seq, 10) || ev.event != ev.data.Type {
			t.Errorf("event framing: id %q event %q data %+v", ev.id, ev.event, ev.data)
		}
		first = append(first, ev)
	}
	s.close()
	if got := seqs(first); got != "1,2,3" {
		t.Fatalf("first events %s", got)
	}

	rest := w.stream("/v1/runs/"+run.ID+"/events", w.developer, "Last-Event-ID", first[2].id).rest()
	want := make([]string, 0, total-3)
	for i := 4; i <= total; i++ {
		want = append(want, strconv.Itoa(i))
	}
	if got := seqs(rest); got != strings.Join(want, ",") {
		t.Fatalf("resumed with Last-Event-ID 3: got %s, want %s", got, strings.Join(want, ","))
	}
	if last := rest[len(rest)-1]; last.event != "run.succeeded" {
		t.Errorf("stream ended after %s", last.event)
	}
	// ?after= resumes too.
	if got := seqs(w.stream("/v1/runs/"+run.ID+"/events?after="+strconv.Itoa(total-1), w.developer).rest()); got != strconv.Itoa(total) {
		t.Errorf("?after=%d gave %s", total-1, got)
	}
}

func TestSSELive(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	s := w.stream("/v1/runs/"+run.ID+"/events", w.customer)
	s.skipTo("approval.requested")
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", w.owner, map[string]any{"note": "fine"}), 200)
	rest := s.rest()
	types := make([]string, len(rest))
	for i, e := range rest {
		types[i] = e.event
	}
	joined := strings.Join(types, " ")
	if !strings.HasPrefix(joined, "approval.approved") || !strings.HasSuffix(joined, "run.succeeded") {
		t.Errorf("live events after approval: %s", joined)
	}
}

func TestSSEHeartbeat(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.Heartbeat = 20e6 })
	run := w.awaiting("alice")
	var page wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events?limit=500", w.developer, nil), 200).decode(&page)
	s := w.stream("/v1/runs/"+run.ID+"/events?after="+strconv.FormatInt(page.NextAfter, 10), w.developer)
	// Read raw lines until a heartbeat comment arrives.
	for s.comments == 0 && s.lines.Scan() {
		if strings.HasPrefix(s.lines.Text(), ":") {
			s.comments++
		}
	}
	if s.comments == 0 {
		t.Fatal("no heartbeat before the stream ended")
	}
	w.must(w.do("POST", "/v1/runs/"+run.ID+"/cancel", w.owner, nil), 200)
	rest := s.rest()
	if len(rest) == 0 || rest[len(rest)-1].event != "run.cancelled" {
		t.Errorf("after cancel: %s", seqs(rest))
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	var got wire.Run
	w.must(w.do("POST", "/v1/runs/"+run.ID+"/cancel", w.developer, nil), 200).decode(&got)
	if got.Status != "cancelled" || got.Error == nil || got.Error.Code != "cancelled" || got.Approval != nil {
		t.Fatalf("cancelled run %+v", got)
	}
	resp := w.must(w.do("POST", "/v1/runs/"+run.ID+"/cancel", w.developer, nil), 409)
	if e := resp.apiErr(); e.Code != api.CodeConflict || !strings.Contains(e.Message, "already cancelled") {
		t.Errorf("second cancel: %+v", e)
	}
	var a wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+run.Approval.ID, w.owner, nil), 200).decode(&a)
	if a.Status != "cancelled" {
		t.Errorf("approval of a cancelled run is %s", a.Status)
	}
	w.must(w.do("POST", "/v1/runs/run_nope/cancel", w.developer, nil), 404)
}

func TestForeignIDsAreNotFound(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	for _, req := range []struct{ method, path string }{
		{"GET", "/v1/runs/" + run.ID},
		{"GET", "/v1/runs/" + run.ID + "/events"},
		{"POST", "/v1/runs/" + run.ID + "/cancel"},
		{"GET", "/v1/approvals/" + run.Approval.ID},
		{"POST", "/v1/approvals/" + run.Approval.ID + "/approve"},
		{"POST", "/v1/approvals/" + run.Approval.ID + "/deny"},
	} {
		foreign := w.must(w.do(req.method, req.path, w.other, nil), 404)
		// Indistinguishable from an id that does not exist.
		other := strings.NewReplacer(run.ID, "run_01AAAAAAAAAAAAAAAAAAAAAAAA", run.Approval.ID, "apr_01AAAAAAAAAAAAAAAAAAAAAAAA").Replace(req.path)
		missing := w.must(w.do(req.method, other, w.other, nil), 404)
		if foreign.apiErr().Code != api.CodeNotFound || missing.apiErr().Code != api.CodeNotFound {
			t.Errorf("%s %s: %s / %s", req.method, req.path, foreign.body, missing.body)
		}
	}
	var got wire.Run
	w.must(w.do("GET", "/v1/runs/"+run.ID, w.owner, nil), 200).decode(&got)
	if got.Status != "awaiting-approval" {
		t.Errorf("another project's requests moved the run to %s", got.Status)
	}
}

// A customer token sees what its run is doing and how it ended, not the
// operator's detail: no log lines, costs, worker names, idempotency keys,
// who decided, or a reviewer's note (unless the tool says so: see
// TestCustomerSeesANoteOnlyWhenTheToolSaysSo).
func TestCustomerSeesAFilteredTrace(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/deny", w.owner, map[string]any{"note": "not eligible"}), 200)
	w.wait(run.ID, "terminal")

	var full, seen wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.developer, nil), 200).decode(&full)
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.customer, nil), 200).decode(&seen)
	if len(seen.Events) == 0 || seen.NextAfter != full.NextAfter {
		t.Fatalf("customer sees %d of %d events (next after %d, %d)", len(seen.Events), len(full.Events), seen.NextAfter, full.NextAfter)
	}
	var types []string
	for _, e := range seen.Events {
		types = append(types, e.Type)
		for _, secret := range []string{"worker", "idempotencyKey", `"by"`, "key_", "input", "output"} {
			if strings.Contains(string(e.Data), secret) {
				t.Errorf("customer event %s shows %s: %s", e.Type, secret, e.Data)
			}
		}
		if e.Type == "approval.denied" && strings.Contains(string(e.Data), "not eligible") {
			t.Errorf("a reviewer's note reaches the customer without the tool's noteToCustomer: %s", e.Data)
		}
	}
	want := []string{"run.created", "run.started", "step.started", "step.completed", "approval.requested", "approval.denied", "run.failed"}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Errorf("customer trace %v, want %v", types, want)
	}
	// The stream shows the same.
	s := w.stream("/v1/runs/"+run.ID+"/events", w.customer)
	var streamed []string
	for _, e := range s.rest() {
		streamed = append(streamed, e.event)
	}
	if strings.Join(streamed, " ") != strings.Join(want, " ") {
		t.Errorf("customer stream %v, want %v", streamed, want)
	}
}

// An approval shows the customer that it was approved, not who approved it
// or the reviewer's note: the approval.approved event carries its id and
// tool alone, in the event list and on the stream.
func TestCustomerDoesNotSeeWhoApproved(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/approve", w.owner, map[string]any{"note": "looks fine"}), 200)
	w.wait(run.ID, "terminal")

	var full, seen wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.developer, nil), 200).decode(&full)
	approvedBy := false
	for _, e := range full.Events {
		approvedBy = approvedBy || e.Type == "approval.approved" && strings.Contains(string(e.Data), `"by"`)
	}
	if !approvedBy {
		t.Fatalf("the operators' approval.approved does not say who decided: %+v", full.Events)
	}
	want := `{"approvalId":"` + run.Approval.ID + `","tool":"refundOrder"}`
	check := func(how string, events []wire.Event) {
		t.Helper()
		approved := false
		for _, e := range events {
			for _, secret := range []string{`"by`, "looks fine"} {
				if strings.Contains(string(e.Data), secret) {
					t.Errorf("%s: customer event %s shows %s: %s", how, e.Type, secret, e.Data)
				}
			}
			if e.Type == "approval.approved" {
				approved = true
				if string(e.Data) != want {
					t.Errorf("%s: customer approval.approved %s, want %s", how, e.Data, want)
				}
			}
		}
		if !approved {
			t.Errorf("%s: the customer does not see the approval: %+v", how, events)
		}
	}
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.customer, nil), 200).decode(&seen)
	check("list", seen.Events)
	s := w.stream("/v1/runs/"+run.ID+"/events", w.customer)
	var streamed []wire.Event
	for _, e := range s.rest() {
		streamed = append(streamed, e.data)
	}
	check("stream", streamed)
}

func TestCustomerDoesNotSeeLogLines(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.start("plain", "alice", map[string]any{})
	w.wait(run.ID, "terminal")
	var full, seen wire.EventList
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.developer, nil), 200).decode(&full)
	w.must(w.do("GET", "/v1/runs/"+run.ID+"/events", w.customer, nil), 200).decode(&seen)
	logs := func(l wire.EventList) (n int) {
		for _, e := range l.Events {
			if e.Type == "log" {
				n++
			}
		}
		return n
	}
	if logs(full) == 0 || logs(seen) != 0 || len(seen.Events) >= len(full.Events) {
		t.Errorf("log events: %d for the developer, %d for the customer", logs(full), logs(seen))
	}
}

// A stream lives no longer than its credential: after the customer token
// expires, the next heartbeat ends the stream instead of sending on.
func TestStreamEndsWhenItsTokenExpires(t *testing.T) {
	t.Parallel()
	w := setup(t, func(c *api.Config) { c.Heartbeat = 20e6 })
	run := w.awaiting("alice")
	token := w.customerToken("alice", 60)
	s := w.stream("/v1/runs/"+run.ID+"/events", token)
	for s.comments == 0 && s.lines.Scan() { // streaming, heartbeats flowing
		if strings.HasPrefix(s.lines.Text(), ":") {
			s.comments++
		}
	}
	if s.comments == 0 {
		t.Fatal("the stream ended before its token expired")
	}
	w.clock.Advance(2 * time.Minute)
	s.waitEnd(10*time.Second, "its expired token")
}

// The run a customer token reads is trimmed like its trace: no approver, no
// costs or trust details, and fixed words for a failure.
func TestCustomerRunIsTrimmed(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	resp := w.must(w.do("GET", "/v1/runs/"+run.ID, w.customer, nil), 200)
	var waiting wire.Run
	resp.decode(&waiting)
	if waiting.Approval == nil || waiting.Approval.Tool != "refundOrder" || waiting.Approval.Reason != "" {
		t.Errorf("customer view of a waiting run: %+v", waiting.Approval)
	}
	w.must(w.do("POST", "/v1/approvals/"+run.Approval.ID+"/deny", w.owner, map[string]any{"note": "not eligible"}), 200)
	w.wait(run.ID, "terminal")
	for _, path := range []string{"/v1/runs/" + run.ID, "/v1/runs"} {
		body := string(w.must(w.do("GET", path, w.customer, nil), 200).body)
		for _, secret := range []string{"key_", `"costs"`, `"trust"`, "denied by"} {
			if strings.Contains(body, secret) {
				t.Errorf("customer %s shows %s: %s", path, secret, body)
			}
		}
		if !strings.Contains(body, `"code":"approval-denied"`) {
			t.Errorf("customer %s lost the error code: %s", path, body)
		}
	}
	// Operators still see everything.
	body := string(w.must(w.do("GET", "/v1/runs/"+run.ID, w.developer, nil), 200).body)
	// The member who decided, by name (the owner key's member is named
	// after the key).
	if !strings.Contains(body, "denied by owner") || !strings.Contains(body, `"costs"`) {
		t.Errorf("developer view lost detail: %s", body)
	}
}
