package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

// storedEvent is an event as a batch keeps it: its run and seq follow from
// where the batch is.
type storedEvent struct {
	Type string          `json:"t"`
	At   time.Time       `json:"a"`
	Step string          `json:"s,omitempty"`
	Data json.RawMessage `json:"d,omitempty"`
}

func storedEvents(es []store.Event) []storedEvent {
	out := make([]storedEvent, len(es))
	for i, e := range es {
		out[i] = storedEvent{Type: e.Type, At: e.At.UTC(), Step: e.Step, Data: e.Data}
	}
	return out
}

// commitBody is the payload of a commit item: its events and the steps it
// records. Items written before read steps could share a commit hold one
// step under "st"; steps() reads both.
type commitBody struct {
	Events []storedEvent `json:"e,omitempty"`
	Steps  []store.Step  `json:"sts,omitempty"`
	Step   *store.Step   `json:"st,omitempty"`
}

// steps returns the steps the item records.
func (b commitBody) steps() []store.Step {
	if b.Step != nil {
		return append([]store.Step{*b.Step}, b.Steps...)
	}
	return b.Steps
}

// Attributes of a commit item: the version whose write made it (a put may
// only replace an item of an older version: see the package comment) and how
// many events it holds.
const (
	aItemVersion = "ver"
	aItemEvents  = "n"
	aBody        = "d"
)

func eventsSK(firstSeq int64) string { return "E#" + seqKey(firstSeq) }
func stepSK(index int) string        { return "S#" + seqKey(int64(index)) }

// errTailFull: a commit's events did not fit the run's tail; it is redone
// as a flush.
var errTailFull = errors.New("event tail full")

// CommitRun applies c and returns the stored run. The run item's
// conditional update (version, step not recorded) is the commit point:
//
//   - A commit without a step or an approval whose events fit the tail is
//     that one UpdateItem.
//   - Otherwise the run is read, then (for an approval) its previous approval
//     item is settled and the new one put, then the tail plus the events plus
//     the steps are put as one commit item, and then the run is updated on
//     the version read. An approval whose run update lost is deleted again;
//     a commit item whose run update lost stays invisible.
func (s *Store) CommitRun(ctx context.Context, c store.RunCommit) (store.Run, error) {
	id := c.Run.ID
	if err := c.Validate(); err != nil {
		return store.Run{}, err
	}
	var batch []byte
	if len(c.Events) > 0 {
		var err error
		if batch, err = s.encode(ctx, "events of run "+id, storedEvents(c.Events)); err != nil {
			return store.Run{}, fmt.Errorf("commit run %s: %w", id, err)
		}
	}
	var (
		it  item
		err error
	)
	if len(c.Steps) == 0 && c.Approval == nil && len(batch) <= s.tailBytes {
		it, err = s.commitTail(ctx, c, batch)
	} else {
		err = errTailFull
	}
	if errors.Is(err, errTailFull) {
		it, err = s.commitFlush(ctx, c)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("commit run %s: %w", id, err)
	}
	return s.runFromItem(ctx, it)
}

// versionJudge judges a lost run update: missing, stale, or one of steps is
// recorded already.
func versionJudge(version int64, steps []store.Step, more judge) judge {
	return func(old item) error {
		if old == nil {
			return store.ErrNotFound
		}
		if getN(old, aVersion) != version {
			return store.ErrConflict
		}
		for _, st := range steps {
			if stepRecorded(old, st.Index) {
				return store.ErrConflict
			}
		}
		if more != nil {
			return more(old)
		}
		return nil
	}
}

func stepRecorded(run item, index int) bool {
	m, ok := run[aSteps].(*types.AttributeValueMemberM)
	if !ok {
		return false
	}
	_, ok = m.Value[strconv.Itoa(index)]
	return ok
}

// setRun adds the SET and REMOVE clauses that write r's state.
func (s *Store) setRun(ctx context.Context, e *expr, r store.Run) error {
	set, remove, err := s.runState(ctx, r)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		e.Set(k, set[k])
	}
	e.Remove(remove...)
	return nil
}

