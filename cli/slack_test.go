package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"stead/api"
	"stead/api/wire"
	"stead/approvals"
	"stead/notify/slack"
	"stead/notify/slack/slacktest"
	"stead/store"
)

const (
	slackToken   = "xoxb-1-stead-e2e"
	slackSecret  = "e2e-signing-secret"
	slackChannel = "C0APPROVALS"
	slackTeam    = "T0STEAD"
)

// slackStack is the stack `stead dev` runs with Slack configured, against
// the Slack stand-in. Its Notifier is not started: pass delivers what is
// due, so that every test sees each message at a known point.
type slackStack struct {
	*testStack
	slack *slacktest.Server
}

func newSlackStack(t *testing.T) *slackStack {
	t.Helper()
	sl := slacktest.New(t, slackToken, slackChannel)
	// As `stead dev`: no STEAD_SLACK_PROJECT, so Slack serves the project
	// ensured as the store opens.
	cfg, err := slack.FromEnvLocal(func(k string) string {
		return map[string]string{
			slack.EnvBotToken: slackToken, slack.EnvSigningSecret: slackSecret,
			slack.EnvChannel: slackChannel, slack.EnvAPIURL: sl.URL,
		}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	return &slackStack{
		testStack: openTestStack(t, false, func(c *StackConfig) { c.Slack, c.PublicURL = cfg, "https://stead.example" }),
		slack:     sl,
	}
}

// pass makes the Notifier's deliveries that are due.
func (s *slackStack) pass() {
	s.t.Helper()
	if err := s.stack.Notifier.Pass(context.Background()); err != nil {
		s.t.Fatalf("notifier pass: %v", err)
	}
}

// message is the one Slack message of an approval, failing the test
// without exactly one.
func (s *slackStack) message(approvalID string) slacktest.Message {
	s.t.Helper()
	var found []slacktest.Message
	for _, m := range s.slack.Messages() {
		if strings.Contains(flatText(m.Blocks), approvalID) {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		s.t.Fatalf("%d Slack messages name %s, want 1: %+v", len(found), approvalID, s.slack.Messages())
	}
	return found[0]
}

// interact posts an interactivity request to Stead, signed with headers.
func (s *slackStack) interact(body []byte, h http.Header) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/slack/interactivity", bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header = h
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// signed posts body as Slack does: signed now with the app's secret. It
// fails the test unless Stead answers 200, and returns the answer's body.
func (s *slackStack) signed(body []byte) string {
	s.t.Helper()
	status, answer := s.interact(body, slacktest.Sign(slackSecret, s.clock.Now(), body))
	if status != http.StatusOK {
		s.t.Fatalf("interactivity: %d %s", status, answer)
	}
	return answer
}

// member adds a member with a key and links them to a Slack user (unless
// slackUser is ""); it returns their key and id.
func (s *slackStack) member(name, role, slackUser string) (string, string) {
	s.t.Helper()
	r := s.mustCLI("members", "add", name, "--role", role, "--key")
	key := regexp.MustCompile(`stk_[0-9a-z]+`).FindString(r.stdout)
	id := regexp.MustCompile(`\((mem_[0-9A-Za-z]+)\)`).FindStringSubmatch(r.stdout)
	if key == "" || id == nil {
		s.t.Fatalf("members add prints no key or id:\n%s", r.stdout)
	}
	if slackUser != "" {
		r = s.mustCLI("members", "link-slack", name, "--team", slackTeam, "--user", slackUser)
		if !strings.Contains(r.stdout, "slack  team "+slackTeam+", user "+slackUser) {
			s.t.Errorf("members link-slack prints:\n%s", r.stdout)
		}
	}
	return key, id[1]
}

func (s *slackStack) approval(id string) approvals.Approval {
	s.t.Helper()
	a, err := s.stack.Store.GetApproval(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return a
}

func flatText(v any) string {
	b, _ := json.Marshal(v)
	var all any
	_ = json.Unmarshal(b, &all)
	var texts []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, v := range x {
				if s, ok := v.(string); ok && (k == "text" || k == "url") {
					texts = append(texts, s)
				}
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(all)
	return strings.Join(texts, "\n")
}

func hasButton(m slacktest.Message, actionID string) bool {
	return strings.Contains(mustJSON(m.Blocks), `"action_id":"`+actionID+`"`)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var (
	ana     = slacktest.User{Team: slackTeam, ID: "U0ANA", Name: "Ana Diaz"}
	mallory = slacktest.User{Team: slackTeam, ID: "U0MALLORY", Name: "Ana Diaz"} // same display name, another account
)

// TestSlackApproveFromSlack: approval.requested posts a message with what
// is asked and the buttons; a signed click from a linked approver approves
// as that member, the run resumes, and the message is updated to say who.
func TestSlackApproveFromSlack(t *testing.T) {
	t.Parallel()
	s := newSlackStack(t)
	s.member("Ana Diaz", "approver", ana.ID)
	run := s.startAwaiting("o-1001")
	s.pass()
	m := s.message(run.ApprovalID)
	text := flatText(m.Blocks)
	for _, want := range []string{"Approval needed: refundOrder", "*Agent*\nrefunds", "*End user*\ndemo-user", `"orderId": "o-1001"`,
		"*Expires*", "https://stead.example/console/#/approvals/" + run.ApprovalID} {
		if !strings.Contains(text, want) {
			t.Errorf("the message does not say %q:\n%s", want, text)
		}
	}
	var seq int64
	events, err := s.stack.Store.ListEvents(context.Background(), run.ID, 0, 100)
	for _, e := range events {
		if e.Type == "approval.requested" {
			seq = e.Seq
		}
	}
	if err != nil || seq == 0 {
		t.Fatalf("no approval.requested in the trace (%v)", err)
	}
	post, err := s.stack.Store.GetDelivery(context.Background(), s.project, slack.PostID(slackChannel, run.ID, seq))
	if err != nil || post.Status != store.DeliveryDelivered || !strings.Contains(post.Attempts[len(post.Attempts)-1].Response, `"ts":"`+m.TS+`"`) {
		t.Errorf("the post delivery %+v (%v) does not record the message's ts %s", post, err, m.TS)
	}

	s.signed(s.slack.Click(t, ana, m, slack.ActionApprove))
	if done := s.waitRun(run.ID, terminal); done.Status != store.RunSucceeded {
		t.Fatalf("the run is %s after the click (%+v)", done.Status, done.Error)
	}
	a := s.approval(run.ApprovalID)
	if a.Status != approvals.Approved || a.DecidedBy != "slack:"+slackTeam+"/"+ana.ID || a.DecidedByName != "Ana Diaz" {
		t.Errorf("approval %s decided by %q (%q), want Ana Diaz as slack:%s/%s", a.Status, a.DecidedBy, a.DecidedByName, slackTeam, ana.ID)
	}
	s.pass()
	m = s.message(run.ApprovalID)
	if text := flatText(m.Blocks); m.Updates == 0 || !strings.Contains(text, "Approved: refundOrder") || !strings.Contains(text, "*Approved* by Ana Diaz in Slack") {
		t.Errorf("after the click the message (%d updates) says:\n%s", m.Updates, text)
	}
	if hasButton(m, slack.ActionApprove) || hasButton(m, slack.ActionDeny) || !hasButton(m, slack.ActionOpen) {
		t.Errorf("a settled message has the buttons %s", mustJSON(m.Blocks))
	}
	if e := s.slack.Ephemerals(); len(e) != 0 {
		t.Errorf("ephemeral answers to a click that decided: %+v", e)
	}
	// The trace names the Slack user and the member.
	r := s.mustCLI("trace", run.ID)
	if !strings.Contains(r.stdout, "Ana Diaz") {
		t.Errorf("the trace does not name Ana Diaz:\n%s", r.stdout)
	}
}

// TestSlackRefusesWhoMayNotDecide: a click from a Slack user linked to no
// member (with a member's display name), from a linked viewer, or from a
// removed member decides nothing and gets an ephemeral refusal.
func TestSlackRefusesWhoMayNotDecide(t *testing.T) {
	t.Parallel()
	s := newSlackStack(t)
	s.member("Ana Diaz", "approver", ana.ID)
	viewer := slacktest.User{Team: slackTeam, ID: "U0VIC", Name: "Vic"}
	s.member("Vic Viewer", "viewer", viewer.ID)
	gone := slacktest.User{Team: slackTeam, ID: "U0GONE", Name: "Gus"}
	_, gus := s.member("Gus Gone", "approver", gone.ID)
	s.mustCLI("members", "rm", gus)
	otherTeam := slacktest.User{Team: "T0OTHER", ID: ana.ID, Name: "Ana Diaz"} // Ana's user id, another workspace
	run := s.startAwaiting("o-1002")
	s.pass()
	m := s.message(run.ApprovalID)

	for _, c := range []struct {
		who  slacktest.User
		says string
	}{
		{mallory, "not linked to a member of this Stead project"},
		{otherTeam, "not linked to a member of this Stead project"},
		{viewer, "is a viewer; only owners, developers and approvers decide"},
		{gone, "not linked to a member"},
	} {
		before := len(s.slack.Ephemerals())
		s.signed(s.slack.Click(t, c.who, m, slack.ActionApprove))
		e := s.slack.Ephemerals()
		if len(e) != before+1 || e[before].User != c.who.ID || e[before].Channel != slackChannel || !strings.Contains(e[before].Text, c.says) {
			t.Errorf("%s (%s/%s): ephemeral answers %+v; want one to them saying %q", c.who.Name, c.who.Team, c.who.ID, e[before:], c.says)
		}
	}
	if e := s.slack.Ephemerals(); !strings.Contains(e[0].Text, "stead members link-slack MEMBER_ID --team "+slackTeam+" --user "+mallory.ID) {
		t.Errorf("the refusal does not say how to link: %s", e[0].Text)
	}
	if a := s.approval(run.ApprovalID); a.Status != approvals.Pending || len(a.Votes) != 0 {
		t.Errorf("after refused clicks the approval is %s with %d votes", a.Status, len(a.Votes))
	}
	s.pass()
	if m := s.message(run.ApprovalID); m.Updates != 0 {
		t.Errorf("refused clicks updated the message %d times", m.Updates)
	}
}

// TestSlackSignature: a bad signature, an old timestamp, a changed body or
// no signature is a 401 and decides nothing.
func TestSlackSignature(t *testing.T) {
	t.Parallel()
	s := newSlackStack(t)
	s.member("Ana Diaz", "approver", ana.ID)
	run := s.startAwaiting("o-1003")
	s.pass()
	click := s.slack.Click(t, ana, s.message(run.ApprovalID), slack.ActionApprove)
	now := s.clock.Now()
	for name, c := range map[string]struct {
		h    http.Header
		body []byte
	}{
		"another secret":       {slacktest.Sign("not-the-secret", now, click), click},
		"six minutes old":      {slacktest.Sign(slackSecret, now.Add(-6*time.Minute), click), click},
		"changed after signed": {slacktest.Sign(slackSecret, now, click), bytes.Replace(click, []byte("U0ANA"), []byte("U0ANB"), 1)},
		"unsigned":             {http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, click},
	} {
		status, body := s.interact(c.body, c.h)
		if status != http.StatusUnauthorized || !strings.Contains(body, `"code":"unauthenticated"`) {
			t.Errorf("%s: %d %s; want 401 unauthenticated", name, status, body)
		}
	}
	if a := s.approval(run.ApprovalID); a.Status != approvals.Pending {
		t.Errorf("after unsigned clicks the approval is %s", a.Status)
	}
	// Within the window it is taken.
	s.clock.Advance(4 * time.Minute)
	if status, body := s.interact(click, slacktest.Sign(slackSecret, now, click)); status != http.StatusOK {
		t.Errorf("a click signed 4 minutes ago: %d %s", status, body)
	}
	if a := s.approval(run.ApprovalID); a.Status != approvals.Approved {
		t.Errorf("after the signed click the approval is %s", a.Status)
	}
}

// TestSlackDenyWithReason: Deny opens a modal asking the reason; a blank
// one keeps the modal open saying so; the submitted reason denies as the
// member with that note, and the message says it.
func TestSlackDenyWithReason(t *testing.T) {
	t.Parallel()
	s := newSlackStack(t)
	s.member("Ana Diaz", "approver", ana.ID)
	run := s.startAwaiting("o-1004")
	s.pass()
	m := s.message(run.ApprovalID)
	if answer := s.signed(s.slack.Click(t, ana, m, slack.ActionDeny)); answer != "" {
		t.Errorf("the deny click answers %q", answer)
	}
	views := s.slack.Views()
	if len(views) != 1 || views[0].View["callback_id"] != slack.CallbackDeny {
		t.Fatalf("views after Deny: %+v", views)
	}
	if a := s.approval(run.ApprovalID); a.Status != approvals.Pending {
		t.Fatalf("the Deny button decided (%s) before the reason", a.Status)
	}
	// Mallory cannot submit Ana's modal either.
	if answer := s.signed(s.slack.Submit(t, mallory, views[0], "not mine")); !strings.Contains(answer, `"response_action":"errors"`) || !strings.Contains(answer, "not linked") {
		t.Errorf("an unlinked user's submission answers %s", answer)
	}
	if answer := s.signed(s.slack.Submit(t, ana, views[0], "   ")); !strings.Contains(answer, `"response_action":"errors"`) || !strings.Contains(answer, `"reason":"give the reason`) {
		t.Errorf("a blank reason answers %s; want the modal kept open with an error on the reason", answer)
	}
	if answer := s.signed(s.slack.Submit(t, ana, views[0], "wrong order: the customer kept it")); answer != "" {
		t.Errorf("the submission answers %q; want an empty 200 (the modal closes)", answer)
	}
	done := s.waitRun(run.ID, terminal)
	if done.Status != store.RunFailed || done.Error == nil || done.Error.Code != "approval-denied" || !strings.Contains(done.Error.Message, "wrong order") {
		t.Errorf("the run is %s (%+v), want failed approval-denied with the reason", done.Status, done.Error)
	}
	a := s.approval(run.ApprovalID)
	if a.Status != approvals.Denied || a.Note != "wrong order: the customer kept it" || a.DecidedByName != "Ana Diaz" {
		t.Errorf("approval %s, note %q, by %q", a.Status, a.Note, a.DecidedByName)
	}
	s.pass()
	if text := flatText(s.message(run.ApprovalID).Blocks); !strings.Contains(text, "*Denied* by Ana Diaz in Slack") || !strings.Contains(text, ">wrong order: the customer kept it") {
		t.Errorf("after the deny the message says:\n%s", text)
	}
	// A Deny click on the settled message's old copy is refused, no modal.
	s.signed(s.slack.Click(t, ana, m, slack.ActionDeny))
	if e := s.slack.Ephemerals(); len(e) != 1 || !strings.Contains(e[0].Text, "was already denied") || len(s.slack.Views()) != 1 {
		t.Errorf("a deny of a settled approval: ephemerals %+v, %d views", e, len(s.slack.Views()))
	}
}

// TestSlackUpdatedWhoeverSettles: the message is updated when the
// approval is settled elsewhere: approved with the CLI (the API), or
// expired by the sweeper.
func TestSlackUpdatedWhoeverSettles(t *testing.T) {
	t.Parallel()
	s := newSlackStack(t)
	byAPI := s.startAwaiting("o-1005")
	expires := s.startAwaiting("o-1006")
	s.pass()
	if n := len(s.slack.Messages()); n != 2 {
		t.Fatalf("%d messages for two approvals", n)
	}
	s.mustCLI("approve", byAPI.ApprovalID, "--note", "fine")
	s.pass()
	m := s.message(byAPI.ApprovalID)
	if text := flatText(m.Blocks); m.Updates != 1 || !strings.Contains(text, "Approved: refundOrder") || !strings.Contains(text, "*Approved* by owner ·") || !strings.Contains(text, ">fine") {
		t.Errorf("after an approve through the API the message (%d updates) says:\n%s", m.Updates, text)
	}
	if hasButton(m, slack.ActionApprove) {
		t.Errorf("the approved message still has Approve")
	}
	s.clock.Advance(16 * time.Minute)
	if _, err := s.stack.Engine.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.pass()
	if text := flatText(s.message(expires.ApprovalID).Blocks); !strings.Contains(text, "Expired: refundOrder") || !strings.Contains(text, "nobody decided in time") {
		t.Errorf("after the expiry the message says:\n%s", text)
	}
	if reqs := s.slack.Requests(); len(reqs) != 4 {
		t.Errorf("%d Web API calls, want 2 posts and 2 updates: %+v", len(reqs), reqs)
	}
}

// TestSlackRefusesEditedInput: examples/finance, where a large refund needs
// two of finance. Ana votes with an edited input; Bo's click on the message
// as it was (its buttons carry the old input's digest) is refused, the
// updated message shows the new input, and Bo's click on it completes the
// quorum.
func TestSlackRefusesEditedInput(t *testing.T) {
	t.Parallel()
	s := newSlackStack(t)
	anaKey, _ := s.member("Ana Diaz", "approver", "")
	bo := slacktest.User{Team: slackTeam, ID: "U0BO", Name: "Bo Li"}
	s.member("Bo Li", "approver", bo.ID)
	s.mustCLI("groups", "create", "finance", "--member", "Ana Diaz", "--member", "Bo Li")
	s.mustCLI("deploy", filepath.Join("..", "examples", "finance"), "--yes")
	r := s.mustCLI("run", "refunds", "--input", `{"orderId":"o-900","amount":900}`, "--end-user", "demo-user", "--json")
	run := s.waitRun(jsonField(t, r.stdout, "id"), func(r store.Run) bool { return r.Status == store.RunAwaitingApproval || r.Status.Terminal() })
	s.pass()
	old := s.message(run.ApprovalID)
	if text := flatText(old.Blocks); !strings.Contains(text, "*Approvers*\n0 of 2 from finance") {
		t.Errorf("the message shows no quorum progress:\n%s", text)
	}

	// Ana votes with an edited input, through the API.
	body, _ := json.Marshal(map[string]any{"input": map[string]any{"orderId": "o-900", "amount": 800}})
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/v1/approvals/"+run.ApprovalID+"/approve", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+anaKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Ana's edited vote: %d", resp.StatusCode)
	}

	s.signed(s.slack.Click(t, bo, old, slack.ActionApprove))
	if e := s.slack.Ephemerals(); len(e) != 1 || e[0].User != bo.ID || !strings.Contains(e[0].Text, "changed since you read it") {
		t.Errorf("Bo's click on the old message: ephemerals %+v; want one saying the input changed", e)
	}
	// Deny on the old message opens no modal: the reason would be asked
	// for an input Bo has not seen.
	s.signed(s.slack.Click(t, bo, old, slack.ActionDeny))
	if e := s.slack.Ephemerals(); len(e) != 2 || e[1].User != bo.ID || !strings.Contains(e[1].Text, "changed since you read it") || len(s.slack.Views()) != 0 {
		t.Errorf("Bo's Deny on the old message: ephemerals %+v, %d views; want one more saying the input changed, and no modal", e, len(s.slack.Views()))
	}
	a := s.approval(run.ApprovalID)
	if a.Status != approvals.Pending || len(a.Votes) != 1 || a.Votes[0].Name != "Ana Diaz" {
		t.Fatalf("after Bo's refused clicks: %s with votes %+v", a.Status, a.Votes)
	}

	s.pass()
	cur := s.message(run.ApprovalID)
	if text := flatText(cur.Blocks); !strings.Contains(text, `"amount": 800`) || !strings.Contains(text, "Voted to approve: Ana Diaz") || !strings.Contains(text, "1 of 2 from finance") {
		t.Errorf("after the edited vote the message says:\n%s", text)
	}
	s.signed(s.slack.Click(t, bo, cur, slack.ActionApprove))
	if done := s.waitRun(run.ID, terminal); done.Status != store.RunSucceeded {
		t.Errorf("the run is %s after Bo's vote from Slack (%+v)", done.Status, done.Error)
	}
	if a := s.approval(run.ApprovalID); a.Status != approvals.Approved || len(a.Votes) != 2 || a.Votes[1].By != "slack:"+slackTeam+"/"+bo.ID {
		t.Errorf("after Bo's vote: %s, votes %+v", a.Status, a.Votes)
	}
}

// TestSlackLinking: owners link a member's Slack account by team and user
// id (never a name), one member per Slack user; members show it to
// owners only.
func TestSlackLinking(t *testing.T) {
	t.Parallel()
	s := newSlackStack(t)
	devKey, _ := s.member("Dee Dev", "developer", "")
	s.member("Ana Diaz", "approver", ana.ID)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--team", slackTeam, "--user", "@ana"}, "is not a Slack user id"},
		{[]string{"--team", "acme", "--user", "U0DEE"}, "is not a Slack team id"},
		{[]string{"--team", slackTeam, "--user", ana.ID}, "is already linked to member Ana Diaz"},
		{[]string{"--team", slackTeam}, "needs --team T… and --user U…"},
	} {
		if r := s.cli(append([]string{"members", "link-slack", "Dee Dev"}, c.args...)...); r.code == 0 || !strings.Contains(r.stderr, c.says) {
			t.Errorf("link-slack %v: %s; want a refusal saying %q", c.args, r, c.says)
		}
	}
	if r := s.run(cliEnv{EnvKey: devKey}, "members", "link-slack", "Dee Dev", "--team", slackTeam, "--user", "U0DEE"); r.code == 0 {
		t.Errorf("a developer linked a Slack account: %s", r)
	}
	// Relinking in the same workspace replaces; another workspace adds.
	s.mustCLI("members", "link-slack", "Ana Diaz", "--team", slackTeam, "--user", "U0ANA2")
	r := s.mustCLI("members", "link-slack", "Ana Diaz", "--team", "T0OTHER", "--user", "U0ANA")
	if strings.Count(r.stdout, "slack  team") != 2 || !strings.Contains(r.stdout, "team "+slackTeam+", user U0ANA2") || !strings.Contains(r.stdout, "team T0OTHER, user U0ANA\n") {
		t.Errorf("after two links:\n%s", r.stdout)
	}
	var asDev wire.MemberList
	if err := json.Unmarshal([]byte(s.run(cliEnv{EnvKey: devKey}, "members", "list", "--json").stdout), &asDev); err != nil {
		t.Fatal(err)
	}
	for _, m := range asDev.Members {
		if len(m.Chat) > 0 {
			t.Errorf("a developer sees %s's chat accounts %+v", m.Name, m.Chat)
		}
	}
	r = s.mustCLI("members", "unlink-slack", "Ana Diaz", "--team", "T0OTHER")
	if strings.Count(r.stdout, "slack  team") != 1 {
		t.Errorf("after unlinking one workspace:\n%s", r.stdout)
	}
	r = s.mustCLI("members", "unlink-slack", "Ana Diaz")
	if strings.Contains(r.stdout, "slack  team") {
		t.Errorf("after unlinking all:\n%s", r.stdout)
	}
}

// TestSlackOtherProject: the app serves the project `stead dev` made. On
// the same Stead, another project's approval posts nothing to the channel,
// and a signed click on it — from a Slack user linked to an approver of
// that project — is refused as if it did not exist and decides nothing.
func TestSlackOtherProject(t *testing.T) {
	t.Parallel()
	s := newSlackStack(t)
	ctx := context.Background()
	s.member("Ana Diaz", "approver", ana.ID)
	mine := s.startAwaiting("o-2001")

	proj, key, err := api.Bootstrap(ctx, s.stack.Store, "other", s.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deployExample(ctx, s.stack, proj.ID, s.stack.log); err != nil {
		t.Fatal(err)
	}
	other := *s.testStack
	other.project, other.key, other.config = proj.ID, key, filepath.Join(t.TempDir(), "config.json")
	(&slackStack{testStack: &other, slack: s.slack}).member("Ana Other", "approver", ana.ID)
	theirs := other.startAwaiting("o-2002")

	s.pass()
	m := s.message(mine.ApprovalID) // exactly one message: the served project's
	for _, msg := range s.slack.Messages() {
		if strings.Contains(flatText(msg.Blocks), theirs.ApprovalID) {
			t.Errorf("the other project's approval %s was posted: %s", theirs.ApprovalID, flatText(msg.Blocks))
		}
	}
	if n := len(s.slack.Messages()); n != 1 {
		t.Errorf("%d Slack messages, want 1 (the served project's)", n)
	}

	// A click forged from the posted message, naming the other approval.
	mineAp, theirsAp := s.approval(mine.ApprovalID), s.approval(theirs.ApprovalID)
	click := s.slack.Click(t, ana, m, slack.ActionApprove)
	click = bytes.ReplaceAll(click, []byte(mineAp.ID), []byte(theirsAp.ID))
	click = bytes.ReplaceAll(click, []byte(mineAp.InputDigest), []byte(theirsAp.InputDigest))
	if !bytes.Contains(click, []byte(theirsAp.ID)) {
		t.Fatalf("the forged click does not name %s: %s", theirsAp.ID, click)
	}
	s.signed(click)
	e := s.slack.Ephemerals()
	if len(e) != 1 || e[0].User != ana.ID || !strings.Contains(e[0].Text, "Stead has no approval "+theirsAp.ID) {
		t.Errorf("ephemeral answers %+v; want one to Ana saying Stead has no approval %s", e, theirsAp.ID)
	}
	if a := s.approval(theirsAp.ID); a.Status != approvals.Pending || len(a.Votes) != 0 {
		t.Errorf("after the refused click the other project's approval is %s with %d votes", a.Status, len(a.Votes))
	}
	// The same click on the served approval decides: the refusal was the
	// project's, not Ana's.
	s.signed(s.slack.Click(t, ana, m, slack.ActionApprove))
	if a := s.approval(mineAp.ID); a.Status != approvals.Approved {
		t.Errorf("the served project's approval is %s after Ana's click, want approved", a.Status)
	}
}

// TestSlackOneUserLinkedToSeveralMembers: a Slack user linked to two
// members (which linking refuses, but the store may hold) decides nothing:
// Stead cannot tell who decides, and says so naming both.
func TestSlackOneUserLinkedToSeveralMembers(t *testing.T) {
	t.Parallel()
	s := newSlackStack(t)
	ctx := context.Background()
	_, anaID := s.member("Ana Diaz", "approver", ana.ID)
	_, boID := s.member("Bo Li", "approver", "")
	bo, err := s.stack.Store.GetMember(ctx, s.project, boID)
	if err != nil {
		t.Fatal(err)
	}
	bo.Chat = append(bo.Chat, store.ChatIdentity{Kind: slack.Name, Team: slackTeam, User: ana.ID})
	if _, err := s.stack.Store.UpdateMember(ctx, bo); err != nil {
		t.Fatal(err)
	}
	run := s.startAwaiting("o-1007")
	s.pass()
	s.signed(s.slack.Click(t, ana, s.message(run.ApprovalID), slack.ActionApprove))
	// Members made in the same instant are listed by id: either order.
	e := s.slack.Ephemerals()
	if len(e) != 1 || e[0].User != ana.ID || !strings.HasPrefix(e[0].Text, "Your Slack account is linked to 2 members of this project (") ||
		!strings.Contains(e[0].Text, "Ana Diaz ("+anaID+")") || !strings.Contains(e[0].Text, "Bo Li ("+boID+")") || !strings.Contains(e[0].Text, "so Stead cannot tell who decides") {
		t.Errorf("ephemeral answers %+v; want one to Ana saying she is linked to Ana Diaz (%s) and Bo Li (%s)", e, anaID, boID)
	}
	if a := s.approval(run.ApprovalID); a.Status != approvals.Pending || len(a.Votes) != 0 {
		t.Errorf("after the click the approval is %s with %d votes", a.Status, len(a.Votes))
	}
}

// TestSlackDenyReasonRefused: a reason past 2000 characters keeps the
// modal open saying so; a reason submitted after the approval expired
// keeps it open saying it can no longer be denied. Neither decides.
func TestSlackDenyReasonRefused(t *testing.T) {
	t.Parallel()
	s := newSlackStack(t)
	s.member("Ana Diaz", "approver", ana.ID)
	run := s.startAwaiting("o-1008")
	s.pass()
	s.signed(s.slack.Click(t, ana, s.message(run.ApprovalID), slack.ActionDeny))
	views := s.slack.Views()
	if len(views) != 1 {
		t.Fatalf("views after Deny: %+v", views)
	}
	if answer := s.signed(s.slack.Submit(t, ana, views[0], strings.Repeat("r", 2001))); !strings.Contains(answer, `"response_action":"errors"`) ||
		!strings.Contains(answer, "the reason must be at most 2000 characters long") {
		t.Errorf("a reason of 2001 characters answers %s", answer)
	}
	s.clock.Advance(16 * time.Minute)
	if answer := s.signed(s.slack.Submit(t, ana, views[0], "too late")); !strings.Contains(answer, `"response_action":"errors"`) ||
		!strings.Contains(answer, "expired at") || !strings.Contains(answer, "it can no longer be denied") {
		t.Errorf("a reason after the expiry answers %s", answer)
	}
	if a := s.approval(run.ApprovalID); a.Status == approvals.Denied || a.Note != "" {
		t.Errorf("after the refused submissions the approval is %s with note %q", a.Status, a.Note)
	}
}
