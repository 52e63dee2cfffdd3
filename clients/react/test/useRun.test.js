// Real-browser tests of @getstead/react's useRun: a test app (test/app.tsx,
// bundled here with esbuild against the packages as built, dist/) rendered
// by headless Chromium on a loopback origin of its own, following a gated
// run of a real `stead dev --example` with a customer token, live, as the
// stead CLI starts and approves it. make test-browser runs it with the
// console's tests, and with their harness (console/e2e).
//
// Every wait is on a condition (Playwright's auto-waiting locators, or
// polling with a deadline), never a fixed sleep.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { chromiumMissing, launchBrowser, openPage, startStead, markPage, wasReloaded, screenshot, defer, WAIT } from "../../../console/e2e/harness.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const clients = path.resolve(here, "../..");

// clientsMissing says why the test cannot run (the clients workspace is
// not installed), or "": with CI=true that is a failure, not a skip.
function clientsMissing() {
  if (existsSync(path.join(clients, "node_modules", "esbuild")) && existsSync(path.join(clients, "node_modules", "react-dom"))) return "";
  const why = "clients/ is not installed: run make ts-client";
  if (process.env.CI === "true") throw new Error(why);
  return why;
}

const missing = chromiumMissing() || clientsMissing();
if (missing) console.log(`# skipping the useRun browser tests: ${missing}`);
const opts = { skip: missing || false, timeout: 60_000 };

let browser, bundle;
before(async () => {
  if (missing) return;
  // The packages as npm pack ships them (dist/, compiled with tsc
  // --strict), and the test app type-checked against them.
  const run = promisify(execFile);
  await run("npm", ["run", "--silent", "build", "-w", "@getstead/client", "-w", "@getstead/react"], { cwd: clients });
  await run("npm", ["run", "--silent", "check-test", "-w", "@getstead/react"], { cwd: clients });
  const esbuild = await import("esbuild");
  const out = await esbuild.build({
    entryPoints: [path.join(here, "app.tsx")],
    bundle: true, write: false, format: "esm", target: "es2022", jsx: "automatic",
    // React's development build: it reports duplicate keys (an event
    // shown twice) as console errors, which fail the page.
    define: { "process.env.NODE_ENV": '"development"' },
    logLevel: "silent",
  });
  bundle = out.outputFiles[0].text;
  browser = await launchBrowser();
});
after(async () => { if (browser) await browser.close(); });

// serveApp serves the test app on 127.0.0.2 (another origin than Stead's
// 127.0.0.1) with config as window.steadTest, and POST /token: a customer
// token for endUser from issue(n), n counting from 1. Resolves the page's
// URL and tokens(), how many tokens it issued.
async function serveApp(t, config, issue) {
  let issued = 0;
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>useRun</title></head>` +
    `<body><main id="root"></main><script>window.steadTest = ${JSON.stringify(config)};</script>` +
    `<script type="module" src="/app.js"></script></body></html>`;
  const server = createServer(async (req, res) => {
    try {
      if (req.method === "GET" && req.url === "/") {
        res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" }).end(html);
      } else if (req.method === "GET" && req.url === "/app.js") {
        res.writeHead(200, { "Content-Type": "text/javascript; charset=utf-8" }).end(bundle);
      } else if (req.method === "POST" && req.url === "/token" && issue) {
        const token = await issue(++issued);
        res.writeHead(200, { "Content-Type": "text/plain", "Cache-Control": "no-store" }).end(token);
      } else {
        res.writeHead(404).end();
      }
    } catch (e) {
      res.writeHead(500).end(String(e));
    }
  });
  await new Promise((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.2", resolve));
  defer(t, () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }));
  return { url: `http://127.0.0.2:${server.address().port}/`, tokens: () => issued };
}

// customerToken issues a customer token for demo-user through the API.
async function customerToken(stead, ttlSeconds) {
  return (await stead.api("POST", "/v1/customer-tokens", { endUserId: "demo-user", ...(ttlSeconds ? { ttlSeconds } : {}) })).token;
}

// apiEvents is every event of the run as the customer token sees it
// (GET /v1/runs/{id}/events, JSON), as "seq type" lines.
async function apiEvents(stead, runId, token) {
  const res = await fetch(`${stead.url}/v1/runs/${runId}/events?limit=500`, { headers: { Authorization: "Bearer " + token } });
  assert.equal(res.status, 200);
  return (await res.json()).events.map((e) => `${e.seq} ${e.type}`);
}

// shown is the events the page shows, in its order.
const shown = (page) => page.locator("#events li").allTextContents();

// until polls fn until it returns a truthy value.
async function until(what, fn) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100)); // poll interval, not a wait for an outcome
  }
}

// streams records the page's event-stream requests' Last-Event-ID ("" for none).
function streams(page, runId) {
  const ids = [];
  page.on("request", (r) => {
    if (r.url().endsWith(`/v1/runs/${runId}/events`) && r.method() === "GET") ids.push(r.headers()["last-event-id"] ?? "");
  });
  return ids;
}

