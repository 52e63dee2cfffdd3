package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"stead/approvals"
	"stead/notify/slack"
	"stead/runtime/engine"
	"stead/store"
)

// Slack is what the interactivity route needs of Stead's Slack app
// (package notify/slack's App).
type Slack interface {
	// Verify checks Slack's v0 signature and its 5-minute window
	// (slack.ErrSignature, slack.ErrStale).
	Verify(h http.Header, body []byte) error
	// OpenDenyModal asks the denier of a for the reason.
	OpenDenyModal(ctx context.Context, in slack.Interaction, a approvals.Approval) error
	// Refuse tells the clicking user alone why nothing was decided.
	Refuse(ctx context.Context, in slack.Interaction, text string) error
	// Serves reports whether clicks on the approvals of a project are the
	// app's to take (its one project's).
	Serves(projectID string) bool
}

// slackRoutes: POST /slack/interactivity, Slack's Interactivity Request
// URL. No credential: Slack signs the request (Config.Slack verifies it),
// the approval must be of the project the app serves (Slack.Serves: a
// click on another project's approval is refused as if it did not exist),
// and the clicking Slack user must be linked to a member of that project,
// by team id and user id, whose role may decide and who is not removed.
// Seeing the message is not authority.
//
// It answers within Slack's 3 seconds by deciding synchronously: a
// decision is one conditional store write (milliseconds on bbolt, tens on
// DynamoDB) — and on Lambda nothing may run after the answer — while the
// Web API calls made in answer (views.open, whose trigger expires in 3
// seconds anyway, and chat.postEphemeral) are bounded at 2 seconds. The
// message itself is updated by the Notifier, kicked by the decision's
// write, as for a decision made anywhere else.
//
// A click decides through Engine.Decide as the member: their role, name
// and member id, with actor id slack.ActorID ("slack:<team>/<user>", the
// approval's DecidedBy), and Seen set to the input digest the message
// showed, so that a click on a message whose input was since edited is
// refused. Approve decides (or votes) at once; Deny opens a modal asking
// the reason, and its submission denies with the reason as the note. A
// click that decides nothing gets an ephemeral answer saying why (in the
// modal, for a submission); the HTTP answer is 200 either way, as Slack
// shows the user nothing of it. A bad or old signature is a 401.
func (s *Server) slackRoutes() {
	s.mux.HandleFunc("POST /slack/interactivity", s.slackInteractivity)
}

func (s *Server) slackInteractivity(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Slack == nil {
		s.writeError(w, r, notFound("Slack is not configured on this Stead: set %s, %s, %s and %s, and restart it",
			slack.EnvBotToken, slack.EnvSigningSecret, slack.EnvChannel, slack.EnvProject))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		s.writeError(w, r, tooLarge("request body is larger than %s", size(s.cfg.MaxBody)))
		return
	}
	if err := s.cfg.Slack.Verify(r.Header, body); err != nil {
		s.writeError(w, r, unauthenticated("%s", err.Error()))
		return
	}
	in, err := slack.ParseInteraction(body)
	if err != nil {
		s.writeError(w, r, invalidField("payload", "%s", err.Error()))
		return
	}
	if in.Kind == slack.Ignore {
		w.WriteHeader(http.StatusOK)
		return
	}
	if info := infoOf(r.Context()); info != nil {
		info.actor = slack.ActorID(in.Team, in.User)
	}
	refusal := s.slackDecide(r.Context(), in)
	switch {
	case refusal == "":
	case in.Kind == slack.DenyWithReason:
		// The modal stays open and shows why.
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(slack.SubmissionError(refusal))
		return
	default:
		if err := s.cfg.Slack.Refuse(r.Context(), in, refusal); err != nil {
			s.log.Warn("slack refusal not delivered", "user", in.User, "refusal", refusal, "error", err)
		}
	}
	w.WriteHeader(http.StatusOK)
}

