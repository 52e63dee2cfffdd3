package boltstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"stead/store"
)

// CreateRun stores a new run (Version 1) with its first events. If the run's
// IdempotencyKey is already used in the project it returns the existing run
// and store.ErrExists, writing nothing; store.ErrExists too if the id is
// taken.
func (s *Store) CreateRun(ctx context.Context, r store.Run, events []store.Event) (store.Run, error) {
	if r.ID == "" || r.ProjectID == "" {
		return store.Run{}, errors.New("create run: id and projectId are required")
	}
	if !r.Status.Valid() {
		return store.Run{}, fmt.Errorf("create run %s: status %q is not a run status", r.ID, r.Status)
	}
	var out store.Run
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = store.Run{}
		if r.IdempotencyKey != "" {
			if id := bucket(tx, xRunIdem).Get(key([]byte(r.IdempotencyKey), r.ProjectID)); id != nil {
				if err := must(get(tx, bRuns, id, &out)); err != nil {
					return err
				}
				return store.ErrExists
			}
		}
		if exists(tx, bRuns, []byte(r.ID)) {
			return store.ErrExists
		}
		nr := r
		nr.Version = 1
		last, err := appendEvents(tx, nr.ID, 0, events)
		if err != nil {
			return err
		}
		nr.LastSeq = last
		if err := putRun(tx, nil, nr); err != nil {
			return err
		}
		out = nr
		return nil
	})
	if errors.Is(err, store.ErrExists) && out.ID != "" {
		return out, fmt.Errorf("create run %s: idempotency key used by run %s: %w", r.ID, out.ID, store.ErrExists)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("create run %s: %w", r.ID, interpretError(err))
	}
	return out, nil
}

// GetRun returns a run or store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	var r store.Run
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		r, err = getRun(tx, id)
		return err
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, interpretError(err))
	}
	return r, nil
}

func getRun(tx *bolt.Tx, id string) (store.Run, error) {
	var r store.Run
	if err := must(get(tx, bRuns, []byte(id), &r)); err != nil {
		return store.Run{}, err
	}
	return r, nil
}

// putRun writes r and keeps the run indexes in step with it; old is the
// stored run it replaces, nil for a new one.
func putRun(tx *bolt.Tx, old *store.Run, r store.Run) error {
	if err := put(tx, bRuns, []byte(r.ID), r); err != nil {
		return err
	}
	if old == nil {
		if err := mark(tx, xRunProject, key(timeID(r.CreatedAt, r.ID), r.ProjectID)); err != nil {
			return err
		}
		if r.IdempotencyKey != "" {
			ik := key([]byte(r.IdempotencyKey), r.ProjectID)
			if err := bucket(tx, xRunIdem).Put(ik, []byte(r.ID)); err != nil {
				return err
			}
		}
	}
	if old != nil && leased(old.Status) {
		if err := unmark(tx, xRunLease, timeID(old.LeaseUntil, old.ID)); err != nil {
			return err
		}
	}
	if leased(r.Status) {
		return mark(tx, xRunLease, timeID(r.LeaseUntil, r.ID))
	}
	if r.Status.Terminal() && (old == nil || !old.Status.Terminal()) {
		return mark(tx, xRunFinished, finishedKey(r))
	}
	return nil
}

// leased reports whether a run in status st carries a lease or dispatch
// deadline that the sweeper watches.
func leased(st store.RunStatus) bool {
	return st == store.RunQueued || st == store.RunRunning
}

// appendEvents stores events after seq last and returns the new last seq;
// a run with events to notify (Event.Notify) enters the outbox with them.
func appendEvents(tx *bolt.Tx, runID string, last int64, events []store.Event) (int64, error) {
	if err := markOutbox(tx, runID, last+1, events); err != nil {
		return 0, err
	}
	p := prefix(runID)
	for _, e := range events {
		last++
		e.RunID = runID
		e.Seq = last
		if err := put(tx, bEvents, append(p, u64(uint64(last))...), e); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// ListRuns lists a project's runs, newest first. Filters other than the
// project are applied while scanning the project's index.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) (store.Page[store.Run], error) {
	f, err := f.Normalize()
	if err != nil {
		return store.Page[store.Run]{}, err
	}
	var out store.Page[store.Run]
	err = s.view(ctx, func(tx *bolt.Tx) (err error) {
		p := prefix(f.ProjectID)
		l := list{bucket: xRunProject, prefix: p, cursor: f.Cursor, desc: true, limit: f.Limit}
		out, err = page(tx, l, func(k, _ []byte) (store.Run, bool, error) {
			r, err := getRun(tx, string(k[len(p)+timeLen:]))
			if err != nil {
				return store.Run{}, false, err
			}
			ok := (f.Status == "" || r.Status == f.Status) &&
				(f.Agent == "" || r.Agent == f.Agent) &&
				(f.EndUserID == "" || r.EndUserID == f.EndUserID)
			return r, ok, nil
		})
		return err
	})
	if err != nil {
		return store.Page[store.Run]{}, fmt.Errorf("list runs of %s: %w", f.ProjectID, interpretError(err))
	}
	return out, nil
}

// CommitRun applies c in one conditional write and returns the stored run.
func (s *Store) CommitRun(ctx context.Context, c store.RunCommit) (store.Run, error) {
	id := c.Run.ID
	if err := c.Validate(); err != nil {
		return store.Run{}, err
	}
	var out store.Run
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = store.Run{}
		old, err := getRun(tx, id)
		if err != nil {
			return err
		}
		if old.Version != c.Run.Version {
			return store.ErrConflict
		}
		for _, st := range c.Steps {
			if exists(tx, bSteps, key(u64(uint64(st.Index)), id)) {
				return store.ErrConflict
			}
		}
		if c.Approval != nil && exists(tx, bApprovals, []byte(c.Approval.ID)) {
			return store.ErrExists
		}
		// Every check is done: from here on, only writes.
		r := keepIdentity(c.Run, old)
		r.Version = old.Version + 1
		if r.LastSeq, err = appendEvents(tx, id, old.LastSeq, c.Events); err != nil {
			return err
		}
		for _, st := range c.Steps {
			st.RunID = id
			if err := put(tx, bSteps, key(u64(uint64(st.Index)), id), st); err != nil {
				return err
			}
		}
		if c.Approval != nil {
			if err := putApproval(tx, nil, *c.Approval); err != nil {
				return err
			}
		}
		if err := putRun(tx, &old, r); err != nil {
			return err
		}
		out = r
		return nil
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("commit run %s: %w", id, interpretError(err))
	}
	return out, nil
}

