package store

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"stead/approvals"
)

// List filters are checked here and nowhere else. The API and the CLI read
// what a user wrote with the Parse functions and CheckLimit; every backend
// calls Normalize (or ClampLimit) before it reads. So each rule — which
// statuses and orders exist, what a missing value means, how large a page
// may be — and the words that refuse a value are written once: adding a
// status is adding it to its list (RunStatuses here; approvals.Statuses,
// which ApprovalStatuses is).

// Page sizes of every list.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// ApprovalStatuses are the statuses an approval filter takes, in the order
// they are offered to users.
var ApprovalStatuses = approvals.Statuses

// DefaultApprovalStatus is what an approval list shows when the user names
// no status: the queue.
const DefaultApprovalStatus = approvals.Pending

// AnyStatus is what a user writes for an approval list of every status; in
// an ApprovalFilter it is the empty Status.
const AnyStatus = "all"

// ApprovalOrder orders approval lists.
type ApprovalOrder string

// Orders: newest request first (default) or soonest expiry first.
const (
	NewestFirst   ApprovalOrder = "newest"
	ExpiringFirst ApprovalOrder = "expiring"
)

// ApprovalOrders are the orders of approval lists, the default first.
var ApprovalOrders = []ApprovalOrder{NewestFirst, ExpiringFirst}

// ErrInvalidFilter: a list filter holds a value no list takes. The error is
// a *FilterError, which says which field and what it takes.
var ErrInvalidFilter = errors.New("invalid list filter")

// FilterError refuses one field of a list filter.
type FilterError struct {
	// Field is the filter's field as the API names it: status, order, limit.
	Field string
	// Value is what was given.
	Value string
	// Want is what the field takes: "newest or expiring".
	Want string
}

func (e *FilterError) Error() string { return e.Field + " " + e.Problem() }

// Problem is the error without its field: `must be newest or expiring
// (got "oldest")`.
func (e *FilterError) Problem() string { return fmt.Sprintf("must be %s (got %q)", e.Want, e.Value) }

func (e *FilterError) Unwrap() error { return ErrInvalidFilter }

// Choices lists values for a person: "a", "a or b", "a, b or c".
func Choices[T ~string](values ...T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// oneOf is what a field with these values takes, for FilterError.Want:
// "newest or expiring", "one of queued, running or failed".
func oneOf[T ~string](values ...T) string {
	if len(values) > 2 {
		return "one of " + Choices(values...)
	}
	return Choices(values...)
}

// ApprovalStatusChoices are the values ParseApprovalStatus takes.
func ApprovalStatusChoices() []string {
	out := make([]string, 0, len(ApprovalStatuses)+1)
	for _, st := range ApprovalStatuses {
		out = append(out, string(st))
	}
	return append(out, AnyStatus)
}

// ParseApprovalStatus reads an approval list's status as a user writes it:
// one of ApprovalStatuses, AnyStatus for every status (the empty Status),
// or nothing for DefaultApprovalStatus.
func ParseApprovalStatus(s string) (approvals.Status, error) {
	switch {
	case s == "":
		return DefaultApprovalStatus, nil
	case s == AnyStatus:
		return "", nil
	case slices.Contains(ApprovalStatuses, approvals.Status(s)):
		return approvals.Status(s), nil
	}
	return "", &FilterError{Field: "status", Value: s, Want: oneOf(ApprovalStatusChoices()...)}
}

// ParseApprovalOrder reads an approval list's order: one of ApprovalOrders,
// or nothing for NewestFirst.
func ParseApprovalOrder(s string) (ApprovalOrder, error) {
	o := ApprovalOrder(s)
	switch {
	case o == "":
		return NewestFirst, nil
	case slices.Contains(ApprovalOrders, o):
		return o, nil
	}
	return "", &FilterError{Field: "order", Value: s, Want: oneOf(ApprovalOrders...)}
}

// ParseRunStatus reads a run list's status: one of RunStatuses, or nothing
// for every status.
func ParseRunStatus(s string) (RunStatus, error) {
	st := RunStatus(s)
	if st == "" || st.Valid() {
		return st, nil
	}
	return "", &FilterError{Field: "status", Value: s, Want: oneOf(RunStatuses...)}
}

// ParseLimit reads a page size as a user writes it: a whole number from 1
// to MaxLimit, or nothing (0: DefaultLimit).
func ParseLimit(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || CheckLimit(n) != nil {
		return 0, &FilterError{Field: "limit", Value: s, Want: "a whole number " + limitRange()}
	}
	return n, nil
}

// CheckLimit refuses a page size a user asked for (a number already) that
// is not from 1 to MaxLimit. Backends clamp instead: ClampLimit.
func CheckLimit(n int) error {
	if n < 1 || n > MaxLimit {
		return &FilterError{Field: "limit", Value: strconv.Itoa(n), Want: limitRange()}
	}
	return nil
}

func limitRange() string { return fmt.Sprintf("from 1 to %d", MaxLimit) }

// ClampLimit is the page size of a list asked for limit: DefaultLimit for
// 0 or less, at most MaxLimit.
func ClampLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultLimit
	case limit > MaxLimit:
		return MaxLimit
	}
	return limit
}

// Normalize checks f as a backend takes it and fills in its defaults: the
// project is required; Status is empty (every status) or one of
// ApprovalStatuses; Order is one of ApprovalOrders, NewestFirst when
// empty; Limit is clamped (ClampLimit). Errors other than a missing project
// are *FilterError.
func (f ApprovalFilter) Normalize() (ApprovalFilter, error) {
	if f.ProjectID == "" {
		return f, errors.New("list approvals: empty projectId")
	}
	if f.Status != "" && !slices.Contains(ApprovalStatuses, f.Status) {
		return f, fmt.Errorf("list approvals: %w", &FilterError{
			Field: "status", Value: string(f.Status), Want: "empty (every status) or " + oneOf(ApprovalStatuses...),
		})
	}
	o, err := ParseApprovalOrder(string(f.Order))
	if err != nil {
		return f, fmt.Errorf("list approvals: %w", err)
	}
	f.Order, f.Limit = o, ClampLimit(f.Limit)
	return f, nil
}

// Normalize checks f as a backend takes it: the project is required,
// Status is empty (every status) or one of RunStatuses, and Limit is
// clamped (ClampLimit). Errors other than a missing project are
// *FilterError.
func (f RunFilter) Normalize() (RunFilter, error) {
	if f.ProjectID == "" {
		return f, errors.New("list runs: empty projectId")
	}
	if _, err := ParseRunStatus(string(f.Status)); err != nil {
		return f, fmt.Errorf("list runs: %w", err)
	}
	f.Limit = ClampLimit(f.Limit)
	return f, nil
}
