package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"stead/approvals"
	"stead/strictjson"
)

// SignatureWindow is how far a request's timestamp may be from now: older
// requests are refused, so that a captured one cannot be replayed later.
const SignatureWindow = 5 * time.Minute

// The signature headers Slack sends.
const (
	HeaderSignature = "X-Slack-Signature"
	HeaderTimestamp = "X-Slack-Request-Timestamp"
)

// Refusals of Verify.
var (
	// ErrSignature: the request does not carry a valid v0 signature made
	// with the app's signing secret.
	ErrSignature = errors.New("the request is not signed with this Slack app's signing secret")
	// ErrStale: the request's timestamp is outside SignatureWindow.
	ErrStale = errors.New("the request's Slack timestamp is not within 5 minutes of now")
)

// Verify checks that a request comes from Slack: X-Slack-Signature is "v0="
// and the hex HMAC-SHA256, keyed with the signing secret, of
// "v0:<X-Slack-Request-Timestamp>:<body>", and the timestamp is within
// SignatureWindow of the app's clock. ErrSignature or ErrStale, wrapped.
func (a *App) Verify(h http.Header, body []byte) error {
	ts, sig := h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if ts == "" || sig == "" {
		return fmt.Errorf("%w: %s and %s are required", ErrSignature, HeaderSignature, HeaderTimestamp)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not Unix seconds", ErrSignature, HeaderTimestamp, ts)
	}
	if d := a.cfg.Now().Sub(time.Unix(sec, 0)); d > SignatureWindow || d < -SignatureWindow {
		return fmt.Errorf("%w: it is %s off (check this server's clock if Slack's requests all fail)", ErrStale, d.Round(time.Second))
	}
	got, err := hex.DecodeString(strings.TrimPrefix(sig, "v0="))
	if !strings.HasPrefix(sig, "v0=") || err != nil {
		return fmt.Errorf("%w: %s is not v0=<hex>", ErrSignature, HeaderSignature)
	}
	m := hmac.New(sha256.New, []byte(a.cfg.SigningSecret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return fmt.Errorf("%w (check %s)", ErrSignature, EnvSigningSecret)
	}
	return nil
}

// Kind is what an interaction asks.
type Kind string

// The kinds of interaction.
const (
	// Approve: the Approve button.
	Approve Kind = "approve"
	// Deny: the Deny button, which asks the reason (OpenDenyModal).
	Deny Kind = "deny"
	// DenyWithReason: the reason modal, submitted.
	DenyWithReason Kind = "deny-with-reason"
	// Ignore: anything else (the "Open in console" link button, a closed
	// modal): acknowledged, and nothing is done.
	Ignore Kind = "ignore"
)

// Interaction is a click or a modal submission, as Stead reads Slack's
// payload.
type Interaction struct {
	Kind Kind
	// Team and User are the Slack user who clicked: the workspace the user
	// belongs to (user.team_id, else team.id) and the user's id.
	Team, User string
	// ApprovalID and Seen are what the message showed: the approval and
	// the digest of its input.
	ApprovalID, Seen string
	// TriggerID opens a modal in answer (valid 3 seconds).
	TriggerID string
	// Channel is where the click was, for an ephemeral answer.
	Channel string
	// Note is the reason given in the modal.
	Note string
}

// payload is the part of Slack's block_actions and view_submission
// payloads Stead reads; Slack sends much more.
type payload struct {
	Type string `json:"type"`
	Team struct {
		ID string `json:"id"`
	} `json:"team"`
	User struct {
		ID     string `json:"id"`
		TeamID string `json:"team_id"`
	} `json:"user"`
	TriggerID string `json:"trigger_id"`
	Channel   struct {
		ID string `json:"id"`
	} `json:"channel"`
	Container struct {
		ChannelID string `json:"channel_id"`
	} `json:"container"`
	Actions []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
	View struct {
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
		State           struct {
			Values map[string]map[string]struct {
				Value *string `json:"value"`
			} `json:"values"`
		} `json:"state"`
	} `json:"view"`
}

// ParseInteraction reads an interactivity request's body (form-encoded,
// one payload parameter holding JSON), already verified. It refuses a body
// that is not one, or an Approve, Deny or reason submission that lacks what
// Stead put in it.
func ParseInteraction(body []byte) (Interaction, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil || len(form["payload"]) != 1 {
		return Interaction{}, errors.New("an interactivity request's body is form-encoded with one payload parameter")
	}
	var p payload
	if err := strictjson.UnmarshalForeign([]byte(form.Get("payload")), &p); err != nil {
		return Interaction{}, fmt.Errorf("payload: %w", err)
	}
	in := Interaction{Kind: Ignore, Team: p.User.TeamID, User: p.User.ID, TriggerID: p.TriggerID, Channel: p.Channel.ID}
	if in.Team == "" {
		in.Team = p.Team.ID
	}
	if in.Channel == "" {
		in.Channel = p.Container.ChannelID
	}
	switch {
	case p.Type == "block_actions" && len(p.Actions) == 1 && (p.Actions[0].ActionID == ActionApprove || p.Actions[0].ActionID == ActionDeny):
		var c choice
		if err := strictjson.Unmarshal([]byte(p.Actions[0].Value), &c); err != nil || c.ApprovalID == "" {
			return in, fmt.Errorf("payload: the value of %s is not Stead's (%q)", p.Actions[0].ActionID, p.Actions[0].Value)
		}
		in.Kind, in.ApprovalID, in.Seen = Approve, c.ApprovalID, c.InputDigest
		if p.Actions[0].ActionID == ActionDeny {
			in.Kind = Deny
		}
	case p.Type == "view_submission" && p.View.CallbackID == CallbackDeny:
		var m modalMeta
		if err := strictjson.Unmarshal([]byte(p.View.PrivateMetadata), &m); err != nil || m.ApprovalID == "" {
			return in, fmt.Errorf("payload: the modal's private_metadata is not Stead's (%q)", p.View.PrivateMetadata)
		}
		v := p.View.State.Values[BlockReason][ActionReason].Value
		if v == nil {
			return in, fmt.Errorf("payload: the modal's state has no %s.%s", BlockReason, ActionReason)
		}
		in.Kind, in.ApprovalID, in.Seen, in.Channel, in.Note = DenyWithReason, m.ApprovalID, m.InputDigest, m.Channel, strings.TrimSpace(*v)
	default:
		return in, nil
	}
	if in.Team == "" || in.User == "" {
		return in, errors.New("payload: it names no user (user.id and user.team_id)")
	}
	return in, nil
}

// actorPrefix starts the actor id of a Slack decision.
const actorPrefix = "slack:"

// ActorID names the Slack user team/user in traces and as an approval's
// DecidedBy: "slack:<team>/<user>".
func ActorID(team, user string) string { return actorPrefix + team + "/" + user }

var (
	teamID = regexp.MustCompile(`^[TE][A-Z0-9]{2,20}$`)
	userID = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)
)

