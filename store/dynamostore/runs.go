package dynamostore

import (
	"cmp"
	"context"
	"encoding/json"
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

// Attributes of a run item.
const (
	aID          = "id"
	aProject     = "pid"
	aAgent       = "ag"
	aEndUser     = "eu"
	aRequester   = "rq"
	aCallTool    = "ot"
	aVia         = "via"
	aDeployment  = "dep"
	aIdemKey     = "ik"
	aReqDigest   = "rd"
	aCreated     = "ca"
	aStatus      = "st"
	aVersion     = "ver"
	aLastSeq     = "seq"
	aAttempts    = "att"
	aCursor      = "cur"
	aTrust       = "tr"
	aTrustOrigin = "to"
	aCosts       = "co"
	aInput       = "in"
	aOutput      = "out"
	aStepState   = "ss"
	aError       = "err"
	aRunApproval = "rapr"
	aLeaseOwner  = "lo"
	aLeaseUntil  = "lu"
	aUpdated     = "ua"
	aFinished    = "fa"
	// The event tail: batches (list of payloads), how many events, how many
	// bytes.
	aTail      = "tl"
	aTailN     = "tn"
	aTailBytes = "tb"
	// aSteps maps a recorded step's index to the sort key of the item that
	// holds its record.
	aSteps = "sx"
	// The run's current approval: id, status, deadline, decision (payload),
	// and every approval id the run ever had.
	aSlotID       = attrAprID
	aSlotStatus   = "ast"
	aSlotExpires  = attrSlotExpires
	aSlotDecision = "adec"
	// aSlotVotes holds the votes of an approval with requirements (and the
	// input an approve edited) while it collects them: a payload of
	// votesState; aSlotVoteVersion counts them (approvals.Approval's
	// VoteVersion), the condition of the next vote.
	aSlotVotes       = "avs"
	aSlotVoteVersion = "avv"
	aApprovals       = "aids"
)

const runSK = "R"

func runPK(id string) string { return "R#" + id }

func runKey(id string) item { return key(runPK(id), runSK) }

// leased reports whether a run in status st carries a lease or dispatch
// deadline that the sweeper watches.
func leased(st store.RunStatus) bool {
	return st == store.RunQueued || st == store.RunRunning
}

// runState is the part of a run every commit rewrites: attributes to set and
// attributes to remove (empty values are not stored).
func (s *Store) runState(ctx context.Context, r store.Run) (map[string]types.AttributeValue, []string, error) {
	set := map[string]types.AttributeValue{}
	var remove []string
	opt := func(attr string, av types.AttributeValue, present bool) {
		if present {
			set[attr] = av
		} else {
			remove = append(remove, attr)
		}
	}
	payload := func(attr, what string, raw []byte) error {
		if len(raw) == 0 {
			remove = append(remove, attr)
			return nil
		}
		p, err := s.encodeRaw(ctx, fmt.Sprintf("%s of run %s", what, r.ID), raw)
		if err != nil {
			return err
		}
		set[attr] = avB(p)
		return nil
	}
	set[aStatus] = avS(string(r.Status))
	set[aAttempts] = avN(int64(r.Attempts))
	set[aCursor] = avN(int64(r.Cursor))
	opt(aTrust, avS(string(r.Trust)), r.Trust != "")
	opt(aTrustOrigin, avS(r.TrustOrigin), r.TrustOrigin != "")
	opt(aRunApproval, avS(r.ApprovalID), r.ApprovalID != "")
	opt(aLeaseOwner, avS(r.LeaseOwner), r.LeaseOwner != "")
	set[aLeaseUntil] = avT(r.LeaseUntil)
	set[aUpdated] = avT(r.UpdatedAt)
	opt(aFinished, avT(r.FinishedAt), !r.FinishedAt.IsZero())
	// A finished run may go Retention after it finished; any other keeps
	// its item (see "Retention" in the package documentation).
	var ttl int64
	if r.Status.Terminal() {
		ttl = s.finishTTL(orNow(r.FinishedAt, r.UpdatedAt))
	}
	opt(AttrTTL, avN(ttl), ttl > 0)
	if r.Costs.IsZero() {
		remove = append(remove, aCosts)
	} else {
		c, _ := json.Marshal(r.Costs)
		set[aCosts] = avB(append([]byte{payloadJSON}, c...))
	}
	var errJSON []byte
	if r.Error != nil {
		errJSON, _ = json.Marshal(r.Error)
	}
	for _, p := range []struct {
		attr, what string
		raw        []byte
	}{
		{aInput, "input", r.Input}, {aOutput, "output", r.Output}, {aStepState, "step state", r.StepState}, {aError, "error", errJSON},
	} {
		if err := payload(p.attr, p.what, p.raw); err != nil {
			return nil, nil, err
		}
	}
	return set, remove, nil
}

// runFromItem decodes a run item.
func (s *Store) runFromItem(ctx context.Context, it item) (store.Run, error) {
	r := store.Run{
		ID:             getS(it, aID),
		ProjectID:      getS(it, aProject),
		Agent:          getS(it, aAgent),
		EndUserID:      getS(it, aEndUser),
		Requester:      getS(it, aRequester),
		Tool:           getS(it, aCallTool),
		Via:            getS(it, aVia),
		Deployment:     int(getN(it, aDeployment)),
		Status:         store.RunStatus(getS(it, aStatus)),
		Trust:          store.Trust(getS(it, aTrust)),
		TrustOrigin:    getS(it, aTrustOrigin),
		Cursor:         int(getN(it, aCursor)),
		ApprovalID:     getS(it, aRunApproval),
		IdempotencyKey: getS(it, aIdemKey),
		RequestDigest:  getS(it, aReqDigest),
		LeaseOwner:     getS(it, aLeaseOwner),
		LeaseUntil:     getT(it, aLeaseUntil),
		Attempts:       int(getN(it, aAttempts)),
		Version:        getN(it, aVersion),
		LastSeq:        getN(it, aLastSeq),
		CreatedAt:      getT(it, aCreated),
		UpdatedAt:      getT(it, aUpdated),
		FinishedAt:     getT(it, aFinished),
	}
	var err error
	if r.Input, err = s.rawOf(ctx, getB(it, aInput)); err != nil {
		return store.Run{}, fmt.Errorf("input of run %s: %w", r.ID, err)
	}
	if r.Output, err = s.rawOf(ctx, getB(it, aOutput)); err != nil {
		return store.Run{}, fmt.Errorf("output of run %s: %w", r.ID, err)
	}
	if r.StepState, err = s.rawOf(ctx, getB(it, aStepState)); err != nil {
		return store.Run{}, fmt.Errorf("step state of run %s: %w", r.ID, err)
	}
	if p := getB(it, aError); p != nil {
		r.Error = &store.RunError{}
		if err := s.decode(ctx, p, r.Error); err != nil {
			return store.Run{}, err
		}
	}
	if p := getB(it, aCosts); p != nil {
		if err := s.decode(ctx, p, &r.Costs); err != nil {
			return store.Run{}, err
		}
	}
	return r, nil
}

// stallBound is a run's sort key in the stall index.
func stallBound(runID string, lease time.Time) string { return timeKey(lease) + "#" + runID }

// errBoundAbove: a write that leases a run lost only because the run's
// stall-index bound is above its new lease; it is redone moving the bound.
var errBoundAbove = errors.New("stall bound above the new lease")

// stallClauses keeps the run's stall-index entry in step with a write that
// leaves it in status st with lease lease.
//
// The entry's sort key is a lower bound of the run's LeaseUntil, set when
// the run enters the index and not moved by later leases: the engine renews
// the lease with every commit, and moving an index key costs two index
// writes each time. ListStalledRuns reads the candidates whose bound is past
// and checks their real lease. A write that would put the lease below the
// bound is refused by the condition (errBoundAbove) and redone with force,
// which moves the bound down. Runs awaiting an approval leave the index
// (the due index holds them) and enter it again when the decision queues
// them, so that a sweep reads no waiting run however many wait; finished
// runs leave it too.
func (s *Store) stallClauses(e *expr, runID string, st store.RunStatus, lease time.Time, force bool) {
	switch {
	case st.Terminal() || st == store.RunAwaitingApproval:
		e.Remove(AttrStallPK, AttrStallSK)
	case force:
		e.Set(AttrStallPK, avS(shardOf(runID, s.shards)))
		e.Set(AttrStallSK, avS(stallBound(runID, lease)))
	default:
		bound := avS(stallBound(runID, lease))
		e.SetIfAbsent(AttrStallPK, avS(shardOf(runID, s.shards)))
		e.SetIfAbsent(AttrStallSK, bound)
		if leased(st) {
			e.Cond(fmt.Sprintf("attribute_not_exists(%s) OR %s <= %s", e.n(AttrStallSK), e.n(AttrStallSK), e.v(bound)))
		}
	}
}

// boundTime is the time part of a stall-index entry's sort key.
func boundTime(entry item) string {
	b, _, _ := strings.Cut(getS(entry, AttrStallSK), "#")
	return b
}

// boundAbove reports whether the old item's stall bound is above lease.
func boundAbove(old item, runID string, lease time.Time) bool {
	b := getS(old, AttrStallSK)
	return b != "" && b > stallBound(runID, lease)
}

// CreateRun stores a new run (Version 1) with its first events, which start
// its event tail. A run with an idempotency key is written in a transaction
// with the key's item. A key whose run is gone (TTL deleted it, its
// retention over) is free again.
func (s *Store) CreateRun(ctx context.Context, r store.Run, events []store.Event) (store.Run, error) {
	if r.ID == "" || r.ProjectID == "" {
		return store.Run{}, errors.New("create run: id and projectId are required")
	}
	if !r.Status.Valid() {
		return store.Run{}, fmt.Errorf("create run %s: status %q is not a run status", r.ID, r.Status)
	}
	nr := r
	nr.Version = 1
	nr.LastSeq = int64(len(events))
	it, err := s.newRunItem(ctx, nr, events)
	if err != nil {
		return store.Run{}, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if r.IdempotencyKey == "" {
		if err := s.putNew(ctx, it); err != nil {
			return store.Run{}, fmt.Errorf("create run %s: %w", r.ID, err)
		}
		return nr, nil
	}
	idem := key(projectPK(r.ProjectID), "I#"+r.IdempotencyKey)
	idem[aID] = avS(r.ID)
	setTTL(idem, getN(it, aKeep))
	notExists := aws.String("attribute_not_exists(" + AttrPK + ")")
	// gone is a run the key named whose item is gone: TTL deleted it, its
	// retention over, before the key's record (which outlives it). The key
	// is free again, and the record is replaced if it still names that run.
	gone := ""
	conflicts := 0
	for {
		put := &types.Put{TableName: &s.table, Item: idem, ConditionExpression: notExists, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
		if gone != "" {
			put.ConditionExpression = aws.String("attribute_not_exists(#pk) OR #id = :gone")
			put.ExpressionAttributeNames = map[string]string{"#pk": AttrPK, "#id": aID}
			put.ExpressionAttributeValues = map[string]types.AttributeValue{":gone": avS(gone)}
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: put},
			{Put: &types.Put{TableName: &s.table, Item: it, ConditionExpression: notExists}},
		}}, s.callOpts...)
		if transactionConflict(err) && conflicts < maxTxConflicts {
			// Another create with the same key is in flight: once it is
			// done, the key's condition tells which run is the replay.
			conflicts++
			if err := conflictPause(ctx, conflicts); err != nil {
				return store.Run{}, fmt.Errorf("create run %s: %w", r.ID, err)
			}
			continue
		}
		var usedBy string
		err = interpretError(err, func(old item) error {
			usedBy = getS(old, aID)
			return store.ErrExists
		}, exists)
		if errors.Is(err, store.ErrExists) && usedBy != "" {
			prev, gerr := s.GetRun(ctx, usedBy)
			if errors.Is(gerr, store.ErrNotFound) && gone == "" {
				gone = usedBy
				continue
			}
			if gerr != nil {
				return store.Run{}, fmt.Errorf("create run %s: idempotency key used by run %s: %w", r.ID, usedBy, gerr)
			}
			return prev, fmt.Errorf("create run %s: idempotency key used by run %s: %w", r.ID, usedBy, store.ErrExists)
		}
		if err != nil {
			return store.Run{}, fmt.Errorf("create run %s: %w", r.ID, err)
		}
		return nr, nil
	}
}

