package email_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"stead/approvals"
	"stead/infra/mailpit"
	"stead/notify"
	"stead/notify/email"
	"stead/store"
)

// memStore is the little the channel reads.
type memStore struct {
	mu        sync.Mutex
	project   store.Project
	approvals map[string]approvals.Approval
	members   []store.Member
}

func (s *memStore) GetProject(_ context.Context, id string) (store.Project, error) {
	if id != s.project.ID {
		return store.Project{}, store.ErrNotFound
	}
	return s.project, nil
}

func (s *memStore) GetApproval(_ context.Context, id string) (approvals.Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.approvals[id]
	if !ok {
		return approvals.Approval{}, store.ErrNotFound
	}
	return a, nil
}

func (s *memStore) ListMembers(_ context.Context, projectID string, includeRemoved bool) ([]store.Member, error) {
	var out []store.Member
	for _, m := range s.members {
		if m.ProjectID == projectID && (includeRemoved || !m.Removed()) {
			out = append(out, m)
		}
	}
	return out, nil
}

func (s *memStore) set(a approvals.Approval) {
	s.mu.Lock()
	s.approvals[a.ID] = a
	s.mu.Unlock()
}

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func member(id, name, mail string, role approvals.Role) store.Member {
	return store.Member{ID: id, ProjectID: "prj_a", Name: name, Email: mail, Role: role, Version: 1}
}

var members = []store.Member{
	member("mem_ana", "Ana Diaz", "ana@example.com", approvals.RoleApprover),
	member("mem_bo", "Bo Li", "bo@example.com", approvals.RoleDeveloper),
	member("mem_cy", "Cy Ng", "cy@example.com", approvals.RoleViewer), // may not decide
	member("mem_di", "Di Wu", "", approvals.RoleOwner),                // no address
	member("mem_ed", "Ed Ek", "ed@example.com", approvals.RoleOwner),  // the requester
	func() store.Member {
		m := member("mem_fa", "Fa Fo", "fa@example.com", approvals.RoleApprover)
		m.RemovedAt = now.Add(-time.Hour)
		return m
	}(),
	{ID: "mem_x", ProjectID: "prj_other", Name: "Xu", Email: "xu@example.com", Role: approvals.RoleOwner},
	member("mem_bad", "Bad", "not an address", approvals.RoleApprover),
	member("mem_mal", "Mal", "Mal <mal@example.com>", approvals.RoleApprover), // a name in the address
}

func pending() approvals.Approval {
	return approvals.Approval{
		ID: "apr_1", ProjectID: "prj_a", RunID: "run_1", Agent: "refunds", EndUserID: "demo-user", Tool: "refundOrder",
		Input: json.RawMessage(`{"orderId":"o-1001","note":"<script>alert(1)</script>"}`), InputDigest: strings.Repeat("ab", 32),
		Reason: "refundOrder requires approval", Status: approvals.Pending, RequestedAt: now, ExpiresAt: now.Add(15 * time.Minute),
		SeparateFrom: "mem_ed", SeparatedBy: "agent refunds approvals.separateFrom",
	}
}

