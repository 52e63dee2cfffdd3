package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/approvals"
	"stead/store"
)

// Attributes of an approval item (besides the byProject keys and aexp).
const (
	aAprStatus = "st"
	aAprRun    = "rid"
)

// approvalBody is the payload of an approval item: the approval, and the
// events of the commit that created it, which the run's tail refers to (see
// commitFlush). One payload, so that the events' copy of the input
// compresses against the approval's.
type approvalBody struct {
	Approval approvals.Approval `json:"a"`
	Events   []storedEvent      `json:"e,omitempty"`
}

const approvalSK = "A"

func approvalKey(id string) item { return key("A#"+id, approvalSK) }

// decision is what the run item keeps of a decision on its current
// approval: enough to settle the approval item (approvals.Decision.Apply).
type decision struct {
	Status      approvals.Status `json:"s"`
	By          string           `json:"b,omitempty"`
	ByName      string           `json:"bn,omitempty"`
	At          time.Time        `json:"a"`
	Note        string           `json:"n,omitempty"`
	Input       json.RawMessage  `json:"i,omitempty"`
	InputDigest string           `json:"g,omitempty"`
}

func (d decision) apply(a approvals.Approval) approvals.Approval {
	return approvals.Decision{Status: d.Status, By: d.By, ByName: d.ByName, At: d.At, Note: d.Note, Input: d.Input, InputDigest: d.InputDigest}.Settle(a)
}

// votesState is what the run item keeps of the votes on its current
// approval (one with requirements), beside the decision: the votes, their
// count, and the input as the last edit left it.
type votesState struct {
	Votes         []approvals.Vote `json:"v"`
	VoteVersion   int64            `json:"vv"`
	Input         json.RawMessage  `json:"i,omitempty"`
	InputDigest   string           `json:"g,omitempty"`
	OriginalInput json.RawMessage  `json:"o,omitempty"`
}

func votesOf(a approvals.Approval) votesState {
	v := votesState{Votes: a.Votes, VoteVersion: a.VoteVersion}
	if a.OriginalInput != nil {
		v.Input, v.InputDigest, v.OriginalInput = a.Input, a.InputDigest, a.OriginalInput
	}
	return v
}

func (v votesState) apply(a approvals.Approval) approvals.Approval {
	a.Votes, a.VoteVersion = v.Votes, v.VoteVersion
	if v.OriginalInput != nil {
		a.Input, a.InputDigest, a.OriginalInput = v.Input, v.InputDigest, v.OriginalInput
	}
	return a
}

// slotApproval is a, the approval of the run item's slot, as the slot has
// it: its votes, then its decision.
func (s *Store) slotApproval(ctx context.Context, a approvals.Approval, run item) (approvals.Approval, error) {
	if b := getB(run, aSlotVotes); b != nil {
		var v votesState
		if err := s.decode(ctx, b, &v); err != nil {
			return approvals.Approval{}, err
		}
		a = v.apply(a)
	}
	if getS(run, aSlotStatus) != string(approvals.Pending) {
		var d decision
		if err := s.decode(ctx, getB(run, aSlotDecision), &d); err != nil {
			return approvals.Approval{}, err
		}
		a = d.apply(a)
	}
	return a, nil
}

// putApproval writes a new approval item, with the events of the commit
// that creates it and the ttl of its run's items (none if zero);
// store.ErrExists if its id is taken.
func (s *Store) putApproval(ctx context.Context, a approvals.Approval, events []storedEvent, ttl int64) error {
	p, err := s.encode(ctx, "approval "+a.ID, approvalBody{Approval: a, Events: events})
	if err != nil {
		return err
	}
	it := approvalKey(a.ID)
	it[aBody] = avB(p)
	it[aAprStatus] = avS(string(a.Status))
	it[aProject] = avS(a.ProjectID)
	it[aAprRun] = avS(a.RunID)
	it[AttrByProjectPK] = avS("A#" + a.ProjectID)
	it[AttrByProjectSK] = avS(timeKey(a.RequestedAt) + "#" + a.ID)
	it[attrAprExpires] = avT(a.ExpiresAt)
	setTTL(it, ttl)
	if err := s.putNew(ctx, it); err != nil {
		return fmt.Errorf("put approval %s: %w", a.ID, err)
	}
	return nil
}

