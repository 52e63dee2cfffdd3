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
package e2e