// keepIdentity returns r with the fields that never change copied from the
// stored run.
func keepIdentity(r, stored store.Run) store.Run {
	r.ID = stored.ID
	r.ProjectID = stored.ProjectID
	r.Agent = stored.Agent
	r.EndUserID = stored.EndUserID
	r.Requester = stored.Requester
	r.Tool = stored.Tool
	r.Via = stored.Via
	r.Deployment = stored.Deployment
	r.IdempotencyKey = stored.IdempotencyKey
	r.RequestDigest = stored.RequestDigest
	r.CreatedAt = stored.CreatedAt
	return r
}

// ClaimRun gives p.Owner the run's lease until p.Until if the run is queued,
// or running with a lease that ran out before p.Now.
func (s *Store) ClaimRun(ctx context.Context, p store.ClaimParams) (store.Run, error) {
	var out store.Run
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = store.Run{}
		old, err := getRun(tx, p.RunID)
		if err != nil {
			return err
		}
		claimable := old.Status == store.RunQueued ||
			(old.Status == store.RunRunning && old.LeaseUntil.Before(p.Now))
		if !claimable {
			return store.ErrConflict
		}
		r := old
		r.Status = store.RunRunning
		r.LeaseOwner = p.Owner
		r.LeaseUntil = p.Until
		r.Attempts++
		r.Version++
		r.UpdatedAt = p.Now
		if err := putRun(tx, &old, r); err != nil {
			return err
		}
		out = r
		return nil
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("claim run %s: %w", p.RunID, interpretError(err))
	}
	return out, nil
}

// ListStalledRuns lists runs of any project that are queued or running with
// LeaseUntil before now, oldest lease first.
func (s *Store) ListStalledRuns(ctx context.Context, now time.Time, limit int) ([]store.Run, error) {
	limit = store.ClampLimit(limit)
	var out []store.Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		end := timeKey(now)
		return scan(bucket(tx, xRunLease), nil, nil, false, func(k, _ []byte) (bool, error) {
			if len(out) == limit || string(k[:timeLen]) >= string(end) {
				return false, nil
			}
			r, err := getRun(tx, string(k[timeLen:]))
			if err != nil {
				return false, err
			}
			out = append(out, r)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list stalled runs: %w", interpretError(err))
	}
	return out, nil
}

// ListEvents returns a run's events with Seq > afterSeq, in order.
func (s *Store) ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error) {
	limit = store.ClampLimit(limit)
	afterSeq = max(afterSeq, 0)
	var out []store.Event
	err := s.view(ctx, func(tx *bolt.Tx) error {
		after := key(u64(uint64(afterSeq)), runID)
		return scan(bucket(tx, bEvents), prefix(runID), after, false, func(_, v []byte) (bool, error) {
			var e store.Event
			if err := decode(v, &e); err != nil {
				return false, err
			}
			out = append(out, e)
			return len(out) < limit, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list events of run %s: %w", runID, interpretError(err))
	}
	return out, nil
}

// GetStep returns a completed step record or store.ErrNotFound.
func (s *Store) GetStep(ctx context.Context, runID string, index int) (store.Step, error) {
	var st store.Step
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if index < 0 {
			return store.ErrNotFound
		}
		return must(get(tx, bSteps, key(u64(uint64(index)), runID), &st))
	})
	if err != nil {
		return store.Step{}, fmt.Errorf("get step %d of run %s: %w", index, runID, interpretError(err))
	}
	return st, nil
}

// ListSteps returns a run's completed steps in index order.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]store.Step, error) {
	var out []store.Step
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return scan(bucket(tx, bSteps), prefix(runID), nil, false, func(_, v []byte) (bool, error) {
			var st store.Step
			if err := decode(v, &st); err != nil {
				return false, err
			}
			out = append(out, st)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list steps of run %s: %w", runID, interpretError(err))
	}
	return out, nil
}
