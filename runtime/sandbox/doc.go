// Package sandbox runs handler calls in worker processes, so that nothing a
// handler does — goja's native recursion overflowing the Go stack (fatal to
// a Go process, beyond recover), a regular expression that backtracks for
// minutes in native code that no interrupt reaches, an allocation that
// takes the machine's memory — can crash, stall or starve the process that
// serves the API and runs the engine.
//
// # Workers
//
// A worker is the parent's own binary started again with WorkerArg (every
// binary that starts workers calls Main first thing), so there is nothing
// extra to ship: `stead dev` starts its workers, and so does the runner
// Lambda from its bootstrap. A worker serves one (tenant, bundle digest),
// one call at a time, on one goja VM (package jsvm); workers are kept warm
// per key (Options.MaxIdlePerBundle, MaxIdle, IdleTimeout) and never
// shared across tenants. A worker whose VM is spent (an interrupt, a stack
// overflow, a panic, a failed top level) is killed, never reused.
//
// # Limits, enforced from outside
//
//   - Time: the worker interrupts its VM at the call's deadline; if the
//     call has not ended Options.Grace after it, the parent kills the worker
//     (SIGKILL) → jsvm.CodeTimeout. With jsvm.Invocation.Timeout the
//     deadline is counted from when a worker is free and loaded for the
//     call: waiting for one is bounded by ctx and Invocation.StartBy
//     (jsvm.CodeBusy), and starting a fresh one by Options.StartTimeout.
//     The parent's kill is the guarantee:
//     regexp2's match timeout is not used, since goja turns a match that
//     timed out into "no match" — a wrong answer instead of a failure.
//   - Memory: inside the worker, jsvm's heap watchdog and size-checked
//     built-ins, and debug.SetMemoryLimit; outside, on Linux, RLIMIT_DATA
//     (the heap the Go runtime maps counts, its PROT_NONE reservations do
//     not, so unlike RLIMIT_AS it lets the runtime start), and the parent's
//     watch of the resident memory of workers running a call
//     (/proc/PID/statm every 10 ms; a call costs the watch nothing) with
//     SIGKILL past
//     Options.WorkerMemory → jsvm.CodeMemory. On macOS (no RLIMIT_DATA
//     enforcement, no /proc) the watch polls ps every 250 ms. cgroup
//     memory.max is for deployments that delegate a cgroup; this package
//     does not create cgroups. A race-enabled worker (go test -race) runs
//     without RLIMIT_DATA, which the race detector's shadow memory would
//     exceed.
//   - Stack: a worker's Go stack is capped (Options.MaxStack, 64 MiB), so
//     native recursion dies fast, as a worker.
//   - Any other death — Go's fatal stack overflow, a signal, a protocol
//     violation — is jsvm.CodeSandboxCrashed, Retryable: the engine tries
//     the step again a bounded number of times.
//   - CPU: a worker runs at a lower scheduling priority than the parent
//     (nice +5 on Linux) with GOMAXPROCS 1 (goja is single-threaded, and
//     one P spares the machine the scheduler's cross-thread wake-ups) and
//     GOGC 200 (see harden); Options.MaxWorkers bounds the calls running at
//     once and MaxPerTenant one tenant's share of them.
//
// # What a worker gets
//
// An empty environment (no AWS credentials, model keys or Stead secrets),
// the temporary folder as its working directory, no file descriptor but the
// two of its channel (New marks the parent's inherited descriptors
// close-on-exec), and on Linux PR_SET_NO_NEW_PRIVS and SIGKILL when its parent dies (the parent
// starts workers from one OS thread that never exits, since Linux sends the
// death signal when the forking thread exits). The Invocation's Secrets
// never cross: the parent redacts them from everything the worker returns
// (the worker redacts the broker token it knows).
//
// # fetch and the broker run in the parent
//
// The context API crosses the boundary with jsvm's semantics: the worker
// validates arguments and throws the same TypeErrors, and sends broker and
// fetch requests to the parent, which checks them again and carries them
// out. fetch's egress policy is enforced in the parent, not the worker:
// the policy is the parent's configuration (an owner's allowlist), the
// parent is the process that can be trusted to apply it, and a worker
// that needs no network of its own can later lose it entirely (a network
// namespace or seccomp filter) without changing fetch. A round trip to the
// parent costs tens of microseconds, nothing beside an HTTP request.
//
// # Reading
//
// The goroutine that holds a worker for a call reads its frames itself, so
// a call's answer reaches its caller without a hand-off between
// goroutines; the read never times out (a frame is never cut): at the
// call's end the worker is told (a cancellation) or sees its own deadline,
// and is killed after Grace, which ends the read. Every frame names its
// call; the worker sends nothing of a call after its done frame (a request
// a handler left floating is dropped there), and a frame of another call
// is a violation. Writes to a worker have deadlines, so one that stops
// reading cannot hold the parent. A worker that dies idle is reaped and
// dropped from the pool by the goroutine waiting for its exit.
//
// # The protocol
//
// Length-prefixed JSON frames over two pipes (a worker's fds 3 and 4),
// versioned (see proto.go), parsed strictly with go-json-experiment/json
// (the frames of every call are encoded by hand, byte for byte as json
// would; see codec.go); frame sizes, host requests per call (10,000) and in
// flight (64, of them 8 fetches), broker values (1 MiB), lists (16 MiB),
// fetch bodies (2 MiB), log lines, untrusted marks, exports and error texts
// are bounded. The worker keeps to the same limits itself (a handler meets
// them as errors, or waits its turn); the parent's kill is for a worker
// that does not. The parent treats the worker as hostile: a frame it cannot
// parse, an oversized one, one it does not expect now, or a result over the
// limits kills the worker, never the parent. Marks from
// context.markUntrusted are sent at once, so they survive a worker killed
// later in the call; logs and costs come with the call's end.
package sandbox
