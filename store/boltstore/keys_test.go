package boltstore

import (
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"stead/store"
)

// An id can hold any byte: a project whose id ends in 0xfe lists its own
// runs, newest first, and none of the neighbour whose id ends in 0xff.
func TestIDsOfAnyByte(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, p := range []string{"p\xfe", "p\xff"} {
		for i := range 2 {
			r := store.Run{ID: fmt.Sprintf("%x-%d", p, i), ProjectID: p, Status: store.RunQueued, CreatedAt: t0.Add(time.Duration(i) * time.Minute)}
			if _, err := s.CreateRun(ctx, r, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range []string{"p\xfe", "p\xff"} {
		page, err := s.ListRuns(ctx, store.RunFilter{ProjectID: p})
		if err != nil {
			t.Fatalf("list runs of %q: %v", p, err)
		}
		var got []string
		for _, r := range page.Items {
			got = append(got, r.ID)
		}
		if want := []string{fmt.Sprintf("%x-1", p), fmt.Sprintf("%x-0", p)}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("runs of %q: got %v, want %v", p, got, want)
		}
	}
}

// A cursor is the key of an item under the list's prefix: the prefix
// itself names no item and is refused, as any cursor the list did not
// hand out, rather than starting the list again.
func TestCursorOfThePrefixRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	if err := s.PutBrokerRecord(ctx, store.BrokerRecord{ProjectID: "p1", EndUserID: "u1", Collection: "orders", Key: "o-1"}); err != nil {
		t.Fatal(err)
	}
	sc := store.BrokerScope{ProjectID: "p1", EndUserID: "u1"}
	cursor := base64.RawURLEncoding.EncodeToString(brokerPrefix(sc, "orders"))
	page, err := s.ListBrokerRecords(ctx, sc, "orders", cursor, 10)
	if !errors.Is(err, store.ErrInvalidCursor) {
		t.Fatalf("list with the list's prefix as cursor: got %d records, error %v; want ErrInvalidCursor", len(page.Items), err)
	}
}

// openInternal opens a new store without fsync, closed when the test ends.
func openInternal(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "stead.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