// newRunItem is the item of a new run.
func (s *Store) newRunItem(ctx context.Context, r store.Run, events []store.Event) (item, error) {
	set, _, err := s.runState(ctx, r)
	if err != nil {
		return nil, err
	}
	it := runKey(r.ID)
	for k, v := range set {
		it[k] = v
	}
	it[aID] = avS(r.ID)
	it[aProject] = avS(r.ProjectID)
	if r.Agent != "" {
		it[aAgent] = avS(r.Agent)
	}
	if r.EndUserID != "" {
		it[aEndUser] = avS(r.EndUserID)
	}
	if r.Requester != "" {
		it[aRequester] = avS(r.Requester)
	}
	if r.Tool != "" {
		it[aCallTool] = avS(r.Tool)
	}
	if r.Via != "" {
		it[aVia] = avS(r.Via)
	}
	it[aDeployment] = avN(int64(r.Deployment))
	if r.IdempotencyKey != "" {
		it[aIdemKey] = avS(r.IdempotencyKey)
	}
	if r.RequestDigest != "" {
		it[aReqDigest] = avS(r.RequestDigest)
	}
	it[aCreated] = avT(r.CreatedAt)
	it[aVersion] = avN(r.Version)
	it[aLastSeq] = avN(r.LastSeq)
	it[aSteps] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
	if len(events) > 0 {
		batch, err := s.encode(ctx, "events of run "+r.ID, storedEvents(events))
		if err != nil {
			return nil, err
		}
		it[aTail] = &types.AttributeValueMemberL{Value: []types.AttributeValue{avB(batch)}}
		it[aTailN] = avN(int64(len(events)))
		it[aTailBytes] = avN(int64(len(batch)))
	}
	it[AttrByProjectPK] = avS("R#" + r.ProjectID)
	it[AttrByProjectSK] = avS(timeKey(r.CreatedAt) + "#" + r.ID)
	if s.retention > 0 {
		it[aKeep] = avN(s.keepUntil(horizon(r, time.Time{}), 2))
	}
	if !r.Status.Terminal() {
		it[AttrStallPK] = avS(shardOf(r.ID, s.shards))
		it[AttrStallSK] = avS(stallBound(r.ID, r.LeaseUntil))
	}
	s.outboxAttrs(it, r.ID, events)
	return it, nil
}

