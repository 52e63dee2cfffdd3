// Command sweeper is the sweeper function: every minute it expires due
// approvals and dispatches again the runs nobody is working on.
package main

import "stead/functions/awsstack"

func main() { awsstack.Main(awsstack.SweeperFunction) }
