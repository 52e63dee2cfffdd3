// Package boltstore is Stead's embedded store: one bbolt file (under .stead/
// for `stead dev`) that implements store.Store with the same key design as
// the DynamoDB table, so both backends behave alike and pass store/storetest.
//
// # Layout
//
// Each DynamoDB item kind is a bucket whose keys mirror its pk/sk; each
// secondary index is a bucket of keys only (like a KEYS_ONLY GSI) whose last
// component is the item's id. Keys are built from length-prefixed parts, so
// an id can hold any byte and a prefix scan never runs into a neighbour
// ("u1" vs "u10"). Times in keys are 12 bytes that sort like the times.
//
//	bucket            key                                  value
//	projects          <project>                            Project
//	apikeys           <project> <keyID>                    APIKey
//	members           <project> <memberID>                 Member
//	groups            <project> <name>                     Group
//	deployments       <project> <version u64>              Deployment
//	runs              <runID>                              Run
//	events            <runID> <seq u64>                    Event
//	steps             <runID> <index u64>                  Step
//	approvals         <approvalID>                         Approval
//	broker            <project> <endUser> <coll> <key>     BrokerRecord
//	revocations       <project> <endUser>                  CustomerRevocations
//	rules             <project> <ruleID>                   approvals.Rule
//	mcpkeys           <project> <mcpKeyID>                 MCPKey
//	endpoints         <project> <endpointID>               Endpoint (webhooks.go)
//	deliveries        <deliveryID>                         Delivery
//	outbox            <runID>                              the run's events still to fan out
//
//	idx-apikey-hash   <hash>                               apikeys key
//	idx-mcpkey-hash   <hash>                               mcpkeys key
//	idx-run-project   <project> <createdAt> <runID>        all runs
//	idx-run-idem      <project> <idempotencyKey>           runID
//	idx-run-lease     <leaseUntil> <runID>                 queued and running runs only
//	idx-run-finished  <finishedAt> <runID>                 finished runs only (retention.go)
//	idx-apr-project   <project> <requestedAt> <id>         all approvals
//	idx-apr-project-x <project> <expiresAt> <id>           all approvals
//	idx-apr-pending   <project> <requestedAt> <id>         pending only
//	idx-apr-pending-x <project> <expiresAt> <id>           pending only
//	idx-apr-due       <expiresAt> <id>                     pending only, every project
//	idx-apr-run       <run> <requestedAt> <id>             all approvals
//	idx-apr-run-x     <run> <expiresAt> <id>               all approvals
//	idx-revoked-until <until> <revocations key>            every revocation record
//	idx-rule-scope    <project> <agent> <tool> <endUser> <ruleID>   every rule
//	idx-rule-expiry   <expiresAt> <rules key>              every rule (retention.go)
//	idx-delivery-endpoint <project> <endpoint> <createdAt> <id>     every delivery
//	idx-delivery-due  <nextAt> <id>                        pending deliveries only
//	idx-delivery-settled <updatedAt> <id>                  settled deliveries only (retention.go)
//
// A member's keys are found by scanning its project's keys (a project has a
// handful): a key holds its member's id, not the other way round. A key
// without one (written before members existed) is its own member's
// (store.LegacyMember) until a write to that member stores it in members.
//
// A revocation record lives until its last revocation ends (its tokens
// expired); every revocation write first deletes the records whose time
// passed, by idx-revoked-until, so they do not pile up.
// An approval leaving pending drops out of the three pending-only indexes in
// the same transaction, as the DynamoDB item drops out of its sparse GSIs.
//
// # Writes
//
// Every write is one bbolt read-write transaction that reads what it
// conditions on and returns a sentinel error, writing nothing, when the
// condition fails. Concurrent writers share a transaction and its fsync
// (group commit, see commit.go); a lone writer commits at once.
package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"stead/approvals"
	"stead/store"
)

var _ store.Store = (*Store)(nil)

// Errors of this backend.
var (
	// ErrLocked: another process holds the store file.
	ErrLocked = errors.New("store file is locked by another process")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store is closed")
)

// DefaultTimeout is how long Open waits for the file lock when
// Options.Timeout is zero.
const DefaultTimeout = time.Second

// Options tune Open.
type Options struct {
	// NoSync skips fsync on commit: faster, and a crash may lose or corrupt
	// recent writes. For tests only.
	NoSync bool
	// Timeout is how long to wait for the file lock held by another process;
	// zero means DefaultTimeout, negative waits forever.
	Timeout time.Duration
	// Retention is how long a finished run, a settled notification or an
	// expired rule is kept before Purge deletes it (see retention.go); zero
	// or less keeps everything.
	Retention time.Duration
}

