// Package e2e holds the end-to-end test of Stead's AWS shape on one machine:
// the real bootstrap binaries of the api, runner and sweeper functions, each
// under its own Lambda Runtime Interface Emulator (infra/rie), against
// moto_server for DynamoDB and S3 (infra/moto). It has no code besides the
// test; `make e2e-lambda` runs it, and so does `make test`.
//
// Dispatch: the api and sweeper functions invoke the runner asynchronously
// through the AWS SDK's Lambda client, pointed (AWS_ENDPOINT_URL_LAMBDA) at
// rie.Queue, a stand-in for the Lambda Invoke API that answers 202 and
// keeps each event. The test then replays the queued events into the
// runner's emulator one at a time — the emulator cannot take concurrent
// invocations, and moto's own Lambda would need Docker to run a function.
//
// Webhooks: the receiver is an HTTP server on loopback, which the
// functions' egress policy admits because the test sets STEAD_EGRESS_ALLOW
// to 127.0.0.1/32, as an owner would for a receiver in the VPC. It answers
// 500 to the first request; the retry is due 5 s later on the functions'
// own clocks, so the test waits for it before it invokes the sweeper.
package e2e
