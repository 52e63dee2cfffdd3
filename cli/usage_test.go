package cli

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// cliAlone runs the CLI with no server, key or config file: enough for
// mistakes that are refused before anything is sent.
func cliAlone(t testing.TB, args ...string) result {
	t.Helper()
	return runCLI(time.Now, map[string]string{EnvConfig: t.TempDir() + "/config.json"}, http.DefaultClient, args...)
}

// TestJSONUsageErrorsEitherOrder: --json gives the error document whether
// it comes before or after the flag that could not be parsed, and not
// after "--" or as --json=false.
func TestJSONUsageErrorsEitherOrder(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"approvals", "--bogus", "--json"},
		{"approvals", "--json", "--bogus"},
		{"approvals", "--limit", "abc", "--json"},
		{"approvals", "--json", "--limit", "abc"},
		{"token", "u", "--ttl", "1w", "--json=true"},
		{"token", "u", "--json", "--ttl", "1w"},
	} {
		r := cliAlone(t, args...)
		if r.code != ExitUsage {
			t.Errorf("stead %s: %s", strings.Join(args, " "), r)
			continue
		}
		if got := jsonField(t, r.stdout, "error.code"); got != "usage" {
			t.Errorf("stead %s: error.code %q, want usage: %s", strings.Join(args, " "), got, r)
		}
	}
	for _, args := range [][]string{
		{"approvals", "--bogus"},
		{"approvals", "--bogus", "--json=false"},
		{"approvals", "--json", "--json=false", "--bogus"},
	} {
		if r := cliAlone(t, args...); r.code != ExitUsage || r.stdout != "" {
			t.Errorf("stead %s: want exit 2 and nothing on stdout: %s", strings.Join(args, " "), r)
		}
	}
	if got := jsonRequested([]string{"run", "x", "--", "--json"}); got {
		t.Errorf(`jsonRequested saw --json after "--"`)
	}
}

// TestUsageNamesTheCommand: a usage error points at the help of the
// command that was run.
func TestUsageNamesTheCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		help string
	}{
		{[]string{"deny", "--bogus"}, "stead deny --help"},
		{[]string{"deny"}, "stead deny --help"},
		{[]string{"rules", "list", "--limit", "0"}, "stead rules list --help"},
		{[]string{"broker", "lisst"}, "stead broker --help"},
		{[]string{"bogus"}, "stead --help"},
		{[]string{"--bogus"}, "stead --help"},
	} {
		r := cliAlone(t, c.args...)
		if want := "\nRun '" + c.help + "' for usage.\n"; r.code != ExitUsage || !strings.HasSuffix(r.stderr, want) {
			t.Errorf("stead %s: stderr should end %q: %s", strings.Join(c.args, " "), want, r)
		}
	}
}

// TestFlagValues: a flag value that does not parse is refused with what
// the flag takes, not Go's parser's words; --ttl takes what --retention
// takes (days too) and shows its default as people write it.
func TestFlagValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"approvals", "--limit", "abc"}, `--limit must be a whole number from 1 to 500 (got "abc")`},
		{[]string{"runs", "--limit", "2.5"}, `--limit must be a whole number from 1 to 500 (got "2.5")`},
		{[]string{"deployments", "--limit", "0"}, `--limit must be from 1 to 500 (got "0")`},
		{[]string{"deployments", "--limit", "501"}, `--limit must be from 1 to 500 (got "501")`},
		{[]string{"dev", "--workers", "many"}, `--workers must be a whole number (got "many")`},
		{[]string{"dev", "--sweep-interval", "5x"}, `--sweep-interval must be a duration such as 30s, 5m or 2h (got "5x")`},
		{[]string{"runs", "--json=maybe"}, `--json is true or false (got "maybe")`},
		{[]string{"token", "u", "--ttl", "1w"}, `--ttl: "1w" is not a duration (30m, 12h) or a number of days (1d); a token lasts from 1s to 24h`},
		{[]string{"token", "u", "--ttl", "2d"}, "--ttl must be from 1s to 24h (got 2d)"},
		{[]string{"token", "u", "--ttl", "0"}, "--ttl must be from 1s to 24h (got 0s)"},
	} {
		r := cliAlone(t, c.args...)
		if r.code != ExitUsage || !strings.HasPrefix(r.stderr, "error: "+c.want+"\n") {
			t.Errorf("stead %s: want exit 2 and %q: %s", strings.Join(c.args, " "), c.want, r)
		}
		if strings.Contains(r.stderr, "strconv.") || strings.Contains(r.stderr, "time: ") {
			t.Errorf("stead %s: Go's parser's words: %s", strings.Join(c.args, " "), r)
		}
	}
	// 1d is accepted: it gets as far as wanting a key.
	if r := cliAlone(t, "token", "u", "--ttl", "1d"); r.code != ExitError || !strings.Contains(r.stderr, "no API key") {
		t.Errorf("token --ttl 1d: %s", r)
	}
	for d, want := range map[time.Duration]string{time.Hour: "1h", 90 * time.Minute: "1h30m", 24 * time.Hour: "1d", 30 * time.Second: "30s"} {
		if got := (ttlValue{&d}).String(); got != want {
			t.Errorf("ttlValue(%s) = %q, want %q", d, got, want)
		}
	}
	if r := cliAlone(t, "token", "--help"); !strings.Contains(r.stdout, "(default 1h)\n") {
		t.Errorf("token --help should show the default as 1h:\n%s", r.stdout)
	}
}
