package model

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Retry defaults.
const (
	DefaultMaxRetries     = 3
	DefaultTimeout        = 2 * time.Minute
	DefaultRequestTimeout = time.Minute
	DefaultBaseDelay      = 500 * time.Millisecond
	DefaultMaxDelay       = 20 * time.Second
)

// RetryPolicy says how Complete retries.
type RetryPolicy struct {
	// MaxRetries is how many times a retryable failure is retried (so at
	// most MaxRetries+1 requests). 0 means no retry; negative means the
	// default, 3.
	MaxRetries int
	// Timeout is the deadline of the whole call, every attempt and wait
	// included; 2m when zero.
	Timeout time.Duration
	// RequestTimeout bounds one request; 1m when zero, and never more than
	// what is left of Timeout.
	RequestTimeout time.Duration
	// BaseDelay and MaxDelay shape the exponential backoff: the n-th retry
	// (from 0) waits between half and all of min(MaxDelay, BaseDelay·2ⁿ),
	// the jitter choosing where. 500ms and 20s when zero.
	BaseDelay, MaxDelay time.Duration
	// Now is the clock used to keep waits inside Timeout; time.Now when nil.
	Now func() time.Time
	// Sleep waits d or until ctx ends; a timer when nil. Tests inject one
	// that returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0, 1); math/rand/v2 when nil.
	Jitter func() float64
	// OnRetry, when set, hears about each retry before its wait.
	OnRetry func(RetryInfo)
}

// RetryInfo describes one retry.
type RetryInfo struct {
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int
	Err     error
	// Wait is how long Complete waits before the next attempt.
	Wait time.Duration
}

func (p *RetryPolicy) defaults() {
	if p.MaxRetries < 0 {
		p.MaxRetries = DefaultMaxRetries
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultTimeout
	}
	if p.RequestTimeout <= 0 {
		p.RequestTimeout = DefaultRequestTimeout
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	if p.Jitter == nil {
		p.Jitter = rand.Float64
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Complete sends req to p and retries retryable failures (429, 5xx,
// timeouts, broken connections) with exponential backoff and jitter,
// honouring a provider's Retry-After, for as long as the policy's Timeout
// allows: a wait that would end past the deadline is not started. It returns
// the response and the number of attempts made.
//
// Errors: the last *Error when the provider refused (not retryable) or
// retries ran out, wrapped in a *GiveUpError when the deadline or the retry
// count stopped the retries; ctx's error when ctx ended.
func Complete(ctx context.Context, p Provider, req Request, pol RetryPolicy) (Response, int, error) {
	pol.defaults()
	deadline := pol.Now().Add(pol.Timeout)
	callCtx, cancel := context.WithTimeout(ctx, pol.Timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		left := deadline.Sub(pol.Now())
		reqCtx, reqCancel := context.WithTimeout(callCtx, min(pol.RequestTimeout, max(left, time.Millisecond)))
		resp, err := p.Complete(reqCtx, req)
		timedOut := reqCtx.Err() != nil && ctx.Err() == nil
		reqCancel()
		if err == nil {
			return resp, attempt, nil
		}
		if ctx.Err() != nil {
			return Response{}, attempt, ctx.Err()
		}
		if timedOut && !IsRetryable(err) {
			// The request's own deadline ended it: a timeout, which may
			// succeed on a later attempt.
			err = &Error{Provider: providerName(err), Code: "timeout", Message: fmt.Sprintf("no answer within %s", min(pol.RequestTimeout, left).Round(time.Millisecond)), Retryable: true}
		}
		if !IsRetryable(err) {
			return Response{}, attempt, err
		}
		if attempt > pol.MaxRetries {
			return Response{}, attempt, &GiveUpError{Attempts: attempt, Err: err}
		}
		wait := pol.backoff(attempt - 1)
		var pe *Error
		if errors.As(err, &pe) && pe.RetryAfter > 0 {
			wait = pe.RetryAfter
		}
		if !pol.Now().Add(wait).Before(deadline) {
			return Response{}, attempt, &GiveUpError{Attempts: attempt, Err: err, Deadline: pol.Timeout, Wait: wait}
		}
		if pol.OnRetry != nil {
			pol.OnRetry(RetryInfo{Attempt: attempt, Err: err, Wait: wait})
		}
		if serr := pol.Sleep(callCtx, wait); serr != nil {
			if ctx.Err() != nil {
				return Response{}, attempt, ctx.Err()
			}
			return Response{}, attempt, &GiveUpError{Attempts: attempt, Err: err, Deadline: pol.Timeout}
		}
	}
}

// backoff is the wait before retry n (from 0): between half and all of
// min(MaxDelay, BaseDelay·2ⁿ).
func (p *RetryPolicy) backoff(n int) time.Duration {
	d := p.MaxDelay
	if n < 30 {
		d = min(p.MaxDelay, p.BaseDelay<<n)
	}
	half := d / 2
	return half + time.Duration(p.Jitter()*float64(d-half))
}

func providerName(err error) string {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Provider
	}
	return "model"
}

// GiveUpError is a retryable failure Complete stopped retrying: the retries
// ran out, or the next wait would have passed the deadline.
type GiveUpError struct {
	Attempts int
	// Err is the last failure, usually a *Error.
	Err error
	// Deadline is the policy's Timeout when it is what stopped the retries;
	// Wait the wait that would have passed it.
	Deadline, Wait time.Duration
}

func (e *GiveUpError) Error() string {
	why := fmt.Sprintf("gave up after %d %s", e.Attempts, attempts(e.Attempts))
	if e.Deadline > 0 && e.Wait > 0 {
		why += fmt.Sprintf(" (waiting %s more would pass the %s deadline)", e.Wait.Round(time.Millisecond), e.Deadline)
	} else if e.Deadline > 0 {
		why += fmt.Sprintf(" (the %s deadline passed)", e.Deadline)
	}
	return fmt.Sprintf("%v; %s", e.Err, why)
}

func (e *GiveUpError) Unwrap() error { return e.Err }

func attempts(n int) string {
	if n == 1 {
		return "attempt"
	}
	return "attempts"
}
