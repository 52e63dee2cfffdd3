package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

var _ store.Webhooks = (*Store)(nil)

// Webhooks: endpoints, deliveries and the outbox (store.Webhooks).
//
// An endpoint is an item of its project's partition (P#<project>,
// WH#<endpoint>) holding the endpoint (its secrets too) and its version
// (ver), which UpdateEndpoint is conditional on; ListEndpoints is one
// strongly consistent Query of the partition's WH# items. Endpoints enter
// no index.
//
// A delivery is an item of its own (WD#<delivery>, WD), so that GetDelivery
// and every try is a point read or write by id. It holds the delivery and
// its version (ver), its project (pid, checked by every read and write),
// and, never rewritten, its endpoint (eid) and CreatedAt (ca). It enters
// two indexes that exist anyway (a new index would cost a CloudFormation
// update of its own, and none is needed):
//
//   - byProject, g1pk WD#<project><endpoint> (length-prefixed, see lp), g1sk
//     <createdAt>#<delivery>: the endpoint's delivery log, read newest
//     first with the package's cursors (ListDeliveries). The key never
//     changes: 1 index write per delivery, once.
//   - due, g3pk W<shard> (shards of their own: ListDueApprovals reads
//     shards 0…n-1 and never sees them), g3sk <nextAt>#<delivery>: pending
//     deliveries by when they are next tried (ListDueDeliveries, every
//     shard merged, then one BatchGetItem of the items, strongly
//     consistent, keeping those still due: the index lags on AWS). The key
//     follows NextAt, so a try that moves it (the notifier's take, then its
//     record) costs 2 index writes, and the one that settles it 1.
//
// PutDeliveries is one PutItem per delivery conditional on its id being
// free (attribute_not_exists), up to 8 at once: a lost condition means the
// delivery exists and is left alone, which is what makes a fan-out done
// twice make each delivery once. BatchWriteItem would be fewer requests,
// but it cannot be conditional: it would put a delivery back to its first
// try (pending, no attempts) under a notifier that already sent it, and a
// conditional TransactWriteItems bills twice and is cancelled whole by one
// delivery that exists. A new delivery of about 1 KB costs 1 write unit for
// the item, 1 for its log entry and 1 for its due entry; one that exists
// costs 1 (a failed condition is billed). UpdateDelivery and UpdateEndpoint
// are one UpdateItem each, conditional on the version (and the project),
// tagged with a write token like a run write (see updateOwn). A delivery's
// ttl is Retention after the latest of its CreatedAt, UpdatedAt and NextAt;
// an endpoint has none. DeleteEndpoint reads the endpoint's log (a Query of
// byProject), deletes its deliveries (BatchWriteItem, 25 a request), then
// deletes the endpoint conditional on it existing — in that order, so that
// a delete cut short leaves the endpoint to delete again rather than a log
// nobody can reach. (The log is read from an index: a delivery put a moment
// before may be missed, and stays, unlisted and failed by the notifier
// once it finds no endpoint.)
//
// # The outbox
//
// A run is in the outbox while it has notifying events (store.Event.Notify)
// not yet turned into deliveries. Its entry lives on its run item, so that
// it is written by the very write that appends the events — CreateRun's
// put, a commit's UpdateItem (the tail commit, or a flush's commit point),
// a decision's or vote's UpdateItem — and a write that loses its condition
// marks nothing, being one write. The entry is:
//
//   - g5pk <shard>, g5sk <at>#<run> (the outbox index, sparse; at is the
//     time of the first notifying event when the run entered), both set
//     with if_not_exists: a run already in the outbox keeps its place and
//     moves no index entry;
//   - oxt, the seq of its last notifying event: seq + j (seq being the
//     run's last seq before the write, read by the write itself, and j the
//     position of the write's last notifying event among its events);
//   - oxa and oxk, whose sum is FromSeq, its first notifying event not fanned
//     out: oxa = if_not_exists(oxa, seq), oxk = if_not_exists(oxk, k), k
//     the position of the write's first notifying event. Two attributes,
//     because the writer does not know seq (a tail commit and a decision
//     append without reading the run, and RunCommit's LastSeq is not
//     trusted) and if_not_exists takes a path or a value, never a sum.
//     Both are projected into the index, so ListOutbox reads the index
//     alone; oxt is not, so a notifying write of a run already in the
//     outbox costs the index nothing.
//
// ListOutbox queries every shard of the index and merges them, oldest
// entry first. AckOutbox is one UpdateItem conditional on oxt ≤ throughSeq
// that removes the entry (the run item's write unit plus 1 for the index
// entry leaving); when it loses because later notifying events came
// (oxt > throughSeq), the item as it stood comes back with the failure
// (ALL_OLD) and, unless the entry already starts after throughSeq, a
// second UpdateItem conditional on oxa and oxk as read sets them to
// throughSeq and 1 (FromSeq = throughSeq+1); one that loses to another ack
// is tried again. A write that appends nothing notifying writes none of
// these attributes: a run that never notifies costs nothing more.
//
// Global secondary indexes lag on AWS: ListOutbox may show an entry just
// acked, or an older FromSeq. Fanning out twice makes the same deliveries
// (PutDeliveries), and an ack of a run no longer in the outbox changes
// nothing, so a stale read costs a repeat, never a lost or a doubled
// notification.
//
// # Why not DynamoDB Streams
//
// A stream of the table's changes would carry the same notifications with
// no outbox attribute, no index entry and no ack: 9 write units and 6 read
// units less on a run that notifies three times (BenchmarkGatedRunCost,
// notify=3: $6.4 of $20.3 per million runs), for a Lambda trigger's
// invocations instead (reading the stream is free for Lambda, an
// invocation is not: some $0.3 per million notifying writes at 256 MB).
// Both keep a decision exactly-once — it stays one conditional write, and
// a stream record, like the mark, exists only if that write applied. The
// outbox is chosen anyway: a stream keeps records for 24 hours, so a
// consumer failing for a day loses notifications, where an entry waits
// until it is acked; a stream has no equivalent on the embedded shape, so
// the two shapes would notify by different mechanisms, and the conformance
// suite could test only one; and the tests' stand-ins run no event
// source mapping (the Lambda emulator has none, moto's runs functions in
// Docker), so the end-to-end tests could not deliver through it.

