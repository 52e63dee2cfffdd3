// Package jsvm invokes a handler export of a compiled bundle (see package
// bundle) in a hardened goja VM, and returns its JSON result with the logs,
// costs and trust marks it recorded.
//
// Stead runs it inside sandbox worker processes (package sandbox), one
// invocation per process at a time: goja's native code can overflow the Go
// stack or ignore interrupts, which no in-process limit contains, so the
// limits below are the first line and the sandbox's process boundary the
// guarantee. A worker's fetch goes to its parent through Options.Fetcher.
//
// # Contract
//
// A handler is a named export `export async function name(input, context)`;
// synchronous exports work too. Its input is Invocation.Input (JSON; empty
// means undefined), built in the VM as fresh JS values with the semantics
// of JSON.parse — never vm.ToValue of Go values, which would alias Go
// memory. (A direct decoder builds them; goja's own JSON.parse, about three
// times slower from 200 B to 64 KB (BenchmarkInputToVM), is the reference
// and handles anything unusual, and a differential test and fuzz target pin
// the two together.)
// The result must be JSON-serializable: it comes out through JSON.stringify
// inside the VM, so toJSON methods apply and, as in JSON, functions and
// undefined nested in objects are dropped; a top-level undefined, function
// or symbol, a cycle or a BigInt fail with CodeNotSerializable, and a
// result over Options.MaxResultSize with CodeResultTooLarge.
//
// # VMs
//
// Each bundle digest has a pool of warm VMs (Options.MaxIdlePerBundle, for
// Options.MaxBundles digests, least recently used dropped first); a VM
// never runs another bundle. A new VM evaluates the bundle's top level
// inside the first invocation that needs it, under that invocation's
// deadline and memory budget (its console lines go to that invocation's
// Result). Module-level state persists between invocations on one VM, as in
// a Node Lambda, so handlers must not keep per-user data in module state.
// A VM is retired (never reused) after an interrupt of any kind — deadline,
// cancellation, memory breach — a stack overflow, a Go panic in host code,
// or a failure of its top-level code; goja cannot run promise jobs after an
// interrupted async function, so reuse would be unsafe. A JS throw, a
// rejected promise or a promise that never settles keeps the VM.
//
// # Event loop
//
// A *goja.Runtime is touched only by the goroutine running its invocation
// (the caller of Invoke). Host async work (fetch, broker calls) runs on its
// own goroutine and hands its result back through the VM's event loop
// exactly once, by a reservation made on the VM's goroutine (the k6
// RegisterCallback pattern); the loop runs those continuations and due
// timers on the invoking goroutine until the handler's promise settles.
// With nothing reserved and no timer pending, a pending promise can never
// settle: Invoke then fails at once with CodeNeverSettles instead of
// waiting for the deadline. goja_nodejs/eventloop does not fit this model:
// it creates its own runtime, runs on its own goroutine until no timer or
// job is left, and has no notion of host work started but not yet queued,
// so it can neither stop when the handler settles nor tell "awaiting a
// broker call" from "never settles". This loop costs nothing when a handler
// awaits only JS values (goja runs promise jobs when a call returns).
//
// An invocation ends when its promise settles. Work it left floating is
// abandoned, unlike in Node: pending timers are cleared, host calls in
// flight are cancelled and their results dropped.
//
// # The context argument
//
// Fresh objects per invocation (see ContextKeys), implemented in Go as goja
// dynamic objects — no Go struct, method or context.Context is reflected
// into the VM. A handler may add, replace or delete their properties, but
// not freeze them or define accessors on them.
//
//   - run.id, step.id, step.index, endUserId, idempotencyKey: the
//     Invocation's identity fields.
//   - broker: token (Invocation.BrokerToken, always redacted from what is
//     recorded) and async get(collection, key) (the stored value, or
//     undefined), put(collection, key, value), delete(collection, key)
//     (whether it existed) and list(collection) ([{key, value}] in key
//     order), backed by Invocation.Broker; without one they reject.
//   - recordCost({tokensInput, tokensOutput, costUsd}): non-negative finite
//     numbers (whole for tokens), summed into Result.Cost; anything else is
//     a TypeError.
//   - markUntrusted(origin): a non-empty string, recorded in
//     Result.Untrusted (first mark first, no repeats, at most 100).
//   - deadline: the epoch milliseconds of ctx's deadline, or null.
//
// Its functions belong to their invocation: called after it ended (from a
// context kept in module state) they throw, so one end user's invocation
// can never act with another's broker.
//
// # Globals
//
// Besides goja's built-ins (ECMAScript 5.1 and most of 2015–2022, see
// shared/notes/goja.md): console.log/info/warn/error/debug (captured as
// Result.Logs, strings as is and other values as JSON, bounded by
// Options.MaxLogLines and MaxLogBytes: past them a line is cut with a
// "…[truncated]" marker or dropped, and Result.LogsTruncated set); fetch
// with Headers (below); setTimeout and clearTimeout (a pending timer keeps
// the invocation waiting until it fires or the deadline passes);
// queueMicrotask; URL and URLSearchParams (goja_nodejs's url module,
// behind a class that keeps its Go-backed object out of reach);
// TextEncoder and TextDecoder (utf-8); atob and btoa; crypto.randomUUID and
// crypto.getRandomValues. An error thrown by a timer or microtask callback
// fails the invocation (CodeHandlerError), as an uncaught exception would
// in Node. The bundle's top-level code sees the same globals (compile it
// with Runtime.Compiler), but there fetch rejects and setTimeout throws:
// host work belongs to handlers.
//
// fetch(url, {method, headers, body}) supports http and https, string,
// JSON (a plain object or array), URLSearchParams and byte bodies, and
// resolves to a response with status, statusText, ok, url, redirected,
// headers.get/has/forEach, and text(), json(), arrayBuffer(), bytes(). It
// is bound by the invocation's deadline, reads at most
// FetchOptions.MaxResponse bytes of body, follows at most
// FetchOptions.MaxRedirects redirects, and refuses loopback, private,
// link-local (169.254.169.254 included), multicast, unspecified,
// IPv4-mapped IPv6, CGNAT (100.64.0.0/10) and other special-purpose
// destinations unless FetchOptions.Allow admits them. The check runs in
// the dialer's ControlContext on the address actually dialled, for every
// connection including redirects, so DNS rebinding cannot get around it;
// no proxy from the environment is used.
//
// # Limits
//
//   - Time: the end of ctx interrupts the VM → CodeTimeout for its
//     deadline, CodeCancelled for a cancellation. The watchdog below
//     registers the context.AfterFunc that does it once an invocation has
//     run for one sampling interval (microsecond invocations never pay for
//     it; a deadline passing sooner is acted on at most 2 ms late), and the
//     event loop watches ctx while the handler awaits host work. Without a
//     deadline an invocation may run until ctx is cancelled: the caller
//     bounds it.
//   - Memory: one watchdog goroutine per Runtime samples the heap every
//     2 ms while invocations run (and sleeps otherwise) and interrupts those that grew it past
//     Options.MemoryLimit over their baseline (after a collection confirms
//     it is not garbage) → CodeMemory. Built-ins that make one huge
//     allocation natively, out of the watchdog's reach, are replaced by
//     size-checked versions that fail the same way before allocating:
//     String.prototype.repeat, padStart and padEnd, the Array constructor
//     (so also Array.from and species), Array.prototype.fill, ArrayBuffer
//     and the typed-array constructors. Catching that error does not help:
//     the VM is interrupted too.
//   - Stack: bundle.MaxCallStackSize frames → CodeStackOverflow, also
//     through built-ins ([1].map(f)); source maps named by eval or Function
//     code are never read.
//   - Input: Options.MaxInputSize; result: Options.MaxResultSize; timers:
//     10 000 pending; broker keys and collections: 1 KiB and 256 bytes.
//
// # Redaction
//
// The broker token and Invocation.Secrets are replaced by "[REDACTED]" in
// the output (inside JSON strings and keys, also in their JSON-escaped
// form; a secret found elsewhere, as in a number, replaces the whole
// output), error messages, names and stacks, log lines and untrusted
// origins.
//
// # Errors
//
// Invoke returns *Error with a stable Code (the Code constants): a handler
// throw or rejection carries the JS error's name, message and stack, with
// positions in the deployed bundle (handlers.mjs:12:5) through its source
// map. Result is returned with every error, holding what was recorded up
// to the failure.
//
// # Known gaps
//
//   - No Intl (toLocaleString with options throws), structuredClone,
//     setInterval, AbortController or fetch signals, Request/Response/
//     Blob/FormData constructors, streams, cookies, or non-utf-8
//     TextDecoder; goja's own gaps are listed in shared/notes/goja.md.
//   - The heap is the process's: concurrent invocations (in-process use;
//     a sandbox worker runs one) share the watchdog's signal, and a breach
//     interrupts each one that grew past its baseline. Native built-ins not size-checked (Array.prototype.join
//     or concat, spreading a huge sparse array, Function.prototype.apply
//     with a huge array-like, replaceAll expansions) can still allocate past
//     the limit before the watchdog stops them: keep debug.SetMemoryLimit
//     and the platform's OOM handling as the last line.
//   - Redaction finds secrets verbatim (or JSON-escaped): a secret split,
//     encoded or transformed by the handler is not found. Short secrets
//     redact every occurrence, wanted or not.
//   - Globals (console, fetch) used by a callback left over from an earlier
//     invocation on the same VM act within the current invocation.
//   - The size-checked constructors are proxies with their own
//     Symbol.hasInstance (goja's instanceof does not see through proxies);
//     Function.prototype[Symbol.hasInstance].call(Array, x) throws.
package jsvm