func ids(ms []store.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestRecipients(t *testing.T) {
	t.Parallel()
	quorum := pending()
	quorum.Requirements = []approvals.Requirement{{Group: "finance", Min: 2, Eligible: []approvals.Voter{
		{Member: "mem_bo", Name: "Bo Li"}, {Member: "mem_cy", Name: "Cy Ng"}, {Member: "mem_fa", Name: "Fa Fo"}, {Member: "mem_ed", Name: "Ed Ek"}, {Member: "mem_di"},
	}}}
	voted := quorum
	voted.Requirements = append([]approvals.Requirement(nil), quorum.Requirements...)
	voted.Requirements[0].Eligible = append(voted.Requirements[0].Eligible, approvals.Voter{Member: "mem_ana", Name: "Ana Diaz"})
	voted.Votes = []approvals.Vote{{Member: "mem_bo", By: "key_bo", At: now}}
	open := pending()
	open.SeparateFrom = ""
	for _, tc := range []struct {
		name string
		a    approvals.Approval
		want []string
	}{
		{"separated from the requester", pending(), []string{"mem_ana", "mem_bo"}},
		{"no separation", open, []string{"mem_ana", "mem_bo", "mem_ed"}},
		// Only the voters, and of those only who may decide, is a
		// member, has an address and is not the requester.
		{"quorum", quorum, []string{"mem_bo"}},
		{"quorum, Bo voted", voted, []string{"mem_ana"}},
	} {
		if got := ids(email.Recipients(tc.a, members)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Recipients = %v, want %v", tc.name, got, tc.want)
		}
	}
}

type world struct {
	st *memStore
	ch *email.Channel
	mp *mailpit.Server
}

func setup(t *testing.T, cfg email.Config, o mailpit.Options) *world {
	t.Helper()
	mp := mailpit.Start(t, o)
	if cfg.Host == "" {
		cfg.Host, cfg.Port = mp.Host, mp.Port
	}
	st, ch := channel(t, cfg)
	return &world{st: st, ch: ch, mp: mp}
}

// channel is a Channel over a fresh store that holds apr_1, pending, and
// the members, sending through cfg (by default plain SMTP, from
// stead@stead.example.com, to 127.0.0.1:1 where nothing listens).
func channel(t *testing.T, cfg email.Config) (*memStore, *email.Channel) {
	t.Helper()
	if cfg.Host == "" {
		cfg.Host, cfg.Port = "127.0.0.1", 1
	}
	if cfg.TLS == "" {
		cfg.TLS = email.TLSNone
	}
	if cfg.From == "" {
		cfg.From = "Stead <stead@stead.example.com>"
	}
	st := &memStore{
		project:   store.Project{ID: "prj_a", SigningKey: bytes.Repeat([]byte{7}, 32)},
		approvals: map[string]approvals.Approval{"apr_1": pending()},
		members:   members,
	}
	ch, err := email.New(email.Options{SMTP: cfg, Store: st, PublicURL: "https://stead.example.com/", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return st, ch
}

// mailOf is the mail a delivery sends.
func mailOf(t *testing.T, d store.Delivery) email.Message {
	t.Helper()
	var m email.Message
	if err := json.Unmarshal(d.Body, &m); err != nil {
		t.Fatalf("the body of %s is not a mail: %v", d.ID, err)
	}
	return m
}

var (
	run     = store.Run{ID: "run_1", ProjectID: "prj_a", Agent: "refunds", EndUserID: "demo-user"}
	request = store.Event{RunID: "run_1", Seq: 4, Type: "approval.requested", At: now, Data: json.RawMessage(`{"approvalId":"apr_1"}`)}
	data    = notify.Data{ApprovalID: "apr_1", ConsoleURL: "https://stead.example.com/console/#/approvals/apr_1"}
)

// TestDeliveriesAndSend: a request makes one mail per recipient, the same
// on every fan-out; each arrives in mailpit as text and HTML with the
// summary, the input (escaped in the HTML), the review and console links;
// every try sends the same Message-ID. Other events, and approvals no
// longer pending, mail nobody.
func TestDeliveriesAndSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := setup(t, email.Config{}, mailpit.Options{})
	ds, err := w.ch.Deliveries(ctx, run, request, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].EndpointID != "email:mem_ana" || ds[1].EndpointID != "email:mem_bo" {
		t.Fatalf("deliveries to %v, want email:mem_ana and email:mem_bo", ds)
	}
	again, _ := w.ch.Deliveries(ctx, run, request, data)
	for i := range ds {
		if ds[i].ID != notify.MessageID(ds[i].EndpointID, run.ID, request.Seq) || ds[i].ID != again[i].ID || !bytes.Equal(ds[i].Body, again[i].Body) {
			t.Errorf("delivery %d differs between fan-outs or has another id: %s / %s", i, ds[i].ID, again[i].ID)
		}
	}
	for _, d := range ds {
		a, final := w.ch.Send(ctx, d)
		if a.Status != 250 || final || a.Error != "" || !strings.HasPrefix(a.Response, "250 ") || !strings.Contains(a.Response, "queued as") {
			t.Fatalf("send %s: %+v final %v", d.EndpointID, a, final)
		}
	}
	got := w.mp.WaitFor(t, 2)
	byTo := map[string]mailpit.Summary{}
	for _, m := range got {
		byTo[m.To[0].Address] = m
	}
	ana, ok := byTo["ana@example.com"]
	if !ok || len(got) != 2 || byTo["bo@example.com"].ID == "" {
		t.Fatalf("received %+v, want one mail each to ana@ and bo@", got)
	}
	if ana.Subject != "Approval needed: refundOrder for refunds (end user demo-user)" || ana.From.Address != "stead@stead.example.com" || ana.To[0].Name != "Ana Diaz" {
		t.Errorf("Ana's mail: %+v", ana)
	}
	full := w.mp.Message(t, ana.ID)
	var token string
	for _, part := range []string{full.Text, full.HTML} {
		for _, want := range []string{"refunds", "refundOrder", "demo-user", "refundOrder requires approval", "2026-11-29 12:15:00 UTC (in 15m)",
			"run_1", "o-1001", "https://stead.example.com/review/rvw_", "https://stead.example.com/console/#/approvals/apr_1", "Ana Diaz (approver)"} {
			if !strings.Contains(part, want) {
				t.Errorf("Ana's mail does not say %q:\n%s", want, part)
			}
		}
		_, rest, _ := strings.Cut(part, "https://stead.example.com/review/")
		tok, _, _ := strings.Cut(rest, `"`)
		tok = strings.Fields(tok)[0]
		if token != "" && tok != token {
			t.Errorf("the text and HTML links differ: %s / %s", token, tok)
		}
		token = tok
	}
	if !strings.Contains(full.Text, `"note": "<script>alert(1)</script>"`) || strings.Contains(full.HTML, "<script>") ||
		!strings.Contains(full.HTML, "&lt;script&gt;") {
		t.Errorf("the input is not shown as text (verbatim in the text part, escaped in the HTML):\n%s\n%s", full.Text, full.HTML)
	}
	r, err := email.OpenReview(ctx, token, func(context.Context, string) ([]byte, error) { return w.st.project.SigningKey, nil })
	want := email.Review{ProjectID: "prj_a", ApprovalID: "apr_1", MemberID: "mem_ana", InputDigest: pending().InputDigest, ExpiresAt: now.Add(15 * time.Minute)}
	if err != nil || r != want {
		t.Errorf("Ana's link asserts %+v (%v), want %+v", r, err, want)
	}

	// Another try of Ana's mail: the same Message-ID, so her mail client
	// shows one.
	if a, _ := w.ch.Send(ctx, ds[0]); a.Status != 250 {
		t.Fatalf("second try: %+v", a)
	}
	msgs := w.mp.WaitFor(t, 3)
	if msgs[0].MessageID != ana.MessageID || !strings.HasPrefix(ana.MessageID, ds[0].ID+"@") {
		t.Errorf("Message-IDs %q and %q, want both %s@…", msgs[0].MessageID, ana.MessageID, ds[0].ID)
	}

	for _, typ := range []string{"approval.approved", "approval.vote", "run.succeeded"} {
		ev := request
		ev.Type = typ
		if ds, err := w.ch.Deliveries(ctx, run, ev, data); len(ds) != 0 || err != nil {
			t.Errorf("%s mails %d (%v)", typ, len(ds), err)
		}
	}
	// Settled since the request: nobody is mailed, and a try still
	// pending sends nothing, for good.
	a := pending()
	a.Status, a.DecidedBy = approvals.Approved, "key_x"
	w.st.set(a)
	if ds, err := w.ch.Deliveries(ctx, run, request, data); len(ds) != 0 || err != nil {
		t.Errorf("a settled approval mails %d (%v)", len(ds), err)
	}
	if att, final := w.ch.Send(ctx, ds[1]); !final || att.Error != "not sent: approval apr_1 is approved" {
		t.Errorf("a try after the decision: %+v final %v", att, final)
	}
	// Deleted since the request: the same.
	w.st.mu.Lock()
	delete(w.st.approvals, "apr_1")
	w.st.mu.Unlock()
	if att, final := w.ch.Send(ctx, ds[1]); !final || att.Error != "not sent: approval apr_1 no longer exists" {
		t.Errorf("a try after the approval was deleted: %+v final %v", att, final)
	}
	if n := len(w.mp.Messages(t)); n != 3 {
		t.Errorf("mailpit has %d messages, want 3", n)
	}
	// Past its deadline though not yet swept: nobody.
	a = pending()
	w.st.set(a)
	expired, _ := email.New(email.Options{SMTP: email.Config{Host: "127.0.0.1", Port: 1, TLS: email.TLSNone, From: "s@x.io"}, Store: w.st,
		PublicURL: "https://stead.example.com", Now: func() time.Time { return a.ExpiresAt }})
	if ds, err := expired.Deliveries(ctx, run, request, data); len(ds) != 0 || err != nil {
		t.Errorf("an expired approval mails %d (%v)", len(ds), err)
	}
}

// TestSendOutcomes: what the SMTP server answers becomes the attempt,
// over each TLS mode, and decides whether the Notifier tries again.
func TestSendOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cert := mailpit.NewCert(t)
	users := map[string]string{"stead": "s3cret"}
	for _, tc := range []struct {
		name   string
		cfg    email.Config
		server mailpit.Options
		status int
		final  bool
		err    string
	}{
		{name: "plain", status: 250},
		{name: "STARTTLS with credentials", cfg: email.Config{TLS: email.TLSStartTLS, Username: "stead", Password: "s3cret"},
			server: mailpit.Options{TLS: cert, RequireSTARTTLS: true, Users: users}, status: 250},
		{name: "implicit TLS with credentials", cfg: email.Config{TLS: email.TLSImplicit, Username: "stead", Password: "s3cret"},
			server: mailpit.Options{TLS: cert, RequireTLS: true, Users: users}, status: 250},
		{name: "a wrong password is tried again", cfg: email.Config{TLS: email.TLSStartTLS, Username: "stead", Password: "wrong"},
			server: mailpit.Options{TLS: cert, RequireSTARTTLS: true, Users: users}, status: 535, err: "AUTH: the server answered 535"},
		{name: "STARTTLS asked of a server without it sends nothing", cfg: email.Config{TLS: email.TLSStartTLS},
			err: "does not offer STARTTLS; nothing was sent in the clear"},
		{name: "a server that requires STARTTLS refuses plain mail", server: mailpit.Options{TLS: cert, RequireSTARTTLS: true},
			status: 530, err: "MAIL FROM:<stead@stead.example.com>: the server answered 530"},
		{name: "an untrusted certificate is refused", cfg: email.Config{TLS: email.TLSImplicit},
			server: mailpit.Options{TLS: mailpit.NewCert(t), RequireTLS: true}, err: "TLS with 127.0.0.1"},
		{name: "a refused recipient is final", server: mailpit.Options{AllowedRecipients: `@elsewhere\.org$`},
			status: 550, final: true, err: "RCPT TO:<ana@example.com>: the server answered 550"},
		{name: "a recipient deferred is tried again", server: mailpit.Options{Chaos: "Recipient:451:100"},
			status: 451, err: "RCPT TO:<ana@example.com>: the server answered 451"},
		{name: "a recipient refused with 500 is final", server: mailpit.Options{Chaos: "Recipient:500:100"},
			status: 500, final: true, err: "RCPT TO:<ana@example.com>: the server answered 500"},
		{name: "credentials for a server that offers no AUTH are not sent", cfg: email.Config{TLS: email.TLSStartTLS, Username: "stead", Password: "s3cret"},
			server: mailpit.Options{TLS: cert}, err: "does not offer AUTH, and credentials are configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			if cfg.TLS != email.TLSNone && cfg.TLS != "" && tc.name != "an untrusted certificate is refused" {
				cfg.TLSConfig = cert.ClientTLS()
			}
			w := setup(t, cfg, tc.server)
			ds, err := w.ch.Deliveries(ctx, run, request, data)
			if err != nil || len(ds) == 0 {
				t.Fatal(err)
			}
			a, final := w.ch.Send(ctx, ds[0])
			if a.Status != tc.status || final != tc.final || !strings.Contains(a.Error, tc.err) || (tc.err == "") != (a.Error == "") {
				t.Fatalf("attempt %+v final %v; want status %d final %v error containing %q", a, final, tc.status, tc.final, tc.err)
			}
			if a.At != now || a.LatencyMs < 0 {
				t.Errorf("attempt at %s, latency %d", a.At, a.LatencyMs)
			}
			if cfg.TLSConfig != nil && cfg.TLSConfig.ServerName != "" {
				t.Errorf("sending set ServerName %q in the TLS configuration it was given", cfg.TLSConfig.ServerName)
			}
			n := len(w.mp.Messages(t))
			if want := map[bool]int{true: 1, false: 0}[tc.status == 250]; n != want {
				t.Errorf("mailpit received %d messages, want %d", n, want)
			}
		})
	}
	// Nothing listening: no status, tried again.
	w := setup(t, email.Config{Host: "127.0.0.1", Port: closedPort(t)}, mailpit.Options{})
	ds, _ := w.ch.Deliveries(ctx, run, request, data)
	if a, final := w.ch.Send(ctx, ds[0]); a.Status != 0 || final || !strings.Contains(a.Error, "connect to 127.0.0.1:") {
		t.Errorf("no server: %+v final %v", a, final)
	}
	// A body that is not a mail cannot be sent, ever.
	if a, final := w.ch.Send(ctx, store.Delivery{ID: "msg_x", Body: json.RawMessage(`{"nope":1}`)}); !final || a.Error != "the delivery's body is not a mail; it cannot be sent" {
		t.Errorf("a bad body: %+v final %v", a, final)
	}
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	st := &memStore{}
	good := email.Config{Host: "127.0.0.1", Port: 1025, TLS: email.TLSNone, From: "stead@localhost"}
	for _, tc := range []struct {
		o    email.Options
		want string
	}{
		{email.Options{SMTP: email.Config{Host: "h", Port: 1, TLS: email.TLSNone}, Store: st, PublicURL: "http://x"}, "from is missing"},
		{email.Options{SMTP: good, PublicURL: "http://x"}, "Store is required"},
		{email.Options{SMTP: good, Store: st}, `the public URL "" must be an http or https URL`},
		{email.Options{SMTP: good, Store: st, PublicURL: "stead.example.com"}, `the public URL "stead.example.com" must be an http or https URL`},
	} {
		if _, err := email.New(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New = %v, want %q", err, tc.want)
		}
	}
	if ch, err := email.New(email.Options{SMTP: good, Store: st, PublicURL: "http://127.0.0.1:8720"}); err != nil || ch.Name() != "email" {
		t.Errorf("New: %v", err)
	}
}

