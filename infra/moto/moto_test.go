package moto_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/infra/moto"
)

var emulator moto.Shared

func TestMain(m *testing.M) { os.Exit(emulator.Run(m)) }

// TestSerializedConditionalWrites: through the server's URL, concurrent
// conditional writes of one item have exactly one winner, as on DynamoDB
// (moto alone lets several through; see the package comment).
func TestSerializedConditionalWrites(t *testing.T) {
	srv := emulator.Get(t)
	ctx := t.Context()
	db := srv.DynamoDB()
	table := aws.String(fmt.Sprintf("race-%d", time.Now().UnixNano()))
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            table,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}
	for round := range 10 {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "x"}, "v": &types.AttributeValueMemberN{Value: "1"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins int
		)
		start := make(chan struct{})
		for range 10 {
			wg.Go(func() {
				<-start
				_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName: table, Key: key,
					UpdateExpression:          aws.String("SET v = v + :one, a1 = :one, a2 = :one, a3 = :one"),
					ConditionExpression:       aws.String("v = :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
				})
				var ccf *types.ConditionalCheckFailedException
				if err != nil && !errors.As(err, &ccf) {
					t.Error(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					wins++
				}
			})
		}
		close(start)
		wg.Wait()
		if wins != 1 {
			t.Fatalf("round %d: %d of 10 conditional writes won, want 1", round, wins)
		}
	}
}

func TestServesItsOwnAPI(t *testing.T) {
	srv := emulator.Get(t)
	for _, u := range []string{srv.URL, srv.Direct} {
		resp, err := http.Get(u + "/moto-api/data.json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d", u, resp.StatusCode)
		}
	}
}

// TestWithoutBinary: without moto_server on PATH a test is skipped with the
// way to get it, and fails when CI=true.
func TestWithoutBinary(t *testing.T) {
	if os.Getenv("STEAD_MOTO_CHILD") == "1" {
		moto.Start(t)
		return
	}
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWithoutBinary$", "-test.v")
		cmd.Env = append(os.Environ(), "STEAD_MOTO_CHILD=1", "PATH="+t.TempDir(), "CI="+ci)
		out, err := cmd.CombinedOutput()
		switch {
		case ci == "" && (err != nil || !strings.Contains(string(out), "--- SKIP") || !strings.Contains(string(out), "moto_server")):
			t.Errorf("without CI: err %v, output:\n%s", err, out)
		case ci == "true" && (err == nil || !strings.Contains(string(out), "--- FAIL")):
			t.Errorf("with CI=true: err %v, output:\n%s", err, out)
		}
	}
}
