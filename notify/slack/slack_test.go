package slack_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"
	"go.uber.org/goleak"

	"stead/approvals"
	"stead/infra/testclock"
	"stead/notify"
	"stead/notify/slack"
	"stead/notify/slack/slacktest"
	"stead/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	token   = "xoxb-1-stead-test"
	secret  = "8f742231b10e8888abcd99yyyzzz85a5"
	channel = "C0APPROVALS"
)

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fakeStore holds approvals and deliveries in memory.
type fakeStore struct {
	mu         sync.Mutex
	approvals  map[string]approvals.Approval
	deliveries map[string]store.Delivery
	events     map[string][]store.Event
}

func (f *fakeStore) ListEvents(_ context.Context, runID string, after int64, limit int) ([]store.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.Event
	evs := slices.Clone(f.events[runID])
	slices.SortStableFunc(evs, func(a, b store.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, e := range evs {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *fakeStore) GetApproval(_ context.Context, id string) (approvals.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.approvals[id]
	if !ok {
		return a, fmt.Errorf("get approval %s: %w", id, store.ErrNotFound)
	}
	return a, nil
}

func (f *fakeStore) GetDelivery(_ context.Context, projectID, id string) (store.Delivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.deliveries[id]
	if !ok || d.ProjectID != projectID {
		return d, fmt.Errorf("get delivery %s: %w", id, store.ErrNotFound)
	}
	return d, nil
}

func (f *fakeStore) put(a approvals.Approval) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.approvals[a.ID] = a
}

func (f *fakeStore) putDelivery(d store.Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deliveries[d.ID] = d
}

type fixture struct {
	app   *slack.App
	slack *slacktest.Server
	store *fakeStore
	clock *testclock.Clock
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		slack: slacktest.New(t, token, channel),
		store: &fakeStore{approvals: map[string]approvals.Approval{}, deliveries: map[string]store.Delivery{}, events: map[string][]store.Event{}},
		clock: testclock.New(epoch),
	}
	app, err := slack.New(slack.Config{BotToken: token, SigningSecret: secret, Channel: channel, Project: "prj_1", APIURL: f.slack.URL, Store: f.store, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.app = app
	return f
}

func pending(id string, input string) approvals.Approval {
	a, err := approvals.New(approvals.Request{
		ProjectID: "prj_1", RunID: "run_01ABC", Agent: "refunds", EndUserID: "demo-user", StepID: "refund",
		Tool: "refundOrder", Input: json.RawMessage(input), Reason: "refunds need a person", RequestedAt: epoch, Timeout: 15 * time.Minute,
	}, id)
	if err != nil {
		panic(err)
	}
	return a
}

// deliveries appends event seq of type typ about a to its run's trace,
// and returns what the app makes of it as the Notifier would store them.
func (f *fixture) deliveries(t *testing.T, typ string, seq int64, a approvals.Approval) []store.Delivery {
	t.Helper()
	return f.deliveriesLinking(t, typ, seq, a, "https://stead.example/console/#/approvals/"+a.ID)
}

// deliveriesLinking is deliveries with the console URL the Notifier
// passes.
func (f *fixture) deliveriesLinking(t *testing.T, typ string, seq int64, a approvals.Approval, consoleURL string) []store.Delivery {
	t.Helper()
	run := store.Run{ID: a.RunID, ProjectID: a.ProjectID, Agent: a.Agent}
	ev := store.Event{RunID: run.ID, Seq: seq, Type: typ, Data: json.RawMessage(`{"approvalId":"` + a.ID + `"}`)}
	f.store.mu.Lock()
	f.store.events[run.ID] = append(f.store.events[run.ID], ev)
	f.store.mu.Unlock()
	ds, err := f.app.Deliveries(context.Background(), run, ev, notify.Data{ApprovalID: a.ID, ConsoleURL: consoleURL})
	if err != nil {
		t.Fatal(err)
	}
	for i := range ds {
		ds[i].ID = notify.MessageID(ds[i].EndpointID, run.ID, seq)
		ds[i].ProjectID, ds[i].RunID, ds[i].Seq, ds[i].Type, ds[i].Channel = run.ProjectID, run.ID, seq, typ, slack.Name
	}
	return ds
}

// blocksText is everything a message's blocks say, for assertions.
func blocksText(m slacktest.Message) string {
	b, _ := json.Marshal(m.Blocks)
	var texts []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x["text"].(string); ok {
				texts = append(texts, s)
			}
			for _, v := range x {
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	var v any
	_ = json.Unmarshal(b, &v)
	walk(v)
	return strings.Join(texts, "\n")
}

// buttons are the action ids of a message's buttons.
func buttons(m slacktest.Message) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, raw := range m.Blocks {
		b, _ := raw.(map[string]any)
		els, _ := b["elements"].([]any)
		for _, e := range els {
			if el, _ := e.(map[string]any); el["type"] == "button" {
				out[el["action_id"].(string)] = el
			}
		}
	}
	return out
}

func TestPostThenUpdate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	a := pending("u1", `{"orderId":"o-1001","amount":12.5,"note":"<b>&</b>"}`)
	f.store.put(a)

	if ds := f.deliveries(t, "run.succeeded", 9, a); len(ds) != 0 {
		t.Fatalf("run.succeeded makes %d Slack deliveries, want none", len(ds))
	}
	posts := f.deliveries(t, "approval.requested", 3, a)
	if len(posts) != 1 || posts[0].ID != slack.PostID(channel, a.RunID, 3) || posts[0].EndpointID != "slack:"+channel {
		t.Fatalf("approval.requested makes %+v, want one delivery %s to slack:%s", posts, slack.PostID(channel, a.RunID, 3), channel)
	}
	for _, notice := range []string{"approval.reminder", "approval.expiring", "approval.escalated"} {
		if ds := f.deliveries(t, notice, 3, a); len(ds) != 0 {
			t.Errorf("%s makes %d Slack deliveries, want none", notice, len(ds))
		}
	}
	if bytes.Contains(posts[0].Body, []byte("o-1001")) {
		t.Errorf("the delivery keeps the input: %s", posts[0].Body)
	}

	// An update tried before the post is delivered waits for it.
	upd := f.deliveries(t, "approval.approved", 4, a)
	if len(upd) != 1 || upd[0].ID == posts[0].ID || !bytes.Contains(upd[0].Body, []byte(posts[0].ID)) {
		t.Fatalf("approval.approved makes %+v; want one update naming the post %s", upd, posts[0].ID)
	}
	f.store.putDelivery(store.Delivery{ID: posts[0].ID, ProjectID: "prj_1", Status: store.DeliveryPending})
	if att, final := f.app.Send(ctx, upd[0]); final || att.Status != 0 || !strings.Contains(att.Error, "not posted yet") {
		t.Errorf("update before the post: %+v final=%v; want a retry", att, final)
	}

	att, final := f.app.Send(ctx, posts[0])
	if att.Status != http.StatusOK || final || att.Error != "" {
		t.Fatalf("post: %+v final=%v", att, final)
	}
	msgs := f.slack.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages posted, want 1", len(msgs))
	}
	m := msgs[0]
	var ref struct {
		OK          bool
		Channel, TS string
	}
	if err := json.Unmarshal([]byte(att.Response), &ref); err != nil || !ref.OK || ref.Channel != channel || ref.TS != m.TS {
		t.Errorf("the attempt records %q; want the message's channel %s and ts %s", att.Response, channel, m.TS)
	}
	text := blocksText(m)
	for _, want := range []string{"Approval needed: refundOrder", "refunds", "demo-user", "refunds need a person", `"orderId": "o-1001"`,
		"&lt;b&gt;&amp;&lt;/b&gt;", "<!date^" + fmt.Sprint(a.ExpiresAt.Unix()), a.ID} {
		if !strings.Contains(text, want) {
			t.Errorf("the message does not say %q:\n%s", want, text)
		}
	}
	bs := buttons(m)
	var c struct{ ApprovalID, InputDigest string }
	if err := json.Unmarshal([]byte(bs[slack.ActionApprove]["value"].(string)), &c); err != nil || c.ApprovalID != a.ID || c.InputDigest != a.InputDigest {
		t.Errorf("the Approve button carries %v; want the approval and its input digest %s", bs[slack.ActionApprove]["value"], a.InputDigest)
	}
	if bs[slack.ActionDeny]["style"] != "danger" || bs[slack.ActionApprove]["style"] != "primary" {
		t.Errorf("buttons %v", bs)
	}
	if u := bs[slack.ActionOpen]["url"]; u != "https://stead.example/console/#/approvals/"+a.ID {
		t.Errorf("Open in console links to %v", u)
	}

	// Settled: the update finds the posted message and shows who decided.
	post := posts[0]
	post.Status = store.DeliveryDelivered
	post = post.Record(att)
	f.store.putDelivery(post)
	a.Status, a.DecidedBy, a.DecidedByName, a.DecidedAt, a.Note = approvals.Approved, slack.ActorID("T0STEAD", "U0ANA"), "Ana Diaz", epoch.Add(time.Minute), "ok, damaged in transit"
	f.store.put(a)
	att, final = f.app.Send(ctx, upd[0])
	if att.Status != http.StatusOK || final {
		t.Fatalf("update: %+v final=%v", att, final)
	}
	m = f.slack.Messages()[0]
	if m.Updates != 1 {
		t.Fatalf("the message had %d updates, want 1", m.Updates)
	}
	text = blocksText(m)
	for _, want := range []string{"Approved: refundOrder", "*Approved* by Ana Diaz in Slack", ">ok, damaged in transit"} {
		if !strings.Contains(text, want) {
			t.Errorf("the updated message does not say %q:\n%s", want, text)
		}
	}
	if bs := buttons(m); bs[slack.ActionApprove] != nil || bs[slack.ActionDeny] != nil || bs[slack.ActionOpen] == nil {
		t.Errorf("a settled message has buttons %v; want Open in console alone", bs)
	}
	if got := f.slack.Requests(); len(got) != 2 || got[0].Method != "chat.postMessage" || got[1].Method != "chat.update" {
		t.Errorf("requests %+v", got)
	}
}

func TestUpdateWithoutPost(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	a := pending("u2", `{"orderId":"o-2"}`)
	f.store.put(a)
	if att, final := f.app.Send(ctx, f.deliveries(t, "approval.cancelled", 5, a)[0]); !final || !strings.Contains(att.Error, "no approval.requested event") {
		t.Errorf("an update of an approval never requested: %+v final=%v; want a final failure", att, final)
	}
	f.store.mu.Lock()
	f.store.events[a.RunID] = []store.Event{{RunID: a.RunID, Seq: 2, Type: "approval.requested", Data: json.RawMessage(`{"approvalId":"` + a.ID + `"}`)}}
	f.store.mu.Unlock()
	upd := f.deliveries(t, "approval.cancelled", 5, a)
	if att, final := f.app.Send(ctx, upd[0]); !final || !strings.Contains(att.Error, "before Slack was configured") {
		t.Errorf("an update of a message never posted: %+v final=%v; want a final failure", att, final)
	}
	f.store.putDelivery(store.Delivery{ID: slack.PostID(channel, a.RunID, 2), ProjectID: "prj_1", Status: store.DeliveryFailed})
	if att, final := f.app.Send(ctx, upd[0]); !final || !strings.Contains(att.Error, "never posted") {
		t.Errorf("an update of a post that failed: %+v final=%v; want a final failure", att, final)
	}
	if n := len(f.slack.Requests()); n != 0 {
		t.Errorf("%d calls to Slack, want none", n)
	}
}

func TestSlackErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code  string
		final bool
		says  string
	}{
		{"not_in_channel", true, "invite it there"},
		{"invalid_auth", true, slack.EnvBotToken},
		{"missing_scope", true, "chat:write"},
		{"ratelimited", false, "ratelimited"},
		{"internal_error", false, "internal_error"},
	} {
		t.Run(c.code, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			a := pending("e1", `{}`)
			f.store.put(a)
			f.slack.FailNext("chat.postMessage", c.code)
			att, final := f.app.Send(context.Background(), f.deliveries(t, "approval.requested", 1, a)[0])
			if final != c.final || att.Status == http.StatusOK || !strings.Contains(att.Error, c.says) || !strings.Contains(att.Response, c.code) {
				t.Errorf("%s: %+v final=%v; want final=%v, an error saying %q", c.code, att, final, c.final, c.says)
			}
		})
	}
}

