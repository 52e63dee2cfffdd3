// Package slack is Stead's Slack app: a notify.Channel that posts every
// approval request to one Slack channel as a Block Kit message with
// Approve, Deny and "Open in console" buttons, and updates that message
// (chat.update) as the approval takes votes and is settled — whoever
// settled it: the API, the console, email or Slack itself. Its other half
// serves the API's interactivity route (api/slack.go): Verify checks
// Slack's v0 request signature, ParseInteraction reads a click or a modal
// submission, OpenDenyModal asks a denier for the reason and Refuse answers
// a click that decides nothing with an ephemeral message.
//
// One Slack workspace, one channel and one project per app: the approvals
// of Config.Project are posted to Config.Channel, those of other projects
// are not (Deliveries makes none, Send refuses one, Serves tells the
// interactivity route to refuse their clicks), so that a deployment holding
// many projects shows no project's approvals in another's channel. A click
// is taken from a Slack user linked to a member of the approval's project
// (store.ChatIdentity, by team id and user id) — never by a handle, and
// never because the user can see the channel.
//
// # Deliveries
//
// Each message is a delivery of the channel "slack" kept by the Notifier
// with the webhooks' retries (notify.Channel). approval.requested makes the
// post delivery; approval.vote and approval.approved, denied, expired and
// cancelled each make an update delivery, which names the post delivery:
// PostID of the run and the seq of its approval.requested event, the id the
// Notifier gives it. The reminders and escalations the Notifier schedules
// (approval.reminder, approval.expiring, approval.escalated) send nothing to
// Slack: the message is in the channel already. A try renders the approval as it stands
// when the try is made, not as it stood at the event: a late try never
// shows an older state than an earlier one did.
//
// The posted message's channel and ts are kept in the post delivery's
// successful attempt: its Response is {"ok":true,"channel":"C…","ts":"…"}
// (Stead writes that small document itself; Slack's own answer is larger
// than an attempt keeps). An update tried before the post succeeded is
// tried again on the schedule; one whose post failed for good, or that was
// never made (Slack was configured after the request), fails at once.
//
// An attempt's Status is 200 when Slack answered ok, Slack's HTTP status
// when it answered with another (429, 5xx), and 0 when it answered
// {"ok":false}: Error then names Slack's error code and the fix. Errors
// that will not change (a revoked token, a missing scope, a channel the app
// is not in) fail the delivery at once; the others are tried again.
//
// At least once: a post whose answer is lost (a timeout after Slack took
// it) is posted again, and the channel shows the request twice; updates go
// to the message recorded.
package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"stead/approvals"
	"stead/notify"
	"stead/store"
)

// The environment variables FromEnv reads.
const (
	EnvBotToken      = "STEAD_SLACK_BOT_TOKEN"
	EnvSigningSecret = "STEAD_SLACK_SIGNING_SECRET"
	EnvChannel       = "STEAD_SLACK_CHANNEL"
	// EnvProject is the id of the project whose approvals are posted
	// (prj_…). Required with the others by FromEnv; `stead dev` defaults
	// it to its local project (FromEnvLocal).
	EnvProject = "STEAD_SLACK_PROJECT"
	// EnvAPIURL overrides Slack's Web API base URL (tests, a proxy).
	EnvAPIURL = "STEAD_SLACK_API_URL"
)

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// Name is the channel's name: Delivery.Channel of its deliveries.
const Name = "slack"

// Store is what the app needs of the store.
type Store interface {
	GetApproval(ctx context.Context, id string) (approvals.Approval, error)
	GetDelivery(ctx context.Context, projectID, id string) (store.Delivery, error)
	ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error)
}

