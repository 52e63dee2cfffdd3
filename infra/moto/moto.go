// Package moto starts moto_server, a local AWS emulator that speaks the
// DynamoDB and S3 protocols, for tests. One server on a free loopback port
// serves both services.
//
// A test package shares one server:
//
//	var aws moto.Shared
//
//	func TestMain(m *testing.M) { os.Exit(aws.Run(m)) }
//
//	func TestX(t *testing.T) {
//		srv := aws.Get(t) // skips (or, with CI=true, fails) without moto_server
//		db := srv.DynamoDB(t)
//	}
//
// Without moto_server on PATH the test is skipped with the command that
// installs and runs it; with CI=true it fails instead, so CI never passes by
// skipping.
//
// # Serialized requests
//
// moto_server 5.2.1 does not apply a conditional write atomically when
// requests arrive concurrently: it checks the condition and writes the item
// without a lock. Measured: 10 concurrent UpdateItems of one item, each
// conditional on the same version, let 2 or 3 of them succeed in 30 of 40
// rounds. DynamoDB serializes writes to an item, and the store's races rely
// on it, so clients here talk to moto through a loopback proxy that passes
// one request at a time (Server.URL). Server.Direct is moto itself.
package moto

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"stead/infra/localproc"
)

// Binary is the emulator's command.
const Binary = "moto_server"

// HowToRun is what a developer without the emulator runs to get it.
const HowToRun = "pip install 'moto[server]==5.2.1' && moto_server -H 127.0.0.1 -p 5055 (the tests start their own on a free port; they only need moto_server on PATH)"

// ReadyTimeout bounds how long Start waits for the server to answer.
const ReadyTimeout = 20 * time.Second

// Server is a running moto_server.
type Server struct {
	// URL is the endpoint of every emulated service, http://127.0.0.1:PORT:
	// the serializing proxy in front of moto.
	URL string
	// Direct is moto's own endpoint.
	Direct string
	proxy  *http.Server
	cmd    *exec.Cmd
	// exited is closed when the process has exited.
	exited chan struct{}
	log    *localproc.Log
}

// Region is the region clients are configured with.
const Region = "us-east-1"

// errNotInstalled: moto_server is not on PATH.
var errNotInstalled = errors.New(Binary + " is not on PATH")

// Start starts a server for one test and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	srv, err := start()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { srv.Stop() })
	return srv
}

// unavailable skips the test, or fails it when CI=true.
func unavailable(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("moto_server unavailable: %v; to run these tests: %s", err, HowToRun)
	if os.Getenv("CI") == "true" || !errors.Is(err, errNotInstalled) {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Shared is one server for a whole test package, started by the first test
// that asks for it and stopped by Run when the package's tests end.
type Shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Get returns the package's server, starting it on first use. It skips or
// fails t like Start when the server cannot be had.
func (s *Shared) Get(t testing.TB) *Server {
	t.Helper()
	s.once.Do(func() { s.srv, s.err = start() })
	if s.err != nil {
		unavailable(t, s.err)
	}
	return s.srv
}

// Run runs the package's tests and then stops the server, for TestMain.
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	s.once.Do(func() {}) // no server was started: nothing to stop
	if s.srv != nil {
		s.srv.Stop()
	}
	return code
}

func start() (*Server, error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, errNotInstalled
	}
	var last error
	for range 3 { // the free port may be taken between the probe and the bind
		srv, err := startOn(bin)
		if err == nil {
			return srv, nil
		}
		last = err
	}
	return nil, last
}

func startOn(bin string) (*Server, error) {
	port, err := localproc.FreePort()
	if err != nil {
		return nil, err
	}
	log := &localproc.Log{Max: 64 << 10, Show: 2000}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	srv := &Server{Direct: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, exited: make(chan struct{}), log: log}
	go func() {
		_ = cmd.Wait()
		close(srv.exited)
	}()
	if err := srv.waitReady(); err != nil {
		srv.Stop()
		return nil, err
	}
	if err := srv.serveProxy(); err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

// serveProxy starts the loopback proxy that passes one request at a time to
// moto (see the package comment).
func (s *Server) serveProxy() error {
	target, err := url.Parse(s.Direct)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the moto proxy: %w", err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	s.proxy = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	s.URL = "http://" + l.Addr().String()
	go func() { _ = s.proxy.Serve(l) }()
	return nil
}

// waitReady polls the server's own API until it answers.
func (s *Server) waitReady() error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(ReadyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("moto_server exited before it was ready: %s", s.log.String())
		default:
		}
		resp, err := client.Get(s.Direct + "/moto-api/data.json")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("moto_server at %s did not answer within %s: %s", s.Direct, ReadyTimeout, s.log.String())
}

// Stop closes the proxy, kills the server and waits for it to exit.
func (s *Server) Stop() {
	if s.proxy != nil {
		_ = s.proxy.Close()
	}
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

// Config is an AWS config for the emulator: static test credentials, the
// test region, and the client options given.
func (s *Server) Config() aws.Config {
	return aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
}

// DynamoDB returns a client of the emulator's DynamoDB, with optFns applied
// after the endpoint is set.
func (s *Server) DynamoDB(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	opts := append([]func(*dynamodb.Options){func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(s.URL) }}, optFns...)
	return dynamodb.NewFromConfig(s.Config(), opts...)
}

// S3 returns a path-style client of the emulator's S3.
func (s *Server) S3(optFns ...func(*s3.Options)) *s3.Client {
	opts := append([]func(*s3.Options){func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.URL)
		o.UsePathStyle = true
	}}, optFns...)
	return s3.NewFromConfig(s.Config(), opts...)
}

// CreateBucket makes a bucket named name.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	_, err := s.S3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}