// Attributes of endpoint and delivery items (besides aBody, aVersion,
// aProject, aCreated and the index keys).
const (
	endpointPrefix   = "WH#"
	deliveryPrefix   = "WD#"
	deliverySK       = "WD"
	aDeliveryEnd     = "eid"
	dueDeliveryShard = "W"
)

// Attributes of a run item in the outbox (see "The outbox" above).
const (
	aOutboxAfter   = attrOutboxAfter
	aOutboxSkip    = attrOutboxSkip
	aOutboxThrough = "oxt"
)

func endpointKey(projectID, id string) item { return key(projectPK(projectID), endpointPrefix+id) }

func deliveryKey(id string) item { return key(deliveryPrefix+id, deliverySK) }

// deliveryLog is the byProject partition of an endpoint's deliveries.
func deliveryLog(projectID, endpointID string) string {
	return deliveryPrefix + lp(projectID) + endpointID
}

func (s *Store) endpointItem(ctx context.Context, e store.Endpoint) (item, error) {
	p, err := s.encode(ctx, "endpoint "+e.ID, e)
	if err != nil {
		return nil, err
	}
	it := endpointKey(e.ProjectID, e.ID)
	it[aBody] = avB(p)
	it[aVersion] = avN(e.Version)
	it[aCreated] = avT(e.CreatedAt)
	return it, nil
}

// decodeEndpoint reads an endpoint item: its payload, with the version and
// CreatedAt of the item's own attributes.
func (s *Store) decodeEndpoint(ctx context.Context, it item) (store.Endpoint, error) {
	var e store.Endpoint
	if err := s.decode(ctx, getB(it, aBody), &e); err != nil {
		return store.Endpoint{}, err
	}
	e.Version, e.CreatedAt = getN(it, aVersion), getT(it, aCreated)
	return e, nil
}

// CreateEndpoint stores a new endpoint at Version 1: one PutItem
// conditional on its id being free in its project.
func (s *Store) CreateEndpoint(ctx context.Context, e store.Endpoint) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("create endpoint: %w", err)
	}
	e.Version = 1
	it, err := s.endpointItem(ctx, e)
	if err == nil {
		err = s.putNew(ctx, it)
	}
	if err != nil {
		return fmt.Errorf("create endpoint %s: %w", e.ID, err)
	}
	return nil
}

// GetEndpoint returns an endpoint of the project: one GetItem.
func (s *Store) GetEndpoint(ctx context.Context, projectID, id string) (store.Endpoint, error) {
	it, err := s.getItem(ctx, endpointKey(projectID, id))
	if err == nil && it == nil {
		err = store.ErrNotFound
	}
	var e store.Endpoint
	if err == nil {
		e, err = s.decodeEndpoint(ctx, it)
	}
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("get endpoint %s: %w", id, err)
	}
	return e, nil
}

