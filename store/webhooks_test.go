package store_test

import (
	"strings"
	"testing"
	"time"

	"stead/store"
)

func TestEndpointSigning(t *testing.T) {
	t.Parallel()
	e := store.Endpoint{Secrets: []store.EndpointSecret{{Secret: "whsec_new"}, {Secret: "whsec_old", Until: t0}}}
	if got := strings.Join(e.Signing(t0.Add(-time.Second)), ","); got != "whsec_new,whsec_old" {
		t.Errorf("before the old secret's until, signing with %q", got)
	}
	if got := strings.Join(e.Signing(t0), ","); got != "whsec_new" {
		t.Errorf("at the old secret's until, signing with %q", got)
	}
}

func TestEndpointWants(t *testing.T) {
	t.Parallel()
	all := store.Endpoint{}
	filtered := store.Endpoint{Events: []string{"approval.requested"}, Agents: []string{"support"}}
	disabled := store.Endpoint{DisabledAt: t0}
	for _, c := range []struct {
		name       string
		e          store.Endpoint
		typ, agent string
		want       bool
	}{
		{"no filters", all, "run.failed", "billing", true},
		{"its event and agent", filtered, "approval.requested", "support", true},
		{"another event", filtered, "run.failed", "support", false},
		{"another agent", filtered, "approval.requested", "billing", false},
		{"disabled", disabled, "run.failed", "billing", false},
	} {
		if got := c.e.Wants(c.typ, c.agent); got != c.want {
			t.Errorf("%s: Wants = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEndpointValidate(t *testing.T) {
	t.Parallel()
	ok := store.Endpoint{ID: "whe_1", ProjectID: "p1", URL: "https://example.com/hook", Secrets: []store.EndpointSecret{{Secret: "whsec_1"}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid endpoint refused: %v", err)
	}
	for name, f := range map[string]func(*store.Endpoint){
		"no project":         func(e *store.Endpoint) { e.ProjectID = "" },
		"no secret":          func(e *store.Endpoint) { e.Secrets = nil },
		"a relative url":     func(e *store.Endpoint) { e.URL = "/hook" },
		"a url with no host": func(e *store.Endpoint) { e.URL = "https:///hook" },
		"an ftp url":         func(e *store.Endpoint) { e.URL = "ftp://example.com/hook" },
	} {
		e := ok
		f(&e)
		if err := e.Validate(); err == nil {
			t.Errorf("an endpoint with %s accepted", name)
		}
	}
}

func TestSortEndpointsByIDWhenCreatedTogether(t *testing.T) {
	t.Parallel()
	es := []store.Endpoint{{ID: "whe_b", CreatedAt: t0}, {ID: "whe_c", CreatedAt: t0.Add(-time.Second)}, {ID: "whe_a", CreatedAt: t0}}
	store.SortEndpoints(es)
	if got := es[0].ID + "," + es[1].ID + "," + es[2].ID; got != "whe_c,whe_a,whe_b" {
		t.Errorf("sorted %s", got)
	}
}

// Record keeps the first attempt and the latest MaxAttempts-1, counts
// every try, and leaves the delivery it was called on as it was.
func TestDeliveryRecordKeepsFirstAndLatest(t *testing.T) {
	t.Parallel()
	var d store.Delivery
	for i := range store.MaxAttempts + 1 {
		d = d.Record(store.Attempt{Status: i})
	}
	if d.Tries != store.MaxAttempts+1 || len(d.Attempts) != store.MaxAttempts {
		t.Fatalf("after %d tries: Tries %d, %d attempts kept", store.MaxAttempts+1, d.Tries, len(d.Attempts))
	}
	if first, last := d.Attempts[0].Status, d.Attempts[len(d.Attempts)-1].Status; first != 0 || last != store.MaxAttempts || d.Attempts[1].Status != 2 {
		t.Errorf("kept attempts %+v; want the first, then the latest", d.Attempts)
	}
	before := store.Delivery{Attempts: make([]store.Attempt, 1, 4)}
	_ = before.Record(store.Attempt{Status: 200})
	if after := before.Attempts[:2]; after[1].Status != 0 {
		t.Error("Record wrote into the attempts of the delivery it was called on")
	}
}
