// Command api is the API function: API Gateway HTTP API requests (payload
// format 2.0) served by Stead's HTTP API.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"stead/functions/awsstack"
)

func main() {
	cfg, err := awsstack.FromEnv(awsstack.APIFunction, os.Getenv)
	log := awsstack.NewLogger(os.Stdout, awsstack.APIFunction, cfg.LogLevel)
	awsstack.RouteStdLog(log)
	if err != nil {
		lambda.Start(awsstack.Broken(log, err))
		return
	}
	stack, err := awsstack.Open(context.Background(), cfg, awsstack.Options{Logger: log})
	if err != nil {
		lambda.Start(awsstack.Broken(log, err))
		return
	}
	lambda.Start(stack.Handler())
}
