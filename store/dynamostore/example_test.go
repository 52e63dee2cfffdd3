package dynamostore_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"stead/store/dynamostore"
	"stead/store/s3blob"
)

// A store on a table named by the operator, spilling payloads over 64 KiB to
// S3. CreateTable is for a table not made by template.yaml; it leaves an
// existing table alone.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	spill, err := s3blob.New(s3.NewFromConfig(cfg), s3blob.Options{Bucket: "stead-bundles", Prefix: "spill/"})
	if err != nil {
		log.Fatal(err)
	}
	st, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{Table: "stead", Blobs: spill})
	if err != nil {
		log.Fatal(err)
	}
	if err := st.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
}
