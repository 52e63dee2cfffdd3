package store_test

import (
	"strings"
	"testing"

	"stead/store"
)

func TestBrokerNames(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"orders", "Orders", "a", "o.v2-x_y", strings.Repeat("c", 128)} {
		if err := store.CheckBrokerCollection(c); err != nil {
			t.Errorf("collection %q refused: %v", c, err)
		}
	}
	for _, c := range []string{"", "a/b", "a b", "é", strings.Repeat("c", 129)} {
		if err := store.CheckBrokerCollection(c); err == nil {
			t.Errorf("collection %q accepted", c)
		}
	}
	for _, k := range []string{"o-1", "ann@example.com", "orders/2026/o-1", "名前", strings.Repeat("k", 512)} {
		if err := store.CheckBrokerKey(k); err != nil {
			t.Errorf("key %q refused: %v", k, err)
		}
	}
	for _, k := range []string{"", "a\nb", "\x00", string([]byte{0xff}), strings.Repeat("k", 513)} {
		if err := store.CheckBrokerKey(k); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
}
