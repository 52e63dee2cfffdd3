// Package slacktest is a stand-in for Slack, for tests: a Web API on
// loopback that holds every request to Slack's documented shapes and
// records it, and the interactivity payloads Slack sends, signed the way
// Slack signs them.
//
// The Web API (Server) serves chat.postMessage, chat.update,
// chat.postEphemeral and views.open. Each request must be a POST to
// /api/<method> with the bot token as "Authorization: Bearer xoxb-…",
// form-encoded (blocks as a JSON string) or JSON, with the method's
// required arguments; blocks are checked against Block Kit's documented
// limits (at most 50 blocks in a message and 100 in a modal; header text
// plain_text of at most 150 characters; section text at most 3000, at most
// 10 fields of at most 2000; at most 10 context elements and 25 actions;
// buttons with plain_text of at most 75, action_id 255, value 2000, url
// 3000, style primary or danger; unique block ids; text objects plain_text
// or mrkdwn, not empty, emoji only on plain_text; no unknown field) and a
// modal's title, submit and close (plain_text, at most 24), callback_id
// and private_metadata (at most 3000). A request that breaks one is
// answered as Slack answers it ({"ok":false,"error":…}) and recorded as a
// problem: every problem fails the test at its end unless the test takes
// it (TakeProblems).
package slacktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Server is the stand-in Web API.
type Server struct {
	// URL is the API's base URL, as Stead's Slack app takes it
	// (STEAD_SLACK_API_URL): http://127.0.0.1:port/api/.
	URL string
	// Token is the bot token it accepts; Channel the id of the one channel
	// it knows (the bot is a member of it).
	Token, Channel string

	mu        sync.Mutex
	seq       int
	requests  []Request
	messages  []*Message
	ephemeral []Ephemeral
	views     []View
	triggers  map[string]bool // issued trigger ids → used
	fail      map[string]string
	problems  []string
}

// Request is one Web API call as received.
type Request struct {
	Method string
	// Args are the arguments, form fields or JSON members; a form's blocks
	// and view are decoded from their JSON.
	Args map[string]any
	// Error is Slack's error code the stand-in answered ("" for ok).
	Error string
}

// Message is a message in the channel, as last posted or updated.
type Message struct {
	Channel, TS, Text string
	Blocks            []any
	// Updates counts the chat.update calls it had.
	Updates int
}

// Ephemeral is a chat.postEphemeral: a message only User sees.
type Ephemeral struct {
	Channel, User, Text string
}

// View is a modal opened with views.open.
type View struct {
	TriggerID string
	View      map[string]any
}

// New starts a stand-in on loopback, stopped when the test ends; a test
// fails at its end if a request broke Slack's shapes.
func New(t testing.TB, token, channel string) *Server {
	t.Helper()
	s := &Server{Token: token, Channel: channel, triggers: map[string]bool{}, fail: map[string]string{}}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = hs.URL + "/api/"
	t.Cleanup(func() {
		hs.Close()
		for _, p := range s.TakeProblems() {
			t.Errorf("slack stand-in: %s", p)
		}
	})
	return s
}

// Requests are the calls received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Messages are the channel's messages, oldest first (copies).
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	for i, m := range s.messages {
		out[i] = *m
	}
	return out
}

// Ephemerals are the ephemeral messages sent so far.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ephemeral)
}

// Views are the modals opened so far.
func (s *Server) Views() []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.views)
}

// TakeProblems returns the requests' breaches of Slack's shapes so far and
// forgets them.
func (s *Server) TakeProblems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.problems
	s.problems = nil
	return p
}

// FailNext makes the next call of method answer {"ok":false,"error":code}.
func (s *Server) FailNext(method, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = code
}

// answer writes Slack's answer: HTTP 200 with {"ok":…}.
func answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func refuse(code string) map[string]any { return map[string]any{"ok": false, "error": code} }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	args, code, problem := s.read(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	req := Request{Method: method, Args: args}
	var out map[string]any
	switch {
	case problem != "":
		s.problems = append(s.problems, method+": "+problem)
		out = refuse(code)
	case s.fail[method] != "":
		out = refuse(s.fail[method])
		delete(s.fail, method)
	default:
		out = s.call(method, args)
	}
	if e, _ := out["error"].(string); e != "" {
		req.Error = e
	}
	s.requests = append(s.requests, req)
	answer(w, out)
}

