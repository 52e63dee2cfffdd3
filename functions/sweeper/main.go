// Command sweeper is the sweeper function: every minute it expires due
// approvals and dispatches again the runs nobody is working on.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"stead/functions/awsstack"
)

func main() {
	cfg, err := awsstack.FromEnv(awsstack.SweeperFunction, os.Getenv)
	log := awsstack.NewLogger(os.Stdout, awsstack.SweeperFunction, cfg.LogLevel)
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
