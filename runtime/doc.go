// Package runtime has no code of its own: it is the folder for what executes
// a run, as opposed to what stores it (store and its backends), decides it
// (approvals) or exposes it (api, cli, functions). The engine walks an
// agent's steps; a step asks a model or calls a tool, and a tool call runs
// the developer's handler code in the sandbox.
//
//   - engine: the run state machine. It starts runs, executes their steps up
//     to a gated tool call, resumes or fails them on a decision or expiry,
//     and sweeps what was left behind, over any store.Store.
//   - agent: the project config, stead.json, parsed and validated once, and
//     the policy's verdict (allow, ask or deny) made before a tool call runs.
//   - bundle: handler code turned into a goja program (an ESM bundle, or a
//     source entry bundled with esbuild's Go API), compiled once per digest.
//   - model: the provider-neutral conversation types and Complete (retries,
//     backoff, deadlines); model/openai and model/bedrock are its providers.
//   - jsvm: one handler call in a hardened goja VM, with its event loop,
//     context API, fetch and limits.
//   - sandbox: the worker processes jsvm runs in, so a handler that
//     overflows the stack, spins or takes the memory cannot crash, stall or
//     starve the process that serves the API and runs the engine.
//   - egress: where outbound requests (handlers' fetch, a model's baseUrl)
//     may go, checked on the address actually dialled.
//   - redact: the one place secrets are replaced with "[REDACTED]", in text
//     and in JSON, for everything the sandbox, the model clients and the
//     engine record.
//
// The sandbox (jsvm, sandbox, egress) knows nothing of runs, and the engine
// nothing of the API or of a particular backend; .golangci.yml's depguard
// rules check both.
package runtime
