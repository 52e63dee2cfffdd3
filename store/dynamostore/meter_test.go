package dynamostore_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"stead/store/dynamostore"
)

// meter counts what a DynamoDB client sends, by operation, and prices it in
// write and read units by AWS's rules, from the items as they were before
// and after each write.
//
// moto_server reports ConsumedCapacity, but not truthfully: a 3 KB PutItem
// reports 1.0 units and no index writes (checked with moto 5.2.1). So the
// meter computes units itself:
//
//   - A write costs ceil(size / 1 KB) units, size being the larger of the
//     item before and after (PutItem, UpdateItem) or the item deleted; a
//     write whose condition failed costs the size of the item as it stood,
//     at least 1. A transactional write costs twice that.
//   - Each global secondary index costs one unit per 1 KB of index entry
//     when an item enters or leaves it or changes a projected attribute, and
//     two when its index key changes (a delete and a put). An entry is its
//     keys, the table's keys and its projected attributes, plus 100 bytes.
//   - A read costs ceil(size / 4 KB) units (half for an eventually
//     consistent one); a Query sums the sizes of what it returned, a
//     BatchGetItem counts each item.
//
// Item size is attribute names plus values (strings and binaries by length,
// numbers by about half their digits plus one, lists and maps by their
// elements plus 3 bytes and 1 per element).
//
// To see an item before and after a write the meter reads it with an
// uncounted client; its time is kept apart (Overhead) so that durations can
// leave it out. It assumes writes are not concurrent with each other, as in
// the benchmark.
type meter struct {
	raw   *dynamodb.Client
	table string
	gsis  []gsiDef

	mu       sync.Mutex
	requests map[string]int
	wu       map[string]float64
	maxSize  map[string]int
	ru       float64
	overhead time.Duration
}

type gsiDef struct {
	name, pk, sk string
	projected    []string // nil: keys only
}

func newMeter(raw *dynamodb.Client, table string) *meter {
	m := &meter{raw: raw, table: table, requests: map[string]int{}, wu: map[string]float64{}, maxSize: map[string]int{}}
	for _, ix := range dynamostore.Indexes() {
		m.gsis = append(m.gsis, gsiDef{name: ix.Name, pk: ix.PK, sk: ix.SK, projected: ix.Projected})
	}
	return m
}

// Option installs the meter on a client.
func (m *meter) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("stead-meter", m.handle), middleware.After)
	})
}

// Reset forgets what was counted.
func (m *meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests, m.wu, m.ru, m.overhead, m.maxSize = map[string]int{}, map[string]float64{}, 0, 0, map[string]int{}
}

// Totals returns requests, write units and read units so far.
func (m *meter) Totals() (requests int, wu, ru float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.requests {
		requests += n
	}
	for _, u := range m.wu {
		wu += u
	}
	return requests, wu, m.ru
}

// Overhead is the time the meter spent on its own reads.
func (m *meter) Overhead() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.overhead
}

// Breakdown renders the counts per operation and where write units went.
func (m *meter) Breakdown(runs int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for _, op := range slices.Sorted(maps.Keys(m.requests)) {
		fmt.Fprintf(&b, "%s %.2f/run; ", op, float64(m.requests[op])/float64(runs))
	}
	b.WriteString("| WU by cause: ")
	for _, k := range slices.Sorted(maps.Keys(m.wu)) {
		fmt.Fprintf(&b, "%s %.2f; ", k, m.wu[k]/float64(runs))
	}
	b.WriteString("| largest item written: ")
	for _, k := range slices.Sorted(maps.Keys(m.maxSize)) {
		fmt.Fprintf(&b, "%s %d B; ", k, m.maxSize[k])
	}
	return b.String()
}

func (m *meter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	var (
		op    string
		keys  []map[string]types.AttributeValue
		twice bool
	)
	switch p := in.Parameters.(type) {
	case *dynamodb.PutItemInput:
		op, keys = "PutItem", []map[string]types.AttributeValue{keyOf(p.Item)}
	case *dynamodb.UpdateItemInput:
		op, keys = "UpdateItem", []map[string]types.AttributeValue{p.Key}
	case *dynamodb.DeleteItemInput:
		op, keys = "DeleteItem", []map[string]types.AttributeValue{p.Key}
	case *dynamodb.TransactWriteItemsInput:
		op, twice = "TransactWriteItems", true
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				keys = append(keys, keyOf(it.Put.Item))
			case it.Update != nil:
				keys = append(keys, it.Update.Key)
			case it.Delete != nil:
				keys = append(keys, it.Delete.Key)
			}
		}
	case *dynamodb.GetItemInput:
		op = "GetItem"
	case *dynamodb.QueryInput:
		op = "Query"
	case *dynamodb.BatchGetItemInput:
		op = "BatchGetItem"
	default:
		op = fmt.Sprintf("%T", p)
	}
	before := m.images(ctx, keys)
	out, md, err := next.HandleInitialize(ctx, in)
	after := m.images(ctx, keys)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[op]++
	factor := 1.0
	if twice {
		factor = 2
	}
	for i := range keys {
		old, cur := before[i], after[i]
		if err != nil {
			// A failed write (condition or cancelled transaction) consumes
			// the size of the item as it stood.
			m.wu[op+" failed"] += factor * units(itemSize(old), 1024)
			continue
		}
		size := max(itemSize(old), itemSize(cur))
		m.wu[op+" "+kindOf(keys[i])] += factor * units(size, 1024)
		m.maxSize[kindOf(keys[i])] = max(m.maxSize[kindOf(keys[i])], size)
		for _, g := range m.gsis {
			m.wu["index "+g.name] += g.writeUnits(old, cur)
		}
	}
	if err == nil {
		m.ru += readUnits(in.Parameters, out.Result)
	}
	return out, md, err
}