// read checks what every method needs (POST, the bearer token, a content
// type Slack takes) and decodes the arguments; a problem comes with the
// error code Slack answers it with.
func (s *Server) read(r *http.Request) (args map[string]any, code, problem string) {
	if r.Method != http.MethodPost {
		return nil, "invalid_request", "the Web API is called with POST here (got " + r.Method + ")"
	}
	switch auth := r.Header.Get("Authorization"); {
	case auth == "":
		return nil, "not_authed", "no Authorization header: the bot token goes in Authorization: Bearer xoxb-…"
	case !strings.HasPrefix(auth, "Bearer xoxb-"):
		return nil, "invalid_auth", fmt.Sprintf("Authorization %q is not Bearer and a bot token (xoxb-…)", clip(auth, 20))
	case auth != "Bearer "+s.Token:
		return nil, "invalid_auth", "the bearer token is not the app's bot token"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, "invalid_request", err.Error()
	}
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, "invalid_request", fmt.Sprintf("content type %q is not one", r.Header.Get("Content-Type"))
	}
	args = map[string]any{}
	switch ct {
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, "invalid_form_data", "the form does not parse: " + err.Error()
		}
		for k, vs := range form {
			if len(vs) != 1 {
				return nil, "invalid_arguments", "argument " + k + " is sent more than once"
			}
			args[k] = vs[0]
		}
		if _, ok := args["token"]; ok {
			return nil, "invalid_arguments", "the token is in the form body as well as the header: send it once, in the header"
		}
		for _, k := range []string{"blocks", "view"} {
			if raw, ok := args[k].(string); ok {
				var v any
				if err := json.Unmarshal([]byte(raw), &v); err != nil {
					return nil, "invalid_arguments", k + " is not JSON: " + err.Error()
				}
				args[k] = v
			}
		}
	case "application/json":
		if err := json.Unmarshal(body, &args); err != nil {
			return nil, "invalid_json", "the body is not a JSON object: " + err.Error()
		}
	default:
		return nil, "invalid_request", "content type " + ct + " is neither application/x-www-form-urlencoded nor application/json"
	}
	return args, "", ""
}

// call runs one method; the lock is held.
func (s *Server) call(method string, args map[string]any) map[string]any {
	str := func(k string) string { v, _ := args[k].(string); return v }
	problem := func(code, format string, a ...any) map[string]any {
		s.problems = append(s.problems, method+": "+fmt.Sprintf(format, a...))
		return refuse(code)
	}
	checkMessage := func() map[string]any {
		blocks, has := args["blocks"]
		if str("text") == "" && !has {
			return problem("no_text", "text or blocks is required")
		}
		if utf8.RuneCountInString(str("text")) > 40000 {
			return problem("msg_too_long", "text is over 40000 characters")
		}
		if has {
			if ps := checkBlocks(blocks, 50, false); len(ps) > 0 {
				return problem("invalid_blocks", "%s", strings.Join(ps, "; "))
			}
		}
		return nil
	}
	switch method {
	case "chat.postMessage":
		if str("channel") != s.Channel {
			return problem("channel_not_found", "channel %q is not the channel the bot is in (%s)", str("channel"), s.Channel)
		}
		if bad := checkMessage(); bad != nil {
			return bad
		}
		s.seq++
		m := &Message{Channel: s.Channel, TS: fmt.Sprintf("%d.%06d", 1764417600+s.seq, s.seq), Text: str("text")}
		m.Blocks, _ = args["blocks"].([]any)
		s.messages = append(s.messages, m)
		return map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "message": map[string]any{"type": "message", "text": m.Text, "ts": m.TS, "blocks": m.Blocks}}
	case "chat.update":
		if str("channel") == "" || str("ts") == "" {
			return problem("invalid_arguments", "channel and ts are required")
		}
		i := slices.IndexFunc(s.messages, func(m *Message) bool { return m.Channel == str("channel") && m.TS == str("ts") })
		if i < 0 {
			return problem("message_not_found", "no message %s in %s", str("ts"), str("channel"))
		}
		if bad := checkMessage(); bad != nil {
			return bad
		}
		m := s.messages[i]
		m.Text, m.Updates = str("text"), m.Updates+1
		m.Blocks, _ = args["blocks"].([]any)
		return map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "text": m.Text}
	case "chat.postEphemeral":
		if str("channel") != s.Channel {
			return problem("channel_not_found", "channel %q is not the channel the bot is in (%s)", str("channel"), s.Channel)
		}
		if str("user") == "" {
			return problem("user_not_in_channel", "user is required")
		}
		if bad := checkMessage(); bad != nil {
			return bad
		}
		s.ephemeral = append(s.ephemeral, Ephemeral{Channel: str("channel"), User: str("user"), Text: str("text")})
		s.seq++
		return map[string]any{"ok": true, "message_ts": fmt.Sprintf("%d.%06d", 1764417600+s.seq, s.seq)}
	case "views.open":
		trigger := str("trigger_id")
		used, issued := s.triggers[trigger]
		switch {
		case trigger == "" || !issued:
			return problem("invalid_trigger_id", "trigger_id %q is not one Slack gave in a payload", trigger)
		case used:
			return problem("expired_trigger_id", "trigger_id %q was used already", trigger)
		}
		view, ok := args["view"].(map[string]any)
		if !ok {
			return problem("invalid_arguments", "view is required, an object")
		}
		if ps := checkModal(view); len(ps) > 0 {
			return problem("invalid_arguments", "%s", strings.Join(ps, "; "))
		}
		s.triggers[trigger] = true
		s.views = append(s.views, View{TriggerID: trigger, View: view})
		s.seq++
		return map[string]any{"ok": true, "view": map[string]any{"id": fmt.Sprintf("V%06d", s.seq), "type": "modal"}}
	}
	return problem("unknown_method", "%s is not a method this stand-in serves", method)
}