// TestBlockLimits renders what is too long for Block Kit — a 100 KB input,
// long names, reasons, notes and vote lists, mrkdwn's control characters,
// ``` in the input — and the stand-in holds every request to the limits.
func TestBlockLimits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	long := strings.Repeat("<&>", 2000)
	input, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x```", 25000)})
	a := pending("big", string(input))
	a.Tool, a.Agent, a.EndUserID, a.Reason = strings.Repeat("t", 300), long, long, long
	var eligible []approvals.Voter
	for i := range 300 {
		eligible = append(eligible, approvals.Voter{Member: fmt.Sprintf("mem_%03d", i), Name: "A Rather Long Member Name " + fmt.Sprint(i)})
		a.Votes = append(a.Votes, approvals.Vote{Member: fmt.Sprintf("mem_%03d", i), Name: "A Rather Long Member Name " + fmt.Sprint(i)})
	}
	a.Requirements = []approvals.Requirement{{Group: "finance", Min: 400, Eligible: eligible}}
	f.store.put(a)
	post := f.deliveries(t, "approval.requested", 1, a)[0]
	if att, _ := f.app.Send(context.Background(), post); att.Status != http.StatusOK {
		t.Fatalf("post: %+v", att)
	}
	text := blocksText(f.slack.Messages()[0])
	if !strings.Contains(text, "(cut: the input has") {
		t.Errorf("a 100 KB input is not cut:\n%.500s", text)
	}
	if strings.Count(text, "```") != 2 {
		t.Errorf("the input's ``` end its code block early")
	}
	a.Status, a.Note, a.DecidedByName, a.DecidedAt = approvals.Denied, long, long, epoch
	f.store.put(a)
	done := post
	done.Status = store.DeliveryDelivered
	done = done.Record(store.Attempt{Status: 200, Response: fmt.Sprintf(`{"ok":true,"channel":%q,"ts":%q}`, channel, f.slack.Messages()[0].TS)})
	f.store.putDelivery(done)
	if att, _ := f.app.Send(context.Background(), f.deliveries(t, "approval.denied", 2, a)[0]); att.Status != http.StatusOK {
		t.Fatalf("update: %+v", att)
	}
}

