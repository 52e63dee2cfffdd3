// Package dynamostore is Stead's DynamoDB backend: store.Store on one table
// (on-demand, string keys pk and sk) with five sparse global secondary
// indexes. It passes store/storetest, like the embedded bbolt backend whose
// key design it mirrors.
//
// # Items
//
//	item          pk                 sk                  holds                                        ttl
//	project       P#<project>        P                   Project                                      never
//	key guard     P#<project>        KEY#<keyID>         the hash of the key with that id             never
//	owner count   P#<project>        OWNERS              active owner keys (n) and owner members (m)  never
//	member        P#<project>        M#<member>          Member, the hashes of its keys (kh)          never
//	group         P#<project>        G#<name>            Group (its member ids), its version (ver)    never
//	api key       KEY#<hash>         K                   APIKey (the auth path: one GetItem)          never
//	deployment    P#<project>        D#<version>         Deployment                                   never
//	idempotency   P#<project>        I#<key>             the run created with that key                the run's keep
//	run           R#<run>            R                   Run, its event tail, its current approval    finished + Retention
//	commit        R#<run>            E#<firstSeq>        a batch of the run's events (+ step records)  the run's keep
//	step          R#<run>            S#<index>           step records committed without events        the run's keep
//	approval      A#<approval>       A                   Approval (the request; settled lazily)       the run's keep
//	broker        B#<p>:<user>:<coll> <key>              BrokerRecord                                 never
//	revocations   CTR#<p>:<user>     R                   CustomerRevocations of one end user          its last revocation's end
//	rule          RL#<p><scope>      <ruleID>            a remembered decision (see rules.go)         its expiry + Retention
//	endpoint      P#<project>        WH#<endpoint>       webhook Endpoint (its secrets), version      never
//	delivery      WD#<delivery>      WD                  webhook Delivery (body, attempts), version   its last time + Retention
//	mcp key       P#<project>        MCK#<key>           MCPKey, its revocation (ra)                  never
//	mcp key guard MCKH#<hash>        K                   the project and id of the MCP key (mcpkeys.go) never
//
// (ttl: the AttrTTL attribute, see Retention below.)
//
// The revocations item is the one read (a strongly consistent GetItem) on
// the path of every request with a customer token. A revocation reads it
// and puts it back conditional on its version (ver), trying again when a
// concurrent revocation came between; its ttl is when its last revocation
// ends (the revoked tokens' expiry), whatever Retention says, since it is
// worthless afterwards. Readers drop ended revocations themselves, so a
// late delete changes nothing.
//
// Indexes (all sparse, names and key attributes exported as constants):
//
//	byProject  g1pk R#<project> | A#<project>  g1sk <createdAt|requestedAt>#<id>   runs and approvals of a project
//	           g1pk RL#<project>               g1sk <ruleID>                       its remembered decisions (rules.go)
//	           g1pk WD#<project><endpoint>     g1sk <createdAt>#<delivery>         an endpoint's delivery log (webhooks.go)
//	pending    g2pk <project>                  g2sk <requestedAt>#<approval>       runs whose current approval is pending
//	due        g3pk <shard>                    g3sk <expiresAt>#<approval>         the same, for the sweeper
//	           g3pk W<shard>                   g3sk <nextAt>#<delivery>            pending deliveries, for the notifier
//	stall      g4pk <shard>                    g4sk <lease lower bound>#<run>      queued and running runs
//	outbox     g5pk <shard>                    g5sk <markedAt>#<run>               runs with notifications to fan out
//
// # Which write moves what
//
// Requests of each operation, in order, and the index entries each moves
// (→ enters, ← leaves). Everything else reads.
//
//	operation                 requests                                         index entries
//	CreateRun                 PutItem run (TransactWriteItems with the         → byProject R#, → stall
//	                          idempotency record when a key is given)
//	ClaimRun                  UpdateItem run (lease, attempts)                 stall moved down only if the lease is below its bound
//	CommitRun, events fit     UpdateItem run (state; events into its tail)     ← stall when it finishes the run
//	CommitRun, otherwise      GetItem run; [settle the previous approval;      with an approval: → byProject A# (approval
//	(steps, an approval, or   PutItem approval]; [PutItem commit: tail +       item), → pending, → due, ← stall (run item);
//	a full tail)              events + steps]; UpdateItem run (the commit      ← stall when it finishes the run
//	                          point: state, tail emptied, steps mapped)
//	DecideApproval            BatchGetItem approval + run (none when the       ← pending, ← due; → stall when it queues
//	                          caller hands its read); UpdateItem run (the      the run
//	                          decision in the run's approval slot)
//	DecideApproval, a vote    as above: UpdateItem run (the votes in the       as above when the vote settles; none
//	that does not settle      slot, conditional on their count; events)        otherwise
//	the writes above that     the same requests: the run's write carries its   also → outbox, unless the run is in it
//	append events, when one   outbox entry (oxa, oxk, oxt: webhooks.go)        already
//	of them notifies
//	AckOutbox                 UpdateItem run (removes the entry; when later    ← outbox, or its projected start moved
//	                          events notify, a second one moves its start)
//	ListStalledRuns, sweep    Query stall (every shard); BatchGetItem runs     —
//	ListDueApprovals          Query due (every shard); BatchGetItem            —
//	                          approvals + runs
//	ListOutbox                Query outbox (every shard)                       —
//	PutDeliveries             PutItem delivery each (conditional on it being   → byProject WD#, → due W
//	                          new; up to 8 at once)
//	UpdateDelivery            UpdateItem delivery (conditional on version)     due W moved with NextAt; ← due W once settled
//	ListDueDeliveries         Query due W (every shard); BatchGetItem          —
//	                          deliveries
//	DeleteEndpoint            Query byProject WD#; BatchWriteItem deletes;     ← byProject WD#, ← due W (its deliveries)
//	                          DeleteItem endpoint
//
// Members and keys move no index entry; their writes are transactions (see
// Members below):
//
//	operation                 requests
//	CreateMember              TransactWriteItems: member item, check that no key's member has its id, [owner count]
//	CreateMemberWithKey       TransactWriteItems: member item, [that check], key item, key guard, [owner count]
//	CreateAPIKey, a member's  GetItem member (+ guard, key of an older key's member); TransactWriteItems: member
//	                          item (its hashes + this one), key item, key guard, [the older key], [owner count]
//	CreateAPIKey, older kind  TransactWriteItems: key item, key guard, check that its member's id is free, [owner count]
//	UpdateMember              GetItem member; BatchGetItem its keys; TransactWriteItems: member item, each active
//	                          key whose role or name changes, [owner count]
//	RemoveMember              GetItem member; BatchGetItem its keys; TransactWriteItems: member item, each active
//	                          key (revoked), [owner count]; an older key's member: RevokeAPIKey of its key
//	RevokeAPIKey              GetItem guard, key; UpdateItem key (TransactWriteItems with the owner count for
//	                          an active owner key)
//	ListMembers               Query guards; BatchGetItem keys; Query member items
//
// Groups move no index entry either (see Groups below):
//
//	operation                 requests
//	CreateGroup, no members   PutItem group (conditional on the name being free)
//	CreateGroup               BatchGetItem member items (+ GetItem guard, key of an older key's member);
//	                          TransactWriteItems: group item (name free), a check of each member
//	UpdateGroup               GetItem group; [BatchGetItem the members it adds (as above)]; TransactWriteItems:
//	                          group item (version as read), a check of each member it adds — or PutItem group
//	                          (version as read) when it adds none
//	DeleteGroup               DeleteItem group (conditional on it existing)
//	GetGroup, ListGroups      GetItem group; Query group items
//
// An approval's state lives in two items, on purpose: the approval item is
// the request (written once, with the pause), the run item's approval slot
// holds the decisive state of the run's current approval (pending or the
// decision), so that a decision is one UpdateItem of one item, with no
// transaction. Every reader goes through resolveApproval, which applies the
// slot to the item; the item itself is settled when the next approval of
// the same run takes the slot (settlePrevious). Settling it inside the
// decision instead needs TransactWriteItems over both items, which bills
// twice the write units of each: about 4 units for a decision with ~1 KB
// items, against 1 today (BenchmarkGatedRunCost's run and approval items
// are 0.8 KB each), +3 units on a run that costs 18.
//
// # The run item is the commit point
//
// Every write that moves a run is one conditional UpdateItem of its run item
// (version, lease, or the state of its current approval); nothing else
// decides. What goes with it:
//
//   - Events. A run item keeps a short tail of events (Options.TailBytes). A
//     commit without a step or an approval whose events fit appends them to
//     the tail in that one UpdateItem; so do a create and a decision. Any
//     other commit reads the run, writes the tail plus its events plus its
//     step record as one commit item keyed by the first sequence number of
//     the batch, and then empties the tail with the conditional run update.
//     A commit that creates an approval (and records no step) keeps its
//     events in the approval item instead, which it writes anyway, and the
//     tail refers to them there. A commit item is visible to readers only
//     once the run item counts it (its first seq is at or below the run's
//     last seq minus its tail); one left by a writer that lost is invisible
//     and is overwritten by the next flush — the put is conditional on the
//     item being new or written for an older version, so a committed batch
//     is never overwritten. Readers never see half a commit, and a crash
//     between the two writes loses nothing; it does hold its version's slot,
//     so the next commit must come from a newer version (after a claim, as
//     the engine does when a worker dies).
//   - Steps. The run item maps each recorded step index to the item holding
//     its record; "step already recorded" is a condition on that map.
//     Steps that share a commit (consecutive read steps, see the engine)
//     share its commit item.
//   - Approvals. The run item holds its current approval's decisive state
//     (id, status, deadline, decision) and the pending and due index keys.
//     A decision is one conditional UpdateItem of the run item,
//     pending ∧ deadline ∧ the run awaits this approval; it moves the run,
//     appends the decision's events to the tail and drops the index keys, in
//     one write, with no transaction. The approval item holds the request
//     and is settled lazily: readers apply the run's decision to it, and a
//     run settles its previous approval item before a new approval takes the
//     run's slot.
//   - Lost answers. Each run write tags the item with a fresh token. When
//     the SDK retries a write whose answer was lost after DynamoDB applied
//     it, the retry's condition fails, and the token tells the store that
//     the write is done rather than lost to another.
//
// Transactions (TransactWriteItems, twice the write units) are used only
// where no single item can hold what must change together: two uniqueness
// constraints in CreateAPIKey (key id in its project and key hash) and in
// CreateRun with an idempotency key (the key in its project and the run id),
// an owner key with its project's owner count (an owner key's create, and
// its revoke, conditional on another active owner key staying), a member
// with its keys (see Members), and a group with a check of each member it
// adds (see Groups). One cancelled because a concurrent request held an
// item (TransactionConflict) is tried again after a short pause.
//
// # Members
//
// A member item holds the member and the hashes of its keys (kh, revoked
// ones too), so that a member's write finds its keys without listing the
// project's. Every write of a member is one transaction: the member item,
// put conditional on the version and the number of keys it was read with;
// each active key it changes (its role and name, or its revocation),
// conditional on the key's payload being as read and the key active; and
// the owner count when owners change. A new key of a member is added to
// the member item in its create's transaction, so an update racing it
// either sees the key or loses and reads again. A write that lost to
// another (its item moved) reads again and is built anew; an update whose
// version is stale then is store.ErrConflict.
//
// One transaction holds at most 100 items: a member with more than
// MaxMemberKeys active keys cannot be renamed, re-roled or removed
// (ErrTooManyKeys) until some of its keys are revoked; changing its email
// or chat identities rewrites no key and always fits.
//
// A key written before members existed (no MemberID in its payload) has no
// member item: it reads as its own member (store.LegacyMember), made up by
// GetMember and ListMembers from the key, so older tables need no
// migration step, and keys that an older version still writes during a
// rollout read the same way. The first write to such a member puts its
// item (conditional on there being none) and binds the key (conditional on
// its payload being as read) in one transaction; removing it only revokes
// the key. The owner count's m counts those members too: it is seeded from
// the project's keys and member items when missing (seedOwners), as n is
// from its keys. An older version does not move m when it creates or
// revokes an owner key; after a rollout during which it did, removing the
// OWNERS items' m attribute has it counted afresh.
//
// # Groups
//
// A group item holds the group, its member ids included (about 20 bytes
// each, deflated with the rest: a full group of 100 with the longest
// description is some 1.3 KB, TestGroupWriteRequests). A write that adds
// members reads them (one BatchGetItem, one read unit each) and is one
// transaction: the group item, put conditional on its name being free
// (create) or on the version it was read at (update), and a condition
// check of each member it adds that the member is still current — its
// member item exists and has no removal (rm), or, for an older key's
// member, its key exists and is not revoked. So a member removed between
// the write's read and the write cannot slip in: the check fails, the
// write reads again and refuses the member (store.GroupMemberError).
// Members the group already had are not checked: a removed member may
// stay in a group, and whoever counts votes filters removed members out.
//
// A transaction is billed twice the write units of each of its items,
// condition checks included: 2 units per KB of the group item plus 2 per
// member it adds (a member item is some 200 bytes, plus 70 per key of the
// member). Creating a group of n members costs 2 + 2n units (a full group
// 202), adding a member 4 (6 to a group over 1 KB). A write that adds no
// member (a new empty group, a new description, members taken out) is
// one conditional PutItem, 1 unit per KB, and a delete one DeleteItem.
// Groups change seldom, and the engine only reads them, so none of this is
// on the path of a run.
//
// One transaction takes at most 100 actions: the group item and 99
// checks. The one write that can add more, setting all 100 members of a
// full group at once, checks its last member by the strongly consistent
// read alone: that member could slip in if removed in the moment between
// (the engine still filters it out).
//
// # Retention
//
// DynamoDB's time to live (on AttrTTL, epoch seconds) deletes the items of
// finished runs, Options.Retention (90 days by default) after they
// finished. It never expires an approval (the sweeper does, and a decision
// checks the deadline itself), and it never touches an unfinished run:
//
//   - The run item gets its ttl, finishedAt + Retention, from the write that
//     finishes the run (a commit, or a decision that fails it); every other
//     run write removes it. Until then it has none.
//   - A run's other items — commit and step items, approval items, the
//     idempotency record — are written once and never read back by their
//     writer, so they get their ttl when they are written: the run's keep
//     ttl, which the run item records (kx). It is the run's horizon plus
//     Retention plus two keep windows (30 days each), the horizon being the
//     latest time by which the run is due to be written again anyway: the
//     write itself, the run's lease, and the deadline of the approval it
//     waits for. A flush (a commit that writes items) whose horizon plus
//     Retention plus one window passes the keep ttl first renews it: it
//     raises the ttl of every item of the run to a new keep ttl, two windows
//     past the new horizon, and the run item records it.
//
// So after every flush a run's other items carry a ttl at least Retention
// plus a keep window past its horizon: they outlive the run item's ttl as
// long as the run finishes, or is flushed again, within a window past that
// horizon. Between flushes a run waits for an approval (whose deadline is
// part of the horizon, so a pending approval's item outlives its deadline
// by at least a window) or runs under a lease of minutes; only an outage of
// the sweeper of weeks could stretch that. A finished run's item goes
// first; its other items follow up to two windows later, and meanwhile are
// invisible (readers start from the run item) except settled approvals in
// a project's approval history. A new run's keep ttl needs no renewal unless the run lives past
// a month, so TTL costs no request: the attributes ride on writes the run
// makes anyway (some 9 bytes an item). A renewal reads the run's partition
// and writes each of its items once.
//
// An idempotency key whose run is gone (its record outlives it) is free
// again. Lowering Retention applies to runs as they finish; raising it
// applies to a run's other items from its next flush. A negative Retention
// writes no new ttl (CreateTable then leaves the table's time to live
// alone) but still renews the items of runs that carry one; to stop
// deleting, switch the table's time to live off.
//
// # Costs and limits
//
// Values that are not keys are stored as payloads: JSON, deflated when that
// is smaller. A payload over Options.InlineCap goes to the blob store
// (Options.Blobs, e.g. s3blob) and the item keeps its digest; without a blob
// store it is refused with *TooLargeError. Throttling is retried by the SDK
// (Options.MaxAttempts) and surfaces as ErrThrottled.
//
// Every payload field is capped on its own, not the item as a whole: a run
// whose input, output, step state, decision and tail are each near the cap
// could pass DynamoDB's 400 KB item limit, and is then refused with an error
// that says so (never truncated); lower InlineCap if that can happen.
//
// A 3-step gated run through the engine (BenchmarkGatedRunCost: two read
// steps, then a write step that needs approval) costs 20 write units with
// ~1 KB JSON outputs (23 when they hardly compress): 5 updates and 1 put of
// the run item, 2 commit items (the two reads share the pause's), 1
// approval item, and 10 index writes (byProject 2, pending 2, due 2, stall
// 4). The stall index keeps a lower bound of the lease that renewals do not
// move (see ListStalledRuns), so a run enters and leaves it once per stretch
// of work rather than with every commit; a pause takes the run out (and the
// decision puts it back), which costs 2 writes a gated run and keeps a
// sweep from reading every waiting run.
//
// A run that notifies nothing pays nothing for webhooks: no outbox
// attribute is written, so the run above still costs 20 units. A
// notification rides on the write that appends its event (some 80 bytes
// more on the run item, which cost a unit only if they take the item past
// a KB boundary), and costs 1 index write when its run enters the outbox,
// then 1 for the ack's update of the run item (2 past 1 KB) and 1 for the
// index entry leaving: 3 units for each one fanned out on its own. With
// approval.requested, approval.approved and run.succeeded notifying, each
// fanned out before the next, the run costs 29 units (9 more) and 6 read
// units more (ListOutbox's queries of 4 shards, three times). Deliveries
// come on top, per endpoint: about 8 units for one delivered at its first
// try (the put 3, the take 3, the record 2; see webhooks.go). DynamoDB
// Streams would carry the notifications for no write unit at all;
// webhooks.go says why the outbox is in the write instead.
//
// Global secondary indexes are eventually consistent on AWS: a list may miss
// a run created or include an approval decided a moment ago. Everything that
// decides reads the table itself, strongly consistent.
package dynamostore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

