// @getstead/react: React hooks on @getstead/client. useRun follows one run
// live, as the token that reads it sees it (a customer token, stc_…, in a
// customer UI): the run (GET /v1/runs/{id}), re-read whenever an event
// arrives, and its events over server-sent events (GET /v1/runs/{id}/events),
// resumed with Last-Event-ID after a drop or a token refresh, each once, in
// order, until the run has ended.
import { useEffect, useRef, useState } from "react";
import { createStead, SteadError, type Event, type Run, type RunStatus } from "@getstead/client";

export { SteadError };
export type { Event, Run, RunStatus };

/** The run's pending approval, as the token sees it (a customer token: no reason, the tool's label). */
export type PendingApproval = NonNullable<Run["approval"]>;

/**
 * A token, or a function that resolves one. The function is called for the
 * first token and again whenever the API answers 401 (an expired or revoked
 * token): the hook then resumes where it was, with the new token.
 */
export type TokenSource = string | (() => Promise<string>);

export interface UseRunOptions {
  /** Where Stead is: "https://stead.example.com" (the API answers any origin's page). */
  baseUrl: string;
  /** A customer token (stc_…) or a function resolving one; see TokenSource. */
  token: TokenSource;
  /** false holds the hook idle (default true). */
  enabled?: boolean;
  /** The fetch to call the API with (default globalThis.fetch). */
  fetch?: typeof fetch;
}

export interface UseRunResult {
  /** The run as last read, undefined until the first read. */
  run: Run | undefined;
  /** run.status. */
  status: RunStatus | undefined;
  /** The approval the run waits for while it is awaiting-approval. */
  approval: PendingApproval | undefined;
  /** The run's events seen so far, each once, in order (seq ascending). */
  events: Event[];
  /** What stopped the hook: a SteadError (the API's answer) or a network error. */
  error: Error | undefined;
  /** True while the hook follows the run's event stream; false once it ended, on an error, or while idle. */
  isLive: boolean;
}

// How many 401s in a row, with no successful read between them, the hook
// takes a new token for before it reports the error.
const maxRefreshes = 2;

// How many transient failures in a row (a network error, a 5xx, a 429),
// with no successful read between them, the hook waits out and tries
// again before it reports the error: with the backoff below, about 20 s.
const maxRetries = 8;
const backoff = (n: number) => Math.min(250 * 2 ** (n - 1), 4000);

// transient: an error that trying again later may cure.
const transient = (e: unknown) =>
  e instanceof SteadError ? e.status >= 500 || e.status === 429 : e instanceof TypeError;

interface State {
  key: string;
  run: Run | undefined;
  events: Event[];
  error: Error | undefined;
  isLive: boolean;
}

const noEvents: Event[] = [];
const idle = (key: string): State => ({ key, run: undefined, events: noEvents, error: undefined, isLive: false });

/**
 * useRun follows run runId live: the run, its pending approval, its events.
 * It stops when the run has ended (succeeded, failed or cancelled) and
 * every event was read, on an error it cannot recover from, and when the
 * component unmounts or runId changes (the requests are aborted).
 *
 *     const { status, approval, events } = useRun(runId, { baseUrl, token: () => getCustomerToken() });
 */
export function useRun(runId: string | undefined, options: UseRunOptions): UseRunResult {
  const { baseUrl, enabled = true } = options;
  // The latest token source and fetch, read when needed: a new function
  // each render does not restart the stream.
  const latest = useRef(options);
  latest.current = options;
  const key = `${baseUrl} ${runId ?? ""}`;
  const [state, setState] = useState<State>(() => idle(key));

  useEffect(() => {
    if (!runId || !enabled) return;
    const stop = new AbortController();
    const signal = stop.signal;
    let run: Run | undefined;
    let events: Event[] = [];
    const publish = (s: Partial<State>) => {
      if (!signal.aborted) setState({ key, run, events, error: undefined, isLive: true, ...s });
    };
    setState(idle(key));

    // token returns the token to use: the first one, or, after failed (a
    // token the API refused), a new one; undefined when there is none.
    const token = async (failed?: string): Promise<string | undefined> => {
      const source = latest.current.token;
      if (typeof source === "string") return source !== "" && source !== failed ? source : undefined;
      return source();
    };

    const follow = async () => {
      let current = await token();
      if (current === undefined) throw new Error("useRun: options.token is empty");
      let refreshes = 0;
      let retries = 0;
      for (;;) {
        // One attempt: the run, then its events from after the last one
        // seen, until the stream ends with the run or fails.
        const attempt = new AbortController();
        const onStop = () => attempt.abort();
        signal.addEventListener("abort", onStop);
        const base = latest.current.fetch ?? globalThis.fetch;
        const stead = createStead({
          baseUrl,
          token: current,
          fetch: (input, init) => base(input, { ...init, signal: attempt.signal }),
        });
        let failure: unknown;
        const reader = rereader(async () => {
          run = await stead.getRun(runId);
          refreshes = 0;
          retries = 0;
          publish({});
        }, (e) => {
          failure = e;
          attempt.abort();
        });
        try {
          await reader.now();
          const after = events.length > 0 ? events[events.length - 1].seq : 0;
          for await (const ev of stead.events(runId, { after, signal: attempt.signal })) {
            if (events.length > 0 && ev.seq <= events[events.length - 1].seq) continue;
            events = [...events, ev];
            publish({});
            reader.soon();
          }
          await reader.settled();
          if (failure !== undefined) throw failure;
          // The stream ended with the run: read it as it ended.
          await reader.now();
          publish({ isLive: false });
          return;
        } catch (e) {
          if (signal.aborted) return;
          const err = failure ?? e;
          if (transient(err) && retries < maxRetries) {
            // Wait, then resume after the last event seen, as after a drop.
            retries++;
            await sleep(backoff(retries), signal);
            if (signal.aborted) return;
            continue;
          }
          if (!(err instanceof SteadError && err.status === 401 && refreshes < maxRefreshes)) throw err;
          const fresh = await token(current);
          if (fresh === undefined) throw err;
          refreshes++;
          current = fresh;
        } finally {
          signal.removeEventListener("abort", onStop);
          attempt.abort();
        }
      }
    };

    follow().catch((e: unknown) => {
      publish({ isLive: false, error: e instanceof Error ? e : new Error(String(e)) });
    });
    return () => {
      stop.abort();
      setState((s) => (s.key === key && s.isLive ? { ...s, isLive: false } : s));
    };
  }, [key, enabled]);

  // Until the effect has reset the state for a new runId, show nothing of the old one.
  const s = state.key === key ? state : idle(key);
  const status = s.run?.status;
  return {
    run: s.run,
    status,
    approval: status === "awaiting-approval" ? s.run?.approval : undefined,
    events: s.events,
    error: s.error,
    isLive: s.isLive,
  };
}

// sleep resolves after ms, or at once when signal aborts.
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done);
  });
}

// rereader runs read now (awaited, its error thrown) or soon (in the
// background, coalesced: at most one read at a time, and one more after it
// when asked for during it; its error goes to fail).
function rereader(read: () => Promise<void>, fail: (e: unknown) => void) {
  let running: Promise<void> | undefined;
  let again = false;
  const loop = async () => {
    try {
      while (again) {
        again = false;
        await read();
      }
    } catch (e) {
      fail(e);
    } finally {
      running = undefined;
    }
  };
  return {
    now: read,
    soon() {
      again = true;
      running ??= loop();
    },
    async settled() {
      while (running) await running;
    },
  };
}
