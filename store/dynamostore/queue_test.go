package dynamostore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/approvals"
	"stead/store"
	"stead/store/dynamostore"
	"stead/store/storetest"
)

// gatedRequest is the gated call of the benchmark's agent (gated3's apply
// step) for run id, asked at req for timeout.
func gatedRequest(id string, req time.Time, timeout time.Duration) approvals.Request {
	return approvals.Request{
		ProjectID: "prj_bench", RunID: id, Agent: "gated3", EndUserID: "u1", Deployment: 1,
		StepIndex: 2, StepID: "apply", CallID: "apply", Tool: "apply", Input: json.RawMessage(`{"order":{"id":"o-1"}}`),
		Reason: "apply requires approval", RequestedAt: req, Timeout: timeout,
	}
}

// runItems reads, unmetered, every item of run id: the run's partition and
// its approval's item.
func runItems(tb testing.TB, db *dynamodb.Client, table, id string, a approvals.Approval) []map[string]types.AttributeValue {
	tb.Helper()
	out, err := db.Query(context.Background(), &dynamodb.QueryInput{
		TableName: awssdk.String(table), ConsistentRead: awssdk.Bool(true),
		KeyConditionExpression:    awssdk.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": dynamostore.AttrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": avStr("R#" + id)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	apr, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: awssdk.String(table), ConsistentRead: awssdk.Bool(true),
		Key: map[string]types.AttributeValue{dynamostore.AttrPK: avStr("A#" + a.ID), dynamostore.AttrSK: avStr("A")}})
	if err != nil || len(apr.Item) == 0 {
		tb.Fatalf("approval item of %s: %v", a.ID, err)
	}
	return append(out.Items, apr.Item)
}

// itemKey names an item by its keys.
func itemKey(it map[string]types.AttributeValue) string {
	return it[dynamostore.AttrPK].(*types.AttributeValueMemberS).Value + " " + it[dynamostore.AttrSK].(*types.AttributeValueMemberS).Value
}

// TestCloneRun: the items CloneRun makes of a waiting run are the items the
// store writes for that run itself, shift later — but the write token, which
// is random — so the queue benchmark seeds the table's real shape.
func TestCloneRun(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{})
	db := aws.Get(t).DynamoDB()
	ctx := t.Context()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const shift = -27*time.Hour - 46*time.Minute - 39*time.Second
	_, tmpl, err := storetest.Awaiting(ctx, s, gatedRequest("run_tmpl00000000", t0, 48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, real, err := storetest.Awaiting(ctx, s, gatedRequest("run_q00000012345", t0.Add(shift), 48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := runItems(t, db, s.Table(), "run_q00000012345", real)
	got, err := s.CloneRun(ctx, runItems(t, db, s.Table(), "run_tmpl00000000", tmpl), "run_tmpl00000000", "run_q00000012345", shift)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("cloned %d items, the store wrote %d", len(got), len(want))
	}
	byKey := func(a, b map[string]types.AttributeValue) int { return strings.Compare(itemKey(a), itemKey(b)) }
	slices.SortFunc(got, byKey)
	slices.SortFunc(want, byKey)
	for i := range want {
		delete(got[i], "wt")
		delete(want[i], "wt")
		for k := range want[i] {
			if g, w := show(got[i][k]), show(want[i][k]); g != w {
				t.Errorf("item %s, attribute %s: cloned %s, the store wrote %s", itemKey(want[i]), k, g, w)
			}
		}
		for k := range got[i] {
			if want[i][k] == nil {
				t.Errorf("item %s: cloned attribute %s, which the store did not write", itemKey(want[i]), k)
			}
		}
	}
}

// show renders an attribute value, nested ones too.
func show(v types.AttributeValue) string {
	switch v := v.(type) {
	case nil:
		return "none"
	case *types.AttributeValueMemberL:
		parts := make([]string, len(v.Value))
		for i, e := range v.Value {
			parts[i] = show(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case *types.AttributeValueMemberM:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(v.Value)) {
			parts = append(parts, k+":"+show(v.Value[k]))
		}
		return "{" + strings.Join(parts, " ") + "}"
	case *types.AttributeValueMemberS:
		return fmt.Sprintf("S%q", v.Value)
	case *types.AttributeValueMemberN:
		return "N" + v.Value
	case *types.AttributeValueMemberB:
		return fmt.Sprintf("B%x", v.Value)
	case *types.AttributeValueMemberSS:
		return fmt.Sprintf("SS%q", v.Value)
	}
	return fmt.Sprintf("%#v", v)
}

func putRequests(table string, items []map[string]types.AttributeValue) *dynamodb.BatchWriteItemInput {
	reqs := make([]types.WriteRequest, len(items))
	for i, it := range items {
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
	}
	return &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}}
}

// BenchmarkApprovalQueue counts on the wire what the approval queue costs
// on DynamoDB with 10,000 and then 100,000 pending approvals in one
// project (moto_server is too slow to time; the figures are the meter's
// requests and read units, see meter). The queue is seeded with
// BatchWriteItem, 25 items a request, of items cloned from one run the store
// wrote itself (CloneRun; TestCloneRun checks them against the store's own).
// Per op, through the engine on the metered store, as the API and the
// sweeper call it:
//
//   - page: the first page of pending approvals, newest first (GET
//     /v1/approvals' default);
//   - expiring-page: the same, soonest deadline first;
//   - sweep: Engine.Sweep with 100 approvals due (their deadlines passed,
//     all the others ahead): the due list, 100 expiry decisions, the
//     stalled-run list.
//
// The op fails if the page or the sweep costs more requests or read units
// at 100,000 than at 10,000: they must scale with the page and with what is
// due, not with what waits.
func BenchmarkApprovalQueue(b *testing.B) {
	g := newGatedBench(b)
	q := &dynamoQueue{g: g, db: aws.Get(b).DynamoDB(), t0: time.Now().Truncate(time.Second)}
	q.template(b)
	// One sweep first, so that the engine's caches (the deployment) are
	// warm before anything is counted.
	q.seed(b, 1, func(int) time.Duration { return -49 * time.Hour })
	if _, err := g.eng.Sweep(context.Background()); err != nil {
		b.Fatal(err)
	}
	var first map[string]float64
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			q.grow(b, n)
			var costs map[string]float64
			for b.Loop() {
				costs = q.measure(b)
			}
			for _, k := range slices.Sorted(maps.Keys(costs)) {
				b.ReportMetric(costs[k], k)
			}
			if first == nil {
				first = costs
				return
			}
			for _, k := range []string{"req/page", "RU/page", "req/sweep", "RU/sweep"} {
				if costs[k] != first[k] {
					b.Errorf("%s is %.1f with %d pending, %.1f with 10,000: it grows with the queue", k, costs[k], n, first[k])
				}
			}
		})
	}
}

