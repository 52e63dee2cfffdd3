package engine

import (
	"context"

	"stead/approvals"
	"stead/notify"
	"stead/store"
)

// Notifications is what the engine tells about the writes that notify
// (package notify's Notifier).
type Notifications interface {
	// Notifies reports whether events of the project notify anyone (it has
	// webhook endpoints). It may answer from a cache a few seconds old.
	Notifies(ctx context.Context, projectID string) bool
	// Kick asks for the notifications just written to go out now.
	Kick()
}

// notifying is the engine's store with notifications: the events of every
// write that notify (notify.Notifies) are flagged, so that the store puts
// their run in its outbox in that same write, and the Notifier is kicked
// once the write is done. One place, so no write that moves a run can
// forget it.
type notifying struct {
	store.Store
	n Notifications
}

// flag marks events that notify; it reports whether any does.
func (s notifying) flag(ctx context.Context, projectID string, events []store.Event) bool {
	found := false
	for i := range events {
		if notify.Notifies(events[i].Type) {
			if !found && !s.n.Notifies(ctx, projectID) {
				return false
			}
			events[i].Notify, found = true, true
		}
	}
	return found
}

func (s notifying) CreateRun(ctx context.Context, r store.Run, events []store.Event) (store.Run, error) {
	kick := s.flag(ctx, r.ProjectID, events)
	out, err := s.Store.CreateRun(ctx, r, events)
	if err == nil && kick {
		s.n.Kick()
	}
	return out, err
}

func (s notifying) CommitRun(ctx context.Context, c store.RunCommit) (store.Run, error) {
	kick := s.flag(ctx, c.Run.ProjectID, c.Events)
	out, err := s.Store.CommitRun(ctx, c)
	if err == nil && kick {
		s.n.Kick()
	}
	return out, err
}

func (s notifying) DecideApproval(ctx context.Context, p store.DecideParams) (approvals.Approval, store.Run, error) {
	kick := s.flag(ctx, p.Decision.ProjectID, p.Events)
	a, r, err := s.Store.DecideApproval(ctx, p)
	if err == nil && kick {
		s.n.Kick()
	}
	return a, r, err
}
