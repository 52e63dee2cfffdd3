// Command admin creates the first project of a Stead deployed on AWS, and
// its owner key, straight in the stack's DynamoDB table:
//
//	go run ./functions/admin bootstrap -table <TableName output> -name "Acme"
//
// It runs on the operator's machine with the operator's AWS credentials
// (dynamodb:PutItem on the table: the project is one conditional put, the
// key a transaction of two). Nothing on the public API can create a
// project: the owner key is printed here once, to the person who ran the
// command, and the table keeps only its hash. Run it again for another
// project; each run creates a new one. AWS_REGION (or the profile's
// region) picks the region, and AWS_ENDPOINT_URL_DYNAMODB points it at an
// emulator.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"stead/api"
	"stead/functions/awsstack"
	"stead/store/dynamostore"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

const usage = `usage: admin bootstrap -name NAME [-table TABLE] [-json]

Creates a project and its owner key in Stead's DynamoDB table and prints
the key once. -table defaults to $` + awsstack.EnvTable + `.
`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "bootstrap" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "the project's name (required)")
	table := fs.String("table", getenv(awsstack.EnvTable), "the DynamoDB table (the stack's TableName output)")
	asJSON := fs.Bool("json", false, "print {projectId, name, ownerKey} as JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if err := bootstrap(ctx, strings.TrimSpace(*name), strings.TrimSpace(*table), *asJSON, stdout); err != nil {
		fmt.Fprintf(stderr, "admin bootstrap: %v\n", err)
		return 1
	}
	return 0
}

func bootstrap(ctx context.Context, name, table string, asJSON bool, stdout io.Writer) error {
	switch {
	case name == "":
		return errors.New("-name is required: the project's name, e.g. -name \"Acme support\"")
	case table == "":
		return fmt.Errorf("-table is required (or set %s): the stack's TableName output", awsstack.EnvTable)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return errors.New("no AWS region: set AWS_REGION (or a region in your AWS profile) to the stack's region")
	}
	st, err := dynamostore.New(dynamodb.NewFromConfig(cfg), dynamostore.Options{Table: table})
	if err != nil {
		return err
	}
	p, key, err := api.Bootstrap(ctx, st, name, time.Now())
	if err != nil {
		return fmt.Errorf("in table %s (%s): %w", table, cfg.Region, err)
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(map[string]string{"projectId": p.ID, "name": p.Name, "ownerKey": key})
	}
	fmt.Fprintf(stdout, "Created project %s (%s) in table %s.\n", p.ID, p.Name, table)
	fmt.Fprintf(stdout, "Owner key, shown this once (Stead keeps only its hash):\n\n  %s\n\n", key)
	fmt.Fprintln(stdout, "Log in with `stead login --url <ApiUrl output> --key <this key>`, and create")
	fmt.Fprintln(stdout, "developer keys with POST /v1/keys rather than sharing it.")
	return nil
}
