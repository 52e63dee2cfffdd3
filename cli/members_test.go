package cli

import (
	"regexp"
	"strings"
	"testing"
)

// TestMembers: add a member with a key, who approves in their name; list,
// show and remove them; --json on each.
func TestMembers(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	r := s.mustCLI("members", "add", "Ana Diaz", "--email", "ana@example.com", "--role", "approver", "--key")
	if !strings.HasPrefix(r.stdout, "added approver Ana Diaz (mem_") || !strings.Contains(r.stdout, "only time the key is shown") {
		t.Fatalf("members add: %s", r)
	}
	id := regexp.MustCompile(`mem_[0-9a-z]+`).FindString(r.stdout)
	key := regexp.MustCompile(`stk_[0-9a-z]+`).FindString(r.stdout)
	if id == "" || key == "" {
		t.Fatalf("members add printed no id or key: %s", r)
	}

	run := s.startAwaiting("o-1001")
	if r := s.run(cliEnv{EnvKey: key}, "approve", run.ApprovalID); r.code != 0 {
		t.Fatalf("approve as Ana: %s", r)
	}
	s.waitRun(run.ID, terminal)
	if r := s.mustCLI("trace", run.ID); !strings.Contains(r.stdout, "approved by Ana Diaz (key_") {
		t.Errorf("trace does not name Ana: %s", r.stdout)
	}
	if r := s.mustCLI("approval", run.ApprovalID); !strings.Contains(r.stdout, "by Ana Diaz (key_") {
		t.Errorf("approval does not name Ana: %s", r.stdout)
	}

	if r := s.mustCLI("members", "list"); !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "approver") || !strings.Contains(r.stdout, "ana@example.com") {
		t.Errorf("members list: %s", r.stdout)
	}
	if r := s.mustCLI("members", "show", id); !strings.Contains(r.stdout, "Ana Diaz") || !strings.Contains(r.stdout, "key_") {
		t.Errorf("members show: %s", r.stdout)
	}
	if r := s.mustCLI("--json", "members", "show", id); jsonField(t, r.stdout, "role") != "approver" {
		t.Errorf("members show --json: %s", r.stdout)
	}
	if r := s.mustCLI("members", "rm", id); !strings.HasPrefix(r.stdout, "removed approver Ana Diaz") {
		t.Errorf("members rm: %s", r.stdout)
	}
	if r := s.run(cliEnv{EnvKey: key}, "approvals"); r.code != 1 {
		t.Errorf("a removed member's key still works: %s", r)
	}
	if r := s.mustCLI("members", "list"); strings.Contains(r.stdout, id) {
		t.Errorf("members list shows a removed member: %s", r.stdout)
	}
	if r := s.mustCLI("members", "list", "--all"); !strings.Contains(r.stdout, id) {
		t.Errorf("members list --all leaves out the removed member: %s", r.stdout)
	}
	if r := s.cli("members", "add", "Bo", "--role", "admin"); r.code != 2 {
		t.Errorf("a bad role: %s", r)
	}
}