// TestNotifySettings: a member's email setting chooses their mail. Ana
// (unset: all) gets the request and its reminder; Bo ("requests") the
// request only; Ed ("none") nothing, though he may decide. What is sent
// is what arrives in mailpit.
func TestNotifySettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := setup(t, email.Config{}, mailpit.Options{})
	w.st.members = slices.Clone(members)
	for i, m := range w.st.members {
		switch m.ID {
		case "mem_bo":
			w.st.members[i].Notify.Email = store.EmailRequests
		case "mem_ed":
			w.st.members[i].Notify.Email = store.EmailNone
		}
	}
	open := pending()
	open.SeparateFrom = "" // Ed, the requester, may decide too
	w.st.set(open)
	reminder := request
	reminder.Type, reminder.Seq = "approval.reminder", 5
	for _, tc := range []struct {
		ev   store.Event
		want []string
	}{
		{request, []string{"email:mem_ana", "email:mem_bo"}},
		{reminder, []string{"email:mem_ana"}},
	} {
		ds, err := w.ch.Deliveries(ctx, run, tc.ev, data)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range ds {
			got = append(got, d.EndpointID)
			if a, final := w.ch.Send(ctx, d); a.Status != 250 || final {
				t.Fatalf("send %s: %+v final %v", d.EndpointID, a, final)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s mails %v, want %v", tc.ev.Type, got, tc.want)
		}
	}
	var to []string
	for _, m := range w.mp.WaitFor(t, 3) {
		to = append(to, m.To[0].Address)
	}
	slices.Sort(to)
	if want := []string{"ana@example.com", "ana@example.com", "bo@example.com"}; !slices.Equal(to, want) {
		t.Errorf("mailpit received mail to %v, want %v", to, want)
	}
}