test("useRun follows a gated run live with a customer token: awaiting approval with the tool and expiry, then succeeded, every event once, in order (StrictMode)", opts, async (t) => {
  const stead = await startStead(t);
  const run = await stead.startRefund("o-1001");
  assert.equal(run.status, "awaiting-approval");
  const token = await customerToken(stead);
  const app = await serveApp(t, { baseUrl: stead.url, runId: run.id, token, strict: true });
  assert.notEqual(new URL(app.url).origin, new URL(stead.url).origin);

  const page = await openPage(t, browser);
  const opened = streams(page, run.id);
  await page.goto(app.url);
  const root = page.locator('#run[data-status="awaiting-approval"][data-live="true"]');
  const approval = root.locator(`#approval[data-approval-id="${run.approval.id}"]`);
  await approval.locator("#tool").getByText("refundOrder", { exact: true }).waitFor();
  assert.equal(await approval.locator("#expires").getAttribute("datetime"), run.approval.expiresAt);
  await root.locator("#events li", { hasText: "approval.requested" }).waitFor();
  assert.deepEqual(await shown(page), await apiEvents(stead, run.id, token));
  await markPage(page);
  await screenshot(page, "react-01-awaiting-approval");

  await stead.cli("approve", run.approval.id);
  await page.locator('#run[data-status="succeeded"][data-live="false"]').waitFor();
  assert.equal(await page.locator("#approval").count(), 0, "the approval is still shown");
  const events = await shown(page);
  assert.deepEqual(events, await apiEvents(stead, run.id, token));
  assert.equal(new Set(events).size, events.length, "an event is shown twice");
  assert.match(events.at(-1), / run\.succeeded$/);
  assert.ok(events.some((e) => / approval\.approved$/.test(e)), "no approval.approved");
  assert.equal(await wasReloaded(page), false, "the page was reloaded");
  // StrictMode mounted the hook twice; the first mount's stream was
  // aborted, and no stream resumed past an event (none dropped).
  assert.ok(opened.every((id) => id === ""), `streams resumed: ${JSON.stringify(opened)}`);
  await screenshot(page, "react-02-succeeded");
});

test("useRun refreshes an expired customer token through its token function and resumes the stream after the last event, without duplicates", opts, async (t) => {
  const stead = await startStead(t);
  const run = await stead.startRefund("o-1002");
  // The first token expires in 3 seconds; the next ones in the default hour.
  const app = await serveApp(t, { baseUrl: stead.url, runId: run.id, token: "function", strict: false },
    (n) => customerToken(stead, n === 1 ? 3 : undefined));

  const page = await openPage(t, browser);
  const opened = streams(page, run.id);
  await page.goto(app.url);
  const waiting = page.locator('#run[data-status="awaiting-approval"][data-live="true"]');
  await waiting.locator("#events li", { hasText: "approval.requested" }).waitFor();
  const before = await shown(page);
  assert.equal(app.tokens(), 1);
  await markPage(page);

  // The token expires, the API ends the stream and answers 401; the hook
  // takes a new token and opens the stream again after the last event.
  await until("a token refresh", () => app.tokens() === 2);
  await until("the resumed stream", () => opened.length === 2);
  assert.deepEqual(opened, ["", before.at(-1).split(" ")[0]], "the streams' Last-Event-ID");
  await waiting.waitFor();
  assert.deepEqual(await shown(page), before);

  await stead.cli("approve", run.approval.id);
  await page.locator('#run[data-status="succeeded"][data-live="false"]').waitFor();
  const events = await shown(page);
  const token = await customerToken(stead);
  assert.deepEqual(events, await apiEvents(stead, run.id, token));
  assert.equal(new Set(events).size, events.length, "an event is shown twice");
  assert.deepEqual(events.slice(0, before.length), before);
  assert.match(events.at(-1), / run\.succeeded$/);
  assert.equal(app.tokens(), 2, "tokens issued: one, and one refresh");
  assert.equal(await page.getByRole("alert").count(), 0);
  assert.equal(await wasReloaded(page), false, "the page was reloaded");
  await screenshot(page, "react-03-refreshed-succeeded");
});

test("useRun rides out transient failures: a run read that fails on the network and one answered 503 are tried again, and the run is followed to its end without an error or a duplicate", opts, async (t) => {
  const stead = await startStead(t);
  const run = await stead.startRefund("o-1003");
  const token = await customerToken(stead);
  const app = await serveApp(t, { baseUrl: stead.url, runId: run.id, token, strict: false });

  // The browser's own network fails the run's second read (the fetch
  // rejects, as when the connection drops) and answers the third with a
  // 503 as a proxy in front of Stead would; every other request reaches
  // Stead.
  const page = await openPage(t, browser, { allowConsole: /net::ERR_FAILED|status of 503/ });
  let reads = 0;
  const failed = [];
  await page.route(`${stead.url}/v1/runs/${run.id}`, async (route) => {
    if (route.request().method() !== "GET") return route.continue();
    reads++;
    if (reads === 2) { failed.push("network"); return route.abort("failed"); }
    if (reads === 3) {
      failed.push("503");
      return route.fulfill({
        status: 503, contentType: "application/json", headers: { "Access-Control-Allow-Origin": "*" },
        body: JSON.stringify({ error: { code: "unavailable", message: "try again" } }),
      });
    }
    return route.continue();
  });
  const opened = streams(page, run.id);
  await page.goto(app.url);
  const waiting = page.locator('#run[data-status="awaiting-approval"][data-live="true"]');
  await waiting.locator("#events li", { hasText: "approval.requested" }).waitFor();
  await until("both failures", () => failed.length === 2);
  await until("a read after them", () => reads >= 4);
  await waiting.waitFor();
  assert.equal(await page.getByRole("alert").count(), 0, "a transient failure was shown as the error");

  await stead.cli("approve", run.approval.id);
  await page.locator('#run[data-status="succeeded"][data-live="false"]').waitFor();
  const events = await shown(page);
  assert.deepEqual(events, await apiEvents(stead, run.id, token));
  assert.equal(new Set(events).size, events.length, "an event is shown twice");
  assert.deepEqual(failed, ["network", "503"]);
  // Each failure ended an attempt; the next one resumed the stream after
  // the last event seen.
  assert.ok(opened.length >= 2 && opened.slice(1).every((id) => /^[1-9][0-9]*$/.test(id)), `streams: ${JSON.stringify(opened)}`);
  assert.equal(await page.getByRole("alert").count(), 0);
  await screenshot(page, "react-04-transient-succeeded");
});