// TestMembersSetRole: set-role changes a member named by name, email or
// id, their key has the role at once, --json prints the member; a missing
// or bad --role is a usage error, an unknown name lists where to look. The
// last owner cannot be removed, and the refusal names set-role. A second
// member with a member's name is refused, naming the first.
func TestMembersSetRole(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	r := s.mustCLI("members", "add", "Ana Diaz", "--email", "ana@example.com", "--role", "viewer", "--key")
	id := regexp.MustCompile(`mem_[0-9a-z]+`).FindString(r.stdout)
	key := regexp.MustCompile(`stk_[0-9a-z]+`).FindString(r.stdout)

	if r := s.mustCLI("members", "set-role", "Ana Diaz", "--role", "approver"); !strings.HasPrefix(r.stdout, "Ana Diaz ("+id+") is now an approver\n  role ") {
		t.Errorf("members set-role by name: %s", r.stdout)
	}
	run := s.startAwaiting("o-1001")
	if r := s.run(cliEnv{EnvKey: key}, "approve", run.ApprovalID); r.code != 0 {
		t.Errorf("Ana approves once an approver: %s", r)
	}
	if r := s.mustCLI("--json", "members", "set-role", "ana@example.com", "--role", "developer"); jsonField(t, r.stdout, "role") != "developer" || jsonField(t, r.stdout, "id") != id {
		t.Errorf("members set-role --json by email: %s", r.stdout)
	}
	if r := s.mustCLI("members", "set-role", id, "--role", "viewer"); !strings.HasPrefix(r.stdout, "Ana Diaz ("+id+") is now a viewer") {
		t.Errorf("members set-role by id: %s", r.stdout)
	}
	for _, args := range [][]string{{"members", "set-role", "Ana Diaz"}, {"members", "set-role", "Ana Diaz", "--role", "admin"}, {"members", "set-role", "--role", "owner"}} {
		if r := s.cli(args...); r.code != ExitUsage {
			t.Errorf("%v: %s, want exit 2", args, r)
		}
	}
	if r := s.cli("members", "set-role", "Dee", "--role", "owner"); r.code != 1 || !strings.Contains(r.stderr, `no member "Dee" in this project`) {
		t.Errorf("members set-role of an unknown member: %s", r)
	}

	var owner string
	for _, line := range strings.Split(s.mustCLI("members", "list").stdout, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "owner" {
			owner = f[0]
		}
	}
	r = s.cli("members", "rm", owner)
	if r.code != 1 || !strings.Contains(r.stderr, "last owner; make another member an owner (stead members set-role NAME --role owner) before you remove them") {
		t.Errorf("members rm of the last owner: %s", r)
	}
	r = s.cli("members", "set-role", owner, "--role", "developer")
	if r.code != 1 || !strings.Contains(r.stderr, "(stead members set-role NAME --role owner) before you change its role") {
		t.Errorf("members set-role of the last owner: %s", r)
	}

	r = s.cli("members", "add", "Ana Diaz", "--email", "ana@example.com", "--role", "approver")
	if want := "member " + id + ` is already named "Ana Diaz"`; r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "stead members set-role "+id) {
		t.Errorf("members add of a second Ana Diaz: %s, want %q", r, want)
	}
	if r := s.mustCLI("members", "list"); strings.Count(r.stdout, "Ana Diaz") != 1 {
		t.Errorf("members list after a refused add: %s", r.stdout)
	}
}

// TestNotifications: stead notifications shows the caller's email setting,
// --email sets it (the API then mails accordingly), a bad level is a
// usage error; --json prints the settings.
func TestNotifications(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	r := s.mustCLI("members", "add", "Ana Diaz", "--email", "ana@example.com", "--role", "approver", "--key")
	key := regexp.MustCompile(`stk_[0-9a-z]+`).FindString(r.stdout)
	id := regexp.MustCompile(`mem_[0-9a-z]+`).FindString(r.stdout)
	ana := cliEnv{EnvKey: key}
	if r := s.run(ana, "notifications"); r.code != 0 || r.stdout != "email: all (every approval you may decide, with its reminders, escalations and expiry warnings)\n" {
		t.Errorf("notifications: %s", r)
	}
	if r := s.run(ana, "notifications", "--email", "requests"); r.code != 0 || r.stdout != "email set to requests (each approval's request only)\n" {
		t.Errorf("notifications --email requests: %s", r)
	}
	if r := s.run(ana, "--json", "notifications"); r.code != 0 || jsonField(t, r.stdout, "email") != "requests" {
		t.Errorf("notifications --json: %s", r)
	}
	if r := s.mustCLI("--json", "members", "show", id); !strings.Contains(r.stdout, `"email": "requests"`) {
		t.Errorf("the owner does not see Ana's setting: %s", r.stdout)
	}
	for _, bad := range []string{"weekly", ""} {
		if r := s.run(ana, "notifications", "--email", bad); r.code != 2 || !strings.Contains(r.stderr, "--email must be all, requests or none") {
			t.Errorf("notifications --email %q: %s", bad, r)
		}
	}
	if r := s.run(ana, "--json", "notifications", "--email", "none"); r.code != 0 || jsonField(t, r.stdout, "email") != "none" {
		t.Errorf("notifications --json --email none: %s", r)
	}
	if r := s.run(ana, "notifications"); !strings.HasPrefix(r.stdout, "email: none (no mail)") {
		t.Errorf("notifications after none: %s", r)
	}
}
