package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"stead/store"
)

var brokerTests = []test{
	{"Broker/PutGetDelete", testBrokerPutGetDelete},
	{"Broker/List", testBrokerList},
	{"Broker/Scopes", testBrokerScopes},
}

func record(p, user, coll, key string, v string) store.BrokerRecord {
	return store.BrokerRecord{ProjectID: p, EndUserID: user, Collection: coll, Key: key, Value: json.RawMessage(v), UpdatedAt: t0}
}

func testBrokerPutGetDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	sc := store.BrokerScope{ProjectID: "p1", EndUserID: "u1"}
	r := record("p1", "u1", "orders", "o-1", `{"amount": 40}`)
	noErr(t, s.PutBrokerRecord(ctx, r), "put")
	got, err := s.GetBrokerRecord(ctx, sc, "orders", "o-1")
	noErr(t, err, "get")
	same(t, got, r, "stored record")

	r.Value = json.RawMessage(`{"amount": 25, "refunded": true}`)
	r.UpdatedAt = at(time.Minute)
	noErr(t, s.PutBrokerRecord(ctx, r), "replace")
	got, err = s.GetBrokerRecord(ctx, sc, "orders", "o-1")
	noErr(t, err, "get replaced")
	same(t, got, r, "replaced record")
	page, err := s.ListBrokerRecords(ctx, sc, "orders", "", 0)
	noErr(t, err, "list")
	eq(t, len(page.Items), 1, "records after a replace")

	_, err = s.GetBrokerRecord(ctx, sc, "orders", "o-2")
	wantErr(t, err, store.ErrNotFound, "get a missing record")
	noErr(t, s.DeleteBrokerRecord(ctx, sc, "orders", "o-1"), "delete")
	_, err = s.GetBrokerRecord(ctx, sc, "orders", "o-1")
	wantErr(t, err, store.ErrNotFound, "get a deleted record")
	wantErr(t, s.DeleteBrokerRecord(ctx, sc, "orders", "o-1"), store.ErrNotFound, "delete a deleted record")
	wantErr(t, s.DeleteBrokerRecord(ctx, sc, "orders", "never"), store.ErrNotFound, "delete a missing record")
	// A record needs its project, collection and key.
	for name, change := range map[string]func(*store.BrokerRecord){
		"no project":    func(r *store.BrokerRecord) { r.ProjectID = "" },
		"no collection": func(r *store.BrokerRecord) { r.Collection = "" },
		"no key":        func(r *store.BrokerRecord) { r.Key = "" },
	} {
		bad := record("p1", "u1", "orders", "o-3", `{}`)
		change(&bad)
		if err := s.PutBrokerRecord(ctx, bad); err == nil {
			t.Errorf("put a record with %s: no error", name)
		}
	}
	page, err = s.ListBrokerRecords(ctx, store.BrokerScope{ProjectID: "p1", EndUserID: "u1"}, "", "", 0)
	noErr(t, err, "list the empty collection")
	eq(t, len(page.Items), 0, "records of the empty collection")

	// No record has an empty key: none is found or deleted by one.
	_, err = s.GetBrokerRecord(ctx, sc, "orders", "")
	wantErr(t, err, store.ErrNotFound, "get the empty key")
	wantErr(t, s.DeleteBrokerRecord(ctx, sc, "orders", ""), store.ErrNotFound, "delete the empty key")
}

