package cli

import (
	"regexp"
	"strings"
	"testing"
)

var bundleFacts = regexp.MustCompile(`sha256:[0-9a-f]{12}  [0-9.]+ (KiB|MiB|bytes)`)

// TestInspectCommands: stead agents, stead deployments and stead broker
// list|get|put|rm, in goldens, with --json the API's shapes, and their
// usage mistakes (exit 2) and refusals (exit 1).
func TestInspectCommands(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	z := newNormalizer()
	check := func(name string, r result) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %s", name, r)
		}
		// The bundle's digest and size change with the bundler, not
		// with these commands.
		out := bundleFacts.ReplaceAllString(z.replace(r.stdout), "sha256:<digest>      <size>")
		golden(t, name, out)
	}
	check("agents", s.cli("agents"))
	check("deployments", s.cli("deployments"))
	check("broker_list", s.cli("broker", "list", "orders", "--end-user", "demo-user"))
	check("broker_get", s.cli("broker", "get", "orders", "o-1001", "--end-user", "demo-user"))
	check("broker_put", s.cli("broker", "put", "notes", "n-1", `{"text":"call back"}`, "--end-user", "demo-user"))
	if r := s.mustCLI("broker", "get", "notes", "n-1", "--end-user", "demo-user", "--json"); jsonField(t, r.stdout, "value.text") != "call back" {
		t.Errorf("broker get --json: %s", r.stdout)
	}
	check("broker_rm", s.cli("broker", "rm", "notes", "n-1", "--end-user", "demo-user"))
	s.mustCLI("broker", "put", "notes", "n-2", `"x"`, "--end-user", "demo-user")
	if r := s.mustCLI("broker", "rm", "notes", "n-2", "--end-user", "demo-user", "--json"); jsonField(t, r.stdout, "collection") != "notes" ||
		jsonField(t, r.stdout, "key") != "n-2" || jsonField(t, r.stdout, "endUserId") != "demo-user" || jsonField(t, r.stdout, "deleted") != "true" {
		t.Errorf("broker rm --json: %s", r.stdout)
	}
	if r := s.cli("broker", "get", "notes", "n-1", "--end-user", "demo-user"); r.code != 1 || !strings.Contains(r.stderr, "n-1") {
		t.Errorf("broker get of a removed record: %s", r)
	}
	if r := s.mustCLI("agents", "--json"); jsonField(t, r.stdout, "agents.0.name") != "refunds" {
		t.Errorf("agents --json: %s", r.stdout)
	}
	if r := s.mustCLI("deployments", "--json"); jsonField(t, r.stdout, "deployments.0.version") != "1" {
		t.Errorf("deployments --json: %s", r.stdout)
	}
	for _, args := range [][]string{
		{"broker"},
		{"broker", "list", "orders"},
		{"broker", "get", "orders", "--end-user", "u"},
		{"broker", "put", "notes", "n-1", "not json", "--end-user", "u"},
		{"agents", "extra"},
	} {
		if r := s.cli(args...); r.code != ExitUsage {
			t.Errorf("stead %s: exit %d, want %d: %s", strings.Join(args, " "), r.code, ExitUsage, r)
		}
	}
}