// trigger issues a trigger id, as Slack puts in a payload.
func (s *Server) trigger() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := fmt.Sprintf("%d.%d.trg%06d", 1764417600+s.seq, 98765, s.seq)
	s.triggers[id] = false
	return id
}

// Fields each block type may have (Block Kit's reference).
var blockFields = map[string][]string{
	"header":  {"type", "block_id", "text"},
	"section": {"type", "block_id", "text", "fields", "accessory", "expand"},
	"context": {"type", "block_id", "elements"},
	"actions": {"type", "block_id", "elements"},
	"divider": {"type", "block_id"},
	"input":   {"type", "block_id", "label", "element", "hint", "optional", "dispatch_action"},
}

// checkBlocks holds a list of blocks to Block Kit's limits; inputs are
// allowed in modals only.
func checkBlocks(v any, max int, modal bool) []string {
	list, ok := v.([]any)
	if !ok {
		return []string{"blocks is not an array"}
	}
	var ps []string
	if len(list) > max {
		ps = append(ps, fmt.Sprintf("%d blocks, over the %d allowed", len(list), max))
	}
	ids := map[string]bool{}
	for i, raw := range list {
		b, ok := raw.(map[string]any)
		at := fmt.Sprintf("blocks[%d]", i)
		if !ok {
			ps = append(ps, at+" is not an object")
			continue
		}
		typ, _ := b["type"].(string)
		at += " (" + typ + ")"
		allowed, known := blockFields[typ]
		if !known || (typ == "input" && !modal) {
			ps = append(ps, at+": not a block type allowed here")
			continue
		}
		ps = append(ps, unknown(at, b, allowed)...)
		if id, ok := b["block_id"].(string); ok {
			if ids[id] || id == "" || utf8.RuneCountInString(id) > 255 {
				ps = append(ps, at+": block_id "+strconv.Quote(id)+" is empty, over 255 characters or not unique")
			}
			ids[id] = true
		}
		switch typ {
		case "header":
			ps = append(ps, text(at+".text", b["text"], "plain_text", 150, true)...)
		case "section":
			_, hasText := b["text"]
			fields, hasFields := b["fields"].([]any)
			if !hasText && !hasFields {
				ps = append(ps, at+": needs text or fields")
			}
			if hasText {
				ps = append(ps, text(at+".text", b["text"], "", 3000, true)...)
			}
			if hasFields {
				if len(fields) == 0 || len(fields) > 10 {
					ps = append(ps, fmt.Sprintf("%s: %d fields; 1 to 10 are allowed", at, len(fields)))
				}
				for j, f := range fields {
					ps = append(ps, text(fmt.Sprintf("%s.fields[%d]", at, j), f, "", 2000, true)...)
				}
			}
		case "context":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 10 {
				ps = append(ps, fmt.Sprintf("%s: %d elements; 1 to 10 are allowed", at, len(els)))
			}
			for j, e := range els {
				ps = append(ps, text(fmt.Sprintf("%s.elements[%d]", at, j), e, "", 3000, true)...)
			}
		case "actions":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 25 {
				ps = append(ps, fmt.Sprintf("%s: %d elements; 1 to 25 are allowed", at, len(els)))
			}
			actionIDs := map[string]bool{}
			for j, e := range els {
				ps = append(ps, button(fmt.Sprintf("%s.elements[%d]", at, j), e, actionIDs)...)
			}
		case "input":
			ps = append(ps, text(at+".label", b["label"], "plain_text", 2000, true)...)
			ps = append(ps, textInput(at+".element", b["element"])...)
		}
	}
	return ps
}