// images reads the items at keys as they stand (nil where none).
func (m *meter) images(ctx context.Context, keys []map[string]types.AttributeValue) []map[string]types.AttributeValue {
	if len(keys) == 0 {
		return nil
	}
	start := time.Now()
	out := make([]map[string]types.AttributeValue, len(keys))
	for i, k := range keys {
		res, err := m.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: awssdk.String(m.table), Key: k, ConsistentRead: awssdk.Bool(true)})
		if err == nil && len(res.Item) > 0 {
			out[i] = res.Item
		}
	}
	m.mu.Lock()
	m.overhead += time.Since(start)
	m.mu.Unlock()
	return out
}

func keyOf(it map[string]types.AttributeValue) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynamostore.AttrPK: it[dynamostore.AttrPK], dynamostore.AttrSK: it[dynamostore.AttrSK]}
}

// kindOf names the kind of item a key is (run, commit, approval, …).
func kindOf(k map[string]types.AttributeValue) string {
	pk := k[dynamostore.AttrPK].(*types.AttributeValueMemberS).Value
	sk := k[dynamostore.AttrSK].(*types.AttributeValueMemberS).Value
	switch {
	case strings.HasPrefix(pk, "R#") && sk == "R":
		return "run"
	case strings.HasPrefix(pk, "R#"):
		return "commit"
	case strings.HasPrefix(pk, "A#"):
		return "approval"
	}
	p, _, _ := strings.Cut(pk, "#")
	s, _, _ := strings.Cut(sk, "#")
	return p + "/" + s
}

func units(size, per int) float64 {
	return math.Max(1, math.Ceil(float64(size)/float64(per)))
}

// writeUnits is what one item's write costs in the index.
func (g gsiDef) writeUnits(old, cur map[string]types.AttributeValue) float64 {
	in := func(it map[string]types.AttributeValue) bool { return it != nil && it[g.pk] != nil && it[g.sk] != nil }
	switch {
	case !in(old) && !in(cur):
		return 0
	case !in(old):
		return units(g.entrySize(cur), 1024)
	case !in(cur):
		return units(g.entrySize(old), 1024)
	case !same(old[g.pk], cur[g.pk]) || !same(old[g.sk], cur[g.sk]):
		return units(g.entrySize(old), 1024) + units(g.entrySize(cur), 1024)
	}
	for _, a := range g.projected {
		if !same(old[a], cur[a]) {
			return units(g.entrySize(cur), 1024)
		}
	}
	return 0
}

func (g gsiDef) entrySize(it map[string]types.AttributeValue) int {
	n := 100
	for _, a := range append([]string{g.pk, g.sk, dynamostore.AttrPK, dynamostore.AttrSK}, g.projected...) {
		if v, ok := it[a]; ok {
			n += len(a) + valueSize(v)
		}
	}
	return n
}

func same(a, b types.AttributeValue) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}

func itemSize(it map[string]types.AttributeValue) int {
	n := 0
	for k, v := range it {
		n += utf8.RuneCountInString(k) + (len(k) - utf8.RuneCountInString(k)) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		digits := strings.TrimLeft(strings.TrimLeft(v.Value, "-"), "0")
		return (len(digits)+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += len(k) + valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	}
	return 0
}

// readUnits prices a read from what it returned.
func readUnits(params, result any) float64 {
	half := func(consistent *bool) float64 {
		if consistent != nil && *consistent {
			return 1
		}
		return 0.5
	}
	switch p := params.(type) {
	case *dynamodb.GetItemInput:
		r := result.(*dynamodb.GetItemOutput)
		return half(p.ConsistentRead) * units(itemSize(r.Item), 4096)
	case *dynamodb.QueryInput:
		r := result.(*dynamodb.QueryOutput)
		n := 0
		for _, it := range r.Items {
			n += itemSize(it)
		}
		c := p.ConsistentRead
		if p.IndexName != nil {
			c = nil // index reads are eventually consistent
		}
		return half(c) * units(n, 4096)
	case *dynamodb.BatchGetItemInput:
		r := result.(*dynamodb.BatchGetItemOutput)
		total := 0.0
		for table, its := range r.Responses {
			for _, it := range its {
				total += half(p.RequestItems[table].ConsistentRead) * units(itemSize(it), 4096)
			}
		}
		return total
	}
	return 0
}
