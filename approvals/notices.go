package approvals

import (
	"slices"
	"time"
)

// Notice is one message an approval sends while it waits, beside the
// request itself: a reminder, the escalation to another group, or the
// warning that it is about to expire. A notice notifies; it never changes
// who may decide. The notifier sends each at most once per endpoint or
// recipient, at At, and not at all once the approval is settled.
type Notice struct {
	Kind NoticeKind `json:"kind"`
	At   time.Time  `json:"at"`
	// After is At as a duration after the request (what the config says).
	After time.Duration `json:"after"`
	// Group is whom an escalation goes to.
	Group string `json:"group,omitempty"`
}

// NoticeKind says what a notice is; its event type is "approval." + kind.
type NoticeKind string

// The notice kinds.
const (
	Reminder  NoticeKind = "reminder"
	Escalated NoticeKind = "escalated"
	Expiring  NoticeKind = "expiring"
)

// EventType is the notification type of a notice: "approval.reminder".
func (k NoticeKind) EventType() string { return "approval." + string(k) }

// placeNotices returns the notices that fall before the deadline, placed in
// time (At = requested + After) and in time order.
func placeNotices(ns []Notice, requested, expires time.Time) []Notice {
	var out []Notice
	for _, n := range ns {
		n.At = requested.Add(n.After)
		if n.After > 0 && n.At.Before(expires) {
			out = append(out, n)
		}
	}
	slices.SortStableFunc(out, func(a, b Notice) int { return a.At.Compare(b.At) })
	return out
}