// GetRun returns a run or store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	it, err := s.getItem(ctx, runKey(id))
	if err == nil && it == nil {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return s.runFromItem(ctx, it)
}

// ClaimRun gives p.Owner the run's lease if the run is queued, or running
// with a lease that ran out before p.Now: one conditional UpdateItem.
func (s *Store) ClaimRun(ctx context.Context, p store.ClaimParams) (store.Run, error) {
	claim := func(force bool) (item, error) {
		e := newExpr()
		e.Cond("attribute_exists(" + e.n(AttrPK) + ")")
		e.Cond(fmt.Sprintf("%s = %s OR (%s = %s AND %s < %s)",
			e.n(aStatus), e.v(avS(string(store.RunQueued))), e.n(aStatus), e.v(avS(string(store.RunRunning))), e.n(aLeaseUntil), e.v(avT(p.Now))))
		e.Set(aStatus, avS(string(store.RunRunning)))
		e.Set(aLeaseOwner, avS(p.Owner))
		e.Set(aLeaseUntil, avT(p.Until))
		e.Set(aUpdated, avT(p.Now))
		e.SetExpr(fmt.Sprintf("%s = if_not_exists(%s, %s) + %s", e.n(aAttempts), e.n(aAttempts), e.v(avN(0)), e.v(avN(1))))
		e.SetExpr(fmt.Sprintf("%s = %s + %s", e.n(aVersion), e.n(aVersion), e.v(avN(1))))
		s.stallClauses(e, p.RunID, store.RunRunning, p.Until, force)
		return s.runUpdate(ctx, p.RunID, e, func(old item) error {
			if old == nil {
				return nil
			}
			st := store.RunStatus(getS(old, aStatus))
			claimable := st == store.RunQueued || (st == store.RunRunning && getT(old, aLeaseUntil).Before(p.Now))
			if claimable && boundAbove(old, p.RunID, p.Until) {
				return errBoundAbove
			}
			return nil
		})
	}
	it, err := claim(false)
	if errors.Is(err, errBoundAbove) {
		it, err = claim(true)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("claim run %s: %w", p.RunID, err)
	}
	return s.runFromItem(ctx, it)
}

