package api

import (
	"fmt"
	"testing"
	"time"
)

func TestSourceAddress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ remote, want string }{
		{"203.0.113.7:4242", "203.0.113.7"},
		{"203.0.113.7:0", "203.0.113.7"},
		{"[2001:db8::1]:0", "2001:db8::/64"},
		{"[2001:db8::ffff:1]:9", "2001:db8::/64"},
		{"[2001:db8:0:1::1]:9", "2001:db8:0:1::/64"},
		{"[::ffff:203.0.113.7]:1", "203.0.113.7"},
		{"[fe80::1%eth0]:1", "fe80::/64"},
		{"pipe", "pipe"},
		{"", ""},
	} {
		if got := sourceAddress(c.remote); got != c.want {
			t.Errorf("sourceAddress(%q) = %q, want %q", c.remote, got, c.want)
		}
	}
}

func TestCredentialPrefix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ token, want string }{
		{"stk_abcdefghijklmnop", "stk_abcdefgh"},
		{"stk_abc", "stk_abc"},
		{"brk_run_1.sig", "brk_run_1"},
		{"brk_nodot", ""},
		{"stc_garbage", ""},
		{"xyz", ""},
	} {
		if got := credentialPrefix(c.token); got != c.want {
			t.Errorf("credentialPrefix(%q) = %q, want %q", c.token, got, c.want)
		}
	}
}

// A flood of distinct keys never grows the counts past their bound, and
// the keys that are refused are the last to be forgotten.
func TestFailureCountsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f := newFailureCounts(3, time.Minute, 100)
	refused := hashKeyOf("addr", "203.0.113.7")
	for range 3 {
		f.fail(refused, now)
	}
	for i := range 100_000 {
		f.fail(hashKeyOf("addr", fmt.Sprint(i)), now)
		if n := f.size(); n > 100 {
			t.Fatalf("after %d keys the counts hold %d, over their bound of 100", i+1, n)
		}
	}
	if d := f.blocked(refused, now); d != time.Minute {
		t.Errorf("the refused key is refused for %s after the flood, want 1m", d)
	}
	// Refused keys go too once the bound needs it: 100 of them, then more.
	for i := range 200 {
		k := hashKeyOf("addr", fmt.Sprint("x", i))
		for range 3 {
			f.fail(k, now)
		}
	}
	if n := f.size(); n > 100 {
		t.Errorf("counts hold %d refused keys, over their bound of 100", n)
	}
}