// TestStandInRefuses shows the stand-in can fail a test: requests that
// break Slack's shapes are refused as Slack refuses them, and recorded.
func TestStandInRefuses(t *testing.T) {
	t.Parallel()
	s := slacktest.New(t, token, channel)
	ctx := context.Background()
	api := slackgo.New(token, slackgo.OptionAPIURL(s.URL)) // the token in the form body, no header
	if _, _, err := api.PostMessageContext(ctx, channel, slackgo.MsgOptionText("hi", false)); err == nil || !strings.Contains(err.Error(), "not_authed") {
		t.Errorf("a post without the Authorization header: %v; want not_authed", err)
	}
	blocks, _ := json.Marshal([]any{slackgo.NewHeaderBlock(slackgo.NewTextBlockObject("mrkdwn", strings.Repeat("h", 151), false, false))})
	form := url.Values{"channel": {channel}, "blocks": {string(blocks)}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"chat.postMessage", strings.NewReader(form.Encode()))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		OK    bool
		Error string
	}
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if answer.OK || answer.Error != "invalid_blocks" {
		t.Errorf("a header of 151 mrkdwn characters: %+v; want invalid_blocks", answer)
	}
	problems := s.TakeProblems()
	if len(problems) != 2 || !strings.Contains(problems[1], "must be plain_text") || !strings.Contains(problems[1], "151 characters") {
		t.Errorf("problems %q", problems)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := []byte("payload=%7B%22type%22%3A%22block_actions%22%7D")
	now := f.clock.Now()
	signed := slacktest.Sign(secret, now, body)
	// with is h with header k set to v (deleted if "").
	with := func(h http.Header, k, v string) http.Header {
		h = h.Clone()
		h.Del(k)
		if v != "" {
			h.Set(k, v)
		}
		return h
	}
	cases := []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"signed now", slacktest.Sign(secret, now, body), body, nil},
		{"signed 4m59s ago", slacktest.Sign(secret, now.Add(-4*time.Minute-59*time.Second), body), body, nil},
		{"signed 5m1s ago", slacktest.Sign(secret, now.Add(-5*time.Minute-time.Second), body), body, slack.ErrStale},
		{"signed 5m ago", slacktest.Sign(secret, now.Add(-5*time.Minute), body), body, nil},
		{"signed 5m ahead", slacktest.Sign(secret, now.Add(5*time.Minute), body), body, nil},
		{"signed 5m1s ahead", slacktest.Sign(secret, now.Add(5*time.Minute+time.Second), body), body, slack.ErrStale},
		{"signed 6m ahead", slacktest.Sign(secret, now.Add(6*time.Minute), body), body, slack.ErrStale},
		{"another secret", slacktest.Sign("another", now, body), body, slack.ErrSignature},
		{"body changed", slacktest.Sign(secret, now, body), append(body, 'x'), slack.ErrSignature},
		{"no headers", http.Header{}, body, slack.ErrSignature},
		{"a timestamp alone, 10m old", with(slacktest.Sign(secret, now.Add(-10*time.Minute), body), slack.HeaderSignature, ""), body, slack.ErrSignature},
		{"a timestamp not in seconds", with(slacktest.Sign(secret, now, body), slack.HeaderTimestamp, now.Format(time.RFC3339)), body, slack.ErrSignature},
		{"half the signature", with(signed, slack.HeaderSignature, signed.Get(slack.HeaderSignature)[:len("v0=")+32]), body, slack.ErrSignature},
		{"v0= alone", with(signed, slack.HeaderSignature, "v0="), body, slack.ErrSignature},
	}
	for _, c := range cases {
		err := f.app.Verify(c.h, c.body)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	timestampOnly := slacktest.Sign(secret, now, body)
	timestampOnly.Set(slack.HeaderSignature, strings.TrimPrefix(timestampOnly.Get(slack.HeaderSignature), "v0="))
	if err := f.app.Verify(timestampOnly, body); !errors.Is(err, slack.ErrSignature) {
		t.Errorf("a signature without v0=: %v", err)
	}
}

