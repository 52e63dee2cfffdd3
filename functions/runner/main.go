// Command runner is the runner function: each asynchronous event {"runId"}
// executes that run until it ends or waits for an approval.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"stead/functions/awsstack"
)

func main() {
	cfg, err := awsstack.FromEnv(awsstack.RunnerFunction, os.Getenv)
	log := awsstack.NewLogger(os.Stdout, awsstack.RunnerFunction, cfg.LogLevel)
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