// Config configures the Slack app.
type Config struct {
	// BotToken is the app's Bot User OAuth Token (xoxb-…), with the
	// chat:write scope.
	BotToken string
	// SigningSecret is the app's signing secret (Basic Information → App
	// Credentials): it checks that interactivity requests come from Slack.
	SigningSecret string
	// Channel is the channel approvals are posted to: its id (C…) or name.
	// The app must be a member of it.
	Channel string
	// Project is the id of the project whose approvals the app posts and
	// takes clicks on; other projects' are neither posted nor decided.
	Project string
	// APIURL is the Web API's base URL; DefaultAPIURL when empty.
	APIURL string
	// Client makes the Web API calls; one with a 15 s timeout when nil.
	Client *http.Client
	Store  Store
	// Now is the clock (attempt times, the signature's 5-minute window);
	// time.Now when nil.
	Now func() time.Time
}

// FromEnv reads the Slack settings from the environment: nil when none of
// STEAD_SLACK_BOT_TOKEN, STEAD_SLACK_SIGNING_SECRET and STEAD_SLACK_CHANNEL
// is set (Slack is off), an error naming what is missing when only some
// are, or when STEAD_SLACK_PROJECT is missing beside them. Store, Client
// and Now are the caller's to fill in.
func FromEnv(getenv func(string) string) (*Config, error) { return fromEnv(getenv, true) }

// FromEnvLocal is FromEnv for `stead dev`, whose one project is made once
// its store is open: STEAD_SLACK_PROJECT may be unset, and the caller sets
// Project (its local project) before New, which refuses a Config without
// one.
func FromEnvLocal(getenv func(string) string) (*Config, error) { return fromEnv(getenv, false) }

func fromEnv(getenv func(string) string, needProject bool) (*Config, error) {
	c := &Config{
		BotToken:      strings.TrimSpace(getenv(EnvBotToken)),
		SigningSecret: strings.TrimSpace(getenv(EnvSigningSecret)),
		Channel:       strings.TrimSpace(getenv(EnvChannel)),
		Project:       strings.TrimSpace(getenv(EnvProject)),
		APIURL:        strings.TrimSpace(getenv(EnvAPIURL)),
	}
	var missing []string
	for _, v := range []struct{ name, value string }{
		{EnvBotToken, c.BotToken}, {EnvSigningSecret, c.SigningSecret}, {EnvChannel, c.Channel},
	} {
		if v.value == "" {
			missing = append(missing, v.name)
		}
	}
	switch len(missing) {
	case 3:
		if c.Project != "" {
			return nil, fmt.Errorf("slack: %s is set but %s, %s and %s are not; set them to post the project's approvals to Slack, or unset %s",
				EnvProject, EnvBotToken, EnvSigningSecret, EnvChannel, EnvProject)
		}
		return nil, nil
	case 0:
		if c.Project == "" && !needProject {
			return c, c.checkAccess()
		}
		return c, c.check()
	}
	return nil, fmt.Errorf("slack: %s not set; set all of %s, %s and %s to post approvals to Slack, or none",
		strings.Join(missing, " and "), EnvBotToken, EnvSigningSecret, EnvChannel)
}

// check refuses settings Slack would refuse, and an app of no project,
// naming the field and the fix.
func (c *Config) check() error {
	if err := c.checkAccess(); err != nil {
		return err
	}
	if c.Project == "" {
		return fmt.Errorf("slack: the project (%s) is required: the id of the one project (prj_…) whose approvals are posted to %s and decided from it; other projects' approvals are not posted", EnvProject, c.Channel)
	}
	if strings.ContainsAny(c.Project, " \t\r\n,") {
		return fmt.Errorf("slack: the project (%s) %q must be one project id (prj_…)", EnvProject, c.Project)
	}
	return nil
}