// slackDecide does what a verified interaction asks; it returns why
// nothing was decided, in words for the Slack user, or "".
func (s *Server) slackDecide(ctx context.Context, in slack.Interaction) string {
	a, err := s.store.GetApproval(ctx, in.ApprovalID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !s.cfg.Slack.Serves(a.ProjectID)) {
		// Another project's approval is not this app's to decide, nor to
		// confirm the existence of.
		return fmt.Sprintf("Stead has no approval %s; nothing was decided", in.ApprovalID)
	}
	if err != nil {
		return s.slackInternal(ctx, "read the approval", err)
	}
	actor, refusal := s.slackActor(ctx, a.ProjectID, in)
	if refusal != "" {
		return refusal
	}
	switch in.Kind {
	case slack.Deny:
		// Ask the reason only of what could still be denied; the decision
		// on submit checks everything again.
		switch {
		case a.Status != approvals.Pending:
			return approvals.NotPendingMessage(a, s.now(), "denied")
		case in.Seen != a.InputDigest:
			return approvals.VoteMessage(a, approvals.ErrChanged, "denied")
		}
		if err := s.cfg.Slack.OpenDenyModal(ctx, in, a); err != nil {
			s.log.Warn("slack deny modal", "approval", a.ID, "error", err)
			return fmt.Sprintf("Stead could not ask you for the reason (%s); nothing was decided. Try again, or deny %s in the console.", err, a.ID)
		}
		return ""
	case slack.DenyWithReason:
		if in.Note == "" {
			return "give the reason for denying: it is kept in the trace and shown to the approvers"
		}
		if p := textNoteProblem(in.Note); p != "" {
			return "the reason " + p
		}
	}
	verb := "denied"
	if in.Kind == slack.Approve {
		verb = "approved"
	}
	decided, err := s.engine.Decide(ctx, actor, engine.DecideParams{ApprovalID: a.ID, Approve: in.Kind == slack.Approve, Note: in.Note, Seen: in.Seen})
	if err == nil {
		return ""
	}
	if decided.ID == "" {
		decided = a
	}
	e := translate(approvalError(a.ID, err, decided, s.now(), verb))
	if e.Status >= 500 {
		return s.slackInternal(ctx, "decide", err)
	}
	return e.Message
}

// slackActor is the member a Slack user is linked to in a project, as the
// actor of a decision; otherwise why the user may not decide.
func (s *Server) slackActor(ctx context.Context, projectID string, in slack.Interaction) (approvals.Actor, string) {
	ms, err := s.store.ListMembers(ctx, projectID, false)
	if err != nil {
		return approvals.Actor{}, s.slackInternal(ctx, "list members", err)
	}
	linked := linkedTo(ms, store.ChatIdentity{Kind: slack.Name, Team: in.Team, User: in.User}, "")
	switch len(linked) {
	case 0:
		return approvals.Actor{}, fmt.Sprintf("Your Slack account (team %s, user %s) is not linked to a member of this Stead project, so your click decided nothing: being in this channel does not make you an approver. Ask an owner to link you: stead members link-slack MEMBER_ID --team %s --user %s",
			in.Team, in.User, in.Team, in.User)
	case 1:
	default:
		names := make([]string, len(linked))
		for i, m := range linked {
			names[i] = m.Name + " (" + m.ID + ")"
		}
		return approvals.Actor{}, fmt.Sprintf("Your Slack account is linked to %d members of this project (%s), so Stead cannot tell who decides; ask an owner to unlink all but one (stead members unlink-slack MEMBER_ID)",
			len(linked), strings.Join(names, ", "))
	}
	m := linked[0]
	if !m.Role.May(approvals.Decide) {
		return approvals.Actor{}, fmt.Sprintf("Your Stead member %s is a %s; only owners, developers and approvers decide approvals", m.Name, m.Role)
	}
	return approvals.Actor{ProjectID: projectID, Role: m.Role, ID: slack.ActorID(in.Team, in.User), Name: m.Name, MemberID: m.ID}, ""
}

// slackInternal logs an internal failure and words it for the user.
func (s *Server) slackInternal(ctx context.Context, what string, err error) string {
	s.log.ErrorContext(ctx, "slack interactivity", "step", what, "error", err)
	return "Stead could not take your decision (an internal error); nothing was decided. Try again, or decide in the console."
}

// linkedTo are the members of ms linked to chat identity id, less the
// member except.
func linkedTo(ms []store.Member, id store.ChatIdentity, except string) []store.Member {
	var out []store.Member
	for _, m := range ms {
		for _, c := range m.Chat {
			if c == id && m.ID != except {
				out = append(out, m)
				break
			}
		}
	}
	return out
}