// ListEndpoints lists a project's endpoints, oldest first: one Query of
// its partition's endpoint items.
func (s *Store) ListEndpoints(ctx context.Context, projectID string) ([]store.Endpoint, error) {
	its, err := s.queryAll(ctx, projectPK(projectID), endpointPrefix)
	if err != nil {
		return nil, fmt.Errorf("list endpoints of %s: %w", projectID, err)
	}
	out := make([]store.Endpoint, len(its))
	for i, it := range its {
		if out[i], err = s.decodeEndpoint(ctx, it); err != nil {
			return nil, fmt.Errorf("list endpoints of %s: %w", projectID, err)
		}
	}
	store.SortEndpoints(out)
	return out, nil
}

// UpdateEndpoint stores e conditional on its version: one UpdateItem,
// which keeps the stored CreatedAt.
func (s *Store) UpdateEndpoint(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	if err := e.Validate(); err != nil {
		return store.Endpoint{}, fmt.Errorf("update endpoint: %w", err)
	}
	p, err := s.encode(ctx, "endpoint "+e.ID, e)
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("update endpoint %s: %w", e.ID, err)
	}
	x := newExpr()
	x.Cond("attribute_exists(" + x.n(AttrPK) + ")")
	x.Cond(x.n(aVersion) + " = " + x.v(avN(e.Version)))
	x.Set(aBody, avB(p))
	x.Set(aVersion, avN(e.Version+1))
	it, err := s.updateOwn(ctx, endpointKey(e.ProjectID, e.ID), x, nil)
	if err == nil {
		e, err = s.decodeEndpoint(ctx, it)
	}
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("update endpoint %s: %w", e.ID, err)
	}
	return e, nil
}

// DeleteEndpoint deletes an endpoint's deliveries, then the endpoint (see
// the comment at the top of this file).
func (s *Store) DeleteEndpoint(ctx context.Context, projectID, id string) error {
	if err := s.deleteLog(ctx, projectID, id); err != nil {
		return fmt.Errorf("delete endpoint %s: %w", id, err)
	}
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &s.table, Key: endpointKey(projectID, id),
		ConditionExpression:                 aws.String("attribute_exists(" + AttrPK + ")"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, s.callOpts...)
	if err := interpretError(err); err != nil {
		return fmt.Errorf("delete endpoint %s: %w", id, err)
	}
	return nil
}

// deleteLog deletes the deliveries of an endpoint's log.
func (s *Store) deleteLog(ctx context.Context, projectID, endpointID string) error {
	var (
		keys  []item
		start map[string]types.AttributeValue
	)
	for {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &s.table,
			IndexName:                 aws.String(IndexByProject),
			KeyConditionExpression:    aws.String("#p = :p"),
			ExpressionAttributeNames:  map[string]string{"#p": AttrByProjectPK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(deliveryLog(projectID, endpointID))},
			ExclusiveStartKey:         start,
		}, s.callOpts...)
		if err != nil {
			return interpretError(err)
		}
		for _, e := range res.Items {
			keys = append(keys, key(getS(e, AttrPK), getS(e, AttrSK)))
		}
		if res.LastEvaluatedKey == nil {
			break
		}
		start = res.LastEvaluatedKey
	}
	return s.batchDelete(ctx, keys)
}

// batchDelete deletes items by key, 25 a request, retrying what DynamoDB
// leaves unprocessed.
func (s *Store) batchDelete(ctx context.Context, keys []item) error {
	for len(keys) > 0 {
		n := min(len(keys), 25)
		reqs := make([]types.WriteRequest, n)
		for i, k := range keys[:n] {
			reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}}
		}
		keys = keys[n:]
		pending := map[string][]types.WriteRequest{s.table: reqs}
		for attempt := 0; len(pending[s.table]) > 0; attempt++ {
			if attempt > 0 {
				if err := sleep(ctx, time.Duration(min(attempt, 6))*20*time.Millisecond); err != nil {
					return err
				}
			}
			if attempt > 20 {
				return fmt.Errorf("batch delete: %w: %d items still unprocessed", ErrThrottled, len(pending[s.table]))
			}
			res, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending}, s.callOpts...)
			if err != nil {
				return interpretError(err)
			}
			pending = res.UnprocessedItems
		}
	}
	return nil
}