// checkAccess refuses what Slack would refuse, naming the field and the
// fix.
func (c *Config) checkAccess() error {
	switch {
	case !strings.HasPrefix(c.BotToken, "xoxb-"):
		return fmt.Errorf("slack: the bot token (%s) must be a Bot User OAuth Token starting xoxb-: copy it from your Slack app's OAuth & Permissions page", EnvBotToken)
	case c.SigningSecret == "":
		return fmt.Errorf("slack: the signing secret (%s) is required: copy it from your Slack app's Basic Information page", EnvSigningSecret)
	case c.Channel == "":
		return fmt.Errorf("slack: the channel (%s) is required: the id of the channel to post approvals to (C…, from the channel's details), with the app invited to it", EnvChannel)
	}
	if c.APIURL != "" {
		u, err := url.Parse(c.APIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("slack: the API URL (%s) %q must be an absolute http or https URL such as %s", EnvAPIURL, c.APIURL, DefaultAPIURL)
		}
	}
	return nil
}

// App is Stead's Slack app (see the package comment). It is safe for
// concurrent use.
type App struct {
	cfg Config
	api *slackgo.Client
}

var _ notify.Channel = (*App)(nil)

// New makes the app.
func New(cfg Config) (*App, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Store == nil {
		return nil, errors.New("slack config: Store is required")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/" // slack-go appends the method name
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: notify.Timeout}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	api := slackgo.New(cfg.BotToken, slackgo.OptionAPIURL(cfg.APIURL),
		slackgo.OptionHTTPClient(headerAuth{c: cfg.Client, token: cfg.BotToken}))
	return &App{cfg: cfg, api: api}, nil
}

// Name is "slack".
func (a *App) Name() string { return Name }

// Serves reports whether the app posts and takes clicks on the approvals
// of project projectID: Config.Project only.
func (a *App) Serves(projectID string) bool { return projectID == a.cfg.Project }

// endpoint is EndpointID of the app's deliveries: the channel they go to.
func (a *App) endpoint() string { return "slack:" + a.cfg.Channel }

// PostID is the id of the delivery that posts to channel the message of
// the approval asked for by event seq (approval.requested) of run runID:
// the id the Notifier gives every delivery, from its endpoint, run and
// event (notify.MessageID).
func PostID(channel, runID string, seq int64) string {
	return notify.MessageID("slack:"+channel, runID, seq)
}

// body is a delivery's Body: which approval, and whether it posts the
// message or updates the one PostID posted.
type body struct {
	ApprovalID string `json:"approvalId"`
	ConsoleURL string `json:"consoleUrl,omitempty"`
	Update     bool   `json:"update,omitempty"`
	PostID     string `json:"postId,omitempty"`
}

// updates are the events that update an approval's message.
var updates = map[string]bool{
	"approval.vote": true, "approval.approved": true, "approval.denied": true,
	"approval.expired": true, "approval.cancelled": true,
}