func testBrokerList(t *testing.T, s store.Store) {
	ctx := t.Context()
	sc := store.BrokerScope{ProjectID: "p1", EndUserID: "u1"}
	for _, k := range []string{"d", "a", "e", "c", "b", "b0", "B"} {
		noErr(t, s.PutBrokerRecord(ctx, record("p1", "u1", "orders", k, `{"k":"`+k+`"}`)), "put "+k)
	}
	want := []string{"B", "a", "b", "b0", "c", "d", "e"} // byte order
	key := func(r store.BrokerRecord) string { return r.Key }
	for _, limit := range []int{1, 2, 3, 50} {
		got := collect(t, limit, key, func(c string) (store.Page[store.BrokerRecord], error) {
			return s.ListBrokerRecords(ctx, sc, "orders", c, limit)
		})
		sameIDs(t, got, want, fmt.Sprintf("keys by pages of %d", limit))
	}
	page, err := s.ListBrokerRecords(ctx, sc, "orders", "", 2)
	noErr(t, err, "first page")
	same(t, page.Items, []store.BrokerRecord{record("p1", "u1", "orders", "B", `{"k":"B"}`), record("p1", "u1", "orders", "a", `{"k":"a"}`)}, "first page of two records")

	noErr(t, s.DeleteBrokerRecord(ctx, sc, "orders", "b"), "delete b")
	got := collect(t, 2, key, func(c string) (store.Page[store.BrokerRecord], error) {
		return s.ListBrokerRecords(ctx, sc, "orders", c, 2)
	})
	sameIDs(t, got, []string{"B", "a", "b0", "c", "d", "e"}, "keys after deleting b")

	_, err = s.ListBrokerRecords(ctx, sc, "orders", "not a cursor %%", 2)
	wantErr(t, err, store.ErrInvalidCursor, "list with a bad cursor")

	// Limits: zero means the default page size.
	for i := range store.DefaultLimit + 5 {
		noErr(t, s.PutBrokerRecord(ctx, record("p1", "u1", "many", fmt.Sprintf("k%03d", i), `{}`)), "put many")
	}
	page, err = s.ListBrokerRecords(ctx, sc, "many", "", 0)
	noErr(t, err, "list with the default limit")
	eq(t, len(page.Items), store.DefaultLimit, "default page size")
	if page.NextCursor == "" {
		t.Fatal("a full default page has no cursor")
	}
	page, err = s.ListBrokerRecords(ctx, sc, "many", page.NextCursor, 0)
	noErr(t, err, "second page with the default limit")
	eq(t, len(page.Items), 5, "rest of the records")
}

func testBrokerScopes(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Neighbours that a careless key design would mix up.
	recs := []store.BrokerRecord{
		record("p1", "u1", "orders", "o-1", `{"who":"p1/u1"}`),
		record("p1", "u10", "orders", "o-1", `{"who":"p1/u10"}`),
		record("p1", "u1", "0orders", "o-1", `{"who":"p1/u1/0orders"}`),
		record("p1", "u1", "orders2", "o-1", `{"who":"p1/u1/orders2"}`),
		record("p1", "u1", "order", "so-1", `{"who":"p1/u1/order"}`),
		record("p2", "u1", "orders", "o-1", `{"who":"p2/u1"}`),
		record("p1", "", "orders", "o-1", `{"who":"p1/-"}`),
	}
	for _, r := range recs {
		noErr(t, s.PutBrokerRecord(ctx, r), "put")
	}
	for _, r := range recs {
		sc := store.BrokerScope{ProjectID: r.ProjectID, EndUserID: r.EndUserID}
		got, err := s.GetBrokerRecord(ctx, sc, r.Collection, r.Key)
		noErr(t, err, "get")
		same(t, got, r, "record in its own scope")
		page, err := s.ListBrokerRecords(ctx, sc, r.Collection, "", 50)
		noErr(t, err, "list")
		if len(page.Items) != 1 {
			t.Fatalf("scope %+v collection %q lists %d records, want only its own", sc, r.Collection, len(page.Items))
		}
		same(t, page.Items[0], r, "listed record in its own scope")
	}
	_, err := s.GetBrokerRecord(ctx, store.BrokerScope{ProjectID: "p3", EndUserID: "u1"}, "orders", "o-1")
	wantErr(t, err, store.ErrNotFound, "get from another project")
	wantErr(t, s.DeleteBrokerRecord(ctx, store.BrokerScope{ProjectID: "p3", EndUserID: "u1"}, "orders", "o-1"), store.ErrNotFound, "delete from another project")

	noErr(t, s.DeleteBrokerRecord(ctx, store.BrokerScope{ProjectID: "p1", EndUserID: "u1"}, "orders", "o-1"), "delete p1/u1")
	for _, r := range recs[1:] {
		_, err := s.GetBrokerRecord(ctx, store.BrokerScope{ProjectID: r.ProjectID, EndUserID: r.EndUserID}, r.Collection, r.Key)
		noErr(t, err, "get a neighbour after a delete")
	}
}
