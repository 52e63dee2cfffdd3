package email

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"stead/approvals"
)

// Summary is what a mail and the review page say about an approval: one
// place, so the page shows what the mail promised.
type Summary struct {
	ApprovalID string
	RunID      string
	Agent      string
	Tool       string
	EndUserID  string
	Reason     string
	ExpiresAt  time.Time
	// Progress is a quorum's, in words ("1 of 2 from finance — waiting on
	// Bo Li"); empty without one.
	Progress string
	// Input is the call's input, indented.
	Input string
	// NoteToCustomer: a deny note is shown to the customer.
	NoteToCustomer bool
	// Pending: the approval waits for a decision; else Outcome says how
	// it was settled ("approved by Ana Diaz at 12:03:04Z").
	Pending bool
	Outcome string
}

// SummaryOf is the summary of a.
func SummaryOf(a approvals.Approval) Summary {
	s := Summary{
		ApprovalID: a.ID, RunID: a.RunID, Agent: a.Agent, Tool: a.Tool, EndUserID: a.EndUserID,
		Reason: a.Reason, ExpiresAt: a.ExpiresAt, Input: indent(a.Input), NoteToCustomer: a.NoteToCustomer,
	}
	if a.HasQuorum() {
		s.Progress = a.ProgressText()
	}
	s.Pending = a.Status == approvals.Pending
	if !s.Pending {
		s.Outcome = string(a.Status)
		if w := a.DecidedByWho(); w != "" && a.Status != approvals.Expired && a.Status != approvals.Cancelled {
			s.Outcome += " by " + w
		}
		if !a.DecidedAt.IsZero() {
			s.Outcome += " at " + a.DecidedAt.UTC().Format("2006-01-02 15:04:05 UTC")
		}
	}
	return s
}

func indent(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// Expires words the deadline as seen at now: "12:15:00 UTC (in 15m)".
func (s Summary) Expires(now time.Time) string {
	at := s.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC")
	if d := s.ExpiresAt.Sub(now); d > 0 {
		return at + " (in " + approvals.Ago(d) + ")"
	}
	return at + " (expired)"
}

// maxMailInput bounds the input a mail shows; the review page shows it
// all.
const maxMailInput = 8 << 10

// Message is a rendered mail: the Body of an email delivery, so that every
// try sends the same mail. The text and HTML hold the review link, which
// is a credential: a delivery's body is not for showing.
type Message struct {
	// To is the recipient, "Ana Diaz <ana@example.com>".
	To      string    `json:"to"`
	Subject string    `json:"subject"`
	Text    string    `json:"text"`
	HTML    string    `json:"html"`
	Date    time.Time `json:"date"`
	// ApprovalID is the approval it asks to decide: a try after it was
	// settled sends nothing.
	ApprovalID string `json:"approvalId"`
}

// mailData is what the templates read.
type mailData struct {
	Summary
	Name, Role, Expires, ReviewURL, ConsoleURL string
}

// render makes the mail to member m about s.
func render(s Summary, to mail.Address, role approvals.Role, reviewURL, consoleURL string, now time.Time) (Message, error) {
	d := mailData{Summary: s, Name: to.Name, Role: string(role), Expires: s.Expires(now), ReviewURL: reviewURL, ConsoleURL: consoleURL}
	if len(d.Input) > maxMailInput {
		d.Input = strings.ToValidUTF8(d.Input[:maxMailInput], "") + "\n… (cut here; the review page shows all of it)"
	}
	var text bytes.Buffer
	tw := tabwriter.NewWriter(&text, 0, 0, 2, ' ', 0)
	fmt.Fprintf(&text, "%s asks to run %s, which needs approval.\n\n", oneLine(s.Agent), oneLine(s.Tool))
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, oneLine(v))
		}
	}
	row("Agent", s.Agent)
	row("Tool", s.Tool)
	row("End user", s.EndUserID)
	row("Reason", s.Reason)
	row("Expires", d.Expires)
	row("Approvers", s.Progress)
	row("Run", s.RunID)
	if err := tw.Flush(); err != nil {
		return Message{}, err
	}
	fmt.Fprintf(&text, "\nInput:\n%s\n\n", d.Input)
	fmt.Fprintf(&text, "Review it and decide (the page decides nothing until you press Approve or Deny):\n%s\n\n", reviewURL)
	fmt.Fprintf(&text, "Or open it in the console: %s\n\n", consoleURL)
	fmt.Fprintf(&text, "-- \nYou get this mail as %s (%s), a member of this Stead project who may decide this approval. "+
		"The link works only for you and only for this approval, until it expires, is decided, or its input is edited; do not forward it.\n",
		oneLine(to.Name), role)
	var html bytes.Buffer
	if err := mailHTML.Execute(&html, d); err != nil {
		return Message{}, fmt.Errorf("render mail: %w", err)
	}
	subject := fmt.Sprintf("Approval needed: %s for %s", s.Tool, s.Agent)
	if s.EndUserID != "" {
		subject += " (end user " + s.EndUserID + ")"
	}
	return Message{
		To: to.String(), Subject: oneLine(subject), Text: text.String(), HTML: html.String(),
		Date: now.UTC().Truncate(time.Second), ApprovalID: s.ApprovalID,
	}, nil
}

