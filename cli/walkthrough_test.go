package cli

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestREADMEWalkthrough follows the README's walkthrough command by command
// against the built `stead dev --example`, in a shell as a newcomer would
// (the commands as written, `export`, `unset`, `cp` and `sed` included),
// and compares each command's output with the README's, line by line, in
// shape: ids, times, durations, digests and sizes stand for any such, runs
// of spaces for any, and a line "…" for any lines. An id the README shows
// stands, in later commands, for the id the real output had in its place.
// A --follow command runs in the background until the README's next block
// without a command, which is the rest of its output.
func TestREADMEWalkthrough(t *testing.T) {
	e, tmp := newE2E(t)
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := walkthroughBlocks(t, string(readme))
	work := filepath.Join(tmp, "work")
	if err := os.CopyFS(filepath.Join(work, "examples", "refunds"), os.DirFS(filepath.Join("..", "examples", "refunds"))); err != nil {
		t.Fatal(err)
	}
	e.startServer(freeAddr(t), filepath.Join(tmp, "data"))
	w := &walker{t: t, e: e, dir: work, ids: map[string]string{}, vars: map[string]string{}}
	for _, b := range blocks {
		if len(b.cmds) == 0 {
			w.finishFollow(b.rest)
			continue
		}
		for _, c := range b.cmds {
			w.run(c)
		}
	}
	if w.follow != nil {
		t.Errorf("the walkthrough leaves `%s` running: no block shows how it ends", w.follow.cmd)
	}
}

type readmeCmd struct {
	cmd  string
	want []string
}

type readmeBlock struct {
	cmds []readmeCmd
	rest []string // the lines of a block without a command
}

