package s3blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"stead/infra/moto"
	"stead/store"
)

var emulator moto.Shared

func TestMain(m *testing.M) { os.Exit(emulator.Run(m)) }

var buckets atomic.Int64

// fresh returns a store on a new bucket of the package's moto_server.
func fresh(t *testing.T) *Store {
	t.Helper()
	srv := emulator.Get(t)
	name := fmt.Sprintf("stead-blobs-%d", buckets.Add(1))
	if err := srv.CreateBucket(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	s, err := New(srv.S3(), Options{Bucket: name})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestPutGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := fresh(t)
	data := []byte("export const a = 1")
	d := digest(data)
	if err := s.Put(ctx, d, data); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, d)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	// A second put of the same digest is fine and keeps the content.
	if err := s.Put(ctx, d, data); err != nil {
		t.Fatalf("second put: %v", err)
	}
	// Data that does not match its digest is refused and not stored.
	other := digest([]byte("other"))
	if err := s.Put(ctx, other, data); !errors.Is(err, ErrDigestMismatch) {
		t.Errorf("mismatched put: err = %v", err)
	}
	if _, err := s.Get(ctx, other); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a missing blob: err = %v", err)
	}
	for _, bad := range []string{"", "../../etc/passwd", "zz" + d[2:]} {
		if _, err := s.Get(ctx, bad); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q): err = %v, want not found", bad, err)
		}
	}
}

// TestPutNeverOverwrites writes different bytes under a key that exists
// (past the digest check, which would refuse them): S3's If-None-Match keeps
// the first content.
func TestPutNeverOverwrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := fresh(t)
	first := []byte("export const a = 1")
	d := digest(first)
	if err := s.Put(ctx, d, first); err != nil {
		t.Fatal(err)
	}
	k, err := s.key(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.putNew(ctx, k, []byte("export const a = 2 // replaced")); err != nil {
		t.Fatalf("second put under the same key: %v", err)
	}
	got, err := s.Get(ctx, d)
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("after a second put: Get = %q, %v; want the first content", got, err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, Options{Bucket: "b"}); err == nil {
		t.Error("New without a client: no error")
	}
	srv := emulator.Get(t)
	if _, err := New(srv.S3(), Options{}); err == nil {
		t.Error("New without a bucket: no error")
	}
}

func TestKeysHaveThePrefix(t *testing.T) {
	t.Parallel()
	d := digest([]byte("x"))
	for prefix, want := range map[string]string{"": "bundles/" + d, "spill/": "spill/" + d} {
		s, err := New(s3.New(s3.Options{}), Options{Bucket: "b", Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		if k, err := s.key(d); err != nil || k != want {
			t.Errorf("prefix %q: key %q, %v; want %q", prefix, k, err, want)
		}
	}
}
