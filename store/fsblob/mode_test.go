package fsblob_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"stead/runtime/bundle"
	"stead/store/fsblob"
)

// TestFoldersArePrivate: the folder and its fan-out folders are the
// owner's only.
func TestFoldersArePrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "blobs")
	d, err := fsblob.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("export const a = 1")
	digest := bundle.Digest(data)
	if err := d.Put(context.Background(), digest, data); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, digest[:2])} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o700 {
			t.Errorf("%s: mode %o, want 700", p, got)
		}
	}
}