// TestVerifyAgreesWithSlackGo holds Verify and the stand-in's Sign to
// slack-go's SecretsVerifier (on the wall clock, which it reads).
func TestVerifyAgreesWithSlackGo(t *testing.T) {
	t.Parallel()
	app, err := slack.New(slack.Config{BotToken: token, SigningSecret: secret, Channel: channel, Project: "prj_1", Store: &fakeStore{}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("payload=%7B%7D")
	for _, c := range []struct {
		secret string
		at     time.Time
	}{{secret, time.Now()}, {"other", time.Now()}, {secret, time.Now().Add(-10 * time.Minute)}} {
		h := slacktest.Sign(c.secret, c.at, body)
		ours := app.Verify(h, body)
		sv, err := slackgo.NewSecretsVerifier(h, secret)
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if (ours == nil) != (err == nil) {
			t.Errorf("signed with %q at %s: Verify says %v, slack-go %v", c.secret, c.at, ours, err)
		}
	}
}

func TestParseInteraction(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := pending("p1", `{"orderId":"o-1"}`)
	f.store.put(a)
	if att, _ := f.app.Send(context.Background(), f.deliveries(t, "approval.requested", 1, a)[0]); att.Status != 200 {
		t.Fatal(att)
	}
	m := f.slack.Messages()[0]
	ana := slacktest.User{Team: "T0STEAD", ID: "U0ANA", Name: "Ana Diaz"}

	in, err := slack.ParseInteraction(f.slack.Click(t, ana, m, slack.ActionApprove))
	if err != nil || in.Kind != slack.Approve || in.Team != "T0STEAD" || in.User != "U0ANA" || in.ApprovalID != a.ID || in.Seen != a.InputDigest || in.Channel != channel || in.TriggerID == "" {
		t.Errorf("approve click: %+v %v", in, err)
	}
	in, err = slack.ParseInteraction(f.slack.Click(t, ana, m, slack.ActionDeny))
	if err != nil || in.Kind != slack.Deny {
		t.Fatalf("deny click: %+v %v", in, err)
	}
	if in, err := slack.ParseInteraction(f.slack.Click(t, ana, m, slack.ActionOpen)); err != nil || in.Kind != slack.Ignore {
		t.Errorf("open-in-console click: %+v %v", in, err)
	}
	if err := f.app.OpenDenyModal(context.Background(), in, a); err != nil {
		t.Fatal(err)
	}
	views := f.slack.Views()
	if len(views) != 1 || views[0].TriggerID != in.TriggerID {
		t.Fatalf("views %+v", views)
	}
	sub, err := slack.ParseInteraction(f.slack.Submit(t, ana, views[0], "  wrong order \n"))
	if err != nil || sub.Kind != slack.DenyWithReason || sub.ApprovalID != a.ID || sub.Seen != a.InputDigest || sub.Note != "wrong order" || sub.Channel != channel {
		t.Errorf("submission: %+v %v", sub, err)
	}
	if err := f.app.OpenDenyModal(context.Background(), in, a); err == nil || !strings.Contains(err.Error(), "expired_trigger_id") {
		t.Errorf("a trigger used twice: %v", err)
	}
	f.slack.TakeProblems() // that one, on purpose

	for name, body := range map[string]string{
		"not a form":                 "%zz",
		"two payloads":               "payload=%7B%7D&payload=%7B%7D",
		"not JSON":                   "payload=nope",
		"duplicate names":            `payload={"type":"block_actions","type":"view_submission"}`,
		"not Stead's value":          `payload={"type":"block_actions","user":{"id":"U1","team_id":"T1"},"actions":[{"action_id":"stead_approve","value":"apr_1"}]}`,
		"no user":                    `payload={"type":"block_actions","actions":[{"action_id":"stead_approve","value":"{\"approvalId\":\"apr_1\",\"inputDigest\":\"x\"}"}]}`,
		"no team":                    `payload={"type":"block_actions","user":{"id":"U1"},"actions":[{"action_id":"stead_approve","value":"{\"approvalId\":\"apr_1\",\"inputDigest\":\"x\"}"}]}`,
		"no approval":                `payload={"type":"block_actions","user":{"id":"U1","team_id":"T1"},"actions":[{"action_id":"stead_deny","value":"{\"inputDigest\":\"x\"}"}]}`,
		"a value Stead never makes":  `payload={"type":"block_actions","user":{"id":"U1","team_id":"T1"},"actions":[{"action_id":"stead_approve","value":"{\"approvalId\":\"apr_1\",\"inputDigest\":\"x\",\"approve\":true}"}]}`,
		"a modal of no approval":     `payload={"type":"view_submission","user":{"id":"U1","team_id":"T1"},"view":{"callback_id":"stead_deny_reason","private_metadata":"{\"inputDigest\":\"x\"}","state":{"values":{"reason":{"reason":{"value":"no"}}}}}}`,
		"a modal without the reason": `payload={"type":"view_submission","user":{"id":"U1","team_id":"T1"},"view":{"callback_id":"stead_deny_reason","private_metadata":"{\"approvalId\":\"apr_1\",\"inputDigest\":\"x\"}","state":{"values":{}}}}`,
	} {
		if _, err := slack.ParseInteraction([]byte(strings.ReplaceAll(body, "+", "%2B"))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if in, err := slack.ParseInteraction([]byte(`payload={"type":"shortcut"}`)); err != nil || in.Kind != slack.Ignore {
		t.Errorf("a shortcut: %+v %v", in, err)
	}
}

// TestParseInteractionReads: who clicked, where and what, from the parts
// of Slack's payloads that carry them; payloads that are not a click on
// Stead's buttons, nor its reason modal, are ignored.
func TestParseInteractionReads(t *testing.T) {
	t.Parallel()
	value := `{"approvalId":"apr_1","inputDigest":"d1"}`
	click := func(edit func(p map[string]any)) map[string]any {
		p := map[string]any{
			"type": "block_actions", "trigger_id": "1.2.trg",
			"user": map[string]any{"id": "U0ANA", "team_id": "T0STEAD"}, "team": map[string]any{"id": "T0STEAD"},
			"channel": map[string]any{"id": "C0APPROVALS"}, "container": map[string]any{"type": "message", "channel_id": "C0APPROVALS"},
			"actions": []any{map[string]any{"action_id": slack.ActionApprove, "value": value}},
		}
		edit(p)
		return p
	}
	approve := slack.Interaction{Kind: slack.Approve, Team: "T0STEAD", User: "U0ANA", ApprovalID: "apr_1", Seen: "d1", TriggerID: "1.2.trg", Channel: "C0APPROVALS"}
	ignore := approve
	ignore.Kind, ignore.ApprovalID, ignore.Seen = slack.Ignore, "", ""
	for _, c := range []struct {
		name    string
		payload map[string]any
		want    slack.Interaction
	}{
		{"a click", click(func(map[string]any) {}), approve},
		{"no user.team_id: the team's id", click(func(p map[string]any) {
			p["user"] = map[string]any{"id": "U0ANA"}
		}), approve},
		{"Enterprise Grid: the user's own team, not the workspace clicked in", click(func(p map[string]any) {
			p["team"] = map[string]any{"id": "E0GRID"}
		}), approve},
		{"no channel: the container's", click(func(p map[string]any) { delete(p, "channel") }), approve},
		{"two actions", click(func(p map[string]any) {
			p["actions"] = []any{
				map[string]any{"action_id": slack.ActionApprove, "value": value},
				map[string]any{"action_id": slack.ActionDeny, "value": value},
			}
		}), ignore},
		{"a legacy message action", click(func(p map[string]any) { p["type"] = "interactive_message" }), ignore},
		{"another modal submitted", click(func(p map[string]any) {
			p["type"] = "view_submission"
			delete(p, "actions")
			p["view"] = map[string]any{"callback_id": "feedback", "private_metadata": "", "state": map[string]any{"values": map[string]any{}}}
		}), ignore},
	} {
		raw, err := json.Marshal(c.payload)
		if err != nil {
			t.Fatal(err)
		}
		in, err := slack.ParseInteraction([]byte(url.Values{"payload": {string(raw)}}.Encode()))
		if err != nil || in != c.want {
			t.Errorf("%s:\n got %+v %v\nwant %+v", c.name, in, err, c.want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	if c, err := slack.FromEnv(env()); c != nil || err != nil {
		t.Errorf("nothing set: %+v %v; want Slack off", c, err)
	}
	if _, err := slack.FromEnv(env(slack.EnvBotToken, token)); err == nil || !strings.Contains(err.Error(), slack.EnvSigningSecret+" and "+slack.EnvChannel+" not set") {
		t.Errorf("half set: %v", err)
	}
	if _, err := slack.FromEnv(env(slack.EnvBotToken, "xoxp-user", slack.EnvSigningSecret, "s", slack.EnvChannel, "C1")); err == nil || !strings.Contains(err.Error(), slack.EnvBotToken) {
		t.Errorf("a user token: %v", err)
	}
	if _, err := slack.FromEnv(env(slack.EnvBotToken, token, slack.EnvSigningSecret, "s", slack.EnvChannel, "C1", slack.EnvAPIURL, "slack.test")); err == nil || !strings.Contains(err.Error(), slack.EnvAPIURL) {
		t.Errorf("a relative API URL: %v", err)
	}
	all := []string{slack.EnvBotToken, token, slack.EnvSigningSecret, " s ", slack.EnvChannel, "C1"}
	if _, err := slack.FromEnv(env(all...)); err == nil || !strings.Contains(err.Error(), slack.EnvProject) {
		t.Errorf("no project: %v; want a refusal naming %s", err, slack.EnvProject)
	}
	if _, err := slack.FromEnv(env(append(all, slack.EnvProject, "prj_1,prj_2")...)); err == nil || !strings.Contains(err.Error(), slack.EnvProject) {
		t.Errorf("two projects: %v; want a refusal naming %s", err, slack.EnvProject)
	}
	if _, err := slack.FromEnv(env(append(all, slack.EnvProject, "prj_1 prj_2")...)); err == nil || !strings.Contains(err.Error(), slack.EnvProject) {
		t.Errorf("two projects, by a space: %v; want a refusal naming %s", err, slack.EnvProject)
	}
	if _, err := slack.FromEnv(env(slack.EnvProject, "prj_1")); err == nil || !strings.Contains(err.Error(), slack.EnvBotToken) {
		t.Errorf("a project alone: %v; want a refusal naming what is missing", err)
	}
	c, err := slack.FromEnv(env(append(all, slack.EnvProject, " prj_1 ")...))
	if err != nil || c.BotToken != token || c.SigningSecret != "s" || c.Channel != "C1" || c.Project != "prj_1" {
		t.Errorf("all set: %+v %v", c, err)
	}
	// stead dev fills in its own project; New refuses a Config without one.
	c, err = slack.FromEnvLocal(env(all...))
	if err != nil || c.Project != "" {
		t.Fatalf("FromEnvLocal without a project: %+v %v", c, err)
	}
	c.Store = &fakeStore{}
	if _, err := slack.New(*c); err == nil || !strings.Contains(err.Error(), slack.EnvProject) {
		t.Errorf("New without a project: %v; want a refusal naming %s", err, slack.EnvProject)
	}
	if _, err := slack.FromEnvLocal(env(slack.EnvBotToken, "xoxp-user", slack.EnvSigningSecret, "s", slack.EnvChannel, "C1")); err == nil || !strings.Contains(err.Error(), slack.EnvBotToken) {
		t.Errorf("FromEnvLocal, a user token: %v", err)
	}
}

// TestOtherProject: the app serves one project. Another project's
// approval makes no delivery, and a delivery of it (made before the
// setting changed) is refused for good without a call to Slack.
func TestOtherProject(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := pending("o1", `{"orderId":"o-1"}`)
	a.ProjectID = "prj_other"
	f.store.put(a)
	if f.app.Serves("prj_other") || !f.app.Serves("prj_1") {
		t.Fatalf("Serves: prj_other %v, prj_1 %v; want false, true", f.app.Serves("prj_other"), f.app.Serves("prj_1"))
	}
	for _, typ := range []string{"approval.requested", "approval.approved"} {
		if ds := f.deliveries(t, typ, 3, a); len(ds) != 0 {
			t.Errorf("%s of another project makes %d Slack deliveries, want none", typ, len(ds))
		}
	}
	body, _ := json.Marshal(map[string]string{"approvalId": a.ID})
	d := store.Delivery{ID: "dlv_x", ProjectID: "prj_other", RunID: a.RunID, Seq: 3, Type: "approval.requested", Channel: slack.Name, EndpointID: "slack:" + channel, Body: body}
	att, final := f.app.Send(context.Background(), d)
	if !final || att.Status == http.StatusOK || !strings.Contains(att.Error, "prj_other") {
		t.Errorf("send of another project's delivery: %+v final %v; want a final refusal naming the project", att, final)
	}
	if ms := f.slack.Messages(); len(ms) != 0 {
		t.Errorf("Slack got %d messages of another project, want none: %+v", len(ms), ms)
	}
}

func TestCheckIdentity(t *testing.T) {
	t.Parallel()
	for _, team := range []string{"T0123ABCD", "E0GRID1"} {
		if err := slack.CheckTeam(team); err != nil {
			t.Errorf("%s: %v", team, err)
		}
	}
	for _, team := range []string{"", "t0123", "acme", "T0123-ABC", "T" + strings.Repeat("0", 21)} {
		if err := slack.CheckTeam(team); err == nil {
			t.Errorf("team %q accepted", team)
		}
	}
	for _, user := range []string{"", "@ana", "Ana Diaz", "u0123", "C0123ABCD", "U0123abcd", "U0123ABCD-ana"} {
		if err := slack.CheckUser(user); err == nil {
			t.Errorf("user %q accepted", user)
		}
	}
	if err := slack.CheckUser("W0123ABCD"); err != nil {
		t.Error(err)
	}
}

// post posts a's message as it stands, failing the test unless Slack
// takes it, and returns the message and the post delivery, recorded as
// delivered.
func (f *fixture) post(t *testing.T, seq int64, a approvals.Approval) (slacktest.Message, store.Delivery) {
	t.Helper()
	f.store.put(a)
	post := f.deliveries(t, "approval.requested", seq, a)[0]
	att, final := f.app.Send(context.Background(), post)
	if att.Status != http.StatusOK {
		t.Fatalf("post of %s: %+v final=%v", a.ID, att, final)
	}
	post.Status = store.DeliveryDelivered
	post = post.Record(att)
	f.store.putDelivery(post)
	ms := f.slack.Messages()
	return ms[len(ms)-1], post
}

// TestMessageEscapes: what requesters, agents and deciders wrote is shown
// as text: no mention, link or channel ping of theirs reaches Slack as
// mrkdwn, in the blocks or in the notification's text.
func TestMessageEscapes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := pending("x1", `{"orderId":"o-1"}`)
	a.Agent, a.EndUserID, a.Reason = "ops & <agent>", "<!channel>", "ask <@U0BOSS> first"
	a.Requirements = []approvals.Requirement{{Group: "finance", Min: 2, Eligible: []approvals.Voter{{Member: "mem_ana", Name: "<!here>"}, {Member: "mem_bo", Name: "Bo"}}}}
	a.Votes = []approvals.Vote{{Member: "mem_ana", Name: "<!here>", By: "key_ana", At: epoch}}
	m, _ := f.post(t, 1, a)
	text := blocksText(m)
	for _, raw := range []string{"<agent>", "<!channel>", "<@U0BOSS>", "<!here>"} {
		if strings.Contains(text, raw) {
			t.Errorf("the message passes %q to Slack unescaped:\n%s", raw, text)
		}
		if strings.Contains(m.Text, raw) {
			t.Errorf("the notification text passes %q to Slack unescaped: %s", raw, m.Text)
		}
	}
	for _, want := range []string{"ops &amp; &lt;agent&gt;", "&lt;!channel&gt;", "ask &lt;@U0BOSS&gt; first", "Voted to approve: &lt;!here&gt;"} {
		if !strings.Contains(text, want) {
			t.Errorf("the message does not say %q:\n%s", want, text)
		}
	}
	if !strings.Contains(m.Text, "&lt;!channel&gt;") {
		t.Errorf("the notification text does not name the end user: %s", m.Text)
	}

	a.Status, a.DecidedBy, a.DecidedAt, a.Note = approvals.Denied, "key_bo", epoch.Add(time.Minute), "see <https://evil.example|the refund>"
	m, _ = f.post(t, 2, a)
	if text := blocksText(m); strings.Contains(text, "<https://evil.example") || !strings.Contains(text, "&lt;https://evil.example|the refund&gt;") {
		t.Errorf("the note is not shown as text:\n%s", text)
	}
}

// TestMessageShows: what the message says of an approval in each state.
func TestMessageShows(t *testing.T) {
	t.Parallel()
	decided := func(s approvals.Status, by, note string) func(*approvals.Approval) {
		return func(a *approvals.Approval) {
			a.Status, a.DecidedBy, a.DecidedAt, a.Note = s, by, epoch.Add(time.Minute), note
		}
	}
	quorum := func(votes ...approvals.Vote) func(*approvals.Approval) {
		return func(a *approvals.Approval) {
			a.Requirements = []approvals.Requirement{{Group: "finance", Min: 2, Eligible: []approvals.Voter{{Member: "mem_ana", Name: "Ana Diaz"}, {Member: "mem_bo", Name: "Bo Li"}}}}
			a.Votes = votes
		}
	}
	for _, c := range []struct {
		name      string
		edit      func(*approvals.Approval)
		text      string
		says, not []string
	}{
		{"pending", func(*approvals.Approval) {}, "Approval needed: refundOrder for refunds (end user demo-user)",
			[]string{"Approval needed: refundOrder", "*Input*\n```"}, []string{"as edited", "Voted to approve", "*Approvers*"}},
		{"one vote of two", quorum(approvals.Vote{Member: "mem_ana", Name: "Ana Diaz", By: "key_ana", At: epoch}), "",
			[]string{"*Approvers*\n1 of 2 from finance", "Voted to approve: Ana Diaz"}, nil},
		{"a vote of a member without a name", quorum(approvals.Vote{Member: "mem_bo", By: "key_bo", At: epoch}), "",
			[]string{"Voted to approve: mem_bo"}, nil},
		{"edited", func(a *approvals.Approval) { a.OriginalInput = json.RawMessage(`{"orderId":"o-0"}`) }, "",
			[]string{"*Input* (as edited by its approver)\n```"}, nil},
		{"denied with a key", decided(approvals.Denied, "key_01", "wrong order\nsee ticket 7"), "Denied: refundOrder for refunds (end user demo-user)",
			[]string{"Denied: refundOrder", "*Denied* by key_01 · <!date^", "\n>wrong order\n>see ticket 7"}, []string{"in Slack", "Approval needed"}},
		{"approved in Slack by someone unnamed", decided(approvals.Approved, slack.ActorID("T0STEAD", "U0ANA"), ""), "",
			[]string{"*Approved* by slack:T0STEAD/U0ANA in Slack"}, nil},
		{"expired", decided(approvals.Expired, "", ""), "Expired: refundOrder for refunds (end user demo-user)",
			[]string{"Expired: refundOrder", "*Expired* at <!date^", "nobody decided in time, and the run failed"}, nil},
		{"cancelled", decided(approvals.Cancelled, "", ""), "Cancelled: refundOrder for refunds (end user demo-user)",
			[]string{"Cancelled: refundOrder", "*Cancelled* at <!date^", "with its run"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			a := pending("s1", `{"orderId":"o-1"}`)
			c.edit(&a)
			m, _ := f.post(t, 1, a)
			if c.text != "" && m.Text != c.text {
				t.Errorf("the notification text is %q, want %q", m.Text, c.text)
			}
			text := blocksText(m)
			for _, want := range c.says {
				if !strings.Contains(text, want) {
					t.Errorf("the message does not say %q:\n%s", want, text)
				}
			}
			for _, unwanted := range c.not {
				if strings.Contains(text, unwanted) {
					t.Errorf("the message says %q:\n%s", unwanted, text)
				}
			}
		})
	}
}

// fieldText is the text of the section field of m that starts with label.
func fieldText(t *testing.T, m slacktest.Message, label string) string {
	t.Helper()
	for _, raw := range m.Blocks {
		b, _ := raw.(map[string]any)
		fields, _ := b["fields"].([]any)
		for _, f := range fields {
			fo, _ := f.(map[string]any)
			if s, _ := fo["text"].(string); strings.HasPrefix(s, label) {
				return strings.TrimPrefix(s, label)
			}
		}
	}
	t.Fatalf("the message has no field %q: %+v", label, m.Blocks)
	return ""
}

// brokenEntity finds an & that does not start one of the entities escape
// writes, as a cut inside one would leave.
func brokenEntity(s string) bool {
	s = strings.NewReplacer("&amp;", "", "&lt;", "", "&gt;", "").Replace(s)
	return strings.Contains(s, "&")
}

// TestMessageCuts: long names are cut to their limits, marked with …, and
// never inside an escaped character.
func TestMessageCuts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := pending("c1", `{}`)
	a.Tool, a.Agent, a.EndUserID = strings.Repeat("t", 300), strings.Repeat("&", 300), strings.Repeat("x&", 150)
	m, _ := f.post(t, 1, a)
	header, _ := m.Blocks[0].(map[string]any)["text"].(map[string]any)["text"].(string)
	if n := utf8.RuneCountInString(header); n != 150 || !strings.HasSuffix(header, "t…") {
		t.Errorf("a long tool's header has %d characters, want 150 ending t…: %q", n, header)
	}
	for _, label := range []string{"*Agent*\n", "*End user*\n"} {
		s := fieldText(t, m, label)
		if n := utf8.RuneCountInString(s); n > 200 || !strings.HasSuffix(s, "…") || brokenEntity(s) {
			t.Errorf("%q of 300 characters is shown as %d characters (want at most 200, ending …, no & cut from its entity): %q", label, n, s)
		}
	}
}

// TestInputShown: the input is shown whole up to MaxInputShown characters;
// a longer one is cut, saying how long it is.
func TestInputShown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		input string
		cut   string // the note under a cut input; "" for none
	}{
		{"exactly the limit", `"` + strings.Repeat("x", slack.MaxInputShown-2) + `"`, ""},
		{"one over", `"` + strings.Repeat("x", slack.MaxInputShown-1) + `"`, fmt.Sprintf("(cut: the input has %d characters;", slack.MaxInputShown+1)},
		// 3,000 < are 12,000 characters escaped; the note counts the input's.
		{"escaped", `{"blob":"` + strings.Repeat("<", 3000) + `"}`, fmt.Sprintf("(cut: the input has %d characters;", len("{\n  \"blob\": \"\"\n}")+3000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			m, _ := f.post(t, 1, pending("i1", c.input))
			text := blocksText(m)
			switch {
			case c.cut == "" && strings.Contains(text, "(cut:"):
				t.Errorf("an input of %d characters is cut:\n%.300s", len(c.input), text)
			case c.cut != "" && !strings.Contains(text, c.cut):
				t.Errorf("the message does not say %q:\n%s", c.cut, text)
			}
		})
	}
}

// TestConsoleButton: "Open in console" links to an absolute URL that
// Slack takes (at most 3000 characters); with another, the message goes
// without the button rather than not at all.
func TestConsoleButton(t *testing.T) {
	t.Parallel()
	long := "https://stead.example/console/#/approvals/o1?" + strings.Repeat("q", 3000)
	for _, c := range []struct {
		name, url string
		button    bool
	}{
		{"absolute", "https://stead.example/console/#/approvals/o1", true},
		{"3000 characters", long[:3000], true},
		{"none", "", false},
		{"relative", "/console/#/approvals/o1", false},
		{"3001 characters", long[:3001], false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			a := pending("o1", `{}`)
			f.store.put(a)
			att, final := f.app.Send(context.Background(), f.deliveriesLinking(t, "approval.requested", 1, a, c.url)[0])
			if att.Status != http.StatusOK {
				t.Fatalf("post: %+v final=%v", att, final)
			}
			open := buttons(f.slack.Messages()[0])[slack.ActionOpen]
			if (open != nil) != c.button || (open != nil && open["url"] != c.url) {
				t.Errorf("console URL %.60q: Open in console is %v; want a button: %v", c.url, open, c.button)
			}
		})
	}
}

// roundTrip answers every Web API call itself.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestHTTPErrors: Slack answering with an HTTP error rather than
// {"ok":false} — 429 with Retry-After when the app is rate limited, 5xx
// when Slack is down — is recorded with its status and tried again.
func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status int
		header http.Header
		says   string
	}{
		{http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}}, "rate limited by Slack (retry after 30s)"},
		{http.StatusServiceUnavailable, nil, "503"},
	} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{approvals: map[string]approvals.Approval{}}
			a := pending("h1", `{}`)
			st.put(a)
			client := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
				h := c.header.Clone()
				if h == nil {
					h = http.Header{}
				}
				h.Set("Content-Type", "text/plain")
				return &http.Response{StatusCode: c.status, Status: fmt.Sprintf("%d %s", c.status, http.StatusText(c.status)), Header: h,
					Body: io.NopCloser(strings.NewReader(http.StatusText(c.status))), Request: r}, nil
			})}
			app, err := slack.New(slack.Config{BotToken: token, SigningSecret: secret, Channel: channel, Project: "prj_1", APIURL: "https://slack.test/api/", Client: client, Store: st, Now: testclock.New(epoch).Now})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(map[string]string{"approvalId": a.ID})
			att, final := app.Send(context.Background(), store.Delivery{ID: "dlv_1", ProjectID: "prj_1", Body: body})
			if att.Status != c.status || final || !strings.Contains(att.Error, c.says) {
				t.Errorf("Slack answering %d: %+v final=%v; want status %d, a retry, an error saying %q", c.status, att, final, c.status, c.says)
			}
		})
	}
}