func unknown(at string, obj map[string]any, allowed []string) []string {
	var ps []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			ps = append(ps, fmt.Sprintf("%s: unknown field %q", at, k))
		}
	}
	slices.Sort(ps)
	return ps
}

// text checks a text object: its type (want, when set), not empty, at
// most max characters, emoji only on plain_text.
func text(at string, v any, want string, max int, required bool) []string {
	if v == nil && !required {
		return nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		return []string{at + ": a text object is required"}
	}
	ps := unknown(at, t, []string{"type", "text", "emoji", "verbatim"})
	typ, _ := t["type"].(string)
	s, _ := t["text"].(string)
	switch {
	case typ != "plain_text" && typ != "mrkdwn":
		ps = append(ps, fmt.Sprintf("%s: type %q is neither plain_text nor mrkdwn", at, typ))
	case want != "" && typ != want:
		ps = append(ps, fmt.Sprintf("%s: must be %s (got %s)", at, want, typ))
	case typ == "mrkdwn" && t["emoji"] != nil:
		ps = append(ps, at+": emoji is for plain_text only")
	}
	if n := utf8.RuneCountInString(s); n == 0 || n > max {
		ps = append(ps, fmt.Sprintf("%s: %d characters; 1 to %d are allowed", at, n, max))
	}
	return ps
}

func button(at string, v any, actionIDs map[string]bool) []string {
	b, ok := v.(map[string]any)
	if !ok || b["type"] != "button" {
		return []string{at + ": only buttons are expected here"}
	}
	ps := unknown(at, b, []string{"type", "text", "action_id", "url", "value", "style", "confirm", "accessibility_label"})
	ps = append(ps, text(at+".text", b["text"], "plain_text", 75, true)...)
	str := func(k string) string { s, _ := b[k].(string); return s }
	for k, max := range map[string]int{"action_id": 255, "value": 2000, "url": 3000} {
		if n := utf8.RuneCountInString(str(k)); n > max {
			ps = append(ps, fmt.Sprintf("%s: %s has %d characters; at most %d", at, k, n, max))
		}
	}
	if id := str("action_id"); id != "" {
		if actionIDs[id] {
			ps = append(ps, at+": action_id "+id+" is not unique in its block")
		}
		actionIDs[id] = true
	}
	if st := str("style"); st != "" && st != "primary" && st != "danger" {
		ps = append(ps, at+": style "+strconv.Quote(st)+" is neither primary nor danger")
	}
	if u := str("url"); u != "" {
		if p, err := url.Parse(u); err != nil || !p.IsAbs() {
			ps = append(ps, at+": url "+strconv.Quote(u)+" is not an absolute URL")
		}
	}
	return ps
}

func textInput(at string, v any) []string {
	e, ok := v.(map[string]any)
	if !ok || e["type"] != "plain_text_input" {
		return []string{at + ": a plain_text_input is expected"}
	}
	ps := unknown(at, e, []string{"type", "action_id", "placeholder", "initial_value", "multiline", "min_length", "max_length", "dispatch_action_config", "focus_on_load"})
	if id, _ := e["action_id"].(string); id == "" || utf8.RuneCountInString(id) > 255 {
		ps = append(ps, at+": action_id is required, at most 255 characters")
	}
	if n, ok := e["max_length"].(float64); ok && (n < 1 || n > 3000) {
		ps = append(ps, fmt.Sprintf("%s: max_length %v is not 1 to 3000", at, n))
	}
	return append(ps, text(at+".placeholder", e["placeholder"], "plain_text", 150, false)...)
}