func TestWants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level store.EmailLevel
		want  map[string]bool
	}{
		{"", map[string]bool{"approval.requested": true, "approval.reminder": true, "approval.escalated": true, "approval.expiring": true}},
		{store.EmailAll, map[string]bool{"approval.requested": true, "approval.reminder": true, "approval.escalated": true, "approval.expiring": true}},
		{store.EmailRequests, map[string]bool{"approval.requested": true}},
		{store.EmailNone, map[string]bool{}},
		{"weekly", map[string]bool{}}, // refused by Member.Validate; mails nothing if met
	} {
		m := member("mem_ana", "Ana Diaz", "ana@example.com", approvals.RoleApprover)
		m.Notify.Email = tc.level
		for _, typ := range email.Mailed {
			if got := email.Wants(m, typ); got != tc.want[typ] {
				t.Errorf("Wants(%q, %s) = %v, want %v", tc.level, typ, got, tc.want[typ])
			}
		}
	}
}

// TestDeliveriesNone: an event whose approval is of another project than
// its run, or does not exist, mails nobody and is no error.
func TestDeliveriesNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, ch := channel(t, email.Config{})
	other := run
	other.ProjectID = "prj_b"
	if ds, err := ch.Deliveries(ctx, other, request, data); len(ds) != 0 || err != nil {
		t.Errorf("a run of prj_b naming prj_a's approval mails %d (%v)", len(ds), err)
	}
	gone := data
	gone.ApprovalID = "apr_gone"
	if ds, err := ch.Deliveries(ctx, run, request, gone); len(ds) != 0 || err != nil {
		t.Errorf("an approval that does not exist mails %d (%v)", len(ds), err)
	}
}

