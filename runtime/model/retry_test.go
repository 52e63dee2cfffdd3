package model_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"stead/runtime/egress"
	"stead/runtime/model"
	"stead/runtime/redact"
)

// scripted answers each Complete with the next result.
type scripted struct {
	mu      sync.Mutex
	results []error
	calls   int
	block   bool // wait for ctx instead of answering
}

func (s *scripted) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.block {
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		return model.Response{}, ctx.Err()
	}
	err := s.results[0]
	s.results = s.results[1:]
	if err != nil {
		return model.Response{}, err
	}
	return model.Response{Content: "ok"}, nil
}

// fakeTime is a clock that sleeping moves.
type fakeTime struct {
	now   time.Time
	waits []time.Duration
}

func (f *fakeTime) Now() time.Time { return f.now }
func (f *fakeTime) Sleep(_ context.Context, d time.Duration) error {
	f.waits = append(f.waits, d)
	f.now = f.now.Add(d)
	return nil
}

func policy(ft *fakeTime) model.RetryPolicy {
	return model.RetryPolicy{MaxRetries: 3, Timeout: time.Minute, Now: ft.Now, Sleep: ft.Sleep, Jitter: func() float64 { return 0 }}
}

var (
	rateLimited = &model.Error{Provider: "p", Status: 429, Retryable: true}
	serverError = &model.Error{Provider: "p", Status: 502, Retryable: true}
	badRequest  = &model.Error{Provider: "p", Status: 400, Message: "bad"}
)

func TestCompleteBacksOffExponentiallyWithJitter(t *testing.T) {
	t.Parallel()
	ft := &fakeTime{now: time.Unix(0, 0)}
	p := &scripted{results: []error{serverError, serverError, serverError, nil}}
	var infos []model.RetryInfo
	pol := policy(ft)
	pol.OnRetry = func(ri model.RetryInfo) { infos = append(infos, ri) }
	resp, n, err := model.Complete(context.Background(), p, model.Request{}, pol)
	if err != nil || resp.Content != "ok" || n != 4 {
		t.Fatalf("Complete = %+v, %d, %v", resp, n, err)
	}
	// Jitter 0: half of 500ms, 1s, 2s.
	if want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second}; !slices.Equal(ft.waits, want) {
		t.Errorf("waits = %v, want %v", ft.waits, want)
	}
	if len(infos) != 3 || infos[2].Attempt != 3 || infos[2].Wait != time.Second {
		t.Errorf("retry infos = %+v", infos)
	}
	// Jitter 1 waits the full backoff, capped by MaxDelay.
	ft = &fakeTime{now: time.Unix(0, 0)}
	pol = policy(ft)
	pol.Jitter = func() float64 { return 0.999999 }
	pol.MaxDelay = 700 * time.Millisecond
	p = &scripted{results: []error{serverError, serverError, nil}}
	if _, _, err := model.Complete(context.Background(), p, model.Request{}, pol); err != nil {
		t.Fatal(err)
	}
	if ft.waits[0] < 499*time.Millisecond || ft.waits[1] > 700*time.Millisecond || ft.waits[1] < 699*time.Millisecond {
		t.Errorf("waits = %v", ft.waits)
	}
}

func TestCompleteHonoursRetryAfterWithinTheDeadline(t *testing.T) {
	t.Parallel()
	ft := &fakeTime{now: time.Unix(0, 0)}
	ra := &model.Error{Provider: "p", Status: 429, Retryable: true, RetryAfter: 30 * time.Second}
	p := &scripted{results: []error{ra, ra, nil}}
	_, n, err := model.Complete(context.Background(), p, model.Request{}, policy(ft))
	// 30s, then another 30s would reach the 1m deadline: give up after 2.
	var gu *model.GiveUpError
	if !errors.As(err, &gu) || n != 2 || !slices.Equal(ft.waits, []time.Duration{30 * time.Second}) {
		t.Fatalf("err = %v, attempts %d, waits %v", err, n, ft.waits)
	}
	if !strings.Contains(err.Error(), "waiting 30s more would pass the 1m0s deadline") || !errors.Is(err, ra) {
		t.Errorf("error = %q", err)
	}
}

func TestCompleteStopsAtRefusalsAndRetryCount(t *testing.T) {
	t.Parallel()
	ft := &fakeTime{now: time.Unix(0, 0)}
	p := &scripted{results: []error{rateLimited, badRequest}}
	_, n, err := model.Complete(context.Background(), p, model.Request{}, policy(ft))
	if !errors.Is(err, badRequest) || n != 2 {
		t.Fatalf("err = %v after %d attempts, want the 400 after 2", err, n)
	}
	var gu *model.GiveUpError
	if errors.As(err, &gu) {
		t.Error("a refusal is not a give-up")
	}
	p = &scripted{results: []error{rateLimited, rateLimited}}
	pol := policy(ft)
	pol.MaxRetries = 1
	_, n, err = model.Complete(context.Background(), p, model.Request{}, pol)
	if !errors.As(err, &gu) || n != 2 || !strings.Contains(err.Error(), "gave up after 2 attempts") {
		t.Fatalf("err = %v after %d", err, n)
	}
}

func TestCompleteRequestTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	ft := &fakeTime{now: time.Unix(0, 0)}
	p := &scripted{block: true}
	pol := policy(ft)
	pol.MaxRetries = 1
	pol.RequestTimeout = 5 * time.Millisecond
	_, n, err := model.Complete(context.Background(), p, model.Request{}, pol)
	var pe *model.Error
	if !errors.As(err, &pe) || pe.Code != "timeout" || n != 2 || p.calls != 2 {
		t.Fatalf("err = %v, attempts %d, calls %d", err, n, p.calls)
	}
	// A cancelled caller is not retried and gets its own error back.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := model.Complete(ctx, &scripted{block: true}, model.Request{}, pol); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	got := redact.String(`key sk-1 and "a\"b" and a"b`, "sk-1", `a"b`, "")
	if got != `key [REDACTED] and "[REDACTED]" and [REDACTED]` {
		t.Errorf("Redact = %q", got)
	}
}

// TestCompleteRetryDefaults: MaxRetries 0 is one attempt, a negative
// MaxRetries is 3 retries, and a zero Timeout is 2 minutes.
func TestCompleteRetryDefaults(t *testing.T) {
	t.Parallel()
	fails := func(n int, err error) *scripted {
		s := &scripted{}
		for range n {
			s.results = append(s.results, err)
		}
		return s
	}
	ft := &fakeTime{now: time.Unix(0, 0)}
	pol := policy(ft)
	pol.MaxRetries = 0
	p := fails(2, serverError)
	_, n, err := model.Complete(context.Background(), p, model.Request{}, pol)
	var gu *model.GiveUpError
	if !errors.As(err, &gu) || n != 1 || p.calls != 1 {
		t.Errorf("MaxRetries 0: err = %v after %d attempts, %d calls; want one", err, n, p.calls)
	}

	pol.MaxRetries = -1
	p = fails(5, serverError)
	_, n, err = model.Complete(context.Background(), p, model.Request{}, pol)
	if !errors.As(err, &gu) || n != 4 || p.calls != 4 {
		t.Errorf("MaxRetries -1: err = %v after %d attempts, %d calls; want 4", err, n, p.calls)
	}

	for _, tc := range []struct {
		retryAfter time.Duration
		attempts   int
	}{
		{119 * time.Second, 2}, // ends before the 2m deadline
		{120 * time.Second, 1}, // would end on it
	} {
		ft := &fakeTime{now: time.Unix(0, 0)}
		pol := policy(ft)
		pol.Timeout = 0
		ra := &model.Error{Provider: "p", Status: 429, Retryable: true, RetryAfter: tc.retryAfter}
		_, n, err := model.Complete(context.Background(), &scripted{results: []error{ra, nil}}, model.Request{}, pol)
		if n != tc.attempts || (tc.attempts == 2) != (err == nil) {
			t.Errorf("zero Timeout, Retry-After %s: %d attempts, %v; want %d", tc.retryAfter, n, err, tc.attempts)
		}
	}
}

// deadlines answers each Complete with the next result and records how
// long its request had.
type deadlines struct {
	results []error
	left    []time.Duration
}

func (d *deadlines) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(24 * time.Hour)
	}
	d.left = append(d.left, time.Until(dl))
	err := d.results[0]
	d.results = d.results[1:]
	return model.Response{}, err
}

// TestCompleteBoundsEachRequest: a request has RequestTimeout, a minute by
// default, and never more than what is left of Timeout.
func TestCompleteBoundsEachRequest(t *testing.T) {
	t.Parallel()
	ft := &fakeTime{now: time.Unix(0, 0)}
	pol := policy(ft)
	pol.Timeout = 10 * time.Minute
	p := &deadlines{results: []error{nil}}
	if _, _, err := model.Complete(context.Background(), p, model.Request{}, pol); err != nil {
		t.Fatal(err)
	}
	if p.left[0] > time.Minute || p.left[0] < 50*time.Second {
		t.Errorf("default request timeout: the request had %s, want a minute", p.left[0])
	}

	ft = &fakeTime{now: time.Unix(0, 0)}
	pol = policy(ft)
	pol.RequestTimeout = 45 * time.Second
	ra := &model.Error{Provider: "p", Status: 429, Retryable: true, RetryAfter: 50 * time.Second}
	p = &deadlines{results: []error{ra, nil}}
	if _, _, err := model.Complete(context.Background(), p, model.Request{}, pol); err != nil {
		t.Fatal(err)
	}
	// The first request had its 45s; after the 50s wait, 10s of the minute
	// are left.
	if p.left[0] > 45*time.Second || p.left[0] < 35*time.Second || p.left[1] > 10*time.Second {
		t.Errorf("the requests had %v, want 45s and at most 10s", p.left)
	}
}

