//go:build race

package sandbox_test

// The race detector slows handlers several-fold: hostile calls get longer
// timeouts so that each still meets the limit it is meant to meet.
const raceEnabled = true
