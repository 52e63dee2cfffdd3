package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"stead/store"
)

// Errors of this backend, besides the sentinels of packages store and
// approvals.
var (
	// ErrThrottled: DynamoDB kept refusing the request for lack of capacity
	// (or request rate) after every retry the client allows.
	ErrThrottled = errors.New("dynamodb throttled the request")
	// ErrNoTable: the table does not exist.
	ErrNoTable = errors.New("dynamodb table does not exist")
	// ErrTooManyKeys: a member has more active keys than one transaction
	// can rewrite with it (MaxMemberKeys), so it cannot be changed or
	// removed until some of them are revoked.
	ErrTooManyKeys = errors.New("member has too many active keys for one transaction")
)

// TooLargeError is a value too large to keep inline in an item when the store
// has no blob store to spill it to (Options.Blobs).
type TooLargeError struct {
	// What names the value: "output of step 2 of run run_…".
	What string
	// Size is the value's JSON size; Stored its size as it would be kept
	// (the JSON, deflated where that is smaller, after a kind byte), which
	// is what Limit bounds.
	Size, Stored int
	Limit        int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is %d bytes of JSON, %d as stored, over the %d bytes a DynamoDB item keeps inline, and the store has no blob store to spill it to (set dynamostore.Options.Blobs)", e.What, e.Size, e.Stored, e.Limit)
}

// judge tells what a lost conditional write means, given the item as it was
// when the condition failed (nil when there was none). It returns the error
// the caller gets; nil means "no judgement": the default applies.
type judge func(old item) error

// interpretError turns what DynamoDB answered into the sentinels of packages
// store and approvals, in one place. A failed condition carries the item as
// it stood (ReturnValuesOnConditionCheckFailure=ALL_OLD, or a transaction's
// cancellation reasons): no item means missing (store.ErrNotFound, unless
// the judge says otherwise), an item means the condition lost to another
// write, and the judge tells which sentinel that is (store.ErrConflict when
// it has nothing to say). Transactions pass one judge per action.
func interpretError(err error, judges ...judge) error {
	if err == nil {
		return nil
	}
	pick := func(i int) judge {
		if i < len(judges) {
			return judges[i]
		}
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return judged(pick(0), ccf.Item)
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for i, r := range tce.CancellationReasons {
			if r.Code != nil && *r.Code == "ConditionalCheckFailed" {
				return judged(pick(i), r.Item)
			}
		}
		return fmt.Errorf("transaction cancelled: %w", err)
	}
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return fmt.Errorf("%w (create it with dynamostore.(*Store).CreateTable or deploy template.yaml): %w", ErrNoTable, err)
	}
	var attempts *retry.MaxAttemptsError
	var api smithy.APIError
	if errors.As(err, &api) && isThrottle(api.ErrorCode()) {
		n := 0
		if errors.As(err, &attempts) {
			n = attempts.Attempt
		}
		return fmt.Errorf("%w (%s) after %d attempts; the table's capacity or the account's request rate is exhausted, retry later or raise the limit: %w",
			ErrThrottled, api.ErrorCode(), n, err)
	}
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" && strings.Contains(strings.ToLower(api.ErrorMessage()), "size") {
		return fmt.Errorf("item over DynamoDB's 400 KB limit: %w", err)
	}
	return err
}

// transactionConflict reports whether a transaction was cancelled because
// another request was changing one of its items at the same moment (and for
// no other reason): trying again once that request is done is safe.
func transactionConflict(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	conflict := false
	for _, r := range tce.CancellationReasons {
		switch code := aws.ToString(r.Code); code {
		case "TransactionConflict":
			conflict = true
		case "", "None":
		default:
			return false
		}
	}
	return conflict
}

// How often a transaction that lost to a concurrent request on the same
// item is tried again, and the step of the pause before each try.
const (
	maxTxConflicts    = 5
	txConflictBackoff = 20 * time.Millisecond
)

// conflictPause waits before try number try (1, 2, …) of a transaction that
// met a concurrent one: try steps plus up to a step of jitter, so that two
// contenders do not meet again.
func conflictPause(ctx context.Context, try int) error {
	return sleep(ctx, time.Duration(try)*txConflictBackoff+rand.N(txConflictBackoff))
}

func judged(j judge, old item) error {
	if j != nil {
		if err := j(old); err != nil {
			return err
		}
	}
	if old == nil {
		return store.ErrNotFound
	}
	return store.ErrConflict
}

func isThrottle(code string) bool {
	switch code {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded", "Throttling", "TooManyRequestsException":
		return true
	}
	return false
}

// exists is the judge of a create (attribute_not_exists): a failed
// condition means the record is there.
func exists(item) error { return store.ErrExists }
