// @getstead/client: a typed client of Stead's HTTP API. The types come from
// the API's OpenAPI document (api/openapi.json → src/schema.d.ts, by
// openapi-typescript); the calls go through openapi-fetch, so every path,
// parameter and body is checked by the compiler against the document.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths };
export type Run = components["schemas"]["Run"];
export type Approval = components["schemas"]["Approval"];
export type Event = components["schemas"]["Event"];
export type CustomerToken = components["schemas"]["CustomerToken"];
export type ErrorBody = components["schemas"]["ErrorBody"];
export type RunStatus = Run["status"];

/** An answer of the API that is an error document, as an object. */
export class SteadError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown> | undefined;
  readonly requestId: string | null;
  constructor(status: number, body: ErrorBody | undefined, requestId: string | null) {
    super(body?.error.message ?? `HTTP ${status}`);
    this.name = "SteadError";
    this.status = status;
    this.code = body?.error.code ?? "unknown";
    this.details = body?.error.details as Record<string, unknown> | undefined;
    this.requestId = requestId;
  }
}

export interface Options {
  /** Where Stead is: "http://127.0.0.1:8720". */
  baseUrl: string;
  /** An API key (stk_…) or a customer token (stc_…). */
  token: string;
  /** How often a start is tried again after a network error, a 5xx or a 429, with the same Idempotency-Key (default 3). */
  retries?: number;
  fetch?: typeof fetch;
}

const terminal: ReadonlySet<string> = new Set(["succeeded", "failed", "cancelled"]);

/** A client of one Stead with one credential. */
export function createStead(o: Options) {
  const doFetch = o.fetch ?? fetch;
  const api = createClient<paths>({ baseUrl: o.baseUrl, headers: { Authorization: `Bearer ${o.token}` }, fetch: doFetch });

  async function unwrap<T>(p: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
    const { data, error, response } = await p;
    if (error !== undefined || data === undefined) {
      throw new SteadError(response.status, error as ErrorBody | undefined, response.headers.get("X-Request-Id"));
    }
    return data;
  }

  return {
    /** The openapi-fetch client, for every other route. */
    api,

    /**
     * Starts a run of agent for endUserId. The start is idempotent: it is
     * sent with an Idempotency-Key (idempotencyKey, else a fresh one) and
     * tried again with the same key after a network error, a 5xx or a 429.
     * wait ("30s", at most "60s") holds the answer until the run settles.
     */
    async startRun(agent: string, body: { endUserId: string; input?: Record<string, unknown> }, opts: { idempotencyKey?: string; wait?: string } = {}): Promise<Run> {
      const key = opts.idempotencyKey ?? crypto.randomUUID();
      const tries = 1 + (o.retries ?? 3);
      for (let i = 1; ; i++) {
        try {
          return await unwrap(api.POST("/v1/agents/{agent}/runs", {
            params: { path: { agent }, query: opts.wait ? { wait: opts.wait } : {}, header: { "Idempotency-Key": key } },
            body,
          }));
        } catch (e) {
          const again = !(e instanceof SteadError) || e.status >= 500 || e.status === 429;
          if (!again || i >= tries) throw e;
          await new Promise((r) => setTimeout(r, 200 * i));
        }
      }
    },

    /** The run; with wait, once it settles (or ends, with until "terminal"). */
    getRun(id: string, opts: { wait?: string; until?: "settled" | "terminal" } = {}): Promise<Run> {
      const query: { wait?: string; until?: "settled" | "terminal" } = {};
      if (opts.wait) query.wait = opts.wait;
      if (opts.until) query.until = opts.until;
      return unwrap(api.GET("/v1/runs/{id}", { params: { path: { id }, query } }));
    },

    /** Waits until the run has ended, long-polling. */
    async waitForEnd(id: string): Promise<Run> {
      for (;;) {
        const run = await this.getRun(id, { wait: "30s", until: "terminal" });
        if (terminal.has(run.status)) return run;
      }
    },

    listApprovals(query: NonNullable<paths["/v1/approvals"]["get"]["parameters"]["query"]> = {}) {
      return unwrap(api.GET("/v1/approvals", { params: { query } }));
    },

    approve(id: string, body: { note?: string; input?: Record<string, unknown> } = {}) {
      return unwrap(api.POST("/v1/approvals/{id}/approve", { params: { path: { id } }, body }));
    },

    deny(id: string, body: { note?: string } = {}) {
      return unwrap(api.POST("/v1/approvals/{id}/deny", { params: { path: { id } }, body }));
    },

    createCustomerToken(endUserId: string, ttlSeconds?: number): Promise<CustomerToken> {
      return unwrap(api.POST("/v1/customer-tokens", { body: ttlSeconds ? { endUserId, ttlSeconds } : { endUserId } }));
    },

    /**
     * The run's events, live (server-sent events), from after `after`: each
     * once, in order, resuming with Last-Event-ID when the stream drops,
     * until the run has ended and every event was read.
     */
    async *events(runId: string, opts: { after?: number; signal?: AbortSignal } = {}): AsyncGenerator<Event> {
      let last = opts.after ?? 0;
      let failures = 0;
      for (;;) {
        const url = `${o.baseUrl}/v1/runs/${encodeURIComponent(runId)}/events`;
        const headers: Record<string, string> = { Authorization: `Bearer ${o.token}`, Accept: "text/event-stream" };
        if (last > 0) headers["Last-Event-ID"] = String(last);
        let closed = false;
        try {
          const resp = await doFetch(url, { headers, signal: opts.signal });
          if (!resp.ok || !resp.body) {
            const body = (await resp.json().catch(() => undefined)) as ErrorBody | undefined;
            throw new SteadError(resp.status, body, resp.headers.get("X-Request-Id"));
          }
          for await (const ev of parseEvents(resp.body)) {
            if (ev.seq <= last) continue;
            last = ev.seq;
            failures = 0;
            yield ev;
          }
          closed = true;
        } catch (e) {
          if (e instanceof SteadError || opts.signal?.aborted || ++failures > 10) throw e;
          await new Promise((r) => setTimeout(r, 250 * failures));
        }
        if (closed && terminal.has((await this.getRun(runId)).status)) return;
      }
    },
  };
}

/** Reads server-sent events' data lines as Events. */
async function* parseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<Event> {
  const decoder = new TextDecoder();
  let buf = "";
  let data: string[] = [];
  // A reader loop, not for-await over the stream: Safari's ReadableStream
  // is not async-iterable. An early return (the caller stopped reading)
  // cancels the stream.
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (line === "") {
          if (data.length > 0) yield JSON.parse(data.join("\n")) as Event;
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