// ListRuns lists a project's runs, newest first, from the byProject index;
// the other filters are applied to the items read.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) (store.Page[store.Run], error) {
	f, err := f.Normalize()
	if err != nil {
		return store.Page[store.Run]{}, err
	}
	l := indexList{
		index: IndexByProject, pkAttr: AttrByProjectPK, skAttr: AttrByProjectSK,
		pk: "R#" + f.ProjectID, desc: true, cursor: f.Cursor, limit: f.Limit,
	}
	page, err := indexPage(ctx, s, l, func(entries []item) ([]store.Run, error) {
		its, err := s.fetch(ctx, entries)
		if err != nil {
			return nil, err
		}
		out := make([]store.Run, len(its))
		for i, it := range its {
			if it == nil {
				continue
			}
			r, err := s.runFromItem(ctx, it)
			if err != nil {
				return nil, err
			}
			if (f.Status == "" || r.Status == f.Status) && (f.Agent == "" || r.Agent == f.Agent) && (f.EndUserID == "" || r.EndUserID == f.EndUserID) {
				out[i] = r
			}
		}
		return out, nil
	}, func(r store.Run) bool { return r.ID != "" })
	if err != nil {
		return store.Page[store.Run]{}, fmt.Errorf("list runs of %s: %w", f.ProjectID, err)
	}
	return page, nil
}