// TestUpdateFindsItsPost: a vote or a decision updates the message of its
// own approval — in a run past its first 100 events, with another
// approval's message before it.
func TestUpdateFindsItsPost(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.store.mu.Lock()
	for seq := int64(1); seq <= 150; seq++ {
		f.store.events["run_01ABC"] = append(f.store.events["run_01ABC"], store.Event{RunID: "run_01ABC", Seq: seq, Type: "step.completed", Data: json.RawMessage(`{}`)})
	}
	f.store.mu.Unlock()
	first, second := pending("f1", `{"orderId":"o-1"}`), pending("f2", `{"orderId":"o-2"}`)
	f.post(t, 151, first)
	f.post(t, 152, second)

	second.Requirements = []approvals.Requirement{{Group: "finance", Min: 2, Eligible: []approvals.Voter{{Member: "mem_ana", Name: "Ana Diaz"}, {Member: "mem_bo", Name: "Bo Li"}}}}
	second.Votes = []approvals.Vote{{Member: "mem_ana", Name: "Ana Diaz", By: "key_ana", At: epoch}}
	f.store.put(second)
	upd := f.deliveries(t, "approval.vote", 153, second)
	if len(upd) != 1 {
		t.Fatalf("approval.vote makes %d Slack deliveries, want the update of the message", len(upd))
	}
	if att, final := f.app.Send(context.Background(), upd[0]); att.Status != http.StatusOK {
		t.Fatalf("update: %+v final=%v", att, final)
	}
	ms := f.slack.Messages()
	if ms[0].Updates != 0 || ms[1].Updates != 1 || !strings.Contains(blocksText(ms[1]), "Voted to approve: Ana Diaz") {
		t.Errorf("updates: %d of the first approval's message, %d of the second's, which says:\n%s; want the second's alone, with the vote",
			ms[0].Updates, ms[1].Updates, blocksText(ms[1]))
	}
}