// dynamoQueue is the benchmark's table: the engine and meter of
// newGatedBench, the template run's items, how many runs were seeded (they
// are numbered) and how many of them wait with their deadline ahead.
type dynamoQueue struct {
	g       gatedBench
	db      *dynamodb.Client
	t0      time.Time
	items   []map[string]types.AttributeValue
	seeded  int
	pending int
}

const templateRun = "run_tmpl00000000"

func queueRun(i int) string { return fmt.Sprintf("run_q%011d", i) }

// template writes the run every seeded run is cloned from, in a table of
// its own, and keeps its items: requested at t0, for 48 hours.
func (q *dynamoQueue) template(b *testing.B) {
	s := fresh(b, dynamostore.Options{})
	_, a, err := storetest.Awaiting(context.Background(), s, gatedRequest(templateRun, q.t0, 48*time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	q.items = runItems(b, q.db, s.Table(), templateRun, a)
}

// grow seeds the queue up to n pending runs, the k-th asked k seconds
// before t0, so that every deadline is hours ahead.
func (q *dynamoQueue) grow(b *testing.B, n int) {
	start := time.Now()
	from := q.pending
	q.seed(b, n-from, func(i int) time.Duration { return -time.Duration(from+i+1) * time.Second })
	q.pending = n
	b.Logf("seeded %d runs in %s (%d pending)", n-from, time.Since(start).Round(time.Second), n)
}

// seed writes n more cloned runs, shifted from t0 by shift(i), in
// BatchWriteItem requests of 25 items from a few writers at once.
func (q *dynamoQueue) seed(b *testing.B, n int, shift func(i int) time.Duration) {
	ctx := context.Background()
	var items []map[string]types.AttributeValue
	for i := range n {
		it, err := q.g.plain.CloneRun(ctx, q.items, templateRun, queueRun(q.seeded+i), shift(i))
		if err != nil {
			b.Fatal(err)
		}
		items = append(items, it...)
	}
	q.seeded += n
	batches := make(chan []map[string]types.AttributeValue)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for batch := range batches {
				if err := q.write(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for len(items) > 0 {
		k := min(len(items), 25)
		select {
		case batches <- items[:k]:
		case err := <-errs:
			b.Fatal(err)
		}
		items = items[k:]
	}
	close(batches)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// write puts items in one BatchWriteItem, again for what comes back
// unprocessed.
func (q *dynamoQueue) write(ctx context.Context, items []map[string]types.AttributeValue) error {
	in := putRequests(q.g.plain.Table(), items)
	for len(in.RequestItems) > 0 {
		out, err := q.db.BatchWriteItem(ctx, in)
		if err != nil {
			return err
		}
		in.RequestItems = out.UnprocessedItems
	}
	return nil
}

// measure makes 100 approvals due (unmetered, deadlines an hour and more
// past), then counts each of the queue's reads on the metered store.
func (q *dynamoQueue) measure(b *testing.B) map[string]float64 {
	const due = 100
	ctx := context.Background()
	b.StopTimer()
	q.seed(b, due, func(i int) time.Duration { return -49*time.Hour - time.Duration(i)*time.Second })
	b.StartTimer()
	out := map[string]float64{}
	count := func(name string, fn func() error) {
		q.g.m.Reset()
		start := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s (%s on moto): %s", name, time.Since(start).Round(time.Millisecond), q.g.m.Breakdown(1))
		requests, wu, ru := q.g.m.Totals()
		out["req/"+name], out["RU/"+name] = float64(requests), ru
		if wu > 0 {
			out["WU/"+name] = wu
		}
	}
	for name, o := range map[string]store.ApprovalOrder{"page": store.NewestFirst, "expiring-page": store.ExpiringFirst} {
		count(name, func() error {
			page, err := q.g.eng.ListApprovals(ctx, q.g.actor, store.ApprovalFilter{Status: approvals.Pending, Order: o})
			if err == nil && len(page.Items) != store.DefaultLimit {
				err = fmt.Errorf("%s first page holds %d approvals, want %d", o, len(page.Items), store.DefaultLimit)
			}
			return err
		})
	}
	count("sweep", func() error {
		res, err := q.g.eng.Sweep(ctx)
		if err == nil && res.Expired != due {
			err = fmt.Errorf("sweep expired %d approvals, want %d", res.Expired, due)
		}
		return err
	})
	return out
}
