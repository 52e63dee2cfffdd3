package api_test

import (
	"strings"
	"testing"

	"stead/api"
	"stead/api/wire"
)

// TestSlackNotConfigured: without Config.Slack the interactivity route
// answers 404 saying what to set.
func TestSlackNotConfigured(t *testing.T) {
	t.Parallel()
	w := setup(t)
	resp := w.must(w.do("POST", "/slack/interactivity", "", "payload=%7B%7D", "Content-Type", "application/x-www-form-urlencoded"), 404)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "STEAD_SLACK_BOT_TOKEN") {
		t.Errorf("message %q does not say how to configure Slack", msg)
	}
}

// TestMemberChat: PATCH /v1/members/{id} links chat accounts by Slack team
// and user id, refusing what is not an id (naming the field), a second
// account in one workspace and a Slack user linked to another member;
// owners see them, other roles do not.
func TestMemberChat(t *testing.T) {
	t.Parallel()
	w := setup(t)
	ana, bo := w.newMember("Ana Diaz"), w.newMember("Bo Li")
	link := func(id string, chat ...map[string]string) *response {
		if chat == nil {
			chat = []map[string]string{}
		}
		return w.do("PATCH", "/v1/members/"+id, w.owner, map[string]any{"chat": chat})
	}
	slack := func(team, user string) map[string]string {
		return map[string]string{"kind": "slack", "team": team, "user": user}
	}
	for _, c := range []struct {
		chat  []map[string]string
		field string
	}{
		{[]map[string]string{{"kind": "discord", "team": "T0STEAD", "user": "U0ANA"}}, "chat[0].kind"},
		{[]map[string]string{slack("acme", "U0ANA")}, "chat[0].team"},
		{[]map[string]string{slack("T0STEAD", "@ana")}, "chat[0].user"},
		{[]map[string]string{slack("T0STEAD", "Ana Diaz")}, "chat[0].user"},
		{[]map[string]string{slack("T0STEAD", "U0ANA"), slack("T0STEAD", "U0ANA2")}, "chat[1].team"},
	} {
		resp := w.must(link(ana, c.chat...), 400)
		if e := resp.apiErr(); e.Code != api.CodeInvalidArgument || !strings.HasPrefix(e.Message, c.field+":") {
			t.Errorf("chat %v: %s %q; want invalid_argument naming %s", c.chat, e.Code, e.Message, c.field)
		}
	}
	var m wire.Member
	w.must(link(ana, slack("T0STEAD", "U0ANA"), slack("E0GRID", "W0ANA")), 200).decode(&m)
	if len(m.Chat) != 2 || m.Chat[0] != (wire.ChatIdentity{Kind: "slack", Team: "T0STEAD", User: "U0ANA"}) {
		t.Errorf("linked: %+v", m.Chat)
	}
	resp := w.must(link(bo, slack("T0STEAD", "U0ANA")), 409)
	if msg := resp.apiErr().Message; !strings.Contains(msg, "already linked to member Ana Diaz ("+ana+")") {
		t.Errorf("a Slack user linked twice: %q", msg)
	}
	w.must(w.do("PATCH", "/v1/members/"+bo, w.developer, map[string]any{"chat": []map[string]string{slack("T0STEAD", "U0BO")}}), 403)

	w.must(w.do("GET", "/v1/members/"+ana, w.owner, nil), 200).decode(&m)
	if len(m.Chat) != 2 {
		t.Errorf("the owner reads chat %+v", m.Chat)
	}
	var list wire.MemberList
	w.must(w.do("GET", "/v1/members", w.developer, nil), 200).decode(&list)
	for _, m := range list.Members {
		if len(m.Chat) > 0 {
			t.Errorf("a developer reads %s's chat accounts %+v", m.Name, m.Chat)
		}
	}
	// A name change keeps the links; [] removes them, and frees the user.
	w.must(w.do("PATCH", "/v1/members/"+ana, w.owner, map[string]any{"name": "Ana D."}), 200).decode(&m)
	if len(m.Chat) != 2 {
		t.Errorf("after a rename: %+v", m.Chat)
	}
	var unlinked wire.Member
	w.must(link(ana), 200).decode(&unlinked)
	if len(unlinked.Chat) != 0 {
		t.Errorf("after unlinking: %+v", unlinked.Chat)
	}
	w.must(link(bo, slack("T0STEAD", "U0ANA")), 200)
}