var _ store.Store = (*Store)(nil)

// Blobs keeps payloads too large for an item, by sha256 digest: the same
// contract as the engine's bundle store (fsblob, s3blob).
type Blobs interface {
	// Put stores data under its sha256 digest; storing it again is not an
	// error.
	Put(ctx context.Context, digest string, data []byte) error
	// Get returns the data or an error wrapping store.ErrNotFound.
	Get(ctx context.Context, digest string) ([]byte, error)
}

// Defaults of Options.
const (
	DefaultInlineCap   = 64 << 10
	DefaultTailBytes   = 384
	DefaultMaxAttempts = 5
	DefaultMaxBackoff  = 2 * time.Second
	// DefaultRetention is how long a finished run is kept: 90 days.
	DefaultRetention = 90 * 24 * time.Hour
)

// Options configure a Store.
type Options struct {
	// Table is the table's name. Required.
	Table string
	// Blobs receives payloads over InlineCap. Optional: without it such
	// payloads are refused with *TooLargeError.
	Blobs Blobs
	// InlineCap is the largest payload kept in an item; DefaultInlineCap when
	// zero. DynamoDB's item limit is 400 KB.
	InlineCap int
	// Shards is how many partitions the due, stall and outbox indexes use;
	// DefaultShards when zero. Changing it strands entries of the old shards:
	// choose it once per table.
	Shards int
	// TailBytes is how many bytes of events a run item keeps before a commit
	// writes them out as a commit item; DefaultTailBytes when zero, negative
	// for none. It keeps a typical run item under 1 KB (one write unit).
	TailBytes int
	// MaxAttempts bounds the SDK's attempts per request (throttling and
	// transient errors are retried); DefaultMaxAttempts when zero.
	MaxAttempts int
	// MaxBackoff bounds the delay between attempts; DefaultMaxBackoff when
	// zero.
	MaxBackoff time.Duration
	// Retention is how long a finished run (its item, events, steps,
	// approvals and idempotency record) is kept after it finished before
	// DynamoDB's time to live may delete it (see Retention in the package
	// documentation); DefaultRetention when zero, negative for never: no new
	// item gets a ttl. Unfinished runs are never deleted, whatever this says.
	Retention time.Duration
}

