package boltstore

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"

	json "github.com/go-json-experiment/json/v1"
	bolt "go.etcd.io/bbolt"

	"stead/store"
)

// prefix builds a key prefix from parts, each length-prefixed so that no
// part can run into the next and a prefix of one tuple is never a prefix of
// another.
func prefix(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += binary.MaxVarintLen64 + len(p)
	}
	b := make([]byte, 0, n+timeLen+32)
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// key is prefix(parts...) followed by a raw tail, which sorts as bytes: the
// item's own id or key, a time, or a number.
func key(tail []byte, parts ...string) []byte {
	return append(prefix(parts...), tail...)
}

// timeLen is the size of an encoded time.
const timeLen = 12

// timeKey encodes t so that byte order is time order, for any time.
func timeKey(t time.Time) []byte {
	b := make([]byte, timeLen)
	binary.BigEndian.PutUint64(b, uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
	return b
}

// timeID is a time followed by an id: the sort key of an index entry.
func timeID(t time.Time, id string) []byte {
	return append(timeKey(t), id...)
}

// u64 encodes a number so that byte order is numeric order.
func u64(n uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, n)
}

// prefixEnd is the smallest key greater than every key starting with p, or
// nil if there is none.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// scan visits the keys of b that start with p, in order (or in reverse with
// desc), beginning after the key after (if set), until fn says stop.
func scan(b *bolt.Bucket, p, after []byte, desc bool, fn func(k, v []byte) (more bool, err error)) error {
	c := b.Cursor()
	var k, v []byte
	switch {
	case !desc && after == nil:
		k, v = c.Seek(p)
	case !desc:
		k, v = c.Seek(after)
		if bytes.Equal(k, after) {
			k, v = c.Next()
		}
	default:
		// The last key before start: before the cursor key, or before the
		// first key past the prefix.
		start := after
		if start == nil {
			start = prefixEnd(p)
		}
		if start == nil {
			k, v = c.Last()
		} else if k, _ = c.Seek(start); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	}
	for ; k != nil && bytes.HasPrefix(k, p); k, v = step(c, desc) {
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func step(c *bolt.Cursor, desc bool) ([]byte, []byte) {
	if desc {
		return c.Prev()
	}
	return c.Next()
}

// list is one paged scan over an index or item bucket.
type list struct {
	bucket []byte
	prefix []byte
	cursor string
	desc   bool
	limit  int
}

// page collects up to l.limit items that load accepts, and a cursor when
// there is at least one more. The cursor is the last returned key, base64:
// opaque to callers, and refused if it does not belong under l.prefix.
func page[T any](tx *bolt.Tx, l list, load func(k, v []byte) (T, bool, error)) (store.Page[T], error) {
	var after []byte
	if l.cursor != "" {
		k, err := base64.RawURLEncoding.DecodeString(l.cursor)
		if err != nil || len(k) <= len(l.prefix) || !bytes.HasPrefix(k, l.prefix) {
			return store.Page[T]{}, store.ErrInvalidCursor
		}
		after = k
	}
	limit := store.ClampLimit(l.limit)
	var (
		out  store.Page[T]
		last []byte
		more bool
	)
	err := scan(bucket(tx, l.bucket), l.prefix, after, l.desc, func(k, v []byte) (bool, error) {
		item, ok, err := load(k, v)
		if err != nil || !ok {
			return err == nil, err
		}
		if len(out.Items) == limit {
			more = true
			return false, nil
		}
		out.Items = append(out.Items, item)
		last = bytes.Clone(k)
		return true, nil
	})
	if err != nil {
		return store.Page[T]{}, err
	}
	if more {
		out.NextCursor = base64.RawURLEncoding.EncodeToString(last)
	}
	return out, nil
}

// get decodes the value at k into v; ok is false if there is none.
func get(tx *bolt.Tx, b, k []byte, v any) (ok bool, err error) {
	data := bucket(tx, b).Get(k)
	if data == nil {
		return false, nil
	}
	return true, decode(data, v)
}

// values decodes the values of b under prefix p, in key order.
func values[T any](tx *bolt.Tx, b, p []byte) ([]T, error) {
	var out []T
	err := scan(bucket(tx, b), p, nil, false, func(_, v []byte) (bool, error) {
		var item T
		if err := decode(v, &item); err != nil {
			return false, err
		}
		out = append(out, item)
		return true, nil
	})
	return out, err
}

// decode reads a stored JSON value. It copies what it keeps, so v outlives
// the transaction. Records are read and written with go-json-experiment's
// encoding/json-compatible v1 package: the same JSON as encoding/json, on
// the faster v2 engine (it took a run's server CPU down by about a tenth in
// an in-process load of ungated runs).
func decode(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}

// put encodes v as JSON at k.
func put(tx *bolt.Tx, b, k []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s item: %w", b, err)
	}
	return bucket(tx, b).Put(k, data)
}

// exists reports whether b has key k.
func exists(tx *bolt.Tx, b, k []byte) bool {
	return bucket(tx, b).Get(k) != nil
}

// mark puts an index entry (keys only).
func mark(tx *bolt.Tx, b, k []byte) error {
	return bucket(tx, b).Put(k, []byte{})
}

// unmark deletes an index entry.
func unmark(tx *bolt.Tx, b, k []byte) error {
	return bucket(tx, b).Delete(k)
}
