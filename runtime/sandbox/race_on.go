//go:build race

package sandbox

// The race detector maps shadow memory that RLIMIT_DATA counts: a
// race-enabled worker runs without it (the parent's resident-memory watch
// and the Go memory limit still apply).
const raceEnabled = true