// deliveryItem is the item of a new delivery.
func (s *Store) deliveryItem(ctx context.Context, d store.Delivery) (item, error) {
	p, err := s.encode(ctx, "delivery "+d.ID, d)
	if err != nil {
		return nil, err
	}
	it := deliveryKey(d.ID)
	it[aBody] = avB(p)
	it[aVersion] = avN(d.Version)
	it[aProject] = avS(d.ProjectID)
	it[aDeliveryEnd] = avS(d.EndpointID)
	it[aCreated] = avT(d.CreatedAt)
	it[AttrByProjectPK] = avS(deliveryLog(d.ProjectID, d.EndpointID))
	it[AttrByProjectSK] = avS(timeKey(d.CreatedAt) + "#" + d.ID)
	if due(d) {
		it[AttrDuePK], it[AttrDueSK] = s.dueDeliveryKeys(d)
	}
	setTTL(it, s.deliveryTTL(d))
	return it, nil
}

// due reports whether d belongs in the due index.
func due(d store.Delivery) bool { return d.Status == store.DeliveryPending && !d.NextAt.IsZero() }

func (s *Store) dueDeliveryKeys(d store.Delivery) (pk, sk types.AttributeValue) {
	return avS(dueDeliveryShard + shardOf(d.ID, s.shards)), avS(timeKey(d.NextAt) + "#" + d.ID)
}

// deliveryTTL is when a delivery's item may go: Retention after the last
// time it names. Zero when the store writes no ttl.
func (s *Store) deliveryTTL(d store.Delivery) int64 {
	return s.finishTTL(orNow(latest(d.CreatedAt, d.UpdatedAt, d.NextAt)))
}

// decodeDelivery reads a delivery item: its payload, with the version,
// project, endpoint and CreatedAt of the item's own attributes.
func (s *Store) decodeDelivery(ctx context.Context, it item) (store.Delivery, error) {
	var d store.Delivery
	if err := s.decode(ctx, getB(it, aBody), &d); err != nil {
		return store.Delivery{}, err
	}
	d.Version, d.ProjectID, d.EndpointID, d.CreatedAt = getN(it, aVersion), getS(it, aProject), getS(it, aDeliveryEnd), getT(it, aCreated)
	return d, nil
}

// PutDeliveries stores each delivery that does not exist yet: one
// conditional PutItem each, up to 8 at once (see the comment at the top of
// this file).
func (s *Store) PutDeliveries(ctx context.Context, ds []store.Delivery) error {
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
		mu   sync.Mutex
		errs []error
	)
	for _, d := range ds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d.Version = 1
			it, err := s.deliveryItem(ctx, d)
			if err == nil {
				err = s.putNew(ctx, it)
			}
			if err != nil && !errors.Is(err, store.ErrExists) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("delivery %s: %w", d.ID, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("put deliveries: %w", err)
	}
	return nil
}

// GetDelivery returns a delivery of the project: one GetItem.
func (s *Store) GetDelivery(ctx context.Context, projectID, id string) (store.Delivery, error) {
	it, err := s.getItem(ctx, deliveryKey(id))
	if err == nil && (it == nil || getS(it, aProject) != projectID) {
		err = store.ErrNotFound
	}
	var d store.Delivery
	if err == nil {
		d, err = s.decodeDelivery(ctx, it)
	}
	if err != nil {
		return store.Delivery{}, fmt.Errorf("get delivery %s: %w", id, err)
	}
	return d, nil
}

// UpdateDelivery stores d conditional on its version and project: one
// UpdateItem, which keeps the stored endpoint and CreatedAt and moves the
// delivery's due entry with its NextAt (out of the index once it is
// settled).
func (s *Store) UpdateDelivery(ctx context.Context, d store.Delivery) (store.Delivery, error) {
	if d.Status != store.DeliveryPending {
		d.NextAt = time.Time{}
	}
	p, err := s.encode(ctx, "delivery "+d.ID, d)
	if err != nil {
		return store.Delivery{}, fmt.Errorf("update delivery %s: %w", d.ID, err)
	}
	x := newExpr()
	x.Cond("attribute_exists(" + x.n(AttrPK) + ")")
	x.Cond(x.n(aProject) + " = " + x.v(avS(d.ProjectID)))
	x.Cond(x.n(aVersion) + " = " + x.v(avN(d.Version)))
	x.Set(aBody, avB(p))
	x.Set(aVersion, avN(d.Version+1))
	if due(d) {
		pk, sk := s.dueDeliveryKeys(d)
		x.Set(AttrDuePK, pk)
		x.Set(AttrDueSK, sk)
	} else {
		x.Remove(AttrDuePK, AttrDueSK)
	}
	if ttl := s.deliveryTTL(d); ttl > 0 {
		x.Set(AttrTTL, avN(ttl))
	}
	it, err := s.updateOwn(ctx, deliveryKey(d.ID), x, func(old item) error {
		if old == nil || getS(old, aProject) != d.ProjectID {
			return store.ErrNotFound
		}
		return store.ErrConflict
	})
	if err == nil {
		d, err = s.decodeDelivery(ctx, it)
	}
	if err != nil {
		return store.Delivery{}, fmt.Errorf("update delivery %s: %w", d.ID, err)
	}
	return d, nil
}