// checkModal holds a views.open view to the modal's documented shape.
func checkModal(v map[string]any) []string {
	ps := unknown("view", v, []string{"type", "title", "blocks", "close", "submit", "private_metadata", "callback_id", "clear_on_close", "notify_on_close", "external_id", "submit_disabled"})
	if v["type"] != "modal" {
		ps = append(ps, fmt.Sprintf("view.type %v is not modal", v["type"]))
	}
	ps = append(ps, text("view.title", v["title"], "plain_text", 24, true)...)
	ps = append(ps, text("view.close", v["close"], "plain_text", 24, false)...)
	ps = append(ps, text("view.submit", v["submit"], "plain_text", 24, false)...)
	ps = append(ps, checkBlocks(v["blocks"], 100, true)...)
	if blocks, _ := v["blocks"].([]any); v["submit"] == nil && slices.ContainsFunc(blocks, func(b any) bool {
		m, _ := b.(map[string]any)
		return m["type"] == "input"
	}) {
		ps = append(ps, "view: a modal with an input block needs submit")
	}
	for k, max := range map[string]int{"private_metadata": 3000, "callback_id": 255} {
		if s, _ := v[k].(string); utf8.RuneCountInString(s) > max {
			ps = append(ps, fmt.Sprintf("view.%s is over %d characters", k, max))
		}
	}
	return ps
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// User is a Slack user who clicks: their workspace's id, their id and
// their display name (which Stead must never take as authority).
type User struct {
	Team, ID, Name string
}

// Sign makes the headers Slack sends with an interactivity request: the
// timestamp, and "v0=" and the hex HMAC-SHA256 of "v0:<timestamp>:<body>"
// keyed with the app's signing secret.
func Sign(secret string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	return h
}

// form is an interactivity request's body: payload=<JSON>.
func form(payload map[string]any) []byte {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	return []byte(url.Values{"payload": {string(b)}}.Encode())
}

func userOf(u User) map[string]any {
	return map[string]any{"id": u.ID, "username": strings.ToLower(strings.ReplaceAll(u.Name, " ", ".")), "name": u.Name, "team_id": u.Team}
}

// Click is the body of the block_actions payload Slack sends when u clicks
// the button actionID of message m (its value as the message carries it),
// with a fresh trigger id. It fails the test if m has no such button.
func (s *Server) Click(t testing.TB, u User, m Message, actionID string) []byte {
	t.Helper()
	var (
		btn     map[string]any
		blockID string
	)
	for _, raw := range m.Blocks {
		b, _ := raw.(map[string]any)
		els, _ := b["elements"].([]any)
		for _, e := range els {
			if el, _ := e.(map[string]any); el["action_id"] == actionID {
				btn = el
				blockID, _ = b["block_id"].(string)
			}
		}
	}
	if btn == nil {
		t.Fatalf("message %s has no button %s", m.TS, actionID)
	}
	if blockID == "" {
		blockID = "b" + m.TS // Slack names blocks the app left unnamed
	}
	action := map[string]any{"action_id": actionID, "block_id": blockID, "text": btn["text"], "type": "button", "action_ts": m.TS}
	for _, k := range []string{"value", "style", "url"} {
		if v, ok := btn[k]; ok {
			action[k] = v
		}
	}
	return form(map[string]any{
		"type": "block_actions", "user": userOf(u), "api_app_id": "A0STEAD", "token": "legacy-verification-token",
		"container":  map[string]any{"type": "message", "message_ts": m.TS, "channel_id": m.Channel, "is_ephemeral": false},
		"trigger_id": s.trigger(), "team": map[string]any{"id": u.Team, "domain": "example"},
		"enterprise": nil, "is_enterprise_install": false,
		"channel":      map[string]any{"id": m.Channel, "name": "approvals"},
		"message":      map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "blocks": m.Blocks, "bot_id": "B0STEAD"},
		"state":        map[string]any{"values": map[string]any{}},
		"response_url": "https://hooks.slack.com/actions/T0/1/stand-in",
		"actions":      []any{action},
	})
}

// Submit is the body of the view_submission payload Slack sends when u
// submits modal v with text typed into its one plain_text_input.
func (s *Server) Submit(t testing.TB, u User, v View, typed string) []byte {
	t.Helper()
	values := map[string]any{}
	blocks, _ := v.View["blocks"].([]any)
	for i, raw := range blocks {
		b, _ := raw.(map[string]any)
		if b["type"] != "input" {
			continue
		}
		el, _ := b["element"].(map[string]any)
		blockID, _ := b["block_id"].(string)
		if blockID == "" {
			blockID = fmt.Sprintf("b%d", i)
		}
		values[blockID] = map[string]any{el["action_id"].(string): map[string]any{"type": "plain_text_input", "value": typed}}
	}
	if len(values) == 0 {
		t.Fatalf("modal %v has no input", v.View["callback_id"])
	}
	view := map[string]any{
		"id": "V0STEAD", "team_id": u.Team, "type": "modal", "blocks": blocks,
		"private_metadata": v.View["private_metadata"], "callback_id": v.View["callback_id"],
		"state": map[string]any{"values": values}, "hash": "1764417600.abc", "title": v.View["title"],
		"close": v.View["close"], "submit": v.View["submit"], "app_id": "A0STEAD", "bot_id": "B0STEAD",
	}
	return form(map[string]any{
		"type": "view_submission", "team": map[string]any{"id": u.Team, "domain": "example"}, "user": userOf(u),
		"api_app_id": "A0STEAD", "token": "legacy-verification-token", "trigger_id": s.trigger(), "view": view,
		"response_urls": []any{}, "is_enterprise_install": false, "enterprise": nil,
	})
}
