package awsstack_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"stead/functions/awsstack"
	"stead/notify"
	"stead/store"
)

// outboxReads is a notify.Store with an empty outbox and no due
// deliveries that counts how often a pass reads each; any other call
// panics (the embedded nil interface), which a pass over nothing never
// makes.
type outboxReads struct {
	notify.Store
	mu            sync.Mutex
	outbox, dueAt int
}

func (s *outboxReads) ListOutbox(context.Context, int) ([]store.OutboxEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outbox++
	return nil, nil
}

func (s *outboxReads) ListDueDeliveries(context.Context, time.Time, int) ([]store.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dueAt++
	return nil, nil
}

func (s *outboxReads) passes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outbox != s.dueAt {
		return -1
	}
	return s.outbox
}

// A Kick passes nothing by itself and starts no goroutine (synctest fails
// the test if one is left in its bubble): nothing may outlive an
// invocation. The runner's PassIfKicked passes once per kick, the
// sweeper's Pass always.
func TestNotificationsPassOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testNotificationsPassOnlyWhenAsked)
}

func testNotificationsPassOnlyWhenAsked(t *testing.T) {
	st := &outboxReads{}
	n := awsstack.NewNotifications(notify.Config{Store: st, Interval: time.Millisecond})
	ctx := t.Context()

	n.Kick()
	n.Kick()
	time.Sleep(time.Second) // a thousand of the Notifier's intervals (fake time): a loop would have passed
	synctest.Wait()
	if got := st.passes(); got != 0 {
		t.Fatalf("kicks alone made %d passes", got)
	}
	if err := n.PassIfKicked(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.PassIfKicked(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.passes(); got != 1 {
		t.Fatalf("two kicks, then PassIfKicked twice: %d passes, want 1", got)
	}
	if err := n.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.passes(); got != 2 {
		t.Fatalf("Pass without a kick: %d passes in all, want 2", got)
	}
	// Pass takes what a kick asked for: no second pass for it.
	n.Kick()
	if err := n.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.PassIfKicked(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.passes(); got != 3 {
		t.Fatalf("a kick, Pass, PassIfKicked: %d passes in all, want 3", got)
	}
}
