package dynamostore

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// item is one DynamoDB item.
type item = map[string]types.AttributeValue

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func avN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func avB(v []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }

// avT is a time as a number: see timeKey.
func avT(t time.Time) types.AttributeValue {
	k := strings.TrimLeft(timeKey(t), "0")
	if k == "" {
		k = "0"
	}
	return &types.AttributeValueMemberN{Value: k}
}

func getS(it item, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getSS(it item, k string) []string {
	if v, ok := it[k].(*types.AttributeValueMemberSS); ok {
		return v.Value
	}
	return nil
}

func getN(it item, k string) int64 {
	if v, ok := it[k].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func getB(it item, k string) []byte {
	if v, ok := it[k].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

func getT(it item, k string) time.Time {
	if v, ok := it[k].(*types.AttributeValueMemberN); ok {
		return parseTimeKey(v.Value)
	}
	return time.Time{}
}

func has(it item, k string) bool { _, ok := it[k]; return ok }

// yearOne is the zero time's offset in Unix seconds.
const yearOne = 62135596800

// timeKey encodes t (in UTC) as 21 decimal digits, seconds since year 1 then
// nanoseconds, so that string order and number order are time order for
// every time from the zero time to year 9999. Keys of indexes use it as a
// string; conditions compare it as a number.
func timeKey(t time.Time) string {
	sec := t.Unix() + yearOne
	if sec < 0 {
		return strings.Repeat("0", 21)
	}
	return fmt.Sprintf("%012d%09d", sec, t.Nanosecond())
}

// parseTimeKey reverses timeKey (with or without its leading zeros); the
// zero key is the zero time.
func parseTimeKey(k string) time.Time {
	if len(k) < 21 {
		k = strings.Repeat("0", 21-len(k)) + k
	}
	sec, err1 := strconv.ParseInt(k[:len(k)-9], 10, 64)
	nsec, err2 := strconv.ParseInt(k[len(k)-9:], 10, 64)
	if err1 != nil || err2 != nil || (sec == 0 && nsec == 0) {
		return time.Time{}
	}
	return time.Unix(sec-yearOne, nsec).UTC()
}

// seqKey is a sequence number or index as a fixed-width sort key part.
func seqKey(n int64) string { return fmt.Sprintf("%016d", n) }

// lp length-prefixes a key part so that no part can run into the next one
// ("u1"+"0" never reads as "u10").
func lp(s string) string { return strconv.Itoa(len(s)) + ":" + s }

// shardOf spreads ids over n shards.
func shardOf(id string, n int) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return strconv.Itoa(int(h.Sum32() % uint32(n)))
}

// Payloads.
//
// Everything that is not a key or a condition attribute is stored as a
// payload: JSON, deflated when that is smaller. A payload over the store's
// inline cap goes to the blob store under its sha256 and the item keeps the
// reference; without a blob store it is refused with *TooLargeError. Nothing
// is ever truncated.
const (
	payloadJSON = 'j'
	payloadZip  = 'z'
	payloadRef  = 'r'
)

// minCompress is the size under which compressing is not worth trying.
const minCompress = 96

// encodeRaw turns JSON bytes into a payload.
func (s *Store) encodeRaw(ctx context.Context, what string, data []byte) ([]byte, error) {
	out := append([]byte{payloadJSON}, data...)
	if len(data) >= minCompress {
		var buf bytes.Buffer
		buf.WriteByte(payloadZip)
		zw, _ := flate.NewWriter(&buf, flate.BestCompression)
		_, _ = zw.Write(data)
		_ = zw.Close()
		if buf.Len() < len(out) {
			out = buf.Bytes()
		}
	}
	if len(out) <= s.inlineCap {
		return out, nil
	}
	if s.blobs == nil {
		return nil, &TooLargeError{What: what, Size: len(data), Stored: len(out), Limit: s.inlineCap}
	}
	sum := sha256.Sum256(out)
	digest := hex.EncodeToString(sum[:])
	if err := s.blobs.Put(ctx, digest, out); err != nil {
		return nil, fmt.Errorf("spill %s (%d bytes) to the blob store: %w", what, len(data), err)
	}
	return append([]byte{payloadRef}, digest...), nil
}

// encode turns v into a payload.
func (s *Store) encode(ctx context.Context, what string, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	return s.encodeRaw(ctx, what, data)
}

// decodeRaw returns the JSON bytes of a payload.
func (s *Store) decodeRaw(ctx context.Context, p []byte) ([]byte, error) {
	if len(p) == 0 {
		return nil, nil
	}
	switch p[0] {
	case payloadJSON:
		return p[1:], nil
	case payloadZip:
		data, err := io.ReadAll(flate.NewReader(bytes.NewReader(p[1:])))
		if err != nil {
			return nil, fmt.Errorf("inflate payload: %w", err)
		}
		return data, nil
	case payloadRef:
		if s.blobs == nil {
			return nil, fmt.Errorf("payload %s is in the blob store, and the store has none (Options.Blobs)", p[1:])
		}
		stored, err := s.blobs.Get(ctx, string(p[1:]))
		if err != nil {
			return nil, fmt.Errorf("read spilled payload %s: %w", p[1:], err)
		}
		if len(stored) > 0 && stored[0] == payloadRef {
			return nil, fmt.Errorf("spilled payload %s refers to another", p[1:])
		}
		return s.decodeRaw(ctx, stored)
	}
	return nil, fmt.Errorf("payload kind %q is unknown", p[0])
}

// decode reads a payload into v; an empty payload leaves v alone.
func (s *Store) decode(ctx context.Context, p []byte, v any) error {
	data, err := s.decodeRaw(ctx, p)
	if err != nil || data == nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}

// rawOf returns a payload's JSON as a RawMessage, nil for none.
func (s *Store) rawOf(ctx context.Context, p []byte) (json.RawMessage, error) {
	data, err := s.decodeRaw(ctx, p)
	if err != nil || data == nil {
		return nil, err
	}
	return json.RawMessage(bytes.Clone(data)), nil
}
