package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"time"

	"stead/notify"
)

// SMTP is spoken with the standard library's net/smtp: one message to one
// recipient per connection, which is all a notification needs. It has no
// context, so the connection carries the deadline (notify.Timeout) and is
// cut when ctx ends. DATA is sent through the client's textproto
// connection so that the server's last reply (its queue id) reaches the
// delivery log.

// result is what one SMTP transaction did.
type result struct {
	// code is the last reply's code (0 when none came), reply its text.
	code  int
	reply string
	// final: the server refused the recipient or the message for good.
	final bool
	err   error
}

func (c *Channel) tlsConfig() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.cfg.TLSConfig != nil {
		cfg = c.cfg.TLSConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = c.cfg.Host
	}
	return cfg
}

// transmit sends msg from one address to one over a new connection.
func (c *Channel) transmit(ctx context.Context, from, to string, msg []byte) result {
	ctx, cancel := context.WithTimeout(ctx, notify.Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.cfg.Addr())
	if err != nil {
		return result{err: fmt.Errorf("connect to %s: %w", c.cfg.Addr(), err)}
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if c.cfg.TLS == TLSImplicit {
		tc := tls.Client(conn, c.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			return result{err: fmt.Errorf("TLS with %s: %w", c.cfg.Addr(), err)}
		}
		conn = tc
	}
	cl, err := smtp.NewClient(conn, c.cfg.Host)
	if err != nil {
		return replyResult("greeting", err)
	}
	defer cl.Close()
	if c.cfg.TLS == TLSStartTLS {
		if ok, _ := cl.Extension("STARTTLS"); !ok {
			return result{err: fmt.Errorf("%s does not offer STARTTLS; nothing was sent in the clear (use tls=tls for implicit TLS, or tls=none for a loopback test server)", c.cfg.Addr())}
		}
		if err := cl.StartTLS(c.tlsConfig()); err != nil {
			return replyResult("STARTTLS", err)
		}
	}
	if c.cfg.Username != "" {
		if ok, _ := cl.Extension("AUTH"); !ok {
			return result{err: fmt.Errorf("%s does not offer AUTH, and credentials are configured", c.cfg.Addr())}
		}
		if err := cl.Auth(smtp.PlainAuth("", c.cfg.Username, c.cfg.Password, c.cfg.Host)); err != nil {
			return replyResult("AUTH", err)
		}
	}
	if err := cl.Mail(from); err != nil {
		return replyResult("MAIL FROM:<"+from+">", err)
	}
	if err := cl.Rcpt(to); err != nil {
		r := replyResult("RCPT TO:<"+to+">", err)
		r.final = r.code >= 500
		return r
	}
	r := data(cl.Text, msg)
	if r.err == nil {
		_ = cl.Quit()
	}
	return r
}

// data sends DATA, the message, and reads the server's verdict.
func data(t *textproto.Conn, msg []byte) result {
	id, err := t.Cmd("DATA")
	if err != nil {
		return result{err: fmt.Errorf("DATA: %w", err)}
	}
	t.StartResponse(id)
	_, _, err = t.ReadResponse(354)
	t.EndResponse(id)
	if err != nil {
		return replyResult("DATA", err)
	}
	w := t.DotWriter()
	if _, err := w.Write(msg); err != nil {
		return result{err: fmt.Errorf("send the message: %w", err)}
	}
	if err := w.Close(); err != nil {
		return result{err: fmt.Errorf("send the message: %w", err)}
	}
	code, reply, err := t.ReadResponse(250)
	if err != nil {
		r := replyResult("end of DATA", err)
		r.final = r.code >= 500
		return r
	}
	return result{code: code, reply: fmt.Sprintf("%d %s", code, reply)}
}

// replyResult is a failed step: with the server's reply when it sent one.
func replyResult(step string, err error) result {
	var te *textproto.Error
	if errors.As(err, &te) {
		return result{code: te.Code, reply: fmt.Sprintf("%d %s", te.Code, te.Msg), err: fmt.Errorf("%s: the server answered %d %s", step, te.Code, te.Msg)}
	}
	return result{err: fmt.Errorf("%s: %w", step, err)}
}
