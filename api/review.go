package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"stead/approvals"
	"stead/console"
	"stead/notify/email"
	"stead/runtime/engine"
	"stead/store"
)

// The review page: where the link of an approval's mail leads
// (notify/email). No credential but the link's token, which names one
// approval, one member and the input the mail showed:
//
//	GET  /review/{token}   the approval's summary and input, and a form:
//	                       Approve / Deny with a note. Never decides:
//	                       mail scanners fetch links.
//	POST /review/{token}   decision=approve|deny&note=…: decides as the
//	                       token's member through Engine.Decide, with the
//	                       token's input digest as what the member saw.
//
// The member is read again on every request: a removed member, or one
// whose role can no longer decide, is refused. A decision records the
// actor "review:<memberId>" (email.ReviewActorID) as DecidedBy, and the
// member's name as DecidedByName. After a decision, an edit of the input,
// the deadline, or with a token that is not one of its project's, the page
// says so and offers no form. Pages are HTML with the console's strict
// headers (console.SetPageHeaders) and no script.

// maxReviewForm bounds a review form's body: a note of maxNoteLen
// characters, percent-encoded.
const maxReviewForm = 64 << 10

func (s *Server) reviewRoutes() {
	s.mux.HandleFunc("GET /review/{token}", s.reviewPage)
	s.mux.HandleFunc("POST /review/{token}", s.reviewDecide)
}

// logPath is a request's path as the request log shows it: a review
// link's token is a credential, so it is left out.
func logPath(p string) string {
	if strings.HasPrefix(p, "/review/") {
		return "/review/…"
	}
	return p
}

// reviewView is what the page template reads.
type reviewView struct {
	Title string
	// State is "open" (the form), "done" (a decision was just made) or
	// "refused".
	State   string
	Message string
	// Summary is shown when the approval could be read.
	Summary    *email.Summary
	Expires    string
	Member     string
	Role       string
	ConsoleURL string
}

// reviewed is a review link as checked on one request.
type reviewed struct {
	token    email.Review
	approval approvals.Approval
	member   store.Member
}

// refusal is a page that says why the link does nothing.
type refusal struct {
	status  int
	title   string
	message string
	// a, when set, is the approval, whose summary the page still shows.
	a *approvals.Approval
}

func (r *refusal) Error() string { return r.message }

// checkReview opens the token and reads the approval and the member as
// they are now. It refuses what no form may be offered for.
func (s *Server) checkReview(ctx context.Context, token string) (reviewed, error) {
	rv, err := email.OpenReview(ctx, token, s.engine.SigningKey)
	if errors.Is(err, email.ErrReviewToken) {
		return reviewed{}, badReviewLink()
	}
	if err != nil {
		return reviewed{}, err
	}
	a, err := s.store.GetApproval(ctx, rv.ApprovalID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && a.ProjectID != rv.ProjectID) {
		return reviewed{}, badReviewLink()
	}
	if err != nil {
		return reviewed{}, fmt.Errorf("get approval %s: %w", rv.ApprovalID, err)
	}
	m, err := s.store.GetMember(ctx, rv.ProjectID, rv.MemberID)
	if errors.Is(err, store.ErrNotFound) {
		return reviewed{}, badReviewLink()
	}
	if err != nil {
		return reviewed{}, fmt.Errorf("get member %s: %w", rv.MemberID, err)
	}
	got := reviewed{token: rv, approval: a, member: m}
	switch now := s.now(); {
	case m.Removed():
		return got, &refusal{status: http.StatusForbidden, title: "You are no longer a member",
			message: fmt.Sprintf("%s was removed from this project at %s, so this link decides nothing.", m.Name, m.RemovedAt.UTC().Format(time.RFC3339))}
	case !m.Role.May(approvals.Decide):
		return got, &refusal{status: http.StatusForbidden, title: "Your role may not decide", a: &a,
			message: fmt.Sprintf("%s is now a %s of this project, and a %s may not approve or deny; ask an owner for the approver role.", m.Name, m.Role, m.Role)}
	case a.Status != approvals.Pending:
		return got, &refusal{status: http.StatusConflict, title: "Already " + string(a.Status), a: &a,
			message: approvals.NotPendingMessage(a, now, "decided") + "."}
	case rv.Expired(now) || !now.Before(a.ExpiresAt):
		return got, &refusal{status: http.StatusGone, title: "This approval has expired", a: &a,
			message: approvals.ExpiredMessage(a, now, "decided") + "."}
	case a.InputDigest != rv.InputDigest:
		return got, editedRefusal(a)
	case a.SeparateFrom != "" && a.SeparateFrom == m.ID:
		return got, &refusal{status: http.StatusForbidden, title: "You may not decide this one", a: &a,
			message: fmt.Sprintf("You started this run, and its approvals may not be decided by its requester (%s); another member decides.", a.SeparatedBy)}
	case a.HasQuorum() && !a.Eligible(m.ID):
		return got, &refusal{status: http.StatusForbidden, title: "You are not among its approvers", a: &a,
			message: approvals.VoteMessage(a, approvals.ErrNotEligible, "decided") + "."}
	case a.HasQuorum() && a.Voted(m.ID):
		return got, &refusal{status: http.StatusConflict, title: "You have already approved", a: &a,
			message: approvals.VoteMessage(a, approvals.ErrAlreadyVoted, "approved") + "."}
	}
	return got, nil
}

