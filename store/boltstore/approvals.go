package boltstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"stead/approvals"
	"stead/store"
)

// GetApproval returns an approval or store.ErrNotFound.
func (s *Store) GetApproval(ctx context.Context, id string) (approvals.Approval, error) {
	var a approvals.Approval
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		a, err = getApproval(tx, id)
		return err
	})
	if err != nil {
		return approvals.Approval{}, fmt.Errorf("get approval %s: %w", id, interpretError(err))
	}
	return a, nil
}

func getApproval(tx *bolt.Tx, id string) (approvals.Approval, error) {
	var a approvals.Approval
	if err := must(get(tx, bApprovals, []byte(id), &a)); err != nil {
		return approvals.Approval{}, err
	}
	return a, nil
}

// putApproval writes a and keeps the approval indexes in step with it; old
// is the stored approval it replaces, nil for a new one. RequestedAt and
// ExpiresAt never change, so only the pending-only entries come and go.
func putApproval(tx *bolt.Tx, old *approvals.Approval, a approvals.Approval) error {
	if err := put(tx, bApprovals, []byte(a.ID), a); err != nil {
		return err
	}
	if old == nil {
		if err := markApproval(tx, a); err != nil {
			return err
		}
	}
	wasPending := old != nil && old.Status == approvals.Pending
	isPending := a.Status == approvals.Pending
	if wasPending == isPending {
		return nil
	}
	for _, e := range pendingEntries(a) {
		var err error
		if isPending {
			err = mark(tx, e.bucket, e.key)
		} else {
			err = unmark(tx, e.bucket, e.key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// An indexEntry is one key of one index bucket.
type indexEntry struct{ bucket, key []byte }

// approvalEntries are a's keys in the indexes that hold every approval.
func approvalEntries(a approvals.Approval) []indexEntry {
	return []indexEntry{
		{xAprProject, key(timeID(a.RequestedAt, a.ID), a.ProjectID)},
		{xAprProjectExp, key(timeID(a.ExpiresAt, a.ID), a.ProjectID)},
		{xAprRun, key(timeID(a.RequestedAt, a.ID), a.RunID)},
		{xAprRunExp, key(timeID(a.ExpiresAt, a.ID), a.RunID)},
	}
}

// pendingEntries are a's keys in the pending-only indexes.
func pendingEntries(a approvals.Approval) []indexEntry {
	return []indexEntry{
		{xAprPending, key(timeID(a.RequestedAt, a.ID), a.ProjectID)},
		{xAprPendingExp, key(timeID(a.ExpiresAt, a.ID), a.ProjectID)},
		{xAprDue, timeID(a.ExpiresAt, a.ID)},
	}
}

// markApproval enters a into the indexes that hold every approval.
func markApproval(tx *bolt.Tx, a approvals.Approval) error {
	for _, e := range approvalEntries(a) {
		if err := mark(tx, e.bucket, e.key); err != nil {
			return err
		}
	}
	return nil
}

// indexApprovalsByRun fills the by-run indexes from the stored approvals,
// for a file written before they existed (marking an entry twice changes
// nothing).
func indexApprovalsByRun(tx *bolt.Tx) error {
	return scan(bucket(tx, bApprovals), nil, nil, false, func(_, v []byte) (bool, error) {
		var a approvals.Approval
		if err := decode(v, &a); err != nil {
			return false, err
		}
		return true, markApproval(tx, a)
	})
}

// ListApprovals lists a project's approvals. Pending lists read the
// pending-only indexes, the lists of one run its by-run indexes; other
// lists scan all of the project's approvals in the asked order and filter.
func (s *Store) ListApprovals(ctx context.Context, f store.ApprovalFilter) (store.Page[approvals.Approval], error) {
	f, err := f.Normalize()
	if err != nil {
		return store.Page[approvals.Approval]{}, err
	}
	expiring := f.Order == store.ExpiringFirst
	l := list{prefix: prefix(f.ProjectID), cursor: f.Cursor, limit: f.Limit, desc: !expiring}
	switch {
	case f.RunID != "" && expiring:
		l.bucket, l.prefix = xAprRunExp, prefix(f.RunID)
	case f.RunID != "":
		l.bucket, l.prefix = xAprRun, prefix(f.RunID)
	case f.Status == approvals.Pending && expiring:
		l.bucket = xAprPendingExp
	case f.Status == approvals.Pending:
		l.bucket = xAprPending
	case expiring:
		l.bucket = xAprProjectExp
	default:
		l.bucket = xAprProject
	}
	var out store.Page[approvals.Approval]
	err = s.view(ctx, func(tx *bolt.Tx) (err error) {
		out, err = page(tx, l, func(k, _ []byte) (approvals.Approval, bool, error) {
			a, err := getApproval(tx, string(k[len(l.prefix)+timeLen:]))
			if err != nil {
				return approvals.Approval{}, false, err
			}
			ok := a.ProjectID == f.ProjectID && (f.Status == "" || a.Status == f.Status) && (f.RunID == "" || a.RunID == f.RunID)
			return a, ok, nil
		})
		return err
	})
	if err != nil {
		return store.Page[approvals.Approval]{}, fmt.Errorf("list approvals of %s: %w", f.ProjectID, interpretError(err))
	}
	return out, nil
}

// ListDueApprovals lists pending approvals of any project whose ExpiresAt is
// at or before now, soonest first.
func (s *Store) ListDueApprovals(ctx context.Context, now time.Time, limit int) ([]approvals.Approval, error) {
	limit = store.ClampLimit(limit)
	var out []approvals.Approval
	err := s.view(ctx, func(tx *bolt.Tx) error {
		end := string(timeKey(now))
		return scan(bucket(tx, xAprDue), nil, nil, false, func(k, _ []byte) (bool, error) {
			if len(out) == limit || string(k[:timeLen]) > end {
				return false, nil
			}
			a, err := getApproval(tx, string(k[timeLen:]))
			if err != nil {
				return false, err
			}
			out = append(out, a)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list due approvals: %w", interpretError(err))
	}
	return out, nil
}

// DecideApproval settles an approval if p.Decision.Check allows it and moves
// its run with it, in one transaction.
func (s *Store) DecideApproval(ctx context.Context, p store.DecideParams) (approvals.Approval, store.Run, error) {
	d := p.Decision
	if !p.RunStatus.Valid() || p.RunStatus == store.RunAwaitingApproval {
		return approvals.Approval{}, store.Run{}, fmt.Errorf("decide approval %s: run status %q cannot follow a decision", d.ApprovalID, p.RunStatus)
	}
	var (
		outA approvals.Approval
		outR store.Run
	)
	err := s.update(ctx, func(tx *bolt.Tx) error {
		outA, outR = approvals.Approval{}, store.Run{}
		a, err := getApproval(tx, d.ApprovalID)
		if err != nil {
			return err
		}
		if err := d.Check(a); err != nil {
			if !approvals.IsForeign(err) {
				outA = a // the approval as it stands
			}
			return err
		}
		old, err := getRun(tx, a.RunID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && (old.Status != store.RunAwaitingApproval || old.ApprovalID != a.ID)) {
			return store.ErrConflict
		}
		if err != nil {
			return err
		}
		// Every check is done: from here on, only writes.
		na := d.Apply(a)
		r := old
		if na.Status != approvals.Pending {
			r.Status = p.RunStatus
			r.Error = p.RunError
			r.LeaseOwner = ""
			r.LeaseUntil = p.LeaseUntil
			if r.Status.Terminal() {
				r.FinishedAt = d.At
			}
		}
		r.UpdatedAt = d.At
		r.Version++
		if r.LastSeq, err = appendEvents(tx, r.ID, old.LastSeq, p.Events); err != nil {
			return err
		}
		if err := putApproval(tx, &a, na); err != nil {
			return err
		}
		if err := putRun(tx, &old, r); err != nil {
			return err
		}
		outA, outR = na, r
		return nil
	})
	if err != nil {
		return outA, store.Run{}, fmt.Errorf("decide approval %s: %w", d.ApprovalID, interpretError(err))
	}
	return outA, outR, nil
}