// Deliveries are what one event sends to Slack: the post of an
// approval.requested, the update of a vote or a settlement, nothing for
// other events, and nothing for the runs of a project the app does not
// serve. The tool's input is not kept in the delivery: a try reads the
// approval.
func (a *App) Deliveries(ctx context.Context, run store.Run, ev store.Event, data notify.Data) ([]store.Delivery, error) {
	if !a.Serves(run.ProjectID) || (ev.Type != "approval.requested" && !updates[ev.Type]) {
		return nil, nil
	}
	if data.ApprovalID == "" {
		return nil, fmt.Errorf("event %d (%s) of run %s names no approval", ev.Seq, ev.Type, run.ID)
	}
	b := body{ApprovalID: data.ApprovalID, ConsoleURL: data.ConsoleURL, Update: updates[ev.Type]}
	if b.Update {
		seq, err := a.requestedSeq(ctx, run.ID, data.ApprovalID, ev.Seq)
		if err != nil {
			return nil, err
		}
		if seq > 0 {
			b.PostID = PostID(a.cfg.Channel, run.ID, seq)
		}
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	return []store.Delivery{{EndpointID: a.endpoint(), Body: raw}}, nil
}

// requestedSeq is the seq of the approval.requested event of approvalID in
// run runID's trace before seq before; 0 if there is none.
func (a *App) requestedSeq(ctx context.Context, runID, approvalID string, before int64) (int64, error) {
	var after int64
	for {
		evs, err := a.cfg.Store.ListEvents(ctx, runID, after, 100)
		if err != nil {
			return 0, fmt.Errorf("list events of run %s: %w", runID, err)
		}
		for _, e := range evs {
			if e.Seq >= before {
				return 0, nil
			}
			var ref struct {
				ApprovalID string `json:"approvalId"`
			}
			if e.Type == "approval.requested" && json.Unmarshal(e.Data, &ref) == nil && ref.ApprovalID == approvalID {
				return e.Seq, nil
			}
		}
		if len(evs) < 100 {
			return 0, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// messageRef is where a posted message is: the Response of the post
// delivery's successful attempt.
type messageRef struct {
	OK      bool   `json:"ok"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// Send makes one try of a delivery: posts the approval's message, or
// updates it, as the approval stands now.
func (a *App) Send(ctx context.Context, d store.Delivery) (store.Attempt, bool) {
	att := store.Attempt{At: a.cfg.Now()}
	var b body
	if err := json.Unmarshal(d.Body, &b); err != nil || b.ApprovalID == "" {
		att.Error = fmt.Sprintf("delivery %s is not a Slack delivery of this version of Stead (body %.100q)", d.ID, d.Body)
		return att, true
	}
	ap, err := a.cfg.Store.GetApproval(ctx, b.ApprovalID)
	if err != nil {
		att.Error = fmt.Sprintf("read approval %s: %s", b.ApprovalID, err)
		return att, errors.Is(err, store.ErrNotFound)
	}
	if !a.Serves(d.ProjectID) || !a.Serves(ap.ProjectID) {
		att.Error = fmt.Sprintf("approval %s is of project %s; this Slack app posts the approvals of %s (%s) only", ap.ID, ap.ProjectID, a.cfg.Project, EnvProject)
		return att, true
	}
	msg := render(ap, b.ConsoleURL)
	opts := []slackgo.MsgOption{slackgo.MsgOptionText(msg.text, true), slackgo.MsgOptionBlocks(msg.blocks...)}
	ctx, cancel := context.WithTimeout(ctx, notify.Timeout)
	defer cancel()
	if !b.Update {
		start := time.Now()
		ch, ts, err := a.api.PostMessageContext(ctx, a.cfg.Channel, opts...)
		att.LatencyMs = time.Since(start).Milliseconds()
		return outcome(att, "chat.postMessage", ch, ts, err)
	}
	ref, final, why := a.posted(ctx, d.ProjectID, ap.ID, b.PostID)
	if why != "" {
		att.Error = why
		return att, final
	}
	start := time.Now()
	ch, ts, _, err := a.api.UpdateMessageContext(ctx, ref.Channel, ref.TS, opts...)
	att.LatencyMs = time.Since(start).Milliseconds()
	return outcome(att, "chat.update", ch, ts, err)
}

// posted finds where approvalID's message was posted; otherwise why not,
// and whether that will not change.
func (a *App) posted(ctx context.Context, projectID, approvalID, id string) (messageRef, bool, string) {
	if id == "" {
		return messageRef{}, true, fmt.Sprintf("approval %s has no approval.requested event to find its message by", approvalID)
	}
	post, err := a.cfg.Store.GetDelivery(ctx, projectID, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return messageRef{}, true, fmt.Sprintf("approval %s has no Slack message to update in %s (it was asked for before Slack was configured here)", approvalID, a.cfg.Channel)
	case err != nil:
		return messageRef{}, false, fmt.Sprintf("read the post delivery %s of approval %s: %s", id, approvalID, err)
	case post.Status == store.DeliveryFailed:
		return messageRef{}, true, fmt.Sprintf("the message of approval %s was never posted (delivery %s failed); there is nothing to update", approvalID, id)
	case post.Status == store.DeliveryPending:
		return messageRef{}, false, fmt.Sprintf("the message of approval %s is not posted yet (delivery %s); this update is tried again after it", approvalID, id)
	}
	for i := len(post.Attempts) - 1; i >= 0; i-- {
		var ref messageRef
		if at := post.Attempts[i]; at.Status == http.StatusOK && json.Unmarshal([]byte(at.Response), &ref) == nil && ref.OK && ref.TS != "" {
			return ref, false, ""
		}
	}
	return messageRef{}, true, fmt.Sprintf("delivery %s of approval %s was delivered but records no message channel and ts", id, approvalID)
}

// permanent are Slack's errors that a later try would get again; each says
// what to do.
var permanent = map[string]string{
	"not_authed":            "send the bot token: set " + EnvBotToken,
	"invalid_auth":          "the bot token is not valid: copy it again from the app's OAuth & Permissions page into " + EnvBotToken,
	"account_inactive":      "the bot token's account is inactive: reinstall the app and update " + EnvBotToken,
	"token_revoked":         "the bot token was revoked: reinstall the app and update " + EnvBotToken,
	"token_expired":         "the bot token expired: reinstall the app and update " + EnvBotToken,
	"missing_scope":         "the app lacks the chat:write scope: add it under OAuth & Permissions and reinstall the app",
	"channel_not_found":     "no such channel for this app: set " + EnvChannel + " to the channel's id (C…) and invite the app to it",
	"not_in_channel":        "the app is not in the channel: invite it there (/invite @your-app)",
	"is_archived":           "the channel is archived: unarchive it or set " + EnvChannel + " to another",
	"message_not_found":     "the approval's message was deleted from the channel",
	"cant_update_message":   "the message is not the app's to update",
	"edit_window_closed":    "the workspace no longer lets the app edit the message",
	"invalid_blocks":        "Slack refused the message's blocks (a bug in Stead: report it)",
	"invalid_blocks_format": "Slack refused the message's blocks (a bug in Stead: report it)",
	"msg_too_long":          "the message is too long (a bug in Stead: report it)",
	"no_text":               "the message has no text (a bug in Stead: report it)",
}

// outcome records what a Web API call answered.
func outcome(att store.Attempt, method, channel, ts string, err error) (store.Attempt, bool) {
	var (
		se slackgo.SlackErrorResponse
		rl *slackgo.RateLimitedError
		sc slackgo.StatusCodeError
	)
	switch {
	case err == nil:
		att.Status = http.StatusOK
		ref, _ := json.Marshal(messageRef{OK: true, Channel: channel, TS: ts})
		att.Response = string(ref)
		return att, false
	case errors.As(err, &se):
		resp, _ := json.Marshal(map[string]any{"ok": false, "error": se.Err})
		att.Response = string(resp)
		att.Error = fmt.Sprintf("%s answered %s", method, se.Err)
		if fix, ok := permanent[se.Err]; ok {
			att.Error += ": " + fix
			return att, true
		}
		return att, false
	case errors.As(err, &rl):
		att.Status = http.StatusTooManyRequests
		att.Error = fmt.Sprintf("%s: rate limited by Slack (retry after %s)", method, rl.RetryAfter)
		return att, false
	case errors.As(err, &sc):
		att.Status = sc.Code
		att.Error = fmt.Sprintf("%s: %s", method, sc.Error())
		return att, false
	}
	att.Error = fmt.Sprintf("%s: %s", method, err)
	return att, false
}

// headerAuth sends the bot token in the Authorization header on every
// call. slack-go puts it in the form body of form-encoded methods (chat.*),
// which Slack allows; the header is what Slack prefers and what JSON
// methods (views.open) need, and it keeps the token out of logged bodies.
type headerAuth struct {
	c     *http.Client
	token string
}

func (h headerAuth) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		raw, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		form, err := url.ParseQuery(string(raw))
		if err != nil {
			return nil, fmt.Errorf("slack request to %s: %w", req.URL.Path, err)
		}
		form.Del("token")
		enc := form.Encode()
		req.Body = io.NopCloser(strings.NewReader(enc))
		req.ContentLength = int64(len(enc))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(enc)), nil }
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	return h.c.Do(req)
}
