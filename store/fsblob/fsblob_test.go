package fsblob_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"stead/runtime/bundle"
	"stead/store"
	"stead/store/fsblob"
)

func TestPutGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := fsblob.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("export const a = 1")
	digest := bundle.Digest(data)
	if err := d.Put(ctx, digest, data); err != nil {
		t.Fatal(err)
	}
	got, err := d.Get(ctx, digest)
	if err != nil || string(got) != string(data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	// A second put of the same digest is fine and keeps the content.
	if err := d.Put(ctx, digest, data); err != nil {
		t.Fatalf("second put: %v", err)
	}
	// Data that does not match its digest is refused and not stored.
	if err := d.Put(ctx, bundle.Digest([]byte("other")), data); !errors.Is(err, fsblob.ErrDigestMismatch) {
		t.Errorf("mismatched put: err = %v", err)
	}
	if _, err := d.Get(ctx, bundle.Digest([]byte("other"))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a missing blob: err = %v", err)
	}
	for _, bad := range []string{"", "../../etc/passwd", "zz" + digest[2:]} {
		if _, err := d.Get(ctx, bad); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q): err = %v, want not found", bad, err)
		}
	}
}

func TestPutNeverOverwrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "blobs")
	d, err := fsblob.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("export const a = 1")
	digest := bundle.Digest(data)
	if err := d.Put(ctx, digest, data); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, digest[:2], digest)
	before, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, digest, data); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("a second put replaced the stored file")
	}
}
