// Package sandbox runs handler calls in worker processes, so that nothing a
// handler does — goja's native recursion overflowing the Go stack, a
// regular expression that backtracks for minutes, an allocation that takes
// the machine's memory — can crash, stall or starve the process that
// serves the API and runs the engine.
package sandbox
