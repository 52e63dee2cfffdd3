// Package mailpit starts mailpit (github.com/axllent/mailpit), a real SMTP
// server that keeps what it receives and serves it over an HTTP API, for
// tests of the email channel:
//
//	mp := mailpit.Start(t, mailpit.Options{})   // skips (or, with CI=true, fails) without the binary
//	// send mail to mp.Host:mp.Port …
//	msgs := mp.WaitFor(t, 2)                     // what arrived, newest first
//	full := mp.Message(t, msgs[0].ID)            // its text and HTML
//
// The binary is $STEAD_MAILPIT, else bin/mailpit at the root of this
// repository (`make mailpit` builds it, pinned), else mailpit on PATH.
package mailpit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"stead/infra/localproc"
)

// Version is the mailpit the Makefile builds (make mailpit).
const Version = "v1.33.1"

// HowToRun is what a developer without the binary runs to get it.
const HowToRun = "make mailpit (go install github.com/axllent/mailpit@" + Version + " into bin/)"

// Wait bounds every wait of this package: the server's start, a message's
// arrival.
const Wait = 20 * time.Second

// Options choose how the server behaves.
type Options struct {
	// TLS, when set, is the server's certificate (CertFile, KeyFile): it
	// offers STARTTLS, or with RequireTLS speaks implicit TLS only.
	TLS *Cert
	// RequireSTARTTLS refuses mail before STARTTLS; RequireTLS makes the
	// port implicit TLS.
	RequireSTARTTLS, RequireTLS bool
	// Users, when set, are the accepted credentials (user → password);
	// mail without them is refused.
	Users map[string]string
	// AllowedRecipients, when set, is a regular expression: other
	// recipients are refused with 550.
	AllowedRecipients string
	// Chaos, when set, is mailpit's --chaos-triggers ("Recipient:451:100"
	// answers every RCPT with 451).
	Chaos string
}

// Server is a running mailpit.
type Server struct {
	// Host and Port are the SMTP server's; API is the HTTP API's base
	// URL, http://127.0.0.1:PORT.
	Host string
	Port int
	API  string

	cmd    *exec.Cmd
	exited chan struct{}
	log    *localproc.Log
}

// Addr is the SMTP server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

var errNotInstalled = errors.New("mailpit is not built")

// Binary finds the mailpit binary.
func Binary() (string, error) {
	if p := os.Getenv("STEAD_MAILPIT"); p != "" {
		return p, nil
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		p := filepath.Join(filepath.Dir(file), "..", "..", "bin", "mailpit")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("mailpit"); err == nil {
		return p, nil
	}
	return "", errNotInstalled
}

// Start starts a server for one test on free loopback ports and stops it
// when the test ends. Without the binary the test is skipped with
// HowToRun; with CI=true it fails instead.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		localproc.Unavailable(t, "mailpit unavailable: %v; to run these tests: %s", err, HowToRun)
	}
	dir := t.TempDir()
	var last error
	for range 3 { // a free port may be taken between the probe and the bind
		srv, err := startOn(bin, dir, o)
		if err == nil {
			t.Cleanup(srv.stop)
			return srv
		}
		last = err
	}
	t.Fatalf("start mailpit: %v", last)
	return nil
}

