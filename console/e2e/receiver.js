// A webhook receiver for the browser tests: an HTTP server on loopback,
// started by the test and stopped when it ends, that records every
// request and answers 500 to the first and 200 to every one after. And the
// Standard Webhooks signature check, twice: by hand with node's crypto
// (HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>", keyed with the
// bytes of the whsec_ secret, base64) and, when `make webhook-oracle` has
// installed it, with the spec's reference library (npm standardwebhooks in
// notify/oracle, pinned there; nothing is added to this package).

import { createServer } from "node:http";
import { createHmac, timingSafeEqual } from "node:crypto";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { defer, repoRoot, WAIT } from "./harness.js";

// startReceiver listens on 127.0.0.1:0; resolves {url, received,
// waitFor}. received[i] is {id, timestamp, signature, headers, body,
// payload, status}.
export async function startReceiver(t) {
  const received = [];
  const waiters = new Set();
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const status = received.length === 0 ? 500 : 200;
      let payload = null;
      try { payload = JSON.parse(body); } catch { /* recorded as is */ }
      received.push({
        method: req.method, path: req.url, headers: req.headers, body, payload, status,
        id: req.headers["webhook-id"], timestamp: req.headers["webhook-timestamp"], signature: req.headers["webhook-signature"],
      });
      res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8" });
      res.end(status === 500 ? "receiver not ready yet (it fails its first request)" : "ok");
      for (const w of waiters) w();
    });
  });
  await new Promise((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.1", resolve));
  defer(t, () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }));
  return {
    url: `http://127.0.0.1:${server.address().port}/hooks/stead`,
    received,
    // waitFor resolves the first request matching pred (an earlier one
    // too), or fails after WAIT.
    waitFor(what, pred) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const r = received.find(pred);
          if (!r) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(r);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`the receiver got no ${what} in ${WAIT} ms; it got: ${JSON.stringify(received.map((r) => [r.id, r.payload && r.payload.type, r.status]))}`));
        }, WAIT);
        if (!check()) waiters.add(check);
      });
    },
  };
}

// sign is the v1 signature of a delivery with secret (whsec_<base64>).
export function sign(secret, id, timestamp, body) {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  return "v1," + createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64");
}

// signedBy reports whether one of the request's space-separated
// signatures is secret's, compared in constant time; index is which.
export function signedBy(r, secret) {
  const want = Buffer.from(sign(secret, r.id, r.timestamp, r.body));
  const sigs = String(r.signature || "").split(" ");
  const index = sigs.findIndex((s) => s.length === want.length && timingSafeEqual(Buffer.from(s), want));
  return { ok: index >= 0, index, count: sigs.length };
}

const oracleDir = path.join(repoRoot, "notify/oracle/node_modules/standardwebhooks");

// oracle is the Standard Webhooks reference library's verify, or null
// when notify/oracle has not been installed (make webhook-oracle).
export function oracle() {
  if (!existsSync(oracleDir)) return null;
  const { Webhook } = createRequire(import.meta.url)(oracleDir);
  return (r, secret) => new Webhook(secret).verify(r.body, {
    "webhook-id": r.id, "webhook-timestamp": r.timestamp, "webhook-signature": r.signature,
  });
}
