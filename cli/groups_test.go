package cli

import (
	"strings"
	"testing"
)

// TestGroups: create a group naming members by name and email, add one by
// id, take one out, show, list and delete it; names that match no member
// or several are refused with what there is, and so are a viewer and
// taking out a member the group has not; --json on each.
func TestGroups(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	add := func(name, email, role string) string {
		t.Helper()
		r := s.mustCLI("--json", "members", "add", name, "--email", email, "--role", role)
		return jsonField(t, r.stdout, "id")
	}
	ana := add("Ana Diaz", "ana@example.com", "approver")
	bo := add("Bo Li", "bo@example.com", "approver")
	cy := add("Cy Ng", "cy@example.com", "developer")
	// Members have unique names, but a key made without a member is one of
	// its own, named after the key.
	cy2 := "mem_" + jsonField(t, s.mustCLI("--json", "keys", "create", "--name", "Cy Ng", "--role", "approver").stdout, "id")
	di := add("Di Wu", "di@example.com", "viewer")

	r := s.mustCLI("groups", "create", "finance", "--description", "Refunds over 1,000 EUR", "--member", "Ana Diaz", "--member", "bo@example.com")
	if want := "created group finance: Ana Diaz, Bo Li\n"; r.stdout != want {
		t.Errorf("groups create: %q, want %q", r.stdout, want)
	}
	if r := s.mustCLI("--json", "groups", "show", "finance"); jsonField(t, r.stdout, "members.1.id") != bo {
		t.Errorf("bo@example.com did not name Bo Li: %s", r.stdout)
	}
	if r := s.mustCLI("groups", "add", "finance", cy); r.stdout != "finance: Ana Diaz, Bo Li, Cy Ng\n" {
		t.Errorf("groups add by id: %q", r.stdout)
	}
	r = s.cli("groups", "add", "finance", "Cy Ng")
	if r.code != 1 || !strings.Contains(r.stderr, `"Cy Ng" names 2 members; name one by its id:`) || !strings.Contains(r.stderr, cy) || !strings.Contains(r.stderr, cy2) {
		t.Errorf("groups add with an ambiguous name: %s", r)
	}
	r = s.cli("groups", "add", "finance", "Dee")
	if r.code != 1 || !strings.Contains(r.stderr, `no member "Dee" in this project (by id, name or email); list them with stead members list`) {
		t.Errorf("groups add with an unknown name: %s", r)
	}
	if r := s.mustCLI("groups", "rm", "finance", "Bo Li"); r.stdout != "finance: Ana Diaz, Cy Ng\n" {
		t.Errorf("groups rm by name: %q", r.stdout)
	}
	r = s.cli("groups", "rm", "finance", "Bo Li")
	if want := "Bo Li (" + bo + ") is not in group finance, so it cannot be taken out of it; list the group's members with stead groups show finance"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("groups rm of a member the group has not: %s, want %q", r, want)
	}
	r = s.cli("groups", "add", "finance", "Di Wu")
	if want := "Di Wu (" + di + ") is a viewer, who cannot decide approvals, so no group may ask them; make them an approver first (stead members set-role " + di + " --role approver"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("groups add of a viewer: %s, want %q", r, want)
	}
	if r := s.cli("groups", "create", "legal", "--member", "di@example.com"); r.code != 1 || !strings.Contains(r.stderr, "is a viewer") {
		t.Errorf("groups create with a viewer: %s", r)
	}

	// Cy leaves the project: the group marks them, and they can be taken
	// out all the same.
	s.mustCLI("members", "rm", cy)
	want := "finance: Ana Diaz, Cy Ng (removed)\n" +
		"  description  Refunds over 1,000 EUR\n" +
		"  created      2026-11-29 12:00:00Z (0s ago)\n" +
		"  changed      2026-11-29 12:00:00Z (0s ago), version 3\n" +
		"\n" +
		"  ID                    NAME      ROLE       REMOVED\n" +
		"  " + ana + "  Ana Diaz  approver   -\n" +
		"  " + cy + "  Cy Ng     developer  removed\n"
	if r := s.mustCLI("groups", "show", "finance"); r.stdout != want {
		t.Errorf("groups show:\n%s\nwant\n%s", r.stdout, want)
	}
	if r := s.cli("groups", "add", "finance", cy); r.code != 1 || !strings.Contains(r.stderr, "no member") {
		t.Errorf("groups add of a removed member: %s", r)
	}
	if r := s.mustCLI("groups", "rm", "finance", cy); r.stdout != "finance: Ana Diaz\n" {
		t.Errorf("groups rm of a removed member: %q", r.stdout)
	}

	s.mustCLI("groups", "create", "approvers")
	if r := s.mustCLI("groups", "list"); r.stdout != "approvers: no members\nfinance: Ana Diaz  — Refunds over 1,000 EUR\n" {
		t.Errorf("groups list: %q", r.stdout)
	}
	for _, args := range [][]string{{"groups", "show", "finance"}, {"groups", "add", "approvers", "Ana Diaz"}} {
		if r := s.mustCLI(append([]string{"--json"}, args...)...); jsonField(t, r.stdout, "members.0.id") != ana || jsonField(t, r.stdout, "members.0.role") != "approver" {
			t.Errorf("%v --json: %s", args, r.stdout)
		}
	}
	if r := s.mustCLI("--json", "groups", "rm", "approvers", "ana@example.com"); jsonField(t, r.stdout, "members") != "[]" {
		t.Errorf("groups rm --json: %s", r.stdout)
	}
	if r := s.mustCLI("--json", "groups", "list"); jsonField(t, r.stdout, "groups.1.name") != "finance" || jsonField(t, r.stdout, "groups.1.members.0.name") != "Ana Diaz" {
		t.Errorf("groups list --json: %s", r.stdout)
	}
	if r := s.mustCLI("--json", "groups", "create", "legal", "--member", ana); jsonField(t, r.stdout, "name") != "legal" {
		t.Errorf("groups create --json: %s", r.stdout)
	}
	if r := s.mustCLI("--json", "groups", "delete", "legal"); jsonField(t, r.stdout, "members.0.id") != ana {
		t.Errorf("groups delete --json: %s", r.stdout)
	}

	if r := s.mustCLI("groups", "delete", "finance"); r.stdout != "deleted group finance: Ana Diaz\n" {
		t.Errorf("groups delete: %q", r.stdout)
	}
	if r := s.cli("groups", "show", "finance"); r.code != 1 || !strings.Contains(r.stderr, `group "finance" not found`) {
		t.Errorf("groups show of a deleted group: %s", r)
	}
	if r := s.cli("groups", "create", "Finance"); r.code != 1 || !strings.Contains(r.stderr, "must start with a lowercase letter") {
		t.Errorf("groups create with a bad name: %s", r)
	}
	for _, args := range [][]string{{"groups"}, {"groups", "create"}, {"groups", "add", "finance"}, {"groups", "rm"}, {"groups", "show"}, {"groups", "delete", "a", "b"}} {
		if r := s.cli(args...); r.code != ExitUsage {
			t.Errorf("%v: %s, want exit 2", args, r)
		}
	}
}