// slotClauses make a a run's current approval: pending, in the pending and
// due indexes, and in the run's list of approvals.
func (s *Store) slotClauses(e *expr, a approvals.Approval) {
	e.Set(aSlotID, avS(a.ID))
	e.Set(aSlotStatus, avS(string(approvals.Pending)))
	e.Set(aSlotExpires, avT(a.ExpiresAt))
	e.Remove(aSlotDecision, aSlotVotes, aSlotVoteVersion)
	e.Set(AttrPendingPK, avS(a.ProjectID))
	e.Set(AttrPendingSK, avS(timeKey(a.RequestedAt)+"#"+a.ID))
	e.Set(AttrDuePK, avS(shardOf(a.RunID, s.shards)))
	e.Set(AttrDueSK, avS(timeKey(a.ExpiresAt)+"#"+a.ID))
	e.Add(aApprovals, &types.AttributeValueMemberSS{Value: []string{a.ID}})
}

// settlePrevious writes the decision the run item holds on its current
// approval into that approval's item, before a new approval takes its place
// on the run. Settling is idempotent: an item settled already is left as it
// is.
func (s *Store) settlePrevious(ctx context.Context, run item) error {
	id := getS(run, aSlotID)
	if id == "" || getS(run, aSlotStatus) == string(approvals.Pending) {
		return nil
	}
	it, err := s.getItem(ctx, approvalKey(id))
	if err != nil || it == nil || getS(it, aAprStatus) != string(approvals.Pending) {
		return err
	}
	a, _, err := s.resolveApproval(ctx, it, run)
	if err != nil {
		return err
	}
	var body approvalBody
	if err := s.decode(ctx, getB(it, aBody), &body); err != nil {
		return err
	}
	body.Approval = a
	p, err := s.encode(ctx, "approval "+id, body)
	if err != nil {
		return err
	}
	e := newExpr()
	e.Cond(e.n(aAprStatus) + " = " + e.v(avS(string(approvals.Pending))))
	e.Set(aBody, avB(p))
	e.Set(aAprStatus, avS(string(a.Status)))
	_, err = s.db.UpdateItem(ctx, e.update(s.table, approvalKey(id)), s.callOpts...)
	if err = interpretError(err); err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("settle approval %s: %w", id, err)
	}
	return nil
}

// resolveApproval reads an approval from its item and its run's item. The
// approval item is the request, settled lazily; while it says pending, the
// run item decides: if the approval is the run's current one, the run's
// decision (if any) applies; if the run had it once, it is still pending; if
// the run never took it (its commit lost, or is still in flight), it does
// not exist (visible is false).
func (s *Store) resolveApproval(ctx context.Context, it, run item) (a approvals.Approval, visible bool, err error) {
	var body approvalBody
	if err := s.decode(ctx, getB(it, aBody), &body); err != nil {
		return approvals.Approval{}, false, err
	}
	a = body.Approval
	if a.Status != approvals.Pending {
		return a, true, nil
	}
	if run == nil {
		return approvals.Approval{}, false, nil
	}
	if getS(run, aSlotID) == a.ID {
		a, err := s.slotApproval(ctx, a, run)
		return a, err == nil, err
	}
	if ids, ok := run[aApprovals].(*types.AttributeValueMemberSS); ok && slices.Contains(ids.Value, a.ID) {
		return a, true, nil
	}
	return approvals.Approval{}, false, nil
}

