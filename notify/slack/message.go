package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"

	"stead/approvals"
)

// The action ids of the message's buttons, and the modal's callback id and
// input: what ParseInteraction recognises.
const (
	ActionApprove = "stead_approve"
	ActionDeny    = "stead_deny"
	ActionOpen    = "stead_open"
	// CallbackDeny is the callback_id of the modal that asks the reason.
	CallbackDeny = "stead_deny_reason"
	// BlockReason and ActionReason name the modal's reason input.
	BlockReason  = "reason"
	ActionReason = "reason"
)

// Limits of what a message shows.
const (
	// MaxInputShown bounds the input shown, in characters of escaped
	// mrkdwn; the console shows all of it.
	MaxInputShown = 2500
	// MaxNote bounds a deny reason, as the API bounds a note.
	MaxNote = 2000
)

// message is an approval's Slack message: the notification text and the
// blocks.
type message struct {
	text   string
	blocks []slackgo.Block
}

// choice is what an Approve or Deny button carries: the approval and the
// digest of the input the message showed (engine.DecideParams.Seen), so
// that a click on a message whose input was since edited is refused.
type choice struct {
	ApprovalID  string `json:"approvalId"`
	InputDigest string `json:"inputDigest"`
}

// statusWords are the message's title words for each state.
var statusWords = map[approvals.Status]string{
	approvals.Pending:   "Approval needed",
	approvals.Approved:  "Approved",
	approvals.Denied:    "Denied",
	approvals.Expired:   "Expired",
	approvals.Cancelled: "Cancelled",
}

// render is approval a's message as it stands: what is asked and by whom,
// its quorum progress and votes, the input (truncated), and while it is
// pending the Approve and Deny buttons; once settled, who settled it and
// how. consoleURL, when absolute, makes the "Open in console" button.
func render(a approvals.Approval, consoleURL string) message {
	title := statusWords[a.Status]
	if title == "" {
		title = string(a.Status)
	}
	msg := message{text: fmt.Sprintf("%s: %s for %s (end user %s)", title, clip(a.Tool, 200), clip(a.Agent, 200), clip(a.EndUserID, 200))}
	add := func(b slackgo.Block) { msg.blocks = append(msg.blocks, b) }

	add(slackgo.NewHeaderBlock(plain(clip(title+": "+a.Tool, 150))))
	fields := []*slackgo.TextBlockObject{
		mrkdwn("*Agent*\n" + lit(a.Agent, 200)),
		mrkdwn("*End user*\n" + lit(a.EndUserID, 200)),
	}
	if a.Status == approvals.Pending {
		fields = append(fields, mrkdwn("*Expires*\n"+date(a.ExpiresAt)))
	} else {
		fields = append(fields, mrkdwn("*Requested*\n"+date(a.RequestedAt)))
	}
	fields = append(fields, mrkdwn("*Approval*\n`"+escape(a.ID)+"`"))
	if a.HasQuorum() {
		fields = append(fields, mrkdwn("*Approvers*\n"+lit(a.ProgressText(), 1900)))
	}
	add(slackgo.NewSectionBlock(nil, fields, nil))
	if a.Reason != "" {
		add(slackgo.NewSectionBlock(mrkdwn("*Reason*\n"+lit(a.Reason, 2900)), nil, nil))
	}
	label := "*Input*"
	if len(a.OriginalInput) > 0 {
		label = "*Input* (as edited by its approver)"
	}
	add(slackgo.NewSectionBlock(mrkdwn(label+"\n```"+showInput(a.Input)+"```"), nil, nil))
	if len(a.Votes) > 0 {
		names := make([]string, len(a.Votes))
		for i, v := range a.Votes {
			names[i] = v.Name
			if names[i] == "" {
				names[i] = v.Member
			}
		}
		add(slackgo.NewContextBlock("", mrkdwn(lit("Voted to approve: "+strings.Join(names, ", "), 2900))))
	}
	if s := settled(a); s != "" {
		add(slackgo.NewSectionBlock(mrkdwn(s), nil, nil))
	}

	var buttons []slackgo.BlockElement
	if a.Status == approvals.Pending {
		value, _ := json.Marshal(choice{ApprovalID: a.ID, InputDigest: a.InputDigest})
		approve := slackgo.NewButtonBlockElement(ActionApprove, string(value), plain("Approve")).WithStyle(slackgo.StylePrimary)
		deny := slackgo.NewButtonBlockElement(ActionDeny, string(value), plain("Deny")).WithStyle(slackgo.StyleDanger)
		buttons = append(buttons, approve, deny)
	}
	if absolute(consoleURL) && len(consoleURL) <= 3000 {
		buttons = append(buttons, slackgo.NewButtonBlockElement(ActionOpen, a.ID, plain("Open in console")).WithURL(consoleURL))
	}
	if len(buttons) > 0 {
		add(slackgo.NewActionBlock("", buttons...))
	}
	add(slackgo.NewContextBlock("", mrkdwn("Stead · run `"+escape(a.RunID)+"`")))
	return msg
}

