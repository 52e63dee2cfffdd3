// Command runner is the runner function: each asynchronous event {"runId"}
// executes that run until it ends or waits for an approval.
package main

import "stead/functions/awsstack"

func main() { awsstack.Main(awsstack.RunnerFunction) }
