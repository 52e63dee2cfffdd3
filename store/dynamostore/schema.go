package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The table's key schema and its global secondary indexes. template.yaml
// declares the same names; a test of the template checks it against these.
const (
	// AttrPK and AttrSK are the table's partition and sort keys (strings).
	AttrPK = "pk"
	AttrSK = "sk"

	// IndexByProject lists a project's runs (newest first) and approvals
	// (history) by time, and an endpoint's deliveries (its delivery log).
	// Every run, approval and delivery item is in it; the key never changes,
	// so it costs one index write per item, once.
	IndexByProject  = "byProject"
	AttrByProjectPK = "g1pk"
	AttrByProjectSK = "g1sk"
	// IndexPending is the approval queue: runs whose current approval is
	// pending, per project, by requestedAt. Sparse: the keys are removed by
	// the decision.
	IndexPending  = "pending"
	AttrPendingPK = "g2pk"
	AttrPendingSK = "g2sk"
	// IndexDue is the sweeper's view of pending approvals, by expiresAt,
	// sharded. Sparse like IndexPending and left with it. Pending webhook
	// deliveries are in it too, by NextAt, in shards of their own (W0, W1,
	// ...: see webhooks.go), so that the notifier's view needs no index of
	// its own.
	IndexDue  = "due"
	AttrDuePK = "g3pk"
	AttrDueSK = "g3sk"
	// IndexStall holds runs that are not finished, sharded, by a lower bound
	// of their lease (see ListStalledRuns). Sparse: a finished run leaves it.
	IndexStall  = "stall"
	AttrStallPK = "g4pk"
	AttrStallSK = "g4sk"
	// IndexOutbox holds runs with notifying events not yet turned into
	// deliveries (store.Webhooks' outbox), sharded, by when they entered.
	// Sparse: the keys are put by the write that appends a notifying event
	// and removed by the ack that covers its last one (see webhooks.go).
	IndexOutbox  = "outbox"
	AttrOutboxPK = "g5pk"
	AttrOutboxSK = "g5sk"

	// AttrTTL is the table's time-to-live attribute (epoch seconds): the
	// moment after which DynamoDB may delete the item, typically within two
	// days. Only a run's items carry it, and only when they may go: the run
	// item once the run finished, its other items far enough ahead that
	// they outlive it (see "Retention" in the package documentation). It is
	// never an approval deadline: approvals expire by the sweeper and by
	// the decision's own condition.
	AttrTTL = "ttl"
)

// Projected non-key attributes: the approval deadline (for the expiring-first
// order without reading items) on approval items (byProject) and on run items
// (pending), the approval id (pending, due), and where a run's entry in the
// outbox starts (outbox: FromSeq is their sum, see webhooks.go). The two
// deadlines have different names so that a run item's never touches its
// byProject entry: an index entry whose projected attribute changes costs a
// write.
const (
	attrAprExpires  = "xexp"
	attrSlotExpires = "aexp"
	attrAprID       = "aid"
	attrOutboxAfter = "oxa"
	attrOutboxSkip  = "oxk"
)

// DefaultShards is how many partitions the due, stall and outbox indexes
// spread over when Options.Shards is zero.
const DefaultShards = 4

// Index describes one global secondary index: its name, its key attributes
// (strings) and the non-key attributes it projects (none: keys only).
type Index struct {
	Name      string
	PK, SK    string
	Projected []string
}

// Indexes are the table's global secondary indexes.
func Indexes() []Index {
	return []Index{
		{Name: IndexByProject, PK: AttrByProjectPK, SK: AttrByProjectSK, Projected: []string{attrAprExpires}},
		{Name: IndexPending, PK: AttrPendingPK, SK: AttrPendingSK, Projected: []string{attrSlotExpires, attrAprID}},
		{Name: IndexDue, PK: AttrDuePK, SK: AttrDueSK, Projected: []string{attrAprID}},
		{Name: IndexStall, PK: AttrStallPK, SK: AttrStallSK},
		{Name: IndexOutbox, PK: AttrOutboxPK, SK: AttrOutboxSK, Projected: []string{attrOutboxAfter, attrOutboxSkip}},
	}
}

// tableDefinition is the CreateTable request for a table named name:
// on-demand billing, the key schema and the indexes above. Operators who
// create the table by hand (or in CloudFormation) create exactly this.
func tableDefinition(name string) *dynamodb.CreateTableInput {
	str := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{str(AttrPK), str(AttrSK)},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange},
		},
	}
	for _, ix := range Indexes() {
		in.AttributeDefinitions = append(in.AttributeDefinitions, str(ix.PK), str(ix.SK))
		p := &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}
		if len(ix.Projected) > 0 {
			p = &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: ix.Projected}
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName: aws.String(ix.Name),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(ix.PK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(ix.SK), KeyType: types.KeyTypeRange},
			},
			Projection: p,
		})
	}
	return in
}

// CreateTable creates the store's table — pk and sk strings, on-demand
// billing, the Indexes — waits until it is active, and (unless Retention is
// negative) switches its time to live on, on AttrTTL. A table that exists
// already keeps its keys and indexes; only its time to live is switched on
// if it is off. Tests call it for each fresh table; operators may call it
// once instead of deploying the SAM template's table.
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.db.CreateTable(ctx, tableDefinition(s.table), s.callOpts...)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", s.table, err)
	}
	w := dynamodb.NewTableExistsWaiter(s.db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = 2 * time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)}, 5*time.Minute); err != nil {
		return fmt.Errorf("wait for table %s: %w", s.table, err)
	}
	if s.retention > 0 {
		return s.enableTTL(ctx)
	}
	return nil
}