// Store is the DynamoDB backend. It is safe for concurrent use.
type Store struct {
	db        *dynamodb.Client
	table     string
	blobs     Blobs
	inlineCap int
	shards    int
	tailBytes int
	retention time.Duration // 0: no ttl
	callOpts  []func(*dynamodb.Options)
}

// New returns a Store on the table o.Table through client. The client's
// endpoint, region and credentials are the caller's; the store sets its own
// retryer on every call (o.MaxAttempts, o.MaxBackoff).
func New(client *dynamodb.Client, o Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("dynamostore: a DynamoDB client is required")
	}
	if o.Table == "" {
		return nil, errors.New("dynamostore: Options.Table is required")
	}
	if o.InlineCap <= 0 {
		o.InlineCap = DefaultInlineCap
	}
	if o.InlineCap > 300<<10 {
		return nil, fmt.Errorf("dynamostore: Options.InlineCap %d is over what fits an item (300 KiB)", o.InlineCap)
	}
	if o.Shards <= 0 {
		o.Shards = DefaultShards
	}
	switch {
	case o.TailBytes == 0:
		o.TailBytes = DefaultTailBytes
	case o.TailBytes < 0:
		o.TailBytes = 0
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	switch {
	case o.Retention == 0:
		o.Retention = DefaultRetention
	case o.Retention < 0:
		o.Retention = 0
	}
	retryer := retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = o.MaxAttempts
		so.MaxBackoff = o.MaxBackoff
		so.Backoff = retry.NewExponentialJitterBackoff(o.MaxBackoff)
	})
	return &Store{
		db:        client,
		table:     o.Table,
		blobs:     o.Blobs,
		inlineCap: o.InlineCap,
		shards:    o.Shards,
		tailBytes: o.TailBytes,
		retention: o.Retention,
		callOpts:  []func(*dynamodb.Options){func(do *dynamodb.Options) { do.Retryer = retryer }},
	}, nil
}

