package storetest

import (
	"errors"
	"testing"

	"stead/approvals"
	"stead/store"
)

var filterTests = []test{
	{"Filter/Refused", testFilterRefused},
}

// testFilterRefused: a list filter no list takes is refused with a
// *store.FilterError naming the field, before anything is read; an empty
// order or status is the default, and a limit past MaxLimit is clamped.
func testFilterRefused(t *testing.T, s store.Store) {
	ctx := t.Context()
	refused := func(err error, field, what string) {
		t.Helper()
		wantErr(t, err, store.ErrInvalidFilter, what)
		var fe *store.FilterError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Fatalf("%s: got %v, want a *store.FilterError of field %s", what, err, field)
		}
	}
	_, err := s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", Status: "open"})
	refused(err, "status", "approvals with status open")
	_, err = s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", Status: store.AnyStatus})
	refused(err, "status", `approvals with status "all" (the API's word, not the filter's)`)
	_, err = s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", Order: "oldest"})
	refused(err, "order", "approvals in order oldest")
	_, err = s.ListRuns(ctx, store.RunFilter{ProjectID: "p1", Status: "done"})
	refused(err, "status", "runs with status done")

	_, err = s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", Status: approvals.Pending, Limit: store.MaxLimit + 1})
	noErr(t, err, "approvals with a limit past MaxLimit")
	_, err = s.ListRuns(ctx, store.RunFilter{ProjectID: "p1", Limit: -1})
	noErr(t, err, "runs with a negative limit")
}
