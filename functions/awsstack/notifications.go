package awsstack

import (
	"context"
	"sync/atomic"

	"stead/api"
	"stead/notify"
	"stead/runtime/engine"
)

// Notifications is a function's notify.Notifier as Lambda runs it. Lambda
// freezes an execution environment between invocations, so nothing may
// run in the background: Kick (the engine's, after a write whose events
// notify) starts nothing and only records that a pass is wanted, and the
// handler makes the pass before it returns.
//
// Who delivers:
//
//   - The runner makes a pass after each execution that wrote a
//     notification (PassIfKicked): approval.requested, run.succeeded and
//     the like are written by the runner, and a decision the API records
//     (approval.approved) dispatches the runner, whose pass fans it out
//     with the rest of the outbox. It is the one function whose invocations
//     nobody waits for and that has time to spare (a 900 s timeout).
//   - The sweeper makes a pass on every schedule (Pass): retries (the
//     second try is due 5 s after the first, the others minutes to hours
//     later), what a runner left (its invocation ended first), and the
//     decisions that dispatch no run — a deny, a vote short of its quorum, a
//     cancel — which therefore go out within the minute.
//   - The API never delivers, so that no response waits on a receiver; it
//     flags its writes' notifications into the outbox like the others, and
//     sends one thing itself: the ping asked for (POST
//     /v1/webhooks/{id}/ping), which is the request's answer.
//
// Every pass takes the whole outbox and every due delivery, whichever
// function wrote them; a delivery is taken with a conditional write
// before it is sent, so two functions passing at once send it once.
type Notifications struct {
	*notify.Notifier
	kicked atomic.Bool
}

var (
	_ engine.Notifications = (*Notifications)(nil)
	_ api.Notifications    = (*Notifications)(nil)
)

// NewNotifications makes a function's Notifications over a Notifier of cfg.
func NewNotifications(cfg notify.Config) *Notifications {
	return &Notifications{Notifier: notify.New(cfg)}
}

// Kick records that notifications were written: the next PassIfKicked
// makes a pass. It starts nothing.
func (n *Notifications) Kick() { n.kicked.Store(true) }

// PassIfKicked makes a pass if notifications were written since the last
// pass (the runner's, after an execution).
func (n *Notifications) PassIfKicked(ctx context.Context) error {
	if !n.kicked.Swap(false) {
		return nil
	}
	return n.Notifier.Pass(ctx)
}

// Pass makes a pass now (the sweeper's, on every schedule): it fans out
// the outbox and makes the tries that are due.
func (n *Notifications) Pass(ctx context.Context) error {
	n.kicked.Store(false)
	return n.Notifier.Pass(ctx)
}