// Store is the bbolt backend. It is safe for concurrent use.
type Store struct {
	db        *bolt.DB
	commits   committer
	retention time.Duration
}

// Bucket names.
var (
	bProjects    = []byte("projects")
	bAPIKeys     = []byte("apikeys")
	bMembers     = []byte("members")
	bGroups      = []byte("groups")
	bDeployments = []byte("deployments")
	bRuns        = []byte("runs")
	bEvents      = []byte("events")
	bSteps       = []byte("steps")
	bApprovals   = []byte("approvals")
	bBroker      = []byte("broker")
	bRevocations = []byte("revocations")

	xAPIKeyHash    = []byte("idx-apikey-hash")
	xRunProject    = []byte("idx-run-project")
	xRunIdem       = []byte("idx-run-idem")
	xRunLease      = []byte("idx-run-lease")
	xRunFinished   = []byte("idx-run-finished")
	xAprProject    = []byte("idx-apr-project")
	xAprProjectExp = []byte("idx-apr-project-x")
	xAprPending    = []byte("idx-apr-pending")
	xAprPendingExp = []byte("idx-apr-pending-x")
	xAprDue        = []byte("idx-apr-due")
	xAprRun        = []byte("idx-apr-run")
	xAprRunExp     = []byte("idx-apr-run-x")
	xRevokedUntil  = []byte("idx-revoked-until")

	allBuckets = [][]byte{
		bProjects, bAPIKeys, bMembers, bGroups, bDeployments, bRuns, bEvents, bSteps, bApprovals, bBroker, bRevocations,
		xAPIKeyHash, xRunProject, xRunIdem, xRunLease, xRunFinished,
		xAprProject, xAprProjectExp, xAprPending, xAprPendingExp, xAprDue, xAprRun, xAprRunExp, xRevokedUntil,
		bRules, xRuleScopes, xRuleExpiry,
		bEndpoints, bDeliveries, xDeliveryLog, xDeliveryDue, xDeliverySettled, bOutbox,
		bMCPKeys, xMCPKeyHash,
	}
)

// Open opens (creating if needed) the store file at path and its parent
// folder. Close it to release the file lock.
func Open(path string, o Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	timeout := o.Timeout
	switch {
	case timeout == 0:
		timeout = DefaultTimeout
	case timeout < 0:
		timeout = 0 // bbolt waits forever
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, NoSync: o.NoSync})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: %w (waited %s)", path, ErrLocked, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		// A file from before the by-run indexes or the retention indexes
		// (finished runs, settled deliveries, rule expiries) gets them
		// filled in once.
		byRun := tx.Bucket(xAprRun) == nil || tx.Bucket(xAprRunExp) == nil
		finished := tx.Bucket(xRunFinished) == nil
		settled := tx.Bucket(xDeliverySettled) == nil
		expiry := tx.Bucket(xRuleExpiry) == nil
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		if byRun {
			if err := indexApprovalsByRun(tx); err != nil {
				return err
			}
		}
		if finished {
			if err := indexFinishedRuns(tx); err != nil {
				return err
			}
		}
		if settled {
			if err := indexSettledDeliveries(tx); err != nil {
				return err
			}
		}
		if expiry {
			return indexRuleExpiries(tx)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Store{db: db, retention: o.Retention}, nil
}

// Close releases the file and its lock.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// update runs fn in a read-write transaction and returns fn's error, which
// the caller wraps with interpretError. Concurrent calls share one
// transaction and one fsync, so fn may run more than once and in a
// transaction that other calls' writes are part of: it must compute
// everything from tx, reset whatever it reports to the caller, and return a
// sentinel error when its condition fails (the shared transaction then rolls
// back and fn is re-run alone, so its error reaches only its caller).
func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.commits.update(s.db, fn)
}

// view runs fn in a read-only transaction.
func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// interpretError turns what a transaction returned into the sentinels of
// packages store and approvals. Transactions return those sentinels
// themselves; this is where the rest is translated, once.
func interpretError(err error) error {
	switch {
	case err == nil:
		return nil
	case approvals.IsForeign(err):
		// Another project's approval reads as missing.
		return store.ErrNotFound
	case errors.Is(err, bolterrors.ErrDatabaseNotOpen):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// bucket returns a bucket created by Open.
func bucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	b := tx.Bucket(name)
	if b == nil {
		panic("boltstore: Open did not create bucket " + string(name))
	}
	return b
}
