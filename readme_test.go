// Tests that the README says what the code does: its stead.json examples
// deploy, its embed page is the one the browser tests run, and the commands,
// make targets and variables it names exist.
package stead_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"stead"
	"stead/cli"
	"stead/functions/awsstack"
	"stead/runtime/agent"
)

// docs are the README and the reference it links to (docs/*.md), which
// the tests below hold against the code alike.
func docs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("docs/ has %d files", len(files))
	}
	return append([]string{"README.md"}, files...)
}

// readme is the README and docs/*.md, one after another.
func readme(t *testing.T) string {
	t.Helper()
	var all strings.Builder
	for _, f := range docs(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		all.WriteByte('\n')
	}
	return all.String()
}

// anchorOf is the fragment GitHub gives a heading.
func anchorOf(heading string) string {
	h := strings.ToLower(strings.TrimSpace(heading))
	h = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`).ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// Every relative link of the README and docs/ reaches a file, and every
// #fragment a heading of the file it names.
func TestReadmeLinksResolve(t *testing.T) {
	t.Parallel()
	heads := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := heads[file]; ok {
			return a
		}
		a := map[string]bool{}
		b, _ := os.ReadFile(file)
		inCode := false
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inCode = !inCode
			}
			if m := regexp.MustCompile(`^#{1,6} (.*)`).FindStringSubmatch(l); m != nil && !inCode {
				a[anchorOf(m[1])] = true
			}
		}
		heads[file] = a
		return a
	}
	n := 0
	for _, f := range docs(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inCode := false
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inCode = !inCode
			}
			if inCode {
				continue
			}
			for _, m := range regexp.MustCompile(`\]\(([^)\s]+)\)`).FindAllStringSubmatch(l, -1) {
				link := m[1]
				if strings.HasPrefix(link, "http") || strings.HasPrefix(link, "mailto:") {
					continue
				}
				n++
				target, frag, _ := strings.Cut(link, "#")
				file := f
				if target != "" {
					file = filepath.Join(filepath.Dir(f), target)
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s links to %s, which does not exist", f, link)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(file, ".md") && !anchorsOf(file)[frag] {
					t.Errorf("%s links to %s: %s has no heading #%s", f, link, file, frag)
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("found %d links in the README and docs/", n)
	}
}

// blocks returns the README's fenced code blocks of one language.
func blocks(doc, lang string) []string {
	re := regexp.MustCompile("(?ms)^ *```" + lang + "\n(.*?)^ *```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestReadmeConfigsParse(t *testing.T) {
	t.Parallel()
	n := 0
	for _, b := range blocks(readme(t), "json") {
		src := strings.TrimSpace(b)
		switch {
		case strings.HasPrefix(src, `"models"`):
			// A fragment: the models section alone.
			src = `{` + src + `, "agents": {"a": {"tools": {"t": {"effect": "read"}}, "steps": [{"id": "s", "tool": "t"}]}}}`
		case strings.HasPrefix(src, "{") && strings.Contains(src, `"agents"`):
		default:
			continue
		}
		n++
		if _, err := agent.Parse([]byte(src)); err != nil {
			t.Errorf("a stead.json example in the README does not parse:\n%s\n%v", src, err)
		}
	}
	if n < 3 {
		t.Fatalf("found %d stead.json examples in the README, want at least 3", n)
	}
}

func TestReadmeEmbedPageIsTheTestedOne(t *testing.T) {
	t.Parallel()
	fixture, err := os.ReadFile("console/e2e/fixtures/embed-example.html")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer(
		"{{STEAD_URL}}", "http://127.0.0.1:8720",
		"{{RUN_ID}}", "run_…",
		"{{CUSTOMER_TOKEN}}", "stc_…",
	).Replace(string(fixture))
	for _, b := range blocks(readme(t), "html") {
		if strings.TrimSpace(b) == strings.TrimSpace(want) {
			return
		}
	}
	t.Errorf("the README's embed page is not console/e2e/fixtures/embed-example.html (the page the browser tests run); update one from the other:\n%s", want)
}

func TestReadmeCommandsExist(t *testing.T) {
	t.Parallel()
	doc := readme(t)
	// Every `stead <command>` the README names answers --help.
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile("`stead ([a-z]+)( [a-z]+)?").FindAllStringSubmatch(doc, -1) {
		args := []string{m[1]}
		if m[1] == "keys" && m[2] != "" {
			args = append(args, strings.TrimSpace(m[2]))
		}
		name := strings.Join(args, " ")
		if seen[name] {
			continue
		}
		seen[name] = true
		var out bytes.Buffer
		if code := cli.Main(append(args, "--help"), strings.NewReader(""), &out, io.Discard); code != 0 {
			t.Errorf("the README names `stead %s`, which the CLI does not know (exit %d)", name, code)
		}
	}
	if len(seen) < 10 {
		t.Errorf("found %d stead commands in the README", len(seen))
	}
}

func TestReadmeMakeTargetsExist(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	out, err := exec.Command("make", "help").Output()
	if err != nil {
		t.Fatal(err)
	}
	out = regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAll(out, nil) // colours
	for _, m := range regexp.MustCompile("make ([a-z][a-z0-9-]*)").FindAllStringSubmatch(readme(t), -1) {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(m[1]) + `\s`).Match(out) {
			t.Errorf("the README names `make %s`, which `make help` does not list", m[1])
		}
	}
}