func badReviewLink() *refusal {
	return &refusal{status: http.StatusNotFound, title: "This review link is not valid",
		message: "It is not a link Stead made for this project, or it was cut short on its way; open the approval in the console instead."}
}

func editedRefusal(a approvals.Approval) *refusal {
	return &refusal{status: http.StatusConflict, title: "The input was edited", a: &a,
		message: "Another approver edited this call's input after this mail was sent, so this link no longer decides it. Review the new input in the console."}
}

// reviewPage: GET /review/{token}.
func (s *Server) reviewPage(w http.ResponseWriter, r *http.Request) {
	rv, err := s.checkReview(r.Context(), r.PathValue("token"))
	if err != nil {
		s.reviewRefused(w, r, err)
		return
	}
	a := rv.approval
	sum := email.SummaryOf(a)
	s.writeReview(w, http.StatusOK, reviewView{
		Title: "Review: " + a.Tool + " for " + a.Agent, State: "open", Summary: &sum, Expires: sum.Expires(s.now()),
		Member: rv.member.Name, Role: string(rv.member.Role), ConsoleURL: consoleApprovalURL(a.ID),
	})
}

// reviewDecide: POST /review/{token} decision=approve|deny&note=….
func (s *Server) reviewDecide(w http.ResponseWriter, r *http.Request) {
	approve, note, err := readReviewForm(r)
	if err != nil {
		s.reviewRefused(w, r, err)
		return
	}
	rv, err := s.checkReview(r.Context(), r.PathValue("token"))
	if err != nil {
		s.reviewRefused(w, r, err)
		return
	}
	m := rv.member
	actor := approvals.Actor{ProjectID: m.ProjectID, Role: m.Role, ID: email.ReviewActorID(m.ID), Name: m.Name, MemberID: m.ID}
	a, err := s.engine.Decide(r.Context(), actor, engine.DecideParams{
		ApprovalID: rv.approval.ID, Approve: approve, Note: note, Seen: rv.token.InputDigest,
	})
	if err != nil {
		s.reviewRefused(w, r, decideRefusal(err, a, rv.approval, s.now(), approve))
		return
	}
	sum := email.SummaryOf(a)
	v := reviewView{State: "done", Summary: &sum, Expires: sum.Expires(s.now()), Member: m.Name, Role: string(m.Role), ConsoleURL: consoleApprovalURL(a.ID)}
	switch a.Status {
	case approvals.Pending:
		v.Title, v.Message = "Your approval is counted", "The approval still waits on others: "+a.ProgressText()+". The run resumes when it has every vote."
	case approvals.Approved:
		v.Title, v.Message = "Approved", fmt.Sprintf("You approved %s; the run continues with exactly the input shown below.", a.Tool)
	default:
		v.Title, v.Message = "Denied", fmt.Sprintf("You denied %s; the call will not run.", a.Tool)
	}
	s.writeReview(w, http.StatusOK, v)
}

