package email_test

import (
	"strings"
	"testing"

	"stead/notify/email"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	ok := []struct {
		in   string
		want email.Config
	}{
		{"smtp://ana:s3cret@mail.example.com?from=stead@example.com",
			email.Config{Host: "mail.example.com", Port: 587, Username: "ana", Password: "s3cret", TLS: email.TLSStartTLS, From: "stead@example.com"}},
		{"smtp://mail.example.com:2525?tls=starttls&from=Stead%20%3Cstead@example.com%3E",
			email.Config{Host: "mail.example.com", Port: 2525, TLS: email.TLSStartTLS, From: "Stead <stead@example.com>"}},
		{"smtps://u:p@mail.example.com?from=stead@example.com",
			email.Config{Host: "mail.example.com", Port: 465, Username: "u", Password: "p", TLS: email.TLSImplicit, From: "stead@example.com"}},
		{"smtp://mail.example.com?tls=tls&from=stead@example.com",
			email.Config{Host: "mail.example.com", Port: 465, TLS: email.TLSImplicit, From: "stead@example.com"}},
		{"smtp://127.0.0.1:1025?tls=none&from=stead@localhost",
			email.Config{Host: "127.0.0.1", Port: 1025, TLS: email.TLSNone, From: "stead@localhost"}},
		{"smtp://[::1]?tls=none&from=stead@localhost",
			email.Config{Host: "::1", Port: 25, TLS: email.TLSNone, From: "stead@localhost"}},
		{"smtp://u:p@localhost:1025?tls=none&from=stead@localhost",
			email.Config{Host: "localhost", Port: 1025, Username: "u", Password: "p", TLS: email.TLSNone, From: "stead@localhost"}},
		{"smtp://mail.example.com/?from=stead@example.com",
			email.Config{Host: "mail.example.com", Port: 587, TLS: email.TLSStartTLS, From: "stead@example.com"}},
	}
	for _, tc := range ok {
		got, err := email.ParseURL(tc.in)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		// What a start-up line shows reads back as the same server.
		noPassword := got
		noPassword.Password = ""
		if back, err := email.ParseURL(got.String()); err != nil || back != noPassword {
			t.Errorf("ParseURL(%q).String() = %q reads back as %+v (%v), want %+v", tc.in, got.String(), back, err, noPassword)
		}
	}
	bad := []struct{ in, want string }{
		{"http://mail.example.com?from=a@b.c", `the scheme is "http"`},
		{"mail.example.com:587", `the scheme is "mail.example.com"`},
		{"smtp://?from=a@b.c", "the host is missing"},
		{"smtp://mail.example.com:99999?from=a@b.c", `the port "99999" is not a port number`},
		{"smtp://mail.example.com:0?from=a@b.c", `the port "0" is not a port number`},
		{"smtp://mail.example.com:abc?from=a@b.c", "is not a URL"},
		{"smtp://mail.example.com", "from is missing: add ?from=stead@example.com"},
		{"smtp://mail.example.com?from=not-an-address", `from "not-an-address" is not a mail address`},
		{"smtp://mail.example.com?tls=ssl&from=a@b.c", `tls="ssl" is not a TLS mode; use none (loopback test servers), starttls or tls`},
		{"smtps://mail.example.com?tls=starttls&from=a@b.c", "smtps:// is implicit TLS, so tls=starttls contradicts it"},
		{"smtp://mail.example.com?from=a@b.c&from=c@d.e", "from is given 2 times"},
		{"smtp://mail.example.com?form=a@b.c", `unknown option "form"; the options are tls (none, starttls, tls) and from`},
		{"smtp://mail.example.com/inbox?from=a@b.c", `the path "/inbox" means nothing here`},
		{"smtp://u:p@mail.example.com?tls=none&from=a@b.c", "credentials with tls=none would cross the network in the clear to mail.example.com"},
		{"smtp://:p@mail.example.com?from=a@b.c", "a password without a user name"},
		{"smtp://u:p@10.0.0.7?tls=none&from=a@b.c", "credentials with tls=none would cross the network in the clear to 10.0.0.7"},
		{"smtp://mail.example.com?from=a@b.c#inbox", "the fragment #inbox means nothing here"},
		{"smtp://u:p@mail.example.com:abc?from=a@b.c", "is not a URL"},
	}
	for _, tc := range bad {
		_, err := email.ParseURL(tc.in)
		if err == nil {
			t.Errorf("ParseURL(%q) accepted it", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), email.EnvURL) {
			t.Errorf("ParseURL(%q) = %q, want it to start with %s and say %q", tc.in, err, email.EnvURL, tc.want)
		}
		if strings.Contains(err.Error(), ":p@") {
			t.Errorf("ParseURL(%q) repeats the password: %q", tc.in, err)
		}
	}
}

