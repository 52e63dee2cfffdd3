package dynamostore

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CloneRun returns the items of one run, as read from the table (its run
// item and the items that belong to it: approvals, commits, steps), written
// again for the run with id to and every time moved by shift: the items the
// store would have written had that run done the same, shift later. It is
// for seeding a table with BatchWriteItem in benchmarks, where going
// through the store would take hours on moto; TestCloneRun checks it
// against the store's own writes.
//
// from and to are run ids (run_…) of the same length, so that every item
// keeps its size; the ids of their approvals (approvals.NewID) follow
// them. shift is whole seconds (ttl attributes are epoch seconds). What it
// rewrites: ids in strings, sets and payloads; time keys (21 digits) in
// strings; times as numbers (avT); ttl and keep attributes; RFC 3339 times
// in payloads; and the shard attributes, which depend on the run id.
func (s *Store) CloneRun(ctx context.Context, items []map[string]types.AttributeValue, from, to string, shift time.Duration) ([]map[string]types.AttributeValue, error) {
	if len(from) != len(to) || !strings.HasPrefix(from, "run_") || !strings.HasPrefix(to, "run_") {
		return nil, fmt.Errorf("clone run %s as %s: the ids must be run ids of the same length", from, to)
	}
	if shift%time.Second != 0 {
		return nil, fmt.Errorf("clone run %s as %s: shift %s is not whole seconds", from, to, shift)
	}
	c := cloner{s: s, ids: strings.NewReplacer(from[len("run_"):], to[len("run_"):]), shift: shift, shard: shardOf(to, s.shards)}
	out := make([]map[string]types.AttributeValue, len(items))
	for i, it := range items {
		n := make(item, len(it))
		for k, v := range it {
			var err error
			switch k {
			case AttrDuePK, AttrStallPK, AttrOutboxPK:
				n[k] = avS(c.shard)
			case AttrTTL, aKeep:
				n[k] = avN(getN(it, k) + int64(shift/time.Second))
			default:
				n[k], err = c.value(ctx, v)
			}
			if err != nil {
				return nil, fmt.Errorf("clone run %s as %s: attribute %s: %w", from, to, k, err)
			}
		}
		out[i] = n
	}
	return out, nil
}

type cloner struct {
	s     *Store
	ids   *strings.Replacer
	shift time.Duration
	shard string
}

var (
	digitRun    = regexp.MustCompile(`[0-9]+`)
	rfc3339JSON = regexp.MustCompile(`"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})"`)
)

// timeKeyLen is the length of timeKey's keys; numbers at least this long,
// less the leading zeros avT trims, are times.
const timeKeyLen = 21

func (c cloner) str(s string) string {
	return digitRun.ReplaceAllStringFunc(c.ids.Replace(s), func(d string) string {
		if len(d) != timeKeyLen || parseTimeKey(d).IsZero() {
			return d
		}
		return timeKey(parseTimeKey(d).Add(c.shift))
	})
}

func (c cloner) value(ctx context.Context, v types.AttributeValue) (types.AttributeValue, error) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return avS(c.str(v.Value)), nil
	case *types.AttributeValueMemberSS:
		out := make([]string, len(v.Value))
		for i, s := range v.Value {
			out[i] = c.str(s)
		}
		return &types.AttributeValueMemberSS{Value: out}, nil
	case *types.AttributeValueMemberN:
		if len(v.Value) < timeKeyLen-2 {
			return v, nil
		}
		return avT(parseTimeKey(v.Value).Add(c.shift)), nil
	case *types.AttributeValueMemberB:
		return c.payload(ctx, v.Value)
	case *types.AttributeValueMemberL:
		out := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			var err error
			if out[i], err = c.value(ctx, e); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberL{Value: out}, nil
	case *types.AttributeValueMemberM:
		out := make(map[string]types.AttributeValue, len(v.Value))
		for k, e := range v.Value {
			var err error
			if out[k], err = c.value(ctx, e); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberM{Value: out}, nil
	}
	return v, nil
}

// payload rewrites a payload's JSON and encodes it again, as the store
// would have encoded the rewritten value.
func (c cloner) payload(ctx context.Context, p []byte) (types.AttributeValue, error) {
	if len(p) == 0 || p[0] == payloadRef {
		return nil, fmt.Errorf("payload kind %q cannot be cloned", p[:min(len(p), 1)])
	}
	data, err := c.s.decodeRaw(ctx, p)
	if err != nil {
		return nil, err
	}
	var bad error
	data = rfc3339JSON.ReplaceAllFunc([]byte(c.ids.Replace(string(data))), func(q []byte) []byte {
		t, err := time.Parse(time.RFC3339Nano, string(q[1:len(q)-1]))
		if err != nil || t.IsZero() {
			bad = err
			return q
		}
		return []byte(strconv.Quote(t.Add(c.shift).Format(time.RFC3339Nano)))
	})
	if bad != nil {
		return nil, bad
	}
	out, err := c.s.encodeRaw(ctx, "clone", data)
	if err != nil {
		return nil, err
	}
	return avB(out), nil
}