// commitTail is the one-write commit: the run's state and its events
// appended to the tail, conditional on the version and on the tail having
// room.
func (s *Store) commitTail(ctx context.Context, c store.RunCommit, batch []byte) (item, error) {
	write := func(force bool) (item, error) {
		e := newExpr()
		e.Cond("attribute_exists(" + e.n(AttrPK) + ")")
		e.Cond(e.n(aVersion) + " = " + e.v(avN(c.Run.Version)))
		if err := s.setRun(ctx, e, c.Run); err != nil {
			return nil, err
		}
		e.SetExpr(fmt.Sprintf("%s = %s + %s", e.n(aVersion), e.n(aVersion), e.v(avN(1))))
		if n := len(c.Events); n > 0 {
			tb := e.n(aTailBytes)
			e.Cond(fmt.Sprintf("attribute_not_exists(%s) OR %s <= %s", tb, tb, e.v(avN(int64(s.tailBytes-len(batch))))))
			appendTail(e, avB(batch), n, len(batch))
			s.outboxClauses(e, c.Run.ID, c.Events)
			e.SetExpr(fmt.Sprintf("%s = %s + %s", e.n(aLastSeq), e.n(aLastSeq), e.v(avN(int64(n)))))
		}
		s.stallClauses(e, c.Run.ID, c.Run.Status, c.Run.LeaseUntil, force)
		return s.runUpdate(ctx, c.Run.ID, e, versionJudge(c.Run.Version, nil, func(old item) error {
			if len(c.Events) > 0 && getN(old, aTailBytes) > int64(s.tailBytes-len(batch)) {
				return errTailFull
			}
			if boundAbove(old, c.Run.ID, c.Run.LeaseUntil) {
				return errBoundAbove
			}
			return nil
		}))
	}
	it, err := write(false)
	if errors.Is(err, errBoundAbove) {
		it, err = write(true)
	}
	return it, err
}

// commitFlush is the commit that writes other items (see CommitRun): read
// the run, write the approval and the commit item, then the commit point.
func (s *Store) commitFlush(ctx context.Context, c store.RunCommit) (item, error) {
	old, err := s.getItem(ctx, runKey(c.Run.ID))
	if err != nil {
		return nil, err
	}
	if err := versionJudge(c.Run.Version, c.Steps, nil)(old); err != nil {
		return nil, err
	}
	// The ttl of the items this commit writes; renewed on the run's other
	// items first when it runs short.
	keep, renewed, err := s.keepFor(ctx, old, c)
	if err != nil {
		return nil, err
	}
	ttl := keep
	if s.retention <= 0 {
		ttl = 0 // a store without Retention writes no ttl on new items
	}
	undo, err := s.flushApproval(ctx, old, c, ttl)
	if err != nil {
		return nil, err
	}
	sk, err := s.putCommitItem(ctx, old, c, ttl)
	if err != nil {
		undo()
		return nil, err
	}
	var renew int64
	if renewed {
		renew = keep
	}
	it, err := s.commitPoint(ctx, old, c, sk, renew)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		// The condition failed: the run did not take the approval. (After
		// any other error the update may have been applied; the approval is
		// left, and is invisible if it was not.)
		undo()
	}
	return it, err
}

// eventsInApproval: a commit that creates an approval and records no step
// keeps its events in the approval item, and the run's tail refers to them
// there: that item is written anyway, and its input is what the events
// repeat. Such a commit writes no commit item.
func eventsInApproval(c store.RunCommit) bool { return c.Approval != nil && len(c.Steps) == 0 }

// flushApproval settles the approval the commit's new one replaces and puts
// the new one. undo deletes it again, for a commit point that lost.
func (s *Store) flushApproval(ctx context.Context, old item, c store.RunCommit, ttl int64) (undo func(), err error) {
	a := c.Approval
	if a == nil {
		return func() {}, nil
	}
	if err := s.settlePrevious(ctx, old); err != nil {
		return nil, err
	}
	var evs []storedEvent
	if eventsInApproval(c) {
		evs = storedEvents(c.Events)
	}
	if err := s.putApproval(ctx, *a, evs, ttl); err != nil {
		return nil, err
	}
	return func() {
		// Best effort: an approval the run never took is invisible anyway
		// (see resolveApproval).
		_, _ = s.db.DeleteItem(context.WithoutCancel(ctx), &dynamodb.DeleteItemInput{TableName: &s.table, Key: approvalKey(a.ID)}, s.callOpts...)
	}, nil
}