// Close releases nothing: the client belongs to the caller.
func (s *Store) Close() error { return nil }

func key(pk, sk string) item {
	return item{AttrPK: avS(pk), AttrSK: avS(sk)}
}

// getItem reads one item, strongly consistent; nil when there is none.
func (s *Store) getItem(ctx context.Context, k item) (item, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: k, ConsistentRead: aws.Bool(true)}, s.callOpts...)
	if err != nil {
		return nil, interpretError(err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// putNew writes an item that must not exist yet: store.ErrExists if it does.
//
// The item is tagged with a write token: when the SDK retries a put whose
// answer was lost after DynamoDB applied it, the retry fails its condition
// on the put's own item, and the token tells it was this very put.
func (s *Store) putNew(ctx context.Context, it item) error {
	token := writeToken()
	it[aWriteToken] = avS(token)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                it,
		ConditionExpression:                 aws.String("attribute_not_exists(" + AttrPK + ")"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, s.callOpts...)
	return ownWrite(interpretError(err, func(old item) error {
		if old != nil && getS(old, aWriteToken) == token {
			return errApplied
		}
		return exists(old)
	}))
}

// writeToken is a fresh tag for one write (48 random bits: enough to tell a
// write from any other of the same item).
func writeToken() string {
	var tok [6]byte
	_, _ = rand.Read(tok[:])
	return base64.RawURLEncoding.EncodeToString(tok[:])
}

// ownWrite turns "the condition failed on this write's own result" into
// success.
func ownWrite(err error) error {
	if errors.Is(err, errApplied) {
		return nil
	}
	return err
}

// batchGet reads items by key, strongly consistent, in any order; missing
// ones are left out.
func (s *Store) batchGet(ctx context.Context, keys []item) ([]item, error) {
	var out []item
	for len(keys) > 0 {
		n := min(len(keys), 100)
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys[:n], ConsistentRead: aws.Bool(true)}}
		keys = keys[n:]
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 0 {
				// Unprocessed keys: DynamoDB asks us to back off.
				if err := sleep(ctx, time.Duration(min(attempt, 6))*20*time.Millisecond); err != nil {
					return nil, err
				}
			}
			if attempt > 20 {
				return nil, fmt.Errorf("batch get: %w: %d keys still unprocessed", ErrThrottled, len(req[s.table].Keys))
			}
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req}, s.callOpts...)
			if err != nil {
				return nil, interpretError(err)
			}
			out = append(out, res.Responses[s.table]...)
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// clampLimit is the page size rule of package store (store.ClampLimit).
func clampLimit(limit int) int { return store.ClampLimit(limit) }

// Table is the name of the store's table.
func (s *Store) Table() string { return s.table }