// ListDueDeliveries lists pending deliveries of any project whose NextAt is
// at or before now, soonest first: the due index's delivery shards, merged,
// then the items themselves.
func (s *Store) ListDueDeliveries(ctx context.Context, now time.Time, limit int) ([]store.Delivery, error) {
	limit = clampLimit(limit)
	// Keys are "<nextAt>#<id>"; '#' sorts before '$': every NextAt up to
	// and including now.
	entries, err := s.queryShards(ctx, IndexDue, AttrDuePK, AttrDueSK, dueDeliveryShard, timeKey(now)+"$", limit)
	if err != nil {
		return nil, fmt.Errorf("list due deliveries: %w", err)
	}
	slices.SortFunc(entries, func(a, b item) int { return strings.Compare(getS(a, AttrDueSK), getS(b, AttrDueSK)) })
	if len(entries) > limit {
		entries = entries[:limit]
	}
	its, err := s.fetch(ctx, entries)
	if err != nil {
		return nil, fmt.Errorf("list due deliveries: %w", err)
	}
	out := make([]store.Delivery, 0, len(its))
	for _, it := range its {
		if it == nil {
			continue
		}
		d, err := s.decodeDelivery(ctx, it)
		if err != nil {
			return nil, fmt.Errorf("list due deliveries: %w", err)
		}
		// An entry the index still shows after a try moved or settled the
		// delivery (indexes lag on AWS).
		if due(d) && !d.NextAt.After(now) {
			out = append(out, d)
		}
	}
	return out, nil
}

// ListDeliveries lists an endpoint's deliveries, newest first: its log in
// byProject, then the items.
func (s *Store) ListDeliveries(ctx context.Context, projectID, endpointID, cursor string, limit int) (store.Page[store.Delivery], error) {
	l := indexList{
		index: IndexByProject, pkAttr: AttrByProjectPK, skAttr: AttrByProjectSK,
		pk: deliveryLog(projectID, endpointID), desc: true, cursor: cursor, limit: limit,
	}
	page, err := indexPage(ctx, s, l, func(entries []item) ([]store.Delivery, error) {
		its, err := s.fetch(ctx, entries)
		if err != nil {
			return nil, err
		}
		out := make([]store.Delivery, len(its))
		for i, it := range its {
			if it == nil {
				continue // deleted since the index was read
			}
			if out[i], err = s.decodeDelivery(ctx, it); err != nil {
				return nil, err
			}
		}
		return out, nil
	}, func(d store.Delivery) bool { return d.ID != "" })
	if err != nil {
		return store.Page[store.Delivery]{}, fmt.Errorf("list deliveries of %s: %w", endpointID, err)
	}
	return page, nil
}