// GetApproval returns an approval or store.ErrNotFound: one BatchGetItem
// of the approval item and, for an id that names its run
// (approvals.RunHint), the run item.
func (s *Store) GetApproval(ctx context.Context, id string) (approvals.Approval, error) {
	var runs map[string]string
	if run, ok := approvals.RunHint(id); ok {
		runs = map[string]string{id: run}
	}
	as, err := s.loadApprovals(ctx, []string{id}, runs)
	if err == nil && as[0].ID == "" {
		err = store.ErrNotFound
	}
	if err != nil {
		return approvals.Approval{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	return as[0], nil
}

// loadApprovals reads approvals by id, in order; the zero Approval for one
// that does not exist. runs, if known, maps approval ids to their runs' ids
// so that both kinds of item come in one batch.
func (s *Store) loadApprovals(ctx context.Context, ids []string, runs map[string]string) ([]approvals.Approval, error) {
	keys := make([]item, 0, 2*len(ids))
	for _, id := range ids {
		keys = append(keys, approvalKey(id))
		if r := runs[id]; r != "" {
			keys = append(keys, runKey(r))
		}
	}
	its, err := s.batchGet(ctx, dedupe(keys))
	if err != nil {
		return nil, err
	}
	byPK := map[string]item{}
	for _, it := range its {
		byPK[getS(it, AttrPK)] = it
	}
	// Runs of approvals that still say pending, not read yet.
	var more []item
	for _, id := range ids {
		a := byPK["A#"+id]
		if a != nil && getS(a, aAprStatus) == string(approvals.Pending) && byPK[runPK(getS(a, aAprRun))] == nil {
			more = append(more, runKey(getS(a, aAprRun)))
		}
	}
	if len(more) > 0 {
		its, err := s.batchGet(ctx, dedupe(more))
		if err != nil {
			return nil, err
		}
		for _, it := range its {
			byPK[getS(it, AttrPK)] = it
		}
	}
	out := make([]approvals.Approval, len(ids))
	for i, id := range ids {
		it := byPK["A#"+id]
		if it == nil {
			continue
		}
		a, visible, err := s.resolveApproval(ctx, it, byPK[runPK(getS(it, aAprRun))])
		if err != nil {
			return nil, err
		}
		if visible {
			out[i] = a
		}
	}
	return out, nil
}

func dedupe(keys []item) []item {
	seen := map[string]bool{}
	out := keys[:0:0]
	for _, k := range keys {
		id := getS(k, AttrPK) + "\x00" + getS(k, AttrSK)
		if !seen[id] {
			seen[id] = true
			out = append(out, k)
		}
	}
	return out
}

// approvalID is the approval an index entry names: its aid attribute (the
// pending and due indexes, on run items) or its own key (byProject, on
// approval items).
func approvalID(entry item) string {
	if id := getS(entry, attrAprID); id != "" {
		return id
	}
	return strings.TrimPrefix(getS(entry, AttrPK), "A#")
}

// entryRun is the run an entry of the pending or due index belongs to.
func entryRun(entry item) string { return strings.TrimPrefix(getS(entry, AttrPK), "R#") }

// ListApprovals lists a project's approvals. Pending ones come from the
// pending index; others from the byProject index (or, for one run, from the
// run's list of approvals). The expiring-first order reads the whole
// partition of its index (keys and deadlines only) and sorts it: cheap for a
// queue of pending approvals, and for a history of up to some 10^5 approvals
// per project; a project past that wants an index by deadline (one more
// index write per approval).
func (s *Store) ListApprovals(ctx context.Context, f store.ApprovalFilter) (store.Page[approvals.Approval], error) {
	f, err := f.Normalize()
	if err != nil {
		return store.Page[approvals.Approval]{}, err
	}
	expiring := f.Order == store.ExpiringFirst
	keep := func(a approvals.Approval) bool {
		return a.ID != "" && a.ProjectID == f.ProjectID && (f.Status == "" || a.Status == f.Status) && (f.RunID == "" || a.RunID == f.RunID)
	}
	load := func(entries []item) ([]approvals.Approval, error) {
		ids := make([]string, len(entries))
		runs := map[string]string{}
		for i, e := range entries {
			ids[i] = approvalID(e)
			if strings.HasPrefix(getS(e, AttrPK), "R#") {
				runs[ids[i]] = entryRun(e)
			}
		}
		return s.loadApprovals(ctx, ids, runs)
	}
	var page store.Page[approvals.Approval]
	switch {
	case f.RunID != "":
		page, err = s.runApprovals(ctx, f, expiring, keep)
	case f.Status == approvals.Pending:
		l := indexList{index: IndexPending, pkAttr: AttrPendingPK, skAttr: AttrPendingSK, pk: f.ProjectID, desc: !expiring, cursor: f.Cursor, limit: f.Limit}
		if expiring {
			page, err = sortedPage(ctx, s, l, load, keep)
		} else {
			page, err = indexPage(ctx, s, l, load, keep)
		}
	default:
		l := indexList{index: IndexByProject, pkAttr: AttrByProjectPK, skAttr: AttrByProjectSK, pk: "A#" + f.ProjectID, desc: !expiring, cursor: f.Cursor, limit: f.Limit}
		if expiring {
			page, err = sortedPage(ctx, s, l, load, keep)
		} else {
			page, err = indexPage(ctx, s, l, load, keep)
		}
	}
	if err != nil {
		return store.Page[approvals.Approval]{}, fmt.Errorf("list approvals of %s: %w", f.ProjectID, err)
	}
	return page, nil
}

// expiringKey orders entries soonest deadline first, then by id.
func expiringKey(entry item) string {
	exp := getT(entry, attrAprExpires)
	if !has(entry, attrAprExpires) {
		exp = getT(entry, attrSlotExpires)
	}
	return timeKey(exp) + "#" + approvalID(entry)
}

// sortedPage pages through a whole index partition sorted by deadline.
func sortedPage(ctx context.Context, s *Store, l indexList, load func([]item) ([]approvals.Approval, error), keep func(approvals.Approval) bool) (store.Page[approvals.Approval], error) {
	tag := l.index + "|" + l.pk + "|expiring"
	c, err := decodeCursor(l.cursor, tag)
	if err != nil {
		return store.Page[approvals.Approval]{}, err
	}
	if c.Key != nil {
		return store.Page[approvals.Approval]{}, store.ErrInvalidCursor
	}
	var entries []item
	var start map[string]types.AttributeValue
	for {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &s.table,
			IndexName:                 aws.String(l.index),
			KeyConditionExpression:    aws.String("#p = :p"),
			ExpressionAttributeNames:  map[string]string{"#p": l.pkAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(l.pk)},
			ExclusiveStartKey:         start,
		}, s.callOpts...)
		if err != nil {
			return store.Page[approvals.Approval]{}, interpretError(err)
		}
		for _, e := range res.Items {
			if expiringKey(e) > c.After {
				entries = append(entries, e)
			}
		}
		if res.LastEvaluatedKey == nil {
			break
		}
		start = res.LastEvaluatedKey
	}
	slices.SortFunc(entries, func(a, b item) int { return strings.Compare(expiringKey(a), expiringKey(b)) })
	return memPage(entries, expiringKey, tag, l.limit, load, keep)
}