func startOn(bin, dir string, o Options) (*Server, error) {
	smtpPort, err := localproc.FreePort()
	if err != nil {
		return nil, err
	}
	httpPort, err := localproc.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--database", filepath.Join(dir, fmt.Sprintf("mailpit-%d.db", smtpPort)),
		"--smtp", "127.0.0.1:" + strconv.Itoa(smtpPort),
		"--listen", "127.0.0.1:" + strconv.Itoa(httpPort),
		"--smtp-disable-rdns", "--disable-version-check",
	}
	if o.TLS != nil {
		args = append(args, "--smtp-tls-cert", o.TLS.CertFile, "--smtp-tls-key", o.TLS.KeyFile)
	}
	if o.RequireSTARTTLS {
		args = append(args, "--smtp-require-starttls")
	}
	if o.RequireTLS {
		args = append(args, "--smtp-require-tls")
	}
	if len(o.Users) > 0 {
		var lines []string
		for u, p := range o.Users {
			sum := sha1.Sum([]byte(p)) // htpasswd's {SHA}, which mailpit reads
			lines = append(lines, u+":{SHA}"+base64.StdEncoding.EncodeToString(sum[:]))
		}
		f := filepath.Join(dir, fmt.Sprintf("users-%d", smtpPort))
		if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--smtp-auth-file", f)
	}
	if o.AllowedRecipients != "" {
		args = append(args, "--smtp-allowed-recipients", o.AllowedRecipients)
	}
	if o.Chaos != "" {
		args = append(args, "--enable-chaos", "--chaos-triggers", o.Chaos)
	}
	log := &localproc.Log{Max: 32 << 10}
	cmd := exec.Command(bin, args...)
	// mailpit also reads MP_* variables; the test's options are all it gets.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{Host: "127.0.0.1", Port: smtpPort, API: "http://127.0.0.1:" + strconv.Itoa(httpPort), cmd: cmd, exited: make(chan struct{}), log: log}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls the HTTP API and the SMTP port until both answer.
func (s *Server) waitReady() error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(Wait)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("mailpit exited before it was ready: %s", s.log.String())
		default:
		}
		resp, err := client.Get(s.API + "/api/v1/messages?limit=1")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
					c.Close()
					return nil
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // poll, bounded by the deadline
	}
	return fmt.Errorf("mailpit at %s did not answer within %s: %s", s.API, Wait, s.log.String())
}

func (s *Server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
	}
}

// Address is a mailbox as the API names it.
type Address struct {
	Name    string `json:"Name"`
	Address string `json:"Address"`
}

// Summary is a received message in the list.
type Summary struct {
	ID        string    `json:"ID"`
	MessageID string    `json:"MessageID"`
	From      Address   `json:"From"`
	To        []Address `json:"To"`
	Subject   string    `json:"Subject"`
}

// Message is a received message, its parts decoded.
type Message struct {
	Summary
	Text string `json:"Text"`
	HTML string `json:"HTML"`
}

// Messages lists what the server received, newest first.
func (s *Server) Messages(t testing.TB) []Summary {
	t.Helper()
	var out struct {
		Messages []Summary `json:"messages"`
	}
	s.get(t, "/api/v1/messages?limit=500", &out)
	return out.Messages
}

// Message reads one received message.
func (s *Server) Message(t testing.TB, id string) Message {
	t.Helper()
	var m Message
	s.get(t, "/api/v1/message/"+url.PathEscape(id), &m)
	return m
}

// Headers reads one received message's headers.
func (s *Server) Headers(t testing.TB, id string) map[string][]string {
	t.Helper()
	var h map[string][]string
	s.get(t, "/api/v1/message/"+url.PathEscape(id)+"/headers", &h)
	return h
}

// WaitFor waits until the server has received at least n messages and
// returns them, newest first.
func (s *Server) WaitFor(t testing.TB, n int) []Summary {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for {
		ms := s.Messages(t)
		if len(ms) >= n {
			return ms
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailpit received %d messages in %s, want %d: %+v", len(ms), Wait, n, ms)
		}
		time.Sleep(20 * time.Millisecond) // poll, bounded by the deadline
	}
}

var client = &http.Client{Timeout: 10 * time.Second}

func (s *Server) get(t testing.TB, path string, v any) {
	t.Helper()
	resp, err := client.Get(s.API + path)
	if err != nil {
		t.Fatalf("mailpit GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mailpit GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("mailpit GET %s: %v", path, err)
	}
}

// Cert is a self-signed certificate for 127.0.0.1 and localhost, in files
// for the server, and the pool a client trusts it with.
type Cert struct {
	CertFile, KeyFile string
	Pool              *x509.CertPool
}

// ClientTLS is a client configuration that trusts only c.
func (c *Cert) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: c.Pool, MinVersion: tls.VersionTLS12}
}

// NewCert makes a Cert in the test's temporary folder.
func NewCert(t testing.TB) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "stead test SMTP"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &Cert{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), Pool: x509.NewCertPool()}
	if err := os.WriteFile(c.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	c.Pool.AddCert(cert)
	return c
}