// putCommitItem writes the commit item — the run's tail, the commit's
// events and its steps — and returns its sort key ("" when the commit
// writes none). The put may replace only an item of an older version, so a
// committed batch is never overwritten.
func (s *Store) putCommitItem(ctx context.Context, old item, c store.RunCommit, ttl int64) (string, error) {
	id, target := c.Run.ID, c.Run.Version+1
	if eventsInApproval(c) {
		return "", nil
	}
	tail, err := s.tailEvents(ctx, old)
	if err != nil {
		return "", err
	}
	body := commitBody{Events: append(tail, storedEvents(c.Events)...)}
	for _, st := range c.Steps {
		st.RunID = id
		body.Steps = append(body.Steps, st)
	}
	var sk string
	switch {
	case len(body.Events) > 0:
		lastSeq, tailN := getN(old, aLastSeq), getN(old, aTailN)
		sk = eventsSK(lastSeq - tailN + 1)
	case len(body.Steps) > 0:
		sk = stepSK(body.Steps[0].Index)
	default:
		return "", nil
	}
	p, err := s.encode(ctx, fmt.Sprintf("commit %d of run %s", target, id), body)
	if err != nil {
		return "", err
	}
	ci := key(runPK(id), sk)
	ci[aItemVersion] = avN(target)
	ci[aItemEvents] = avN(int64(len(body.Events)))
	ci[aBody] = avB(p)
	setTTL(ci, ttl)
	token := writeToken()
	ci[aWriteToken] = avS(token)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                ci,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk) OR #ver < :ver"),
		ExpressionAttributeNames:            map[string]string{"#pk": AttrPK, "#ver": aItemVersion},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":ver": avN(target)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, s.callOpts...)
	err = ownWrite(interpretError(err, func(old item) error {
		if old != nil && getS(old, aWriteToken) == token {
			return errApplied // a retry of this put, whose answer was lost
		}
		return nil
	}))
	if err != nil {
		// Another writer of the same version got there first.
		return "", err
	}
	return sk, nil
}

// commitPoint is a flush's conditional update of the run item, on the
// version read: the run's state, its tail emptied into the commit item sk
// (or, for eventsInApproval, a reference to the approval appended), its
// steps mapped to sk, the new approval in its slot, and (renew > 0) the
// renewed keep ttl.
func (s *Store) commitPoint(ctx context.Context, old item, c store.RunCommit, sk string, renew int64) (item, error) {
	id := c.Run.ID
	lastSeq := getN(old, aLastSeq)
	write := func(force bool) (item, error) {
		e := newExpr()
		e.Cond("attribute_exists(" + e.n(AttrPK) + ")")
		e.Cond(e.n(aVersion) + " = " + e.v(avN(c.Run.Version)))
		if err := s.setRun(ctx, e, c.Run); err != nil {
			return nil, err
		}
		e.Set(aVersion, avN(c.Run.Version+1))
		s.outboxClauses(e, id, c.Events)
		e.Set(aLastSeq, avN(lastSeq+int64(len(c.Events))))
		if renew > 0 {
			e.Set(aKeep, avN(renew))
		}
		switch {
		case !eventsInApproval(c):
			e.Remove(aTail, aTailN, aTailBytes)
		case len(c.Events) > 0:
			ref := "A#" + c.Approval.ID
			appendTail(e, avS(ref), len(c.Events), len(ref))
		}
		for _, st := range c.Steps {
			path := e.nested(aSteps, strconv.Itoa(st.Index))
			e.Cond("attribute_not_exists(" + path + ")")
			e.SetExpr(path + " = " + e.v(avS(sk)))
		}
		if a := c.Approval; a != nil {
			s.slotClauses(e, *a)
		}
		s.stallClauses(e, id, c.Run.Status, c.Run.LeaseUntil, force)
		return s.runUpdate(ctx, id, e, versionJudge(c.Run.Version, c.Steps, func(old item) error {
			if boundAbove(old, id, c.Run.LeaseUntil) {
				return errBoundAbove
			}
			return nil
		}))
	}
	it, err := write(false)
	if errors.Is(err, errBoundAbove) {
		it, err = write(true)
	}
	return it, err
}