// memPage pages through entries already in order: it loads them in chunks
// and returns the first limit that keep accepts, with a cursor (the sort key
// of the last) when there are more.
func memPage(entries []item, sortKey func(item) string, tag string, limit int, load func([]item) ([]approvals.Approval, error), keep func(approvals.Approval) bool) (store.Page[approvals.Approval], error) {
	limit = clampLimit(limit)
	var (
		out  store.Page[approvals.Approval]
		last string
	)
	for len(entries) > 0 {
		n := min(len(entries), limit+1)
		vals, err := load(entries[:n])
		if err != nil {
			return store.Page[approvals.Approval]{}, err
		}
		for i, v := range vals {
			if !keep(v) {
				continue
			}
			if len(out.Items) == limit {
				out.NextCursor = encodeCursor(cursor{List: tag, After: last})
				return out, nil
			}
			out.Items = append(out.Items, v)
			last = sortKey(entries[i])
		}
		entries = entries[n:]
	}
	return out, nil
}

// runApprovals lists the approvals of one run: the run item names them all.
func (s *Store) runApprovals(ctx context.Context, f store.ApprovalFilter, expiring bool, keep func(approvals.Approval) bool) (store.Page[approvals.Approval], error) {
	tag := "run|" + f.RunID
	c, err := decodeCursor(f.Cursor, tag)
	if err != nil {
		return store.Page[approvals.Approval]{}, err
	}
	run, err := s.getItem(ctx, runKey(f.RunID))
	if err != nil || run == nil {
		return store.Page[approvals.Approval]{}, err
	}
	ids, _ := run[aApprovals].(*types.AttributeValueMemberSS)
	if ids == nil {
		return store.Page[approvals.Approval]{}, nil
	}
	runs := map[string]string{}
	for _, id := range ids.Value {
		runs[id] = f.RunID
	}
	as, err := s.loadApprovals(ctx, ids.Value, runs)
	if err != nil {
		return store.Page[approvals.Approval]{}, err
	}
	sortKey := func(a approvals.Approval) string {
		if expiring {
			return timeKey(a.ExpiresAt) + "#" + a.ID
		}
		return timeKey(a.RequestedAt) + "#" + a.ID
	}
	as = slices.DeleteFunc(as, func(a approvals.Approval) bool { return !keep(a) })
	slices.SortFunc(as, func(a, b approvals.Approval) int {
		if expiring {
			return strings.Compare(sortKey(a), sortKey(b))
		}
		return strings.Compare(sortKey(b), sortKey(a))
	})
	var out store.Page[approvals.Approval]
	limit := clampLimit(f.Limit)
	for _, a := range as {
		k := sortKey(a)
		if c.After != "" && ((expiring && k <= c.After) || (!expiring && k >= c.After)) {
			continue
		}
		if len(out.Items) == limit {
			out.NextCursor = encodeCursor(cursor{List: tag, After: sortKey(out.Items[limit-1])})
			break
		}
		out.Items = append(out.Items, a)
	}
	return out, nil
}