// TestMailContent: what the mail says in cases TestDeliveriesAndSend does
// not show.
func TestMailContent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := func(t *testing.T, a approvals.Approval, d notify.Data) email.Message {
		t.Helper()
		st, ch := channel(t, email.Config{})
		st.set(a)
		ds, err := ch.Deliveries(ctx, run, request, d)
		if err != nil || len(ds) == 0 {
			t.Fatalf("deliveries %v, %v", ds, err)
		}
		return mailOf(t, ds[0])
	}
	t.Run("the console link defaults to the approval's page under the public URL", func(t *testing.T) {
		t.Parallel()
		m := first(t, pending(), notify.Data{ApprovalID: "apr_1"})
		const want = "https://stead.example.com/console/#/approvals/apr_1"
		if !strings.Contains(m.Text, "Or open it in the console: "+want+"\n") || !strings.Contains(m.HTML, `href="`+want+`"`) {
			t.Errorf("the mail does not link %s:\n%s\n%s", want, m.Text, m.HTML)
		}
	})
	t.Run("without an end user the subject names none", func(t *testing.T) {
		t.Parallel()
		a := pending()
		a.EndUserID = ""
		if m := first(t, a, data); m.Subject != "Approval needed: refundOrder for refunds" || strings.Contains(m.Text, "End user") {
			t.Errorf("subject %q, text:\n%s", m.Subject, m.Text)
		}
	})
	t.Run("a quorum's progress", func(t *testing.T) {
		t.Parallel()
		a := pending()
		a.Requirements = []approvals.Requirement{{Group: "finance", Min: 2, Eligible: []approvals.Voter{{Member: "mem_ana", Name: "Ana Diaz"}, {Member: "mem_bo", Name: "Bo Li"}}}}
		progress := a.ProgressText()
		m := first(t, a, data)
		if progress == "" || !strings.Contains(m.Text, "Approvers:  "+progress+"\n") || !strings.Contains(m.HTML, progress) {
			t.Errorf("the mail does not say the approvers' progress %q:\n%s\n%s", progress, m.Text, m.HTML)
		}
	})
	t.Run("a long input is cut, between characters", func(t *testing.T) {
		t.Parallel()
		a := pending()
		// Indented, the input is 13 bytes of `{\n  "note": "` and then é's
		// of 2 bytes: its 8 KiB end in the middle of one.
		a.Input = json.RawMessage(`{"note":"` + strings.Repeat("é", 5000) + `"}`)
		m := first(t, a, data)
		for part, body := range map[string]string{"text": m.Text, "HTML": m.HTML} {
			if !strings.Contains(body, "… (cut here; the review page shows all of it)") || strings.Count(body, "é") != (8<<10-13)/2 ||
				strings.ContainsRune(body, utf8.RuneError) {
				t.Errorf("the %s part does not show the input's first 8 KiB, whole characters, and say where it is cut:\n%s", part, body)
			}
		}
	})
}