// notifyingSpan returns the positions of the first and the last of events
// that notify; ok is false when none does.
func notifyingSpan(events []store.Event) (first, last int, ok bool) {
	first = -1
	for i, e := range events {
		if e.Notify {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	return first, last, first >= 0
}

func outboxSK(at time.Time, runID string) string { return timeKey(at) + "#" + runID }

// outboxClauses add to a write that appends events to run runID (after
// its last seq as the item has it) the clauses that put the run in the
// outbox for those that notify; none if none does (see "The outbox"
// above). The write reads the run's seq itself: every value on the right
// of an update expression is the item's before the write.
func (s *Store) outboxClauses(e *expr, runID string, events []store.Event) {
	first, last, ok := notifyingSpan(events)
	if !ok {
		return
	}
	seq, after := e.n(aLastSeq), e.n(aOutboxAfter)
	e.SetIfAbsent(AttrOutboxPK, avS(shardOf(runID, s.shards)))
	e.SetIfAbsent(AttrOutboxSK, avS(outboxSK(events[first].At, runID)))
	e.SetExpr(fmt.Sprintf("%s = if_not_exists(%s, %s)", after, after, seq))
	e.SetIfAbsent(aOutboxSkip, avN(int64(first+1)))
	e.SetExpr(fmt.Sprintf("%s = %s + %s", e.n(aOutboxThrough), seq, e.v(avN(int64(last+1)))))
}

// outboxAttrs put a new run, whose events are its first, in the outbox for
// those that notify.
func (s *Store) outboxAttrs(it item, runID string, events []store.Event) {
	first, last, ok := notifyingSpan(events)
	if !ok {
		return
	}
	it[AttrOutboxPK] = avS(shardOf(runID, s.shards))
	it[AttrOutboxSK] = avS(outboxSK(events[first].At, runID))
	it[aOutboxAfter] = avN(0)
	it[aOutboxSkip] = avN(int64(first + 1))
	it[aOutboxThrough] = avN(int64(last + 1))
}

// ListOutbox lists the runs in the outbox, oldest entry first: every shard
// of the outbox index, merged. The index holds what it lists; no item is
// read.
func (s *Store) ListOutbox(ctx context.Context, limit int) ([]store.OutboxEntry, error) {
	limit = clampLimit(limit)
	// Keys are "<time>#<run>": "~" sorts after every one.
	entries, err := s.queryShards(ctx, IndexOutbox, AttrOutboxPK, AttrOutboxSK, "", "~", limit)
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	slices.SortFunc(entries, func(a, b item) int { return strings.Compare(getS(a, AttrOutboxSK), getS(b, AttrOutboxSK)) })
	if len(entries) > limit {
		entries = entries[:limit]
	}
	out := make([]store.OutboxEntry, len(entries))
	for i, e := range entries {
		out[i] = store.OutboxEntry{RunID: entryRun(e), FromSeq: getN(e, aOutboxAfter) + getN(e, aOutboxSkip)}
	}
	return out, nil
}

// maxAckTries bounds how often an ack that keeps the entry loses to another
// ack of the same run before it gives up.
const maxAckTries = 5

// AckOutbox takes a run's events up to throughSeq out of the outbox: one
// UpdateItem that removes the entry if its last notifying event is within
// throughSeq; else one more that starts it after throughSeq (see "The
// outbox" above). A run not in the outbox, or gone, is left as it is.
func (s *Store) AckOutbox(ctx context.Context, runID string, throughSeq int64) error {
	for range maxAckTries {
		var old item
		lost := func(o item) error { old = o; return store.ErrConflict }
		x := newExpr()
		x.Cond(x.n(aOutboxThrough) + " <= " + x.v(avN(throughSeq)))
		x.Remove(AttrOutboxPK, AttrOutboxSK, aOutboxAfter, aOutboxSkip, aOutboxThrough)
		err := s.ack(ctx, runID, x, lost)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		if !has(old, aOutboxThrough) {
			return nil // not in the outbox (or no such run)
		}
		after, skip := getN(old, aOutboxAfter), getN(old, aOutboxSkip)
		if after+skip > throughSeq {
			return nil // its entry starts after throughSeq already
		}
		x = newExpr()
		x.Cond(x.n(aOutboxAfter) + " = " + x.v(avN(after)))
		x.Cond(x.n(aOutboxSkip) + " = " + x.v(avN(skip)))
		x.Cond(x.n(aOutboxThrough) + " > " + x.v(avN(throughSeq)))
		x.Set(aOutboxAfter, avN(throughSeq))
		x.Set(aOutboxSkip, avN(1))
		err = s.ack(ctx, runID, x, lost)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		// Another ack moved the entry between the two: read it again.
	}
	return fmt.Errorf("ack outbox of run %s: %w: other acks of the run kept moving its entry", runID, store.ErrConflict)
}

// ack sends one of AckOutbox's updates; a lost condition is lost's to
// judge.
func (s *Store) ack(ctx context.Context, runID string, x *expr, lost judge) error {
	in := x.update(s.table, runKey(runID))
	in.ReturnValues = types.ReturnValueNone
	_, err := s.db.UpdateItem(ctx, in, s.callOpts...)
	if err = interpretError(err, lost); err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("ack outbox of run %s: %w", runID, err)
	}
	return err
}