// ListDueApprovals lists pending approvals of any project whose ExpiresAt is
// at or before now, soonest first: the due index, every shard, merged.
func (s *Store) ListDueApprovals(ctx context.Context, now time.Time, limit int) ([]approvals.Approval, error) {
	limit = clampLimit(limit)
	// Keys are "<expiresAt>#<id>"; '#' sorts before '$', so this takes every
	// deadline up to and including now.
	entries, err := s.queryShards(ctx, IndexDue, AttrDuePK, AttrDueSK, "", timeKey(now)+"$", limit)
	if err != nil {
		return nil, fmt.Errorf("list due approvals: %w", err)
	}
	slices.SortFunc(entries, func(a, b item) int { return strings.Compare(getS(a, AttrDueSK), getS(b, AttrDueSK)) })
	if len(entries) > limit {
		entries = entries[:limit]
	}
	ids := make([]string, len(entries))
	runs := map[string]string{}
	for i, e := range entries {
		ids[i] = approvalID(e)
		runs[ids[i]] = entryRun(e)
	}
	as, err := s.loadApprovals(ctx, ids, runs)
	if err != nil {
		return nil, fmt.Errorf("list due approvals: %w", err)
	}
	// An entry the index still shows after a decision (indexes lag on AWS).
	return slices.DeleteFunc(as, func(a approvals.Approval) bool { return a.Status != approvals.Pending }), nil
}