// appendTail adds the clauses that append v, holding n events in size
// bytes, to the run item's event tail.
func appendTail(e *expr, v types.AttributeValue, n, size int) {
	tl, tn, tb, zero := e.n(aTail), e.n(aTailN), e.n(aTailBytes), e.v(avN(0))
	e.SetExpr(fmt.Sprintf("%s = list_append(if_not_exists(%s, %s), %s)", tl, tl,
		e.v(&types.AttributeValueMemberL{Value: []types.AttributeValue{}}), e.v(&types.AttributeValueMemberL{Value: []types.AttributeValue{v}})))
	e.SetExpr(fmt.Sprintf("%s = if_not_exists(%s, %s) + %s", tn, tn, zero, e.v(avN(int64(n)))))
	e.SetExpr(fmt.Sprintf("%s = if_not_exists(%s, %s) + %s", tb, tb, zero, e.v(avN(int64(size)))))
}

// tailEvents decodes a run item's event tail: batches (payloads), and
// references to the approval items that hold a batch ("A#<id>").
func (s *Store) tailEvents(ctx context.Context, run item) ([]storedEvent, error) {
	l, ok := run[aTail].(*types.AttributeValueMemberL)
	if !ok {
		return nil, nil
	}
	var out []storedEvent
	for _, v := range l.Value {
		var batch []storedEvent
		switch v := v.(type) {
		case *types.AttributeValueMemberB:
			if err := s.decode(ctx, v.Value, &batch); err != nil {
				return nil, err
			}
		case *types.AttributeValueMemberS:
			it, err := s.getItem(ctx, key(v.Value, approvalSK))
			if err != nil {
				return nil, err
			}
			var body approvalBody
			if it != nil {
				err = s.decode(ctx, getB(it, aBody), &body)
			}
			if err != nil || len(body.Events) == 0 {
				return nil, fmt.Errorf("event tail of run %s refers to %s, which holds no events (%v)", getS(run, aID), v.Value, err)
			}
			batch = body.Events
		default:
			return nil, errors.New("event tail holds a value of an unknown kind")
		}
		out = append(out, batch...)
	}
	if int64(len(out)) != getN(run, aTailN) {
		return nil, fmt.Errorf("event tail of run %s holds %d events, its count says %d", getS(run, aID), len(out), getN(run, aTailN))
	}
	return out, nil
}

func toEvents(runID string, first int64, es []storedEvent) []store.Event {
	out := make([]store.Event, len(es))
	for i, e := range es {
		out[i] = store.Event{RunID: runID, Seq: first + int64(i), Type: e.Type, At: e.At, Step: e.Step, Data: e.Data}
	}
	return out
}

