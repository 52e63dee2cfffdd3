package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"stead/approvals"
	"stead/notify"
	"stead/runtime/egress"
	"stead/runtime/engine"
	"stead/store"
)

// diesAfterDecision makes the decision's write and then fails, as a
// process that dies right after its commit would: the engine never learns
// that the write went through, and kicks nobody.
type diesAfterDecision struct {
	store.Store
}

func (s diesAfterDecision) DecideApproval(ctx context.Context, p store.DecideParams) (approvals.Approval, store.Run, error) {
	if _, _, err := s.Store.DecideApproval(ctx, p); err != nil {
		return approvals.Approval{}, store.Run{}, err
	}
	return approvals.Approval{}, store.Run{}, errCrash
}

// A crash right after a decision still delivers its approval.approved:
// the event and its outbox entry were one write, so the next pass of any
// notifier finds it — once.
func TestDecisionNotifiedDespiteACrashAfterItsWrite(t *testing.T) {
	var (
		mu  sync.Mutex
		got = map[string]int{}
	)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		got[p.Type]++
		mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	var n *notify.Notifier
	h := setup(t,
		func(o *options) { o.wrap = func(s store.Store) store.Store { return diesAfterDecision{s} } },
		func(o *options) {
			o.notifications = func(s store.Store, now func() time.Time) engine.Notifications {
				client := egress.Policy{Allow: egress.Loopback}.Client()
				n = notify.New(notify.Config{Store: s, Client: client, Now: now})
				return n
			}
		})
	now := h.clock.Now()
	if err := h.store.CreateEndpoint(h.ctx, store.Endpoint{ID: "whe_a", ProjectID: h.project, URL: rc.URL,
		Secrets: []store.EndpointSecret{{Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	n.Forget(h.project)
	r := h.start("refunds", `{"orderId": "o-1", "amount": 5}`)
	a := h.pending(r.ID)
	if _, err := h.eng.Decide(h.ctx, h.owner, engine.DecideParams{ApprovalID: a.ID, Approve: true}); !errors.Is(err, errCrash) {
		t.Fatalf("decide: %v, want the crash", err)
	}
	if st, err := h.store.GetApproval(h.ctx, a.ID); err != nil || st.Status != approvals.Approved {
		t.Fatalf("the decision's write did not land: %+v, %v", st, err)
	}
	for range 2 { // a notifier after the restart; and one more pass: nothing twice
		if err := n.Pass(h.ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got["approval.requested"] != 1 || got["approval.approved"] != 1 {
		t.Errorf("received %v, want approval.requested and approval.approved once each", got)
	}
}