// DecideApproval settles an approval and moves its run in one conditional
// UpdateItem of the run item, which holds the approval's decisive state.
// The condition is approvals.Decision.Check as an expression:
//
//	aid = :id ∧ pid = :project ∧ ast = pending ∧ st = awaiting-approval ∧ rapr = :id
//	∧ aexp > :at (BeforeDeadline) | aexp ≤ :at (FromDeadline)
//
// The same write records the decision, appends the events to the run's
// tail, and removes the pending and due index keys. The approval item is
// settled later (see settlePrevious); readers apply the run's decision.
// With p.Read (the caller's fresh read, as the engine's) the decision is one
// write and no read.
func (s *Store) DecideApproval(ctx context.Context, p store.DecideParams) (approvals.Approval, store.Run, error) {
	d := p.Decision
	if !p.RunStatus.Valid() || p.RunStatus == store.RunAwaitingApproval {
		return approvals.Approval{}, store.Run{}, fmt.Errorf("decide approval %s: run status %q cannot follow a decision", d.ApprovalID, p.RunStatus)
	}
	window, err := d.Window()
	if err != nil {
		return approvals.Approval{}, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, err)
	}
	var a approvals.Approval
	fromRead := p.Read != nil && p.Read.ID == d.ApprovalID
	if fromRead {
		a = *p.Read
	} else if a, err = s.GetApproval(ctx, d.ApprovalID); err != nil {
		return approvals.Approval{}, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, err)
	}
	if err := d.Check(a); err != nil && fromRead {
		// Refused on the caller's read: say why on the stored state, as
		// bbolt does (a stale read may refuse for a reason that no longer
		// holds, or hide the one that does).
		if a, err = s.GetApproval(ctx, d.ApprovalID); err != nil {
			return approvals.Approval{}, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, err)
		}
	}
	if err := d.Check(a); err != nil {
		if approvals.IsForeign(err) {
			return approvals.Approval{}, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, store.ErrNotFound)
		}
		return a, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, err)
	}
	var batch []byte
	if len(p.Events) > 0 {
		if batch, err = s.encode(ctx, "events of run "+a.RunID, storedEvents(p.Events)); err != nil {
			return approvals.Approval{}, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, err)
		}
	}
	na := d.Apply(a)
	vote := d.Status == approvals.Approved && a.HasQuorum()
	settles := na.Status != approvals.Pending
	stored := decision{Status: d.Status, By: d.By, ByName: d.ByName, At: d.At.UTC(), Note: d.Note, Input: d.Input, InputDigest: d.InputDigest}
	var votes []byte
	if vote {
		// The votes hold the input an edit left; the decision only settles.
		stored.Input, stored.InputDigest = nil, ""
		if votes, err = s.encode(ctx, "votes on approval "+a.ID, votesOf(na)); err != nil {
			return approvals.Approval{}, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, err)
		}
	}
	dec, err := s.encode(ctx, "decision on approval "+a.ID, stored)
	if err != nil {
		return approvals.Approval{}, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, err)
	}
	write := func(force bool) (item, error) {
		e := newExpr()
		e.Cond("attribute_exists(" + e.n(AttrPK) + ")")
		e.Cond(e.n(aSlotID) + " = " + e.v(avS(a.ID)))
		// The decider's project, from the stored run, not from the Read.
		e.Cond(e.n(aProject) + " = " + e.v(avS(d.ProjectID)))
		e.Cond(e.n(aSlotStatus) + " = " + e.v(avS(string(approvals.Pending))))
		e.Cond(e.n(aStatus) + " = " + e.v(avS(string(store.RunAwaitingApproval))))
		e.Cond(e.n(aRunApproval) + " = " + e.v(avS(a.ID)))
		switch window {
		case approvals.BeforeDeadline:
			e.Cond(e.n(aSlotExpires) + " > " + e.v(avT(d.At)))
		case approvals.FromDeadline:
			e.Cond(e.n(aSlotExpires) + " <= " + e.v(avT(d.At)))
		}
		e.SetExpr(fmt.Sprintf("%s = %s + %s", e.n(aVersion), e.n(aVersion), e.v(avN(1))))
		e.Set(aUpdated, avT(d.At))
		if n := len(p.Events); n > 0 {
			appendTail(e, avB(batch), n, len(batch))
			s.outboxClauses(e, a.RunID, p.Events)
			e.SetExpr(fmt.Sprintf("%s = %s + %s", e.n(aLastSeq), e.n(aLastSeq), e.v(avN(int64(n)))))
		}
		if vote || (a.HasQuorum() && d.Seen != "") {
			// Check's VoteVersion: the vote counts on the votes it was
			// judged on. (Eligibility and a second vote were judged on a
			// by Check; this clause makes that judgement still hold.) A
			// deny with Seen is held to it too: an edit moves the
			// version, and the input is then not the one the decider saw.
			if a.VoteVersion == 0 {
				e.Cond("attribute_not_exists(" + e.n(aSlotVoteVersion) + ")")
			} else {
				e.Cond(e.n(aSlotVoteVersion) + " = " + e.v(avN(a.VoteVersion)))
			}
		}
		if vote {
			e.Set(aSlotVotes, avB(votes))
			e.Set(aSlotVoteVersion, avN(na.VoteVersion))
		}
		if !settles {
			return s.runUpdate(ctx, a.RunID, e, s.decisionJudge(ctx, d, &a, p))
		}
		e.Set(aSlotStatus, avS(string(d.Status)))
		e.Set(aSlotDecision, avB(dec))
		e.Remove(AttrPendingPK, AttrPendingSK, AttrDuePK, AttrDueSK)
		e.Set(aStatus, avS(string(p.RunStatus)))
		if p.RunError != nil {
			ej, _ := json.Marshal(p.RunError)
			e.Set(aError, avB(append([]byte{payloadJSON}, ej...)))
		} else {
			e.Remove(aError)
		}
		e.Remove(aLeaseOwner)
		e.Set(aLeaseUntil, avT(p.LeaseUntil))
		if p.RunStatus.Terminal() {
			e.Set(aFinished, avT(d.At))
		}
		if ttl := s.finishTTL(orNow(d.At)); ttl > 0 && p.RunStatus.Terminal() {
			e.Set(AttrTTL, avN(ttl))
		} else {
			e.Remove(AttrTTL)
		}
		s.stallClauses(e, a.RunID, p.RunStatus, p.LeaseUntil, force)
		return s.runUpdate(ctx, a.RunID, e, s.decisionJudge(ctx, d, &a, p))
	}
	it, err := write(false)
	if errors.Is(err, errBoundAbove) {
		it, err = write(true)
	}
	if err != nil {
		if lostToCheck(err) {
			return a, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, err)
		}
		return approvals.Approval{}, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, err)
	}
	r, err := s.runFromItem(ctx, it)
	if err != nil {
		return approvals.Approval{}, store.Run{}, err
	}
	return na, r, nil
}

