// Package localproc has what the test servers' starters (infra/moto,
// infra/mailpit, …) share: a free loopback port, a buffer that keeps the
// tail of what a server printed, for the error that says why it did not
// start, and the rule for a component that is missing (Unavailable).
package localproc

import (
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
)

// FreePort returns a loopback TCP port nothing listens on now (it may be
// taken before the caller binds it: starters try again).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Log keeps the last Max bytes written to it; String shows at most the
// last Show of them (all when Show is 0). Safe for concurrent use.
type Log struct {
	Max, Show int

	mu  sync.Mutex
	buf []byte
}

func (b *Log) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.Max {
		b.buf = b.buf[len(b.buf)-b.Max:]
	}
	return len(p), nil
}

func (b *Log) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Show > 0 && len(b.buf) > b.Show {
		return "…" + string(b.buf[len(b.buf)-b.Show:])
	}
	return string(b.buf)
}

// Unavailable is the one rule for a test whose real component (an
// emulator, a server, an npm tool) is missing: it skips the test, and fails
// it when CI=true, where the Makefile has installed everything.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
