package cli

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
		{[]string{"deploy", "one", "two"}, "stead deploy --help"},
		{[]string{"cancel", "run_a", "run_b"}, "stead cancel --help"},
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
		{[]string{"token", "u", "--ttl", "500ms"}, "--ttl must be from 1s to 24h (got 500ms)"},
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

// TestDecideRefusesARunID: a run id given to approve or deny is a usage
// error (exit 2) that says where approval ids are, and nothing is sent:
// the URL here has nothing listening.
func TestDecideRefusesARunID(t *testing.T) {
	t.Parallel()
	vars := map[string]string{EnvURL: deadURL(t), EnvKey: "stk_x", EnvConfig: t.TempDir() + "/config.json"}
	for _, args := range [][]string{{"approve", "run_01ABC"}, {"deny", "run_01ABC"}, {"approve", "apr_01ABC", "run_01ABC"}} {
		r := runCLI(time.Now, vars, http.DefaultClient, args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "run_01ABC is a run id; approval ids start with apr_") || strings.Contains(r.stderr, "cannot reach") {
			t.Errorf("stead %s: want exit 2 naming the run id, before any request: %s", strings.Join(args, " "), r)
		}
	}
}

// TestJSONArgFileUnreadable: a JSON argument's @file that cannot be read
// is a usage error (exit 2) naming the flag, before anything is sent.
func TestJSONArgFileUnreadable(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "refunds", "--end-user", "u", "--input", "@" + missing}, "read --input file"},
		{[]string{"approve", "apr_a", "--input", "@" + missing}, "read --input file"},
		{[]string{"approve", "apr_a", "--remember", "1h", "--when", "@" + missing}, "read --when file"},
		{[]string{"broker", "put", "notes", "n-1", "@" + missing, "--end-user", "u"}, "read VALUE file"},
	} {
		r := cliAlone(t, c.args...)
		if r.code != ExitUsage || !strings.HasPrefix(r.stderr, "error: "+c.want) || !strings.Contains(r.stderr, "missing.json") {
			t.Errorf("stead %s: want exit 2 and %q: %s", strings.Join(c.args, " "), c.want, r)
		}
	}
}

// TestSettingsThatCannotWork: a config file that is not JSON, and an API
// URL that is not http(s), are refused saying where they came from and
// what to do, before any request.
func TestSettingsThatCannotWork(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(config, []byte(`{"url": "http://127.0.0.1:8720", "key": `), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(time.Now, map[string]string{EnvConfig: config}, http.DefaultClient, "runs")
	if want := "error: config " + config + " is not valid JSON ("; r.code != ExitError || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "run `stead login` to write it again") {
		t.Errorf("a corrupt config file: want exit 1 and %q: %s", want, r)
	}
	r = runCLI(time.Now, map[string]string{EnvURL: "ftp://stead.example.com", EnvKey: "stk_x", EnvConfig: config}, http.DefaultClient, "runs")
	if want := `error: the API URL "ftp://stead.example.com" (from $STEAD_URL) is not an http(s) URL; use e.g. http://127.0.0.1:8720`; r.code != ExitError || !strings.HasPrefix(r.stderr, want) {
		t.Errorf("an ftp URL: want exit 1 and %q: %s", want, r)
	}
}

// TestInitRefusesBesideAnyOfItsFiles: stead init refuses a folder that
// holds any one of the files it writes, naming it and writing nothing;
// --json says the folder and the files written.
func TestInitRefusesBesideAnyOfItsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stead.json"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cliAlone(t, "init", dir)
	if r.code != ExitError || !strings.Contains(r.stderr, dir+" already has stead.json: ") || !strings.Contains(r.stderr, "nothing was written") {
		t.Errorf("init beside a stead.json: %s", r)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a refused init wrote into %s: %v", dir, entries)
	}

	dir = filepath.Join(t.TempDir(), "proj")
	r = cliAlone(t, "init", dir, "--json")
	want := []string{".gitignore", "handlers.ts", "stead.d.ts", "stead.json", "stead.schema.json", "tsconfig.json"}
	var got []string
	for _, f := range jsonValue(t, r.stdout, "files").([]any) {
		got = append(got, f.(string))
	}
	if r.code != 0 || jsonField(t, r.stdout, "dir") != dir || !slices.Equal(got, want) {
		t.Errorf("init --json: want dir %s and files %v: %s", dir, want, r)
	}
}

// TestDevRefusesBadFlags: stead dev refuses a flag out of range with exit 2,
// naming the flag, before it opens anything (the --addr given is never
// reached: it would be refused too).
func TestDevRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--workers", "0"}, "--workers must be at least 1 (got 0)"},
		{[]string{"--sweep-interval", "0s"}, "--sweep-interval must be longer than 0 (got 0s)"},
		{[]string{"--mcp-wait", "0s"}, "--mcp-wait must be longer than 0 and at most"},
		{[]string{"--mcp-wait", "1h"}, "--mcp-wait must be longer than 0 and at most"},
		{[]string{"--log-level", "loud"}, `--log-level must be debug, info, warn or error (got "loud")`},
		{[]string{"--retention", "-1h"}, `--retention: "-1h" is not a number of days (90d) or a duration (12h)`},
	} {
		data := filepath.Join(t.TempDir(), "data")
		args := append([]string{"dev", "--addr", "nonsense", "--data", data}, c.flags...)
		r := cliAlone(t, args...)
		if r.code != ExitUsage || !strings.HasPrefix(r.stderr, "error: "+c.want) {
			t.Errorf("stead dev %s: want exit 2 and %q: %s", strings.Join(c.flags, " "), c.want, r)
		}
		if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stead dev %s made its data folder: %v", strings.Join(c.flags, " "), err)
		}
	}
}

// TestTraceReadsEveryPage: stead trace reads a run's events page by page
// (after=nextAfter) until a page comes back empty, and prints them all.
func TestTraceReadsEveryPage(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var afters []string
	ev := func(seq int, typ string) string {
		return `{"version":1,"seq":` + strconv.Itoa(seq) + `,"type":"` + typ + `","at":"2026-11-29T12:00:00Z","data":{}}`
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/runs/run_1":
			_, _ = io.WriteString(w, `{"id":"run_1","agent":"refunds","endUserId":"u","status":"succeeded","deployment":1}`)
		case "/v1/runs/run_1/events":
			after := r.URL.Query().Get("after")
			mu.Lock()
			afters = append(afters, after)
			mu.Unlock()
			switch after {
			case "0":
				_, _ = io.WriteString(w, `{"events":[`+ev(1, "run.created")+`,`+ev(2, "step.completed")+`],"nextAfter":2}`)
			case "2":
				_, _ = io.WriteString(w, `{"events":[`+ev(3, "run.succeeded")+`],"nextAfter":3}`)
			default:
				_, _ = io.WriteString(w, `{"events":[],"nextAfter":3}`)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	r := runCLI(time.Now, map[string]string{EnvURL: api.URL, EnvKey: "stk_x", EnvConfig: t.TempDir() + "/config.json"}, http.DefaultClient, "trace", "run_1", "--json")
	if r.code != 0 {
		t.Fatalf("trace --json: %s", r)
	}
	if n := len(jsonValue(t, r.stdout, "events").([]any)); n != 3 || jsonField(t, r.stdout, "events.2.type") != "run.succeeded" {
		t.Errorf("trace --json has %d events, want the 3 of both pages: %s", n, r.stdout)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"0", "2", "3"}; !slices.Equal(afters, want) {
		t.Errorf("pages asked for after=%q, want %q", afters, want)
	}
}