// lostToCheck reports whether a decision lost to approvals.Decision.Check,
// so that the approval as it stands goes back with the error.
func lostToCheck(err error) bool {
	for _, e := range []error{approvals.ErrNotPending, approvals.ErrExpired, approvals.ErrNotDue, approvals.ErrSeparated,
		approvals.ErrNotEligible, approvals.ErrAlreadyVoted, approvals.ErrChanged} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// decisionJudge tells why a decision's write lost, from the run item as it
// stood: the approval as that item has it, judged by approvals'
// Decision.Check — another decision came first (approvals.ErrNotPending,
// and *a becomes the approval as it stands), the deadline (ErrExpired or
// ErrNotDue) — or a stall bound to move (errBoundAbove), or the run no
// longer awaits this approval (store.ErrConflict).
func (s *Store) decisionJudge(ctx context.Context, d approvals.Decision, a *approvals.Approval, p store.DecideParams) judge {
	return func(old item) error {
		if old == nil || getS(old, aSlotID) != a.ID {
			return store.ErrConflict
		}
		if getS(old, aProject) != d.ProjectID {
			return store.ErrNotFound // another project's: as if it did not exist
		}
		cur := *a
		cur.ExpiresAt = getT(old, aSlotExpires)
		// The votes and decision as the item has them, on the request as
		// the caller read it (the request part never changes).
		cur.Votes, cur.VoteVersion = nil, 0
		cur, err := s.slotApproval(ctx, cur, old)
		if err != nil {
			return err
		}
		if err := d.Check(cur); err != nil {
			*a = cur
			return err
		}
		if cur.VoteVersion != a.VoteVersion {
			// A vote came between (an edit would have failed Check above):
			// judged again on the approval as it is now, it may well pass.
			*a = cur
			return approvals.ErrChanged
		}
		if store.RunStatus(getS(old, aStatus)) != store.RunAwaitingApproval || getS(old, aRunApproval) != a.ID {
			return store.ErrConflict
		}
		if leased(p.RunStatus) && boundAbove(old, a.RunID, p.LeaseUntil) {
			return errBoundAbove
		}
		return store.ErrConflict
	}
}