// TestSummary: the deadline as a mail or the review page words it, and a
// settled approval's outcome: by whom only when someone decided it.
func TestSummary(t *testing.T) {
	t.Parallel()
	s := email.SummaryOf(pending())
	for at, want := range map[time.Time]string{
		s.ExpiresAt.Add(-90 * time.Second): "2026-11-29 12:15:00 UTC (in 1m)",
		s.ExpiresAt:                        "2026-11-29 12:15:00 UTC (expired)",
	} {
		if got := s.Expires(at); got != want {
			t.Errorf("Expires(%s) = %q, want %q", at.Format(time.TimeOnly), got, want)
		}
	}
	if !s.Pending || s.Outcome != "" {
		t.Errorf("a pending approval: Pending %v, Outcome %q", s.Pending, s.Outcome)
	}
	for _, tc := range []struct {
		status approvals.Status
		want   string
	}{
		{approvals.Approved, "approved by Ana Diaz (key_ana) at 2026-11-29 12:03:00 UTC"},
		{approvals.Denied, "denied by Ana Diaz (key_ana) at 2026-11-29 12:03:00 UTC"},
		{approvals.Expired, "expired at 2026-11-29 12:03:00 UTC"},
		{approvals.Cancelled, "cancelled at 2026-11-29 12:03:00 UTC"},
	} {
		a := pending()
		a.Status, a.DecidedBy, a.DecidedByName, a.DecidedAt = tc.status, "key_ana", "Ana Diaz", now.Add(3*time.Minute)
		if s := email.SummaryOf(a); s.Pending || s.Outcome != tc.want {
			t.Errorf("%s: Pending %v, Outcome %q; want %q", tc.status, s.Pending, s.Outcome, tc.want)
		}
	}
}

