// The API client of the console: same origin, the API key from this tab's
// sessionStorage in the Authorization header (never in a URL or a cookie).

const KEY = "stead.apiKey";

export const session = {
  get key() { return sessionStorage.getItem(KEY) || ""; },
  set key(k) { sessionStorage.setItem(KEY, k); },
  clear() { sessionStorage.removeItem(KEY); },
  // me is what GET /v1/me said about the key (set by the app).
  me: null,
};

// ApiError carries the API's refusal: status, code, message, details.
export class ApiError extends Error {
  constructor(status, error) {
    super((error && error.message) || `HTTP ${status}`);
    this.status = status;
    this.code = (error && error.code) || (status ? `http_${status}` : "network");
    this.details = (error && error.details) || null;
  }
}

let onUnauthenticated = () => {};

// whenUnauthenticated registers what to do when the key stops working.
export function whenUnauthenticated(fn) { onUnauthenticated = fn; }

// call sends a request and returns the decoded JSON, or throws ApiError.
export async function call(method, path, { body, query, key = session.key, signal } = {}) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
    const s = q.toString();
    if (s) url += "?" + s;
  }
  const headers = { Accept: "application/json", Authorization: "Bearer " + key };
  const init = { method, headers, cache: "no-store", signal };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(url, init);
  } catch (err) {
    if (signal && signal.aborted) throw err;
    throw new ApiError(0, { code: "network", message: `cannot reach the Stead API (${err.message}); is it running?` });
  }
  let doc = null;
  try { doc = await res.json(); } catch { /* empty or not JSON */ }
  if (!res.ok) {
    const e = new ApiError(res.status, doc && doc.error);
    if (res.status === 401 && key === session.key) onUnauthenticated(e);
    throw e;
  }
  return doc;
}

export const get = (path, query, opts = {}) => call("GET", path, { ...opts, query });
export const post = (path, body, opts = {}) => call("POST", path, { ...opts, body });
export const patch = (path, body, opts = {}) => call("PATCH", path, { ...opts, body });
export const del = (path, opts = {}) => call("DELETE", path, opts);

// streamEvents follows a run's trace live (Stead.events from /embed.js,
// with the API key in the Authorization header).
export function streamEvents(runId, { after = 0, onEvent, signal }) {
  return globalThis.Stead.events({ baseUrl: "", runId, token: () => session.key, after, onEvent, signal });
}

export const enc = encodeURIComponent;