// fetch reads the table items of index entries, in the entries' order (nil
// where an item is gone).
func (s *Store) fetch(ctx context.Context, entries []item) ([]item, error) {
	keys := make([]item, 0, len(entries))
	seen := map[string]bool{}
	for _, e := range entries {
		k := getS(e, AttrPK) + "\x00" + getS(e, AttrSK)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, key(getS(e, AttrPK), getS(e, AttrSK)))
		}
	}
	its, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	byKey := map[string]item{}
	for _, it := range its {
		byKey[getS(it, AttrPK)+"\x00"+getS(it, AttrSK)] = it
	}
	out := make([]item, len(entries))
	for i, e := range entries {
		out[i] = byKey[getS(e, AttrPK)+"\x00"+getS(e, AttrSK)]
	}
	return out, nil
}

// queryShards runs one query per shard of an index, concurrently, each
// reading entries with sort keys below upTo (inclusive) in ascending order,
// at most max each, and returns them all. A shard's partition key is its
// number after prefix.
func (s *Store) queryShards(ctx context.Context, index, pkAttr, skAttr, prefix, upTo string, max int) ([]item, error) {
	var (
		mu   sync.Mutex
		all  []item
		errs = make([]error, s.shards)
		wg   sync.WaitGroup
	)
	for shard := range s.shards {
		wg.Go(func() {
			var start map[string]types.AttributeValue
			n := 0
			for {
				out, err := s.db.Query(ctx, &dynamodb.QueryInput{
					TableName:                 &s.table,
					IndexName:                 aws.String(index),
					KeyConditionExpression:    aws.String("#p = :p AND #s <= :s"),
					ExpressionAttributeNames:  map[string]string{"#p": pkAttr, "#s": skAttr},
					ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(prefix + fmt.Sprint(shard)), ":s": avS(upTo)},
					ExclusiveStartKey:         start,
					Limit:                     aws.Int32(int32(min(max-n, 1000))),
				}, s.callOpts...)
				if err != nil {
					errs[shard] = interpretError(err)
					return
				}
				mu.Lock()
				all = append(all, out.Items...)
				mu.Unlock()
				n += len(out.Items)
				if out.LastEvaluatedKey == nil || n >= max {
					return
				}
				start = out.LastEvaluatedKey
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return all, nil
}

// ListStalledRuns lists runs of any project that are queued or running with
// LeaseUntil before now, oldest lease first. The stall index holds a lower
// bound of each unfinished run's lease (see stallClauses): every entry whose
// bound is before now is a candidate, and the run items tell which ones are
// stalled. Candidates are read in bound order, and reading stops once the
// bound passes the limit-th oldest stalled lease found: no later candidate
// can be older. The cost is a read of every queued or running run whose
// bound is past (long-running runs included); runs awaiting an approval are
// not in the index.
func (s *Store) ListStalledRuns(ctx context.Context, now time.Time, limit int) ([]store.Run, error) {
	limit = clampLimit(limit)
	// Bounds are "<time>#<run>": below "<now>" is strictly before now.
	entries, err := s.queryShards(ctx, IndexStall, AttrStallPK, AttrStallSK, "", timeKey(now), 1<<20)
	if err != nil {
		return nil, fmt.Errorf("list stalled runs: %w", err)
	}
	slices.SortFunc(entries, func(a, b item) int { return strings.Compare(getS(a, AttrStallSK), getS(b, AttrStallSK)) })
	var out []store.Run
	for len(entries) > 0 {
		if len(out) >= limit && boundTime(entries[0]) > timeKey(out[limit-1].LeaseUntil) {
			break
		}
		n := min(len(entries), 100)
		its, err := s.fetch(ctx, entries[:n])
		if err != nil {
			return nil, fmt.Errorf("list stalled runs: %w", err)
		}
		entries = entries[n:]
		for _, it := range its {
			if it == nil {
				continue
			}
			r, err := s.runFromItem(ctx, it)
			if err != nil {
				return nil, fmt.Errorf("list stalled runs: %w", err)
			}
			if leased(r.Status) && r.LeaseUntil.Before(now) {
				out = append(out, r)
			}
		}
		slices.SortFunc(out, func(a, b store.Run) int {
			return cmp.Or(a.LeaseUntil.Compare(b.LeaseUntil), strings.Compare(a.ID, b.ID))
		})
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// aWriteToken tags a run item with the last write that changed it.
const aWriteToken = "wt"

// errApplied: a conditional write lost to itself (see runUpdate).
var errApplied = errors.New("write already applied")

// runUpdate sends e as a conditional update of a run item (updateOwn).
func (s *Store) runUpdate(ctx context.Context, runID string, e *expr, j judge) (item, error) {
	return s.updateOwn(ctx, runKey(runID), e, j)
}

// updateOwn sends e as a conditional update of the item at k, tagged with a
// fresh write token, and returns the item as written. When the SDK retries
// a write whose answer was lost after DynamoDB applied it, the retry finds
// the condition failed; the token on the item tells that it failed because
// of this very write, and the item as it stands is the write's result. Any
// other failure is judged by j.
func (s *Store) updateOwn(ctx context.Context, k item, e *expr, j judge) (item, error) {
	token := writeToken()
	e.Set(aWriteToken, avS(token))
	out, err := s.db.UpdateItem(ctx, e.update(s.table, k), s.callOpts...)
	if err == nil {
		return out.Attributes, nil
	}
	var applied item
	err = interpretError(err, func(old item) error {
		if old != nil && getS(old, aWriteToken) == token {
			applied = old
			return errApplied
		}
		if j != nil {
			return j(old)
		}
		return nil
	})
	if errors.Is(err, errApplied) {
		return applied, nil
	}
	return nil, err
}
