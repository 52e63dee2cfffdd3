// Package wire holds the JSON shapes of Stead's HTTP API: the runs,
// approvals, events, deployments, keys, members, groups, rules and webhooks
// its requests and responses carry, as api/openapi.json describes them.
//
// They are written out apart from the store's records, so that internal
// fields (lease owner, request digest, step state, signing keys, key
// hashes) can never leak into a response and the shapes the CLI, the
// clients and UIs rely on change only on purpose; package api's contract
// tests hold them to the document. The package imports nothing of the
// server but the approval domain's Vote and Tally (package approvals, plain
// Go), so the Go client (package client) carries none of it.
package wire