// TestCompleteBackoffStaysWithinMaxDelay: past the point where
// BaseDelay·2ⁿ would overflow, the wait is still MaxDelay's.
func TestCompleteBackoffStaysWithinMaxDelay(t *testing.T) {
	t.Parallel()
	ft := &fakeTime{now: time.Unix(0, 0)}
	pol := policy(ft)
	pol.MaxRetries = 70
	pol.Timeout = 24 * time.Hour
	pol.MaxDelay = time.Second
	p := &scripted{}
	for range 70 {
		p.results = append(p.results, serverError)
	}
	p.results = append(p.results, nil)
	if _, n, err := model.Complete(context.Background(), p, model.Request{}, pol); err != nil || n != 71 {
		t.Fatalf("Complete = %d attempts, %v", n, err)
	}
	// Jitter 0: half of 500ms, then half of the 1s cap.
	for i, w := range ft.waits {
		want := 500 * time.Millisecond
		if i == 0 {
			want = 250 * time.Millisecond
		}
		if w != want {
			t.Fatalf("wait %d = %s, want %s (waits %v)", i, w, want, ft.waits)
		}
	}
}

// TestCompleteReturnsTheCallersErrorWhenCancelled: a caller that cancels
// while a retryable failure is answered, or during the wait before the
// next attempt, gets its context's error after one attempt, not a
// give-up; the real wait ends when the caller cancels.
func TestCompleteReturnsTheCallersErrorWhenCancelled(t *testing.T) {
	t.Parallel()
	check := func(name string, err error, n, calls int) {
		t.Helper()
		var gu *model.GiveUpError
		if !errors.Is(err, context.Canceled) || errors.As(err, &gu) || n != 1 || calls != 1 {
			t.Errorf("%s: err = %v after %d attempts, %d calls; want context.Canceled after one", name, err, n, calls)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	ft := &fakeTime{now: time.Unix(0, 0)}
	pol := policy(ft)
	p := &cancelling{cancel: cancel, err: rateLimited}
	_, n, err := model.Complete(ctx, p, model.Request{}, pol)
	check("cancelled while answering", err, n, p.calls)

	ctx, cancel = context.WithCancel(context.Background())
	pol = policy(&fakeTime{now: time.Unix(0, 0)})
	pol.Sleep = func(ctx context.Context, _ time.Duration) error {
		cancel()
		return ctx.Err()
	}
	p2 := &scripted{results: []error{rateLimited, nil}}
	_, n, err = model.Complete(ctx, p2, model.Request{}, pol)
	check("cancelled during the wait", err, n, p2.calls)

	// The policy's own wait: an hour, unless the caller cancels.
	ctx, cancel = context.WithCancel(context.Background())
	pol = model.RetryPolicy{MaxRetries: 1, Timeout: 24 * time.Hour, BaseDelay: 2 * time.Hour, MaxDelay: 2 * time.Hour,
		Jitter: func() float64 { return 0 }, OnRetry: func(model.RetryInfo) { cancel() }}
	p3 := &scripted{results: []error{rateLimited, nil}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, n, err = model.Complete(ctx, p3, model.Request{}, pol)
	}()
	select {
	case <-done:
		check("cancelled during a real wait", err, n, p3.calls)
	case <-time.After(10 * time.Second):
		t.Error("the wait went on after the caller cancelled")
	}
}

// cancelling cancels its caller's context, then answers err.
type cancelling struct {
	cancel context.CancelFunc
	err    error
	calls  int
}

func (c *cancelling) Complete(context.Context, model.Request) (model.Response, error) {
	c.calls++
	c.cancel()
	return model.Response{}, c.err
}

// TestRequestTimeoutNamesTheProvider: a request its deadline ended, which
// the provider reported as a refusal of its own, becomes a retryable
// timeout that keeps the provider's name.
func TestRequestTimeoutNamesTheProvider(t *testing.T) {
	t.Parallel()
	pol := policy(&fakeTime{now: time.Unix(0, 0)})
	pol.MaxRetries = 0
	pol.RequestTimeout = 5 * time.Millisecond
	_, _, err := model.Complete(context.Background(), &refusingLate{}, model.Request{}, pol)
	var pe *model.Error
	if !errors.As(err, &pe) || pe.Provider != "openai gpt-4o-mini" || pe.Code != "timeout" || !pe.Retryable {
		t.Errorf("err = %v (%#v), want a retryable timeout of openai gpt-4o-mini", err, pe)
	}
}

// refusingLate waits for its request's end and reports it as a refusal.
type refusingLate struct{}

func (refusingLate) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	<-ctx.Done()
	return model.Response{}, &model.Error{Provider: "openai gpt-4o-mini", Message: "request canceled"}
}

// TestErrorUnwrapsItsCause: the egress policy's refusal stays reachable
// through a provider error and a give-up.
func TestErrorUnwrapsItsCause(t *testing.T) {
	t.Parallel()
	refusal := &egress.RefusedError{Reason: "a loopback address"}
	err := error(&model.GiveUpError{Attempts: 1, Err: &model.Error{Provider: "openai m", Message: "refused", Err: refusal}})
	var re *egress.RefusedError
	if !errors.As(err, &re) || re != refusal {
		t.Errorf("errors.As(%v, *egress.RefusedError) = %v", err, re)
	}
}

// TestIsRetryable: a provider error says itself whether it is retryable,
// also when wrapped; any other error is not.
func TestIsRetryable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"rate limited", rateLimited, true},
		{"wrapped", fmt.Errorf("ask the model: %w", serverError), true},
		{"refused", badRequest, false},
		{"wrapped refusal", fmt.Errorf("ask the model: %w", badRequest), false},
		{"not a provider error", errors.New("boom"), false},
		{"nil", nil, false},
	} {
		if got := model.IsRetryable(c.err); got != c.want {
			t.Errorf("%s: IsRetryable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestErrorMessages: a provider error names the provider, then what it
// knows (status, code, message); a give-up says how many attempts were
// made and why it stopped.
func TestErrorMessages(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{&model.Error{Provider: "openai m", Status: 429, Code: "rate_limit_exceeded", Message: "slow down"}, "openai m: HTTP 429 rate_limit_exceeded: slow down"},
		{&model.Error{Provider: "openai m", Code: "timeout", Message: "no answer within 1m0s"}, "openai m timeout: no answer within 1m0s"},
		{&model.Error{Provider: "bedrock m", Status: 400}, "bedrock m: HTTP 400"},
		{&model.Error{Provider: "bedrock m"}, "bedrock m"},
		{&model.GiveUpError{Attempts: 1, Err: rateLimited}, "p: HTTP 429; gave up after 1 attempt"},
		{&model.GiveUpError{Attempts: 2, Err: rateLimited, Deadline: time.Minute}, "p: HTTP 429; gave up after 2 attempts (the 1m0s deadline passed)"},
		{&model.GiveUpError{Attempts: 3, Err: rateLimited, Deadline: time.Minute, Wait: 1500 * time.Microsecond}, "p: HTTP 429; gave up after 3 attempts (waiting 2ms more would pass the 1m0s deadline)"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

// TestCompleteGivesUpWhenTheWaitIsCut: a wait the call's deadline ends is
// a give-up that keeps the provider's last failure.
func TestCompleteGivesUpWhenTheWaitIsCut(t *testing.T) {
	t.Parallel()
	pol := policy(&fakeTime{now: time.Unix(0, 0)})
	pol.Sleep = func(context.Context, time.Duration) error { return context.DeadlineExceeded }
	_, n, err := model.Complete(context.Background(), &scripted{results: []error{rateLimited, nil}}, model.Request{}, pol)
	var gu *model.GiveUpError
	if !errors.As(err, &gu) || n != 1 || !errors.Is(err, rateLimited) || !strings.Contains(err.Error(), "the 1m0s deadline passed") {
		t.Errorf("err = %v after %d attempts, want a give-up after one that keeps the 429", err, n)
	}
}

// TestRequestTimeoutSaysHowLongTheRequestHad: a request cut by what was
// left of Timeout says so, not RequestTimeout.
func TestRequestTimeoutSaysHowLongTheRequestHad(t *testing.T) {
	t.Parallel()
	pol := policy(&fakeTime{now: time.Unix(0, 0)})
	pol.MaxRetries = 0
	pol.Timeout = 20 * time.Millisecond
	_, _, err := model.Complete(context.Background(), &scripted{block: true}, model.Request{}, pol)
	var pe *model.Error
	if !errors.As(err, &pe) || pe.Code != "timeout" || pe.Message != "no answer within 20ms" {
		t.Errorf("err = %v, want a timeout with no answer within 20ms", err)
	}
}
