package dynamostore_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"stead/infra/moto"
	"stead/store"
	"stead/store/dynamostore"
	"stead/store/storetest"
)

// aws is the package's moto_server.
var aws moto.Shared

func TestMain(m *testing.M) { os.Exit(aws.Run(m)) }

var tables atomic.Int64

// fresh returns a store on a new table of the package's moto_server.
func fresh(t testing.TB, o dynamostore.Options, clientOpts ...func(*dynamodb.Options)) *dynamostore.Store {
	t.Helper()
	srv := aws.Get(t)
	o.Table = fmt.Sprintf("stead-%d", tables.Add(1))
	s, err := dynamostore.New(srv.DynamoDB(clientOpts...), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// sameTable is a second store on s's table, without s's fault injection:
// another process writing beside it.
func sameTable(t testing.TB, s *dynamostore.Store) *dynamostore.Store {
	t.Helper()
	other, err := dynamostore.New(aws.Get(t).DynamoDB(), dynamostore.Options{Table: s.Table()})
	if err != nil {
		t.Fatal(err)
	}
	return other
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return fresh(t, dynamostore.Options{})
	})
}