// oneLine replaces control characters (line breaks among them) with
// spaces: what goes in a header or a table cell stays on its line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

var mailHTML = template.Must(template.New("mail").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Approval needed</title></head>
<body style="margin:0;padding:24px;background:#f6f7f9;font:15px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1f2328">
<div style="max-width:40rem;margin:0 auto;background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:20px">
<p style="margin:0 0 12px"><strong>{{.Agent}}</strong> asks to run <strong>{{.Tool}}</strong>, which needs approval.</p>
<table style="border-collapse:collapse;margin:0 0 12px" role="presentation">
<tr><td style="padding:2px 12px 2px 0;color:#57606a">Agent</td><td>{{.Agent}}</td></tr>
<tr><td style="padding:2px 12px 2px 0;color:#57606a">Tool</td><td>{{.Tool}}</td></tr>
{{if .EndUserID}}<tr><td style="padding:2px 12px 2px 0;color:#57606a">End user</td><td>{{.EndUserID}}</td></tr>{{end}}
{{if .Reason}}<tr><td style="padding:2px 12px 2px 0;color:#57606a">Reason</td><td>{{.Reason}}</td></tr>{{end}}
<tr><td style="padding:2px 12px 2px 0;color:#57606a">Expires</td><td>{{.Expires}}</td></tr>
{{if .Progress}}<tr><td style="padding:2px 12px 2px 0;color:#57606a">Approvers</td><td>{{.Progress}}</td></tr>{{end}}
<tr><td style="padding:2px 12px 2px 0;color:#57606a">Run</td><td>{{.RunID}}</td></tr>
</table>
<p style="margin:0 0 4px;color:#57606a">Input</p>
<pre style="margin:0 0 16px;padding:10px;background:#f6f8fa;border-radius:6px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:13px">{{.Input}}</pre>
<p style="margin:0 0 16px"><a href="{{.ReviewURL}}" style="display:inline-block;padding:10px 18px;background:#1f6feb;color:#fff;border-radius:6px;text-decoration:none;font-weight:600">Review</a>
&nbsp; <a href="{{.ConsoleURL}}" style="color:#0969da">Open in the console</a></p>
<p style="margin:0 0 4px;color:#57606a;font-size:13px">Review opens a page that shows the call again; nothing is decided until you press Approve or Deny there.</p>
<p style="margin:0;color:#57606a;font-size:13px">You get this mail as {{.Name}} ({{.Role}}), a member of this Stead project who may decide this approval. The link works only for you and only for this approval, until it expires, is decided, or its input is edited; do not forward it.</p>
</div></body></html>
`))

// bytes is m as sent: RFC 5322 headers and a multipart/alternative body
// (text, then HTML, each quoted-printable), with the Message-ID and MIME
// boundary made from the delivery id, so every try sends the same bytes.
func (m Message) bytes(from, deliveryID string) ([]byte, error) {
	fromAddr, err := mail.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("from %q: %w", from, err)
	}
	domain := "stead.invalid"
	if _, d, ok := strings.Cut(fromAddr.Address, "@"); ok && d != "" {
		domain = d
	}
	sum := sha256.Sum256([]byte(deliveryID))
	boundary := "stead-" + hex.EncodeToString(sum[:12])
	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	h("From", fromAddr.String())
	h("To", m.To)
	// Folded between its encoded words: an end user's id of 256 bytes in
	// any script, at three characters a byte, would make one line longer
	// than the 998 characters a mail's line may have (RFC 5322 2.1.1).
	h("Subject", strings.ReplaceAll(mime.QEncoding.Encode("utf-8", oneLine(m.Subject)), "?= =?", "?=\r\n =?"))
	h("Date", m.Date.Format(time.RFC1123Z))
	h("Message-ID", "<"+deliveryID+"@"+domain+">")
	h("Auto-Submitted", "auto-generated")
	h("MIME-Version", "1.0")
	h("Content-Type", `multipart/alternative; boundary="`+boundary+`"`)
	b.WriteString("\r\n")
	mw := multipart.NewWriter(&b)
	if err := mw.SetBoundary(boundary); err != nil {
		return nil, err
	}
	for _, p := range []struct{ typ, body string }{{"text/plain", m.Text}, {"text/html", m.HTML}} {
		w, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {p.typ + "; charset=utf-8"},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return nil, err
		}
		qp := quotedprintable.NewWriter(w)
		if _, err := qp.Write([]byte(p.body)); err != nil {
			return nil, err
		}
		if err := qp.Close(); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