// CheckTeam refuses what is not a Slack team id: T… (a workspace), or E…
// (an Enterprise Grid organisation). The error says where to find it.
func CheckTeam(team string) error {
	if !teamID.MatchString(team) {
		return fmt.Errorf("%q is not a Slack team id: it looks like T0123ABCD (open Slack in a browser: the workspace's id follows /client/ in the address)", team)
	}
	return nil
}

// CheckUser refuses what is not a Slack user id (U… or W…; never a
// display name or handle). The error says where to find it.
func CheckUser(user string) error {
	if !userID.MatchString(user) {
		return fmt.Errorf("%q is not a Slack user id: it looks like U0123ABCD, never a name or @handle (in Slack: the person's profile → ⋮ → Copy member ID)", user)
	}
	return nil
}

// interactionTimeout bounds a Web API call made while Slack waits for the
// interactivity request's answer (3 seconds in all).
const interactionTimeout = 2 * time.Second

// OpenDenyModal opens the modal asking why approval ap is denied, in
// answer to in (a Deny click; its trigger is valid for 3 seconds).
func (a *App) OpenDenyModal(ctx context.Context, in Interaction, ap approvals.Approval) error {
	ctx, cancel := context.WithTimeout(ctx, interactionTimeout)
	defer cancel()
	_, err := a.api.OpenViewContext(ctx, in.TriggerID, denyModal(ap, modalMeta{ApprovalID: ap.ID, InputDigest: in.Seen, Channel: in.Channel}))
	if err != nil {
		return fmt.Errorf("open the deny modal (views.open): %w", err)
	}
	return nil
}

// Refuse tells the user of in, and only them, why their click decided
// nothing (chat.postEphemeral in the channel of the click).
func (a *App) Refuse(ctx context.Context, in Interaction, text string) error {
	if in.Channel == "" {
		return errors.New("refuse a Slack click: it names no channel to answer in")
	}
	ctx, cancel := context.WithTimeout(ctx, interactionTimeout)
	defer cancel()
	_, err := a.api.PostEphemeralContext(ctx, in.Channel, in.User, slackgo.MsgOptionText(clip(text, 3000), true))
	if err != nil {
		return fmt.Errorf("answer %s in %s (chat.postEphemeral): %w", in.User, in.Channel, err)
	}
	return nil
}

// SubmissionError is the answer to a reason modal's submission that keeps
// the modal open and shows text under the reason input
// (response_action "errors").
func SubmissionError(text string) []byte {
	b, _ := json.Marshal(map[string]any{"response_action": "errors", "errors": map[string]string{BlockReason: clip(text, 1000)}})
	return b
}