func TestReadmeVariablesAreTheFunctions(t *testing.T) {
	t.Parallel()
	var named []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(STEAD_[A-Z0-9_]+)` \\|").FindAllStringSubmatch(readme(t), -1) {
		named = append(named, m[1])
	}
	code := awsstack.EnvVars()
	slices.Sort(named)
	slices.Sort(code)
	if !slices.Equal(named, code) {
		got, _ := json.Marshal(named)
		want, _ := json.Marshal(code)
		t.Errorf("the README's variable table lists %s; the functions read %s", got, want)
	}
}

// The npm package the README names is the version the VERSION file says.
func TestReadmeVersionIsTheVersionFile(t *testing.T) {
	doc := readme(t)
	found := regexp.MustCompile(`getstead@(\d+\.\d+\.\d+)`).FindAllStringSubmatch(doc, -1)
	if len(found) == 0 {
		t.Fatal("the README names no getstead@VERSION")
	}
	for _, m := range found {
		if m[1] != stead.Version() {
			t.Errorf("the README says getstead@%s; VERSION says %s", m[1], stead.Version())
		}
	}
}

// TestDocsListEveryEventKind: docs/openapi.md's table of event kinds has
// one row per kind of the OpenAPI document's Event, with the kind's data
// fields, and no row for a kind the document lacks.
func TestDocsListEveryEventKind(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("api", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Components struct {
			Schemas map[string]struct {
				Discriminator struct {
					Mapping map[string]string `json:"mapping"`
				} `json:"discriminator"`
				Properties struct {
					Data struct {
						Properties map[string]json.RawMessage `json:"properties"`
					} `json:"data"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join("docs", "openapi.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // kind → its data column
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z.]+)` \\| [^|]* \\| ([^|]*) \\| (?:yes|no) \\|$").FindAllStringSubmatch(string(md), -1) {
		rows[m[1]] = m[2]
	}
	mapping := d.Components.Schemas["Event"].Discriminator.Mapping
	if len(mapping) == 0 {
		t.Fatal("openapi.json's Event has no discriminator mapping")
	}
	for kind, ref := range mapping {
		col, ok := rows[kind]
		if !ok {
			t.Errorf("docs/openapi.md's event table has no row for %s", kind)
			continue
		}
		for field := range d.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")].Properties.Data.Properties {
			if !strings.Contains(col, "`"+field+"`") {
				t.Errorf("docs/openapi.md's row for %s does not name its data field %s", kind, field)
			}
		}
	}
	for kind := range rows {
		if _, ok := mapping[kind]; !ok {
			t.Errorf("docs/openapi.md's event table lists %s, which openapi.json's Event does not have", kind)
		}
	}
}
