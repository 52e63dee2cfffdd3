package store

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Limits of broker names, the same for handlers and the HTTP API.
const (
	MaxBrokerCollection = 128
	MaxBrokerKey        = 512
)

// CheckBrokerCollection refuses a name a broker collection cannot have: a
// collection is 1 to 128 letters, digits, "_", "." or "-".
func CheckBrokerCollection(c string) error {
	if c == "" || len(c) > MaxBrokerCollection {
		return fmt.Errorf("collection must be 1 to %d characters (got %d)", MaxBrokerCollection, len(c))
	}
	for _, r := range c {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-'
		if !ok {
			return fmt.Errorf(`collection may hold only letters, digits, "_", "." and "-" (got %q)`, c)
		}
	}
	return nil
}

// CheckBrokerKey refuses a key a broker record cannot have: a key is 1 to
// 512 bytes of UTF-8 without control characters ("ann@example.com" and
// "orders/2026/o-1" are fine).
func CheckBrokerKey(k string) error {
	if k == "" || len(k) > MaxBrokerKey {
		return fmt.Errorf("key must be 1 to %d bytes (got %d)", MaxBrokerKey, len(k))
	}
	if !utf8.ValidString(k) {
		return fmt.Errorf("key must be valid UTF-8")
	}
	for _, r := range k {
		if unicode.IsControl(r) {
			return fmt.Errorf("key must not contain control characters (got %q)", k)
		}
	}
	return nil
}
