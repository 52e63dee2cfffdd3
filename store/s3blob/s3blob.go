// Package s3blob keeps blobs in an S3 bucket, content-addressed by their
// sha256: the AWS shape's bundle store (and the DynamoDB store's spill area
// for large payloads). It has the methods of fsblob, the local one. A put
// never overwrites: it is a conditional PutObject (If-None-Match: *), so an
// object, once stored under its digest, keeps its first content.
package s3blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"stead/store"
)

// DefaultPrefix is the key prefix of bundles: bundles/<digest>.
const DefaultPrefix = "bundles/"

// ErrDigestMismatch: the data does not hash to the digest it was stored under.
var ErrDigestMismatch = errors.New("data does not match its digest")

// Options configure a Store.
type Options struct {
	// Bucket is the bucket's name. Required.
	Bucket string
	// Prefix comes before every digest in object keys; DefaultPrefix when
	// empty. Give each use its own ("bundles/", "spill/").
	Prefix string
}

// Store is a bucket of blobs named by digest.
type Store struct {
	client *s3.Client
	bucket string
	prefix string
}

// New returns a Store on o.Bucket through client (whose endpoint, region,
// credentials and addressing style are the caller's).
func New(client *s3.Client, o Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("s3blob: an S3 client is required")
	}
	if o.Bucket == "" {
		return nil, errors.New("s3blob: Options.Bucket is required")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	return &Store{client: client, bucket: o.Bucket, prefix: o.Prefix}, nil
}

// key is the object key of a digest; store.ErrNotFound for one that is not a
// sha256 in hex.
func (s *Store) key(digest string) (string, error) {
	if len(digest) != sha256.Size*2 {
		return "", fmt.Errorf("blob digest %q: %w", digest, store.ErrNotFound)
	}
	if _, err := hex.DecodeString(digest); err != nil {
		return "", fmt.Errorf("blob digest %q: %w", digest, store.ErrNotFound)
	}
	return s.prefix + digest, nil
}

// Put stores data under digest, which must be its hex sha256. Storing a
// digest that exists already keeps the stored object.
func (s *Store) Put(ctx context.Context, digest string, data []byte) error {
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != digest {
		return fmt.Errorf("put blob %s: %w", digest, ErrDigestMismatch)
	}
	k, err := s.key(digest)
	if err != nil {
		return err
	}
	if err := s.putNew(ctx, k, data); err != nil {
		return fmt.Errorf("put blob %s: %w", digest, err)
	}
	return nil
}

// putNew writes an object unless one exists under k; an existing object is
// kept and is not an error.
func (s *Store) putNew(ctx context.Context, k string, data []byte) error {
	sum := sha256.Sum256(data)
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(k),
		Body:           bytes.NewReader(data),
		ContentLength:  aws.Int64(int64(len(data))),
		IfNoneMatch:    aws.String("*"),
		ChecksumSHA256: aws.String(b64(sum[:])),
		ContentType:    aws.String("application/octet-stream"),
	})
	if err == nil || isStatus(err, http.StatusPreconditionFailed) {
		return nil
	}
	return err
}

// Get returns the blob or an error wrapping store.ErrNotFound.
func (s *Store) Get(ctx context.Context, digest string) ([]byte, error) {
	k, err := s.key(digest)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) || isStatus(err, http.StatusNotFound) {
		return nil, fmt.Errorf("get blob %s: %w", digest, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", digest, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", digest, err)
	}
	return data, nil
}

// isStatus reports whether err is an S3 answer with HTTP status code.
func isStatus(err error, code int) bool {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == code {
		return true
	}
	var api smithy.APIError
	if code == http.StatusPreconditionFailed && errors.As(err, &api) && api.ErrorCode() == "PreconditionFailed" {
		return true
	}
	return false
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