// ListEvents returns a run's events with Seq > afterSeq, in order: from the
// commit items the run item counts as written out, then from its tail.
func (s *Store) ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error) {
	limit = clampLimit(limit)
	afterSeq = max(afterSeq, 0)
	run, err := s.getItem(ctx, runKey(runID))
	if err != nil {
		return nil, fmt.Errorf("list events of run %s: %w", runID, err)
	}
	if run == nil {
		return nil, nil
	}
	lastSeq, tailN := getN(run, aLastSeq), getN(run, aTailN)
	flushed := lastSeq - tailN // events 1..flushed are in commit items
	var out []store.Event
	if afterSeq < flushed {
		// The item holding afterSeq+1 is the last one starting at or before it.
		from := eventsSK(afterSeq + 1)
		if afterSeq > 0 {
			res, err := s.db.Query(ctx, &dynamodb.QueryInput{
				TableName:                 &s.table,
				KeyConditionExpression:    aws.String("#p = :p AND #s BETWEEN :lo AND :hi"),
				ExpressionAttributeNames:  map[string]string{"#p": AttrPK, "#s": AttrSK},
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(runPK(runID)), ":lo": avS("E#"), ":hi": avS(from)},
				ScanIndexForward:          aws.Bool(false),
				Limit:                     aws.Int32(1),
				ConsistentRead:            aws.Bool(true),
				ProjectionExpression:      aws.String("#s"),
			}, s.callOpts...)
			if err != nil {
				return nil, fmt.Errorf("list events of run %s: %w", runID, interpretError(err))
			}
			if len(res.Items) > 0 {
				from = getS(res.Items[0], AttrSK)
			}
		}
		var start map[string]types.AttributeValue
		for len(out) < limit {
			res, err := s.db.Query(ctx, &dynamodb.QueryInput{
				TableName:                 &s.table,
				KeyConditionExpression:    aws.String("#p = :p AND #s BETWEEN :lo AND :hi"),
				ExpressionAttributeNames:  map[string]string{"#p": AttrPK, "#s": AttrSK},
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(runPK(runID)), ":lo": avS(from), ":hi": avS(eventsSK(flushed))},
				ExclusiveStartKey:         start,
				ConsistentRead:            aws.Bool(true),
			}, s.callOpts...)
			if err != nil {
				return nil, fmt.Errorf("list events of run %s: %w", runID, interpretError(err))
			}
			for _, it := range res.Items {
				first, err := strconv.ParseInt(strings.TrimPrefix(getS(it, AttrSK), "E#"), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("list events of run %s: commit item %q: %w", runID, getS(it, AttrSK), err)
				}
				var body commitBody
				if err := s.decode(ctx, getB(it, aBody), &body); err != nil {
					return nil, fmt.Errorf("list events of run %s: %w", runID, err)
				}
				for _, e := range toEvents(runID, first, body.Events) {
					if e.Seq > afterSeq && e.Seq <= flushed && len(out) < limit {
						out = append(out, e)
					}
				}
			}
			if res.LastEvaluatedKey == nil {
				break
			}
			start = res.LastEvaluatedKey
		}
	}
	if len(out) < limit && lastSeq > afterSeq {
		tail, err := s.tailEvents(ctx, run)
		if err != nil {
			return nil, fmt.Errorf("list events of run %s: %w", runID, err)
		}
		for _, e := range toEvents(runID, flushed+1, tail) {
			if e.Seq > afterSeq && len(out) < limit {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// GetStep returns a completed step record or store.ErrNotFound.
func (s *Store) GetStep(ctx context.Context, runID string, index int) (store.Step, error) {
	steps, err := s.steps(ctx, runID, func(i int) bool { return i == index })
	if err == nil && len(steps) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Step{}, fmt.Errorf("get step %d of run %s: %w", index, runID, err)
	}
	return steps[0], nil
}

// ListSteps returns a run's completed steps in index order.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]store.Step, error) {
	steps, err := s.steps(ctx, runID, func(int) bool { return true })
	if err != nil {
		return nil, fmt.Errorf("list steps of run %s: %w", runID, err)
	}
	return steps, nil
}

// steps reads the recorded steps of a run whose index want accepts: the run
// item says which item holds each.
func (s *Store) steps(ctx context.Context, runID string, want func(int) bool) ([]store.Step, error) {
	run, err := s.getItem(ctx, runKey(runID))
	if err != nil || run == nil {
		return nil, err
	}
	m, _ := run[aSteps].(*types.AttributeValueMemberM)
	if m == nil {
		return nil, nil
	}
	// Steps that shared a commit share its item: each item is read once.
	wanted := map[int]bool{}
	var keys []item
	for k, v := range m.Value {
		i, err := strconv.Atoi(k)
		sk, ok := v.(*types.AttributeValueMemberS)
		if err != nil || !ok {
			return nil, fmt.Errorf("run %s records step %q oddly", runID, k)
		}
		if want(i) {
			wanted[i] = true
			keys = append(keys, key(runPK(runID), sk.Value))
		}
	}
	its, err := s.batchGet(ctx, dedupe(keys))
	if err != nil {
		return nil, err
	}
	var out []store.Step
	for _, it := range its {
		var body commitBody
		if err := s.decode(ctx, getB(it, aBody), &body); err != nil {
			return nil, err
		}
		steps := body.steps()
		if len(steps) == 0 {
			return nil, fmt.Errorf("commit item %s of run %s holds no step", getS(it, AttrSK), runID)
		}
		for _, st := range steps {
			if wanted[st.Index] {
				out = append(out, st)
			}
		}
	}
	if len(out) != len(wanted) {
		return nil, fmt.Errorf("run %s records %d steps, its items hold %d of them", runID, len(wanted), len(out))
	}
	slices.SortFunc(out, func(a, b store.Step) int { return a.Index - b.Index })
	return out, nil
}
