// Command api is the API function: API Gateway HTTP API requests (payload
// format 2.0) served by Stead's HTTP API.
package main

import "stead/functions/awsstack"

func main() { awsstack.Main(awsstack.APIFunction) }