// settled says who settled a and when, with the note; "" while pending.
func settled(a approvals.Approval) string {
	var s string
	switch a.Status {
	case approvals.Pending:
		return ""
	case approvals.Approved, approvals.Denied:
		s = fmt.Sprintf("*%s* by %s%s · %s", statusWords[a.Status], lit(decider(a), 200), via(a.DecidedBy), date(a.DecidedAt))
	case approvals.Expired:
		s = fmt.Sprintf("*Expired* at %s: nobody decided in time, and the run failed (approval-expired)", date(a.DecidedAt))
	case approvals.Cancelled:
		s = fmt.Sprintf("*Cancelled* at %s with its run", date(a.DecidedAt))
	default:
		s = "*" + escape(string(a.Status)) + "*"
	}
	if a.Note != "" {
		s += "\n>" + strings.ReplaceAll(lit(a.Note, 2500), "\n", "\n>")
	}
	return s
}

// decider names who decided: the member, else the deciding key or actor.
func decider(a approvals.Approval) string {
	if a.DecidedByName != "" {
		return a.DecidedByName
	}
	if a.DecidedBy != "" {
		return a.DecidedBy
	}
	return "someone"
}

// via says where a decision came from, when the decider's id tells.
func via(decidedBy string) string {
	if strings.HasPrefix(decidedBy, actorPrefix) {
		return " in Slack"
	}
	return ""
}

// showInput is the input for a code block: indented JSON, escaped, with
// no ``` to end the block early, cut at MaxInputShown characters.
func showInput(input json.RawMessage) string {
	var buf bytes.Buffer
	s := string(input)
	if json.Indent(&buf, input, "", "  ") == nil {
		s = buf.String()
	}
	if s == "" {
		return "(none)"
	}
	all := utf8.RuneCountInString(s)
	s = strings.ReplaceAll(escape(s), "```", "`\u200b``")
	if utf8.RuneCountInString(s) > MaxInputShown {
		s = cut(s, MaxInputShown) + fmt.Sprintf("\n(cut: the input has %d characters; open the console to read all of it)", all)
	}
	return s
}

// denyModal is the modal that asks for the reason of a deny. Its private
// metadata carries the choice and the channel the click came from.
func denyModal(a approvals.Approval, meta modalMeta) slackgo.ModalViewRequest {
	raw, _ := json.Marshal(meta)
	input := slackgo.NewPlainTextInputBlockElement(plain("Why is this call refused?"), ActionReason).
		WithMultiline(true).WithMaxLength(MaxNote)
	intro := fmt.Sprintf("Deny *%s* for *%s* (end user %s). The reason is kept in the trace and shown to the approvers.",
		lit(a.Tool, 200), lit(a.Agent, 200), lit(a.EndUserID, 200))
	return slackgo.ModalViewRequest{
		Type:            slackgo.VTModal,
		CallbackID:      CallbackDeny,
		PrivateMetadata: string(raw),
		Title:           plain("Deny approval"),
		Submit:          plain("Deny"),
		Close:           plain("Cancel"),
		Blocks: slackgo.Blocks{BlockSet: []slackgo.Block{
			slackgo.NewSectionBlock(mrkdwn(intro), nil, nil),
			slackgo.NewInputBlock(BlockReason, plain("Reason"), nil, input),
		}},
	}
}

// modalMeta is the deny modal's private_metadata.
type modalMeta struct {
	ApprovalID  string `json:"approvalId"`
	InputDigest string `json:"inputDigest"`
	Channel     string `json:"channel,omitempty"`
}

func plain(s string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.PlainTextType, s, false, false)
}

func mrkdwn(s string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.MarkdownType, s, false, false)
}

// escape makes text literal in mrkdwn: Slack's three control characters.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// clip cuts s to at most n characters, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// lit is s as literal mrkdwn of at most n characters.
func lit(s string, n int) string { return cut(escape(s), n) }

// cut cuts escaped mrkdwn to at most n characters, marking the cut, never
// inside an entity (&amp;).
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n-1]
	if i := lastIndex(r, '&'); i >= 0 && i >= len(r)-5 && lastIndex(r[i:], ';') < 0 {
		r = r[:i]
	}
	return string(r) + "…"
}

func lastIndex(r []rune, c rune) int {
	for i := len(r) - 1; i >= 0; i-- {
		if r[i] == c {
			return i
		}
	}
	return -1
}

// date is a time as Slack shows it in the reader's time zone, with UTC as
// the fallback text.
func date(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

func absolute(u string) bool {
	return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")
}