// rawMessage is a message as mailpit received it, before any decoding.
func rawMessage(t *testing.T, mp *mailpit.Server, id string) *mail.Message {
	t.Helper()
	b := rawBytes(t, mp, id)
	m, err := mail.ReadMessage(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the message does not parse: %v\n%s", err, b)
	}
	return m
}

// rawBytes returns a received message as the server received it.
func rawBytes(t *testing.T, mp *mailpit.Server, id string) []byte {
	t.Helper()
	client := &http.Client{Timeout: mailpit.Wait}
	resp, err := client.Get(mp.API + "/api/v1/message/" + url.PathEscape(id) + "/raw")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET the raw message %s: %s, %v", id, resp.Status, err)
	}
	return b
}

// sendOne sends the first mail of a pending approval for endUser and
// returns its world, the delivery's id and what mailpit received.
func sendOne(t *testing.T, endUser string) (*world, string, []mailpit.Summary) {
	t.Helper()
	ctx := context.Background()
	w := setup(t, email.Config{}, mailpit.Options{})
	a := pending()
	a.EndUserID = endUser
	w.st.set(a)
	ds, err := w.ch.Deliveries(ctx, run, request, data)
	if err != nil || len(ds) == 0 {
		t.Fatalf("deliveries %v, %v", ds, err)
	}
	if att, _ := w.ch.Send(ctx, ds[0]); att.Status != 250 {
		t.Fatalf("send: %+v", att)
	}
	return w, ds[0].ID, w.mp.WaitFor(t, 1)
}

// TestLongSubjectFolded: an end user's id may be 256 bytes of any
// script, and its encoded words (three characters a byte) would make
// the Subject line longer than the 998 characters a mail's line may have
// (RFC 5322 2.1.1): it is folded between its encoded words, and reads
// back whole.
func TestLongSubjectFolded(t *testing.T) {
	t.Parallel()
	endUser := strings.Repeat("界", 85) // 255 bytes
	w, _, got := sendOne(t, endUser)
	b := rawBytes(t, w.mp, got[0].ID)
	for i, l := range strings.Split(string(b), "\r\n") {
		if len(l) > 998 {
			t.Errorf("line %d of the mail has %d characters, over 998: %.80s…", i+1, len(l), l)
		}
	}
	msg := rawMessage(t, w.mp, got[0].ID)
	want := "Approval needed: refundOrder for refunds (end user " + endUser + ")"
	if dec, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); err != nil || dec != want {
		t.Errorf("the subject reads back as %q (%v), want %q", dec, err, want)
	}
}

