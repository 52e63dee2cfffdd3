package email

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
)

// EnvURL is the environment variable that configures the SMTP server:
// smtp://user:pass@host:587?tls=starttls&from=stead@example.com.
const EnvURL = "STEAD_SMTP_URL"

// TLS is how the connection to the SMTP server is protected.
type TLS string

// The TLS modes.
const (
	// TLSNone: plain SMTP, for a server on loopback (a local test server
	// such as mailpit). Credentials are refused with it.
	TLSNone TLS = "none"
	// TLSStartTLS: plain SMTP upgraded with STARTTLS before anything is
	// sent (port 587); a server that does not offer it is refused.
	TLSStartTLS TLS = "starttls"
	// TLSImplicit: TLS from the first byte (port 465, "smtps").
	TLSImplicit TLS = "tls"
)

// Config is the SMTP server mail goes out through.
type Config struct {
	Host string
	Port int
	// Username and Password, when Username is set, authenticate with AUTH
	// PLAIN (only over TLS or to loopback).
	Username string
	Password string
	TLS      TLS
	// From is the sender: "stead@example.com" or "Stead <stead@example.com>".
	From string
	// TLSConfig, when set, is the TLS configuration of STARTTLS and
	// implicit TLS (a private CA's RootCAs; tests). Its ServerName defaults
	// to Host.
	TLSConfig *tls.Config
}

// ParseURL reads an SMTP URL:
//
//	smtp://[user[:password]@]host[:port][?tls=none|starttls|tls][&from=ADDRESS]
//	smtps://[user[:password]@]host[:port][?from=ADDRESS]
//
// smtp:// defaults to STARTTLS on port 587 (port 25 with tls=none, 465 with
// tls=tls); smtps:// is implicit TLS on port 465. from is required.
// Errors name the part that is wrong and what it should be.
func ParseURL(s string) (Config, error) {
	var c Config
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return c, fmt.Errorf("%s is not a URL (%w); write it as smtp://user:pass@host:587?tls=starttls&from=stead@example.com", EnvURL, unwrapURL(err))
	}
	switch u.Scheme {
	case "smtp":
		c.TLS = TLSStartTLS
	case "smtps":
		c.TLS = TLSImplicit
	default:
		return c, fmt.Errorf("%s: the scheme is %q; use smtp:// (STARTTLS or, with tls=none, plain) or smtps:// (implicit TLS)", EnvURL, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return c, fmt.Errorf("%s: the host is missing; write smtp://host:port", EnvURL)
	}
	if u.Path != "" && u.Path != "/" {
		return c, fmt.Errorf("%s: the path %q means nothing here; remove it (options go in ?tls=…&from=…)", EnvURL, u.Path)
	}
	if u.Fragment != "" {
		return c, fmt.Errorf("%s: the fragment #%s means nothing here; remove it", EnvURL, u.Fragment)
	}
	c.Host = u.Hostname()
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return c, fmt.Errorf("%s: the query is not valid (%w); write ?tls=starttls&from=stead@example.com", EnvURL, err)
	}
	for k, vs := range q {
		if len(vs) > 1 {
			return c, fmt.Errorf("%s: %s is given %d times; give it once", EnvURL, k, len(vs))
		}
		switch k {
		case "tls":
			if u.Scheme == "smtps" && vs[0] != string(TLSImplicit) {
				return c, fmt.Errorf("%s: smtps:// is implicit TLS, so tls=%s contradicts it; use smtp://…?tls=%s", EnvURL, vs[0], vs[0])
			}
			c.TLS = TLS(vs[0])
		case "from":
			c.From = vs[0]
		default:
			return c, fmt.Errorf("%s: unknown option %q; the options are tls (none, starttls, tls) and from", EnvURL, k)
		}
	}
	switch p := u.Port(); {
	case p != "":
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return c, fmt.Errorf("%s: the port %q is not a port number (1-65535)", EnvURL, p)
		}
		c.Port = n
	case c.TLS == TLSImplicit:
		c.Port = 465
	case c.TLS == TLSNone:
		c.Port = 25
	default:
		c.Port = 587
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%s: %w", EnvURL, err)
	}
	return c, nil
}

// unwrapURL drops url.Error's repetition of the whole URL, which may hold
// a password.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// FromEnv reads EnvURL with getenv; ok is false when it is not set.
func FromEnv(getenv func(string) string) (c Config, ok bool, err error) {
	v := getenv(EnvURL)
	if strings.TrimSpace(v) == "" {
		return Config{}, false, nil
	}
	c, err = ParseURL(v)
	return c, err == nil, err
}

// Plain is the configuration of `stead dev --smtp HOST:PORT`: plain SMTP,
// no credentials, from "Stead <stead@localhost>".
func Plain(hostPort string) (Config, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" {
		return Config{}, fmt.Errorf("--smtp must be HOST:PORT, like 127.0.0.1:1025 (got %q)", hostPort)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return Config{}, fmt.Errorf("--smtp: the port %q is not a port number (1-65535)", port)
	}
	c := Config{Host: host, Port: n, TLS: TLSNone, From: "Stead <stead@localhost>"}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("--smtp: %w", err)
	}
	return c, nil
}

// Validate refuses a configuration that cannot send, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Host == "":
		return errors.New("the SMTP host is missing")
	case c.Port < 1 || c.Port > 65535:
		return fmt.Errorf("the SMTP port %d is not a port number (1-65535)", c.Port)
	case c.TLS != TLSNone && c.TLS != TLSStartTLS && c.TLS != TLSImplicit:
		return fmt.Errorf("tls=%q is not a TLS mode; use none (loopback test servers), starttls or tls", c.TLS)
	case c.From == "":
		return errors.New("from is missing: add ?from=stead@example.com (the address mail is sent from)")
	case c.Username == "" && c.Password != "":
		return errors.New("a password without a user name: write smtp://user:password@host")
	case c.Username != "" && c.TLS == TLSNone && !loopback(c.Host):
		return fmt.Errorf("credentials with tls=none would cross the network in the clear to %s; use tls=starttls or tls", c.Host)
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		return fmt.Errorf("from %q is not a mail address (%w); write from=stead@example.com", c.From, err)
	}
	return nil
}

// Addr is host:port.
func (c Config) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// String is the configuration as a URL with the password left out, for
// start-up lines and logs.
func (c Config) String() string {
	u := url.URL{Scheme: "smtp", Host: c.Addr()}
	if c.TLS == TLSImplicit {
		u.Scheme = "smtps"
	}
	if c.Username != "" {
		u.User = url.User(c.Username)
	}
	q := url.Values{}
	if c.TLS != TLSImplicit {
		q.Set("tls", string(c.TLS))
	}
	q.Set("from", c.From)
	u.RawQuery = q.Encode()
	return u.String()
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