// walkthroughBlocks are the console blocks of the README's walkthrough.
func walkthroughBlocks(t *testing.T, readme string) []readmeBlock {
	t.Helper()
	start := strings.Index(readme, "\n## Walkthrough")
	if start < 0 {
		t.Fatal("the README has no walkthrough")
	}
	section := readme[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []readmeBlock
	for _, raw := range regexp.MustCompile("(?s)```console\n(.*?)```").FindAllStringSubmatch(section, -1) {
		var b readmeBlock
		for _, line := range strings.Split(strings.TrimSuffix(raw[1], "\n"), "\n") {
			switch {
			case strings.HasPrefix(line, "$ "):
				b.cmds = append(b.cmds, readmeCmd{cmd: strings.TrimPrefix(line, "$ ")})
			case len(b.cmds) > 0:
				b.cmds[len(b.cmds)-1].want = append(b.cmds[len(b.cmds)-1].want, line)
			default:
				b.rest = append(b.rest, line)
			}
		}
		for i := range b.cmds {
			// A blank line between commands is the README's, not output.
			for n := len(b.cmds[i].want); n > 0 && strings.TrimSpace(b.cmds[i].want[n-1]) == ""; n-- {
				b.cmds[i].want = b.cmds[i].want[:n-1]
			}
		}
		blocks = append(blocks, b)
	}
	if len(blocks) < 5 {
		t.Fatalf("the walkthrough has %d console blocks", len(blocks))
	}
	return blocks
}

type walker struct {
	t   *testing.T
	e   *e2e
	dir string
	// ids maps an id the README shows to the one this session had.
	ids map[string]string
	// vars are the shell variables the walkthrough exported.
	vars   map[string]string
	follow *following
}

// following is a --follow command running in the background.
type following struct {
	cmd  string
	out  *syncBuffer
	done chan error
	seen int // lines of out already compared
}

func (w *walker) env() []string {
	env := w.e.env([]string{"PATH=" + filepath.Dir(w.e.bin) + string(os.PathListSeparator) + os.Getenv("PATH")})
	for k, v := range w.vars {
		env = append(env, k+"="+v)
	}
	return env
}

func (w *walker) shell(ctx context.Context, cmd string) *exec.Cmd {
	c := exec.CommandContext(ctx, "bash", "-c", cmd)
	c.Dir, c.Env = w.dir, w.env()
	return c
}

var (
	exportCmd = regexp.MustCompile(`^export (\w+)=\$\((.*)\)$`)
	unsetCmd  = regexp.MustCompile(`^unset (\w+)$`)
)

func (w *walker) run(c readmeCmd) {
	t := w.t
	t.Helper()
	cmd := strings.TrimSpace(strings.SplitN(c.cmd, "  #", 2)[0])
	if strings.HasPrefix(cmd, "make dev") {
		return // the test started stead dev itself
	}
	cmd = w.substitute(cmd)
	if m := unsetCmd.FindStringSubmatch(cmd); m != nil {
		delete(w.vars, m[1])
		return
	}
	if strings.Contains(strings.Join(c.want, "\n"), "expired at") {
		w.waitExpired(cmd)
	}
	if m := traceShows.FindStringSubmatch(strings.Join(c.want, "\n")); m != nil && strings.HasPrefix(cmd, "stead trace ") {
		w.waitStatus(strings.Fields(cmd)[2], m[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if strings.Contains(cmd, "--follow") {
		f := &following{cmd: cmd, out: newSyncBuffer(nil), done: make(chan error, 1)}
		sh := w.shell(context.Background(), cmd)
		sh.Stdout, sh.Stderr = f.out, f.out
		if err := sh.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { f.done <- sh.Wait() }()
		w.follow = f
		// Compare what it prints until it waits for a person.
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(f.out.String(), "waiting for approval") {
			if time.Now().After(deadline) {
				t.Fatalf("`%s` did not reach its approval:\n%s", cmd, f.out)
			}
			time.Sleep(50 * time.Millisecond) // poll interval, bounded by the deadline
		}
		got := lines(f.out.String())
		f.seen = len(got)
		w.compare(cmd, c.want, got)
		return
	}
	if m := exportCmd.FindStringSubmatch(cmd); m != nil {
		sh := w.shell(ctx, m[2])
		var stdout, stderr bytes.Buffer
		sh.Stdout, sh.Stderr = &stdout, &stderr
		if err := sh.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
		}
		w.vars[m[1]] = strings.TrimSpace(stdout.String())
		w.compare(cmd, c.want, lines(stderr.String()))
		return
	}
	out, _ := w.shell(ctx, cmd).CombinedOutput() // the README shows failures' output too
	w.compare(cmd, c.want, lines(string(out)))
}

// finishFollow waits for the background --follow command and compares the
// rest of its output with want.
func (w *walker) finishFollow(want []string) {
	t := w.t
	t.Helper()
	f := w.follow
	if f == nil {
		t.Fatalf("a console block without a command, but nothing runs in the background: %q", want)
	}
	select {
	case err := <-f.done:
		_ = err // its exit status shows in the output compared below (the error: line)
	case <-time.After(30 * time.Second):
		t.Fatalf("`%s` did not end:\n%s", f.cmd, f.out)
	}
	w.compare(f.cmd+" (to its end)", want, lines(f.out.String())[f.seen:])
	w.follow = nil
}

// waitExpired waits until the approval the command names has expired, as
// the README's reader does before trying it.
func (w *walker) waitExpired(cmd string) {
	id := regexp.MustCompile(`apr_\w+`).FindString(cmd)
	deadline := time.Now().Add(20 * time.Second)
	for id != "" && time.Now().Before(deadline) {
		out, _ := w.shell(context.Background(), "stead approval "+id+" --json").Output()
		if strings.Contains(string(out), `"status": "expired"`) {
			return
		}
		time.Sleep(100 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

// traceShows is the status a README trace shows in its first line.
var traceShows = regexp.MustCompile(`^run \S+ · .* · (succeeded|failed|cancelled)\n`)

// waitStatus waits until the run has the status the README's trace shows,
// as its reader, who runs the command a moment later, sees it.
func (w *walker) waitStatus(runID, status string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := w.shell(context.Background(), "stead trace "+runID+" --json").Output()
		if strings.Contains(string(out), `"status": "`+status+`"`) {
			return
		}
		time.Sleep(50 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

var (
	idToken = regexp.MustCompile(`\b(run|apr|key|prj|stk|stc|idk|mck|mem|rul|whe)_[0-9A-Za-z_]+`)
	shapes  = []struct {
		re   *regexp.Regexp
		with string
	}{
		{idToken, "<id>"},
		{regexp.MustCompile(`sha256:[0-9a-f]+`), "<digest>"},
		{regexp.MustCompile(`\d{4}-\d{2}-\d{2}`), "<date>"},
		{regexp.MustCompile(`\d{2}:\d{2}:\d{2}(\.\d+)?Z?`), "<time>"},
		{regexp.MustCompile(`\b\d+(\.\d+)? (KiB|MiB|bytes)\b`), "<size>"},
		{regexp.MustCompile(`\b\d+(ms|s|m|h|d)\b`), "<dur>"},
		{regexp.MustCompile(`\s+`), " "},
	}
)

// shape is a line with what changes from session to session replaced.
func shape(l string) string {
	for _, s := range shapes {
		l = s.re.ReplaceAllString(l, s.with)
	}
	return strings.TrimSpace(l)
}

// compare matches got against want line by line in shape, "…" standing for
// any lines, and learns the ids want shows from got.
func (w *walker) compare(cmd string, want, got []string) {
	t := w.t
	t.Helper()
	if !w.match(want, got) {
		t.Errorf("`%s`: the output does not have the README's shape\n--- README\n%s\n--- got\n%s", cmd, strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

func (w *walker) match(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0 || (len(got) == 1 && strings.TrimSpace(got[0]) == "")
	}
	if strings.TrimSpace(want[0]) == "…" {
		for i := 0; i <= len(got); i++ {
			if w.match(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 || shape(want[0]) != shape(got[0]) {
		return false
	}
	if !w.match(want[1:], got[1:]) {
		return false
	}
	readmeIDs, gotIDs := idToken.FindAllString(want[0], -1), idToken.FindAllString(got[0], -1)
	for i := range min(len(readmeIDs), len(gotIDs)) {
		w.ids[readmeIDs[i]] = gotIDs[i]
	}
	return true
}

// substitute puts this session's ids in place of the README's.
func (w *walker) substitute(cmd string) string {
	return idToken.ReplaceAllStringFunc(cmd, func(id string) string {
		if real, ok := w.ids[id]; ok {
			return real
		}
		return id
	})
}
