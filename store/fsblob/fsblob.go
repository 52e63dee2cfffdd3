// Package fsblob keeps bundles in a local folder, content-addressed by their
// sha256: the embedded shape's blob store. A put never overwrites.
package fsblob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"stead/store"
)

// Dir is a folder of blobs named by digest.
type Dir struct{ path string }

// Open returns the blob folder at path, creating it if needed.
func Open(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("open blob folder: %w", err)
	}
	return &Dir{path: path}, nil
}

// ErrDigestMismatch: the data does not hash to the digest it was stored under.
var ErrDigestMismatch = errors.New("data does not match its digest")

func (d *Dir) file(digest string) (string, error) {
	if len(digest) != sha256.Size*2 {
		return "", fmt.Errorf("blob digest %q: %w", digest, store.ErrNotFound)
	}
	if _, err := hex.DecodeString(digest); err != nil {
		return "", fmt.Errorf("blob digest %q: %w", digest, store.ErrNotFound)
	}
	return filepath.Join(d.path, digest[:2], digest), nil
}

// Put stores data under digest, which must be its hex sha256. Storing a
// digest that exists already keeps the existing file.
func (d *Dir) Put(_ context.Context, digest string, data []byte) error {
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != digest {
		return fmt.Errorf("put blob %s: %w", digest, ErrDigestMismatch)
	}
	name, err := d.file(digest)
	if err != nil {
		return err
	}
	if _, err := os.Stat(name); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return fmt.Errorf("put blob %s: %w", digest, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), ".put-*")
	if err != nil {
		return fmt.Errorf("put blob %s: %w", digest, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("put blob %s: %w", digest, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("put blob %s: %w", digest, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("put blob %s: %w", digest, err)
	}
	// Link, not rename: linking fails if the name exists, so a put never
	// replaces a blob.
	if err := os.Link(tmp.Name(), name); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("put blob %s: %w", digest, err)
	}
	return nil
}

// Get returns the blob or an error wrapping store.ErrNotFound.
func (d *Dir) Get(_ context.Context, digest string) ([]byte, error) {
	name, err := d.file(digest)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get blob %s: %w", digest, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", digest, err)
	}
	return data, nil
}
