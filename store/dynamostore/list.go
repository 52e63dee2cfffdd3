package dynamostore

import (
	"context"
	"encoding/base64"
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/store"
)

// Cursors are opaque to callers: base64 of a small JSON object that names
// the list it belongs to ("l") and where the previous page stopped: the key
// of the last entry taken ("k", DynamoDB's LastEvaluatedKey of that entry),
// or the sort value of the last item of a list sorted in memory ("a"). A
// cursor of another list, or garbage, is store.ErrInvalidCursor.
type cursor struct {
	List  string            `json:"l"`
	Key   map[string]string `json:"k,omitempty"`
	After string            `json:"a,omitempty"`
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor of list; the zero cursor for "".
func decodeCursor(s, list string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, store.ErrInvalidCursor
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.List != list || (c.Key == nil && c.After == "") {
		return cursor{}, store.ErrInvalidCursor
	}
	return c, nil
}

// startKey is the ExclusiveStartKey of a cursor, checked to lie in the
// partition pkAttr = pk and to name exactly the attributes attrs.
func (c cursor) startKey(pkAttr, pk string, attrs ...string) (map[string]types.AttributeValue, error) {
	if c.Key == nil {
		return nil, nil
	}
	if c.Key[pkAttr] != pk || len(c.Key) != len(attrs) {
		return nil, store.ErrInvalidCursor
	}
	k := map[string]types.AttributeValue{}
	for _, a := range attrs {
		v, ok := c.Key[a]
		if !ok {
			return nil, store.ErrInvalidCursor
		}
		k[a] = avS(v)
	}
	return k, nil
}

func cursorKey(entry item, attrs ...string) map[string]string {
	k := map[string]string{}
	for _, a := range attrs {
		k[a] = getS(entry, a)
	}
	return k
}

// indexList is one paged read of a partition of the table or of an index.
type indexList struct {
	index          string // "" for the table
	pkAttr, skAttr string
	pk             string
	// skPrefix, if set, keeps sort keys that start with it.
	skPrefix string
	desc     bool
	cursor   string
	limit    int
}

// keyAttrs are the attributes of an entry's key: the index's and the
// table's.
func (l indexList) keyAttrs() []string {
	if l.index == "" {
		return []string{AttrPK, AttrSK}
	}
	return []string{l.pkAttr, l.skAttr, AttrPK, AttrSK}
}

// indexPage reads entries of l in order after its cursor, turns each batch
// into values with load (one per entry), and returns the first l.limit
// values that keep accepts, with a cursor at the last one when there are
// more.
func indexPage[T any](ctx context.Context, s *Store, l indexList, load func([]item) ([]T, error), keep func(T) bool) (store.Page[T], error) {
	tag := l.index + "|" + l.pk
	c, err := decodeCursor(l.cursor, tag)
	if err != nil {
		return store.Page[T]{}, err
	}
	start, err := c.startKey(l.pkAttr, l.pk, l.keyAttrs()...)
	if err != nil {
		return store.Page[T]{}, err
	}
	limit := clampLimit(l.limit)
	var (
		out  store.Page[T]
		last item
	)
	for {
		in := &dynamodb.QueryInput{
			TableName:                 &s.table,
			KeyConditionExpression:    aws.String("#p = :p"),
			ExpressionAttributeNames:  map[string]string{"#p": l.pkAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(l.pk)},
			ScanIndexForward:          aws.Bool(!l.desc),
			ExclusiveStartKey:         start,
			Limit:                     aws.Int32(int32(limit + 1)),
		}
		if l.skPrefix != "" {
			in.KeyConditionExpression = aws.String("#p = :p AND begins_with(#s, :s)")
			in.ExpressionAttributeNames["#s"] = l.skAttr
			in.ExpressionAttributeValues[":s"] = avS(l.skPrefix)
		}
		if l.index != "" {
			in.IndexName = aws.String(l.index)
		} else {
			in.ConsistentRead = aws.Bool(true)
		}
		res, err := s.db.Query(ctx, in, s.callOpts...)
		if err != nil {
			return store.Page[T]{}, interpretError(err)
		}
		vals, err := load(res.Items)
		if err != nil {
			return store.Page[T]{}, err
		}
		for i, v := range vals {
			if !keep(v) {
				continue
			}
			if len(out.Items) == limit {
				out.NextCursor = encodeCursor(cursor{List: tag, Key: cursorKey(last, l.keyAttrs()...)})
				return out, nil
			}
			out.Items = append(out.Items, v)
			last = res.Items[i]
		}
		if res.LastEvaluatedKey == nil {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}