// readReviewForm reads the form strictly: a form-encoded body of at most
// maxReviewForm bytes with decision (approve or deny) and an optional note,
// each once, and nothing else.
func readReviewForm(r *http.Request) (approve bool, note string, err error) {
	bad := func(msg string) (bool, string, error) {
		return false, "", &refusal{status: http.StatusBadRequest, title: "The form was not understood", message: msg}
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return bad("Send the page's form (application/x-www-form-urlencoded); nothing was decided.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxReviewForm))
	if err != nil {
		return bad(fmt.Sprintf("The form is larger than %s; nothing was decided.", size(maxReviewForm)))
	}
	q, err := url.ParseQuery(string(body))
	if err != nil {
		return bad("The form is not valid form encoding; nothing was decided.")
	}
	for k, vs := range q {
		switch {
		case k != "decision" && k != "note":
			return bad(fmt.Sprintf("The form has a field %q; it has only decision and note; nothing was decided.", k))
		case len(vs) != 1:
			return bad(fmt.Sprintf("The form gives %s %d times; nothing was decided.", k, len(vs)))
		}
	}
	note = strings.ReplaceAll(q.Get("note"), "\r\n", "\n")
	switch {
	case !utf8.ValidString(note):
		return bad("The note is not valid UTF-8; nothing was decided.")
	case textNoteProblem(note) != "":
		return bad("The note " + textNoteProblem(note) + "; nothing was decided.")
	}
	switch q.Get("decision") {
	case "approve":
		return true, note, nil
	case "deny":
		return false, note, nil
	}
	return bad(fmt.Sprintf("decision must be approve or deny (got %q); nothing was decided.", q.Get("decision")))
}

// decideRefusal words what refused a decision from the page; a is the
// approval as the engine returned it, read as it was read before.
func decideRefusal(err error, a, read approvals.Approval, now time.Time, approve bool) error {
	verb := "denied"
	if approve {
		verb = "approved"
	}
	if a.ID == "" {
		a = read
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return badReviewLink()
	case errors.Is(err, engine.ErrForbidden):
		return &refusal{status: http.StatusForbidden, title: "Your role may not decide", a: &a, message: "Your role in this project may not approve or deny."}
	case errors.Is(err, approvals.ErrSeparated):
		return &refusal{status: http.StatusForbidden, title: "You may not decide this one", a: &a,
			message: fmt.Sprintf("You started this run, and its approvals may not be %s by its requester (%s).", verb, a.SeparatedBy)}
	case errors.Is(err, approvals.ErrChanged):
		return editedRefusal(a)
	case errors.Is(err, approvals.ErrExpired):
		return &refusal{status: http.StatusGone, title: "This approval has expired", a: &a, message: approvals.ExpiredMessage(a, now, verb) + "."}
	case errors.Is(err, approvals.ErrNotPending):
		return &refusal{status: http.StatusConflict, title: "Already " + string(a.Status), a: &a, message: approvals.NotPendingMessage(a, now, verb) + "."}
	case errors.Is(err, approvals.ErrNotEligible), errors.Is(err, approvals.ErrAlreadyVoted):
		status := http.StatusForbidden
		if errors.Is(err, approvals.ErrAlreadyVoted) {
			status = http.StatusConflict
		}
		return &refusal{status: status, title: "Not counted", a: &a, message: approvals.VoteMessage(a, err, verb) + "."}
	}
	return err
}

// reviewRefused writes the page for err: its refusal, or an internal
// error (logged, never shown).
func (s *Server) reviewRefused(w http.ResponseWriter, r *http.Request, err error) {
	var rf *refusal
	if !errors.As(err, &rf) {
		s.log.ErrorContext(r.Context(), "review page", "error", err)
		rf = &refusal{status: http.StatusInternalServerError, title: "Something went wrong",
			message: "Stead could not read this approval just now; nothing was decided. Try again in a moment, or open the console."}
	}
	v := reviewView{Title: rf.title, State: "refused", Message: rf.message, ConsoleURL: "/console/"}
	if rf.a != nil {
		sum := email.SummaryOf(*rf.a)
		v.Summary, v.Expires, v.ConsoleURL = &sum, sum.Expires(s.now()), consoleApprovalURL(rf.a.ID)
	}
	s.writeReview(w, rf.status, v)
}

func consoleApprovalURL(id string) string { return "/console/#/approvals/" + url.PathEscape(id) }

func (s *Server) writeReview(w http.ResponseWriter, status int, v reviewView) {
	var b bytes.Buffer
	if err := reviewHTML.Execute(&b, v); err != nil {
		s.log.Error("render review page", "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	console.SetPageHeaders(h)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

var reviewHTML = template.Must(template.New("review").Parse(`<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <meta name="referrer" content="no-referrer">
  <meta name="robots" content="noindex">
  <title>{{.Title}} · Stead</title>
  <link rel="icon" href="/console/icon.svg" type="image/svg+xml">
  <link rel="stylesheet" href="/console/review.css">
</head>
<body>
<main class="review" data-state="{{.State}}">
  <h1>{{.Title}}</h1>
  {{if .Message}}<div class="review__card" data-state="{{.State}}" role="{{if eq .State "refused"}}alert{{else}}status{{end}}"><p class="review__message">{{.Message}}</p></div>{{end}}
  {{with .Summary}}
  <section class="review__card" aria-label="The call">
    <p class="review__message"><strong>{{.Agent}}</strong> asks to run <strong>{{.Tool}}</strong>.</p>
    <dl class="review__facts">
      <dt>Agent</dt><dd>{{.Agent}}</dd>
      <dt>Tool</dt><dd>{{.Tool}}</dd>
      {{if .EndUserID}}<dt>End user</dt><dd>{{.EndUserID}}</dd>{{end}}
      {{if .Reason}}<dt>Reason</dt><dd>{{.Reason}}</dd>{{end}}
      {{if .Pending}}<dt>Expires</dt><dd>{{$.Expires}}</dd>{{else}}<dt>Status</dt><dd>{{.Outcome}}</dd>{{end}}
      {{if .Progress}}<dt>Approvers</dt><dd>{{.Progress}}</dd>{{end}}
      <dt>Run</dt><dd>{{.RunID}}</dd>
      <dt>Approval</dt><dd>{{.ApprovalID}}</dd>
    </dl>
    <p class="review__muted">Input</p>
    <pre>{{.Input}}</pre>
  </section>
  {{end}}
  {{if eq .State "open"}}
  <form class="review__card" method="post">
    <label for="note">Note (optional, recorded in the trace{{if .Summary.NoteToCustomer}}; on a deny the customer sees it{{end}})</label>
    <textarea id="note" name="note" maxlength="2000"></textarea>
    <div class="review__buttons">
      <button type="submit" name="decision" value="approve">Approve</button>
      <button type="submit" name="decision" value="deny">Deny</button>
    </div>
    <p class="review__muted">You decide as {{.Member}} ({{.Role}}). Nothing is decided until you press a button.</p>
  </form>
  {{end}}
  <p class="review__muted"><a href="{{.ConsoleURL}}">Open in the console</a></p>
</main>
</body>
</html>
`))