// TestDeliveriesNeedAnApproval: an approval event that names no approval
// is an error, not a message about nothing.
func TestDeliveriesNeedAnApproval(t *testing.T) {
	t.Parallel()
	f := setup(t)
	run := store.Run{ID: "run_01ABC", ProjectID: "prj_1"}
	for _, typ := range []string{"approval.requested", "approval.denied"} {
		ds, err := f.app.Deliveries(context.Background(), run, store.Event{RunID: run.ID, Seq: 4, Type: typ}, notify.Data{})
		if err == nil || !strings.Contains(err.Error(), "names no approval") {
			t.Errorf("%s without an approval: %+v %v; want an error", typ, ds, err)
		}
	}
}

// failingStore fails reading deliveries, as a store that is down.
type failingStore struct{ *fakeStore }

func (failingStore) GetDelivery(context.Context, string, string) (store.Delivery, error) {
	return store.Delivery{}, errors.New("connection refused")
}

// TestSendFinal: a try fails for good when no later try can succeed — a
// body that is not a Slack delivery, an approval that is gone — and is
// tried again when the store could not be read.
func TestSendFinal(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	if att, final := f.app.Send(ctx, store.Delivery{ID: "dlv_1", ProjectID: "prj_1", Body: json.RawMessage(`{"url":"https://example.com"}`)}); !final || !strings.Contains(att.Error, "not a Slack delivery") {
		t.Errorf("a body not Slack's: %+v final=%v; want a final failure", att, final)
	}
	gone := pending("g1", `{}`)
	if att, final := f.app.Send(ctx, f.deliveries(t, "approval.requested", 1, gone)[0]); !final || !strings.Contains(att.Error, "read approval "+gone.ID) {
		t.Errorf("an approval not in the store: %+v final=%v; want a final failure", att, final)
	}

	a := pending("g2", `{}`)
	_, post := f.post(t, 2, a)
	app, err := slack.New(slack.Config{BotToken: token, SigningSecret: secret, Channel: channel, Project: "prj_1", APIURL: f.slack.URL, Store: failingStore{f.store}, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	att, final := app.Send(ctx, f.deliveries(t, "approval.cancelled", 3, a)[0])
	if final || !strings.Contains(att.Error, post.ID) || !strings.Contains(att.Error, "connection refused") {
		t.Errorf("an update while the store is down: %+v final=%v; want a retry naming the post and the error", att, final)
	}
}

// TestAPIURLWithoutSlash: STEAD_SLACK_API_URL is a base URL with or
// without its last /.
func TestAPIURLWithoutSlash(t *testing.T) {
	t.Parallel()
	f := setup(t)
	app, err := slack.New(slack.Config{BotToken: token, SigningSecret: secret, Channel: channel, Project: "prj_1", APIURL: strings.TrimSuffix(f.slack.URL, "/"), Store: f.store, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	a := pending("w1", `{}`)
	f.store.put(a)
	if att, final := app.Send(context.Background(), f.deliveries(t, "approval.requested", 1, a)[0]); att.Status != http.StatusOK || len(f.slack.Messages()) != 1 {
		t.Errorf("post with API URL %s: %+v final=%v", strings.TrimSuffix(f.slack.URL, "/"), att, final)
	}
}

// TestDenyModal: the reason modal carries the input digest the clicked
// message showed, not the approval's as the modal opens, so that a deny
// of an input edited since is refused; its reason is bounded as a note is.
func TestDenyModal(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := pending("d1", `{"orderId":"o-1"}`)
	m, _ := f.post(t, 1, a)
	ana := slacktest.User{Team: "T0STEAD", ID: "U0ANA", Name: "Ana Diaz"}
	in, err := slack.ParseInteraction(f.slack.Click(t, ana, m, slack.ActionDeny))
	if err != nil {
		t.Fatal(err)
	}
	edited := a
	edited.InputDigest = "digest-of-an-edited-input"
	if err := f.app.OpenDenyModal(context.Background(), in, edited); err != nil {
		t.Fatal(err)
	}
	view := f.slack.Views()[0]
	sub, err := slack.ParseInteraction(f.slack.Submit(t, ana, view, "no"))
	if err != nil || sub.Seen != a.InputDigest {
		t.Errorf("the modal's submission has Seen %q (%v); want the digest the message showed, %s", sub.Seen, err, a.InputDigest)
	}
	var maxLength any
	for _, raw := range view.View["blocks"].([]any) {
		if b := raw.(map[string]any); b["type"] == "input" {
			maxLength = b["element"].(map[string]any)["max_length"]
		}
	}
	if maxLength != float64(slack.MaxNote) {
		t.Errorf("the reason input takes at most %v characters, want %d", maxLength, slack.MaxNote)
	}
}

// TestRefuse: a refusal goes to the user who clicked, alone, in the
// channel of the click, cut to what Slack shows.
func TestRefuse(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	in := slack.Interaction{Kind: slack.Approve, Team: "T0STEAD", User: "U0ANA", Channel: channel}
	if err := f.app.Refuse(ctx, in, "nothing was decided"); err != nil {
		t.Fatal(err)
	}
	if err := f.app.Refuse(ctx, in, strings.Repeat("x", 5000)); err != nil {
		t.Fatal(err)
	}
	e := f.slack.Ephemerals()
	if len(e) != 2 || e[0] != (slacktest.Ephemeral{Channel: channel, User: "U0ANA", Text: "nothing was decided"}) {
		t.Fatalf("ephemerals %+v; want one to U0ANA in %s", e, channel)
	}
	if n := utf8.RuneCountInString(e[1].Text); n != 3000 || !strings.HasSuffix(e[1].Text, "x…") {
		t.Errorf("a refusal of 5000 characters is sent as %d characters (ending in …: %v); want 3000 ending in …", n, strings.HasSuffix(e[1].Text, "x…"))
	}
	in.Channel = ""
	if err := f.app.Refuse(ctx, in, "nothing was decided"); err == nil || len(f.slack.Requests()) != 2 {
		t.Errorf("a refusal of a click in no channel: %v, %d calls; want an error and no call", err, len(f.slack.Requests()))
	}
}

// TestSubmissionError: the answer that keeps the reason modal open shows
// the text under the reason input.
func TestSubmissionError(t *testing.T) {
	t.Parallel()
	var got struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.Unmarshal(slack.SubmissionError("give the reason"), &got); err != nil || got.ResponseAction != "errors" || got.Errors[slack.BlockReason] != "give the reason" || len(got.Errors) != 1 {
		t.Errorf("SubmissionError: %+v %v; want response_action errors and the text under %s", got, err, slack.BlockReason)
	}
}

// TestUpdateByChannelName: with the channel set by name, the update goes
// to the channel id Slack answered the post with (chat.update takes ids
// only).
func TestUpdateByChannelName(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	a := pending("n1", `{}`)
	// The post, as the app below makes it: Slack answers with the
	// channel's id, which the attempt keeps.
	_, post := f.post(t, 1, a)
	byName, err := slack.New(slack.Config{BotToken: token, SigningSecret: secret, Channel: "approvals", Project: "prj_1", APIURL: f.slack.URL, Store: f.store, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	post.ID, post.EndpointID = slack.PostID("approvals", a.RunID, 1), "slack:approvals"
	f.store.putDelivery(post)
	a.Status, a.DecidedBy, a.DecidedAt = approvals.Approved, "key_01", epoch.Add(time.Minute)
	f.store.put(a)
	run := store.Run{ID: a.RunID, ProjectID: a.ProjectID}
	ds, err := byName.Deliveries(ctx, run, store.Event{RunID: run.ID, Seq: 2, Type: "approval.approved"}, notify.Data{ApprovalID: a.ID})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %+v %v", ds, err)
	}
	ds[0].ProjectID = "prj_1"
	if att, final := byName.Send(ctx, ds[0]); att.Status != http.StatusOK || f.slack.Messages()[0].Updates != 1 {
		t.Errorf("update: %+v final=%v, %d updates; want the message in %s updated", att, final, f.slack.Messages()[0].Updates, channel)
	}
}