func TestFromEnvAndPlain(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if _, ok, err := email.FromEnv(getenv); ok || err != nil {
		t.Errorf("unset: ok %v, err %v", ok, err)
	}
	env[email.EnvURL] = "smtp://u:secret@mail.example.com?from=stead@example.com"
	c, ok, err := email.FromEnv(getenv)
	if !ok || err != nil || c.Host != "mail.example.com" {
		t.Fatalf("set: %+v %v %v", c, ok, err)
	}
	if s := c.String(); strings.Contains(s, "secret") || s != "smtp://u@mail.example.com:587?from=stead%40example.com&tls=starttls" {
		t.Errorf("String() = %q: the password must be left out", s)
	}
	if smtps := (email.Config{Host: "mail.example.com", Port: 465, TLS: email.TLSImplicit, From: "stead@example.com"}).String(); smtps != "smtps://mail.example.com:465?from=stead%40example.com" {
		t.Errorf("String() of implicit TLS = %q, want smtps:// without a tls option", smtps)
	}
	env[email.EnvURL] = "  "
	if _, ok, err := email.FromEnv(getenv); ok || err != nil {
		t.Errorf("blank: ok %v, err %v; want it taken as unset", ok, err)
	}
	env[email.EnvURL] = "smtp://mail.example.com"
	if _, ok, err := email.FromEnv(getenv); ok || err == nil {
		t.Errorf("a bad URL: ok %v, err %v", ok, err)
	}

	p, err := email.Plain("127.0.0.1:1025")
	if err != nil || p.TLS != email.TLSNone || p.Port != 1025 || p.From == "" {
		t.Errorf("Plain: %+v %v", p, err)
	}
	for in, want := range map[string]string{
		"127.0.0.1":   "--smtp must be HOST:PORT, like 127.0.0.1:1025",
		":1025":       "--smtp must be HOST:PORT, like 127.0.0.1:1025",
		"127.0.0.1:0": "--smtp: the port \"0\" is not a port number (1-65535)",
		"127.0.0.1:x": "--smtp: the port \"x\" is not a port number (1-65535)",
	} {
		if _, err := email.Plain(in); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Plain(%q) = %v, want %q", in, err, want)
		}
	}
}

// TestValidate: a Config built in code, not parsed from a URL, is refused
// by the same rules, naming what is wrong.
func TestValidate(t *testing.T) {
	t.Parallel()
	good := email.Config{Host: "mail.example.com", Port: 587, TLS: email.TLSStartTLS, From: "stead@example.com"}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v", good, err)
	}
	for _, tc := range []struct {
		change func(*email.Config)
		want   string
	}{
		{func(c *email.Config) { c.Host = "" }, "the SMTP host is missing"},
		{func(c *email.Config) { c.Port = 0 }, "the SMTP port 0 is not a port number (1-65535)"},
		{func(c *email.Config) { c.Port = 65536 }, "the SMTP port 65536 is not a port number (1-65535)"},
	} {
		c := good
		tc.change(&c)
		if err := c.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("Validate(%+v) = %v, want %q", c, err, tc.want)
		}
	}
}