// TestMessageAsSent: the mail on the wire. The end user's id (which the
// agent's caller chooses) adds no header and no line: its line breaks are
// spaces, and the subject, not ASCII, is an encoded word. The Date is the
// channel's clock, the Message-ID the delivery's id at the sender's
// domain, Auto-Submitted keeps auto-responders from answering; the body
// is multipart/alternative, text then HTML (the part clients prefer),
// each UTF-8 in quoted-printable lines of at most 76 characters.
func TestMessageAsSent(t *testing.T) {
	t.Parallel()
	w, delivery, got := sendOne(t, "José\r\nBcc: eve@example.com")
	const subject = "Approval needed: refundOrder for refunds (end user José  Bcc: eve@example.com)"
	if len(got) != 1 || got[0].Subject != subject {
		t.Errorf("received %+v, want one mail with the subject %q", got, subject)
	}
	msg := rawMessage(t, w.mp, got[0].ID)
	raw := msg.Header.Get("Subject")
	if dec, err := new(mime.WordDecoder).DecodeHeader(raw); err != nil || dec != subject || strings.ContainsFunc(raw, func(r rune) bool { return r > '~' }) {
		t.Errorf("the Subject header is %q (%q, %v), want %q as encoded words in ASCII", raw, dec, err, subject)
	}
	for k, want := range map[string]string{
		"Date":           "Sun, 29 Nov 2026 12:00:00 +0000",
		"Message-ID":     "<" + delivery + "@stead.example.com>",
		"Auto-Submitted": "auto-generated",
		"Bcc":            "",
	} {
		if got := msg.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	typ, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || typ != "multipart/alternative" {
		t.Fatalf("Content-Type %q (%v), want multipart/alternative", msg.Header.Get("Content-Type"), err)
	}
	var types []string
	parts := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := parts.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ct := p.Header.Get("Content-Type")
		types = append(types, ct)
		if cte := p.Header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
			t.Errorf("the %s part is %q, want quoted-printable", ct, cte)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(strings.Split(string(body), "\r\n"), func(l string) bool { return len(l) > 76 }); i >= 0 {
			t.Errorf("line %d of the %s part is longer than 76 characters:\n%s", i+1, ct, body)
		}
		text, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
		if err != nil {
			t.Errorf("the %s part is not quoted-printable: %v", ct, err)
		}
		// (In the HTML a line break in a cell is a space.)
		if ct == "text/plain; charset=utf-8" && (!bytes.Contains(text, []byte("End user:  José  Bcc: eve@example.com\r\n")) || bytes.Contains(text, []byte("\nBcc:"))) {
			t.Errorf("the text part does not show the end user on one line:\n%s", text)
		}
	}
	if want := []string{"text/plain; charset=utf-8", "text/html; charset=utf-8"}; !slices.Equal(types, want) {
		t.Errorf("the parts are %q, want %q", types, want)
	}
}

// scripted is an SMTP server on loopback that takes one mail and ends its
// DATA with reply. It stands in for a real server where mailpit cannot be
// made to answer so: a message refused after DATA, a reply of 1 KiB.
func scripted(t *testing.T, reply string) (host string, port int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := textproto.NewConn(c)
		_ = tc.PrintfLine("220 scripted ESMTP")
		for {
			line, err := tc.ReadLine()
			if err != nil {
				return
			}
			switch verb, _, _ := strings.Cut(strings.ToUpper(line), " "); verb {
			case "EHLO", "HELO", "MAIL", "RCPT", "RSET", "NOOP":
				_ = tc.PrintfLine("250 ok")
			case "DATA":
				_ = tc.PrintfLine("354 go on")
				if _, err := tc.ReadDotBytes(); err != nil {
					return
				}
				_ = tc.PrintfLine("%s", reply)
			case "QUIT":
				_ = tc.PrintfLine("221 bye")
				return
			default:
				_ = tc.PrintfLine("500 unknown command")
			}
		}
	}()
	return "127.0.0.1", l.Addr().(*net.TCPAddr).Port
}

// TestSendVerdict: the server's answer to the message itself. Refused
// (5xx) is final, deferred (4xx) is tried again, and the attempt keeps
// the reply, its first 1024 bytes cut between characters.
func TestSendVerdict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	long := "250 " + strings.Repeat("x", 1019) // 1023 bytes, then a 2-byte é across the 1024th
	for _, tc := range []struct {
		reply, response string
		status          int
		final           bool
		err             string
	}{
		{"554 5.6.0 message refused", "554 5.6.0 message refused", 554, true, "end of DATA: the server answered 554 5.6.0 message refused"},
		{"452 4.3.1 out of space", "452 4.3.1 out of space", 452, false, "end of DATA: the server answered 452 4.3.1 out of space"},
		{long + "é and more", long, 250, false, ""},
	} {
		host, port := scripted(t, tc.reply)
		_, ch := channel(t, email.Config{Host: host, Port: port})
		ds, err := ch.Deliveries(ctx, run, request, data)
		if err != nil || len(ds) == 0 {
			t.Fatalf("deliveries %v, %v", ds, err)
		}
		a, final := ch.Send(ctx, ds[0])
		if a.Status != tc.status || final != tc.final || a.Error != tc.err || a.Response != tc.response {
			t.Errorf("the server ends DATA with %.40q…: attempt %+v final %v; want status %d final %v error %q response %.40q…",
				tc.reply, a, final, tc.status, tc.final, tc.err, tc.response)
		}
	}
}
