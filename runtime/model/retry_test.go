package model_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
