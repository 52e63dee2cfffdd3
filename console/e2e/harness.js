// Test helpers: a real `stead dev` per test on a free loopback port, the
// stead CLI against it, headless Chromium driven by playwright-core, and
// page checks (no script errors, no CSP violations, screenshots).

import { spawn, execFile } from "node:child_process";
import { mkdtemp, mkdir, rm, readFile, writeFile, cp } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { createServer } from "node:http";
import { chromium } from "playwright-core";
import { AxeBuilder } from "@axe-core/playwright";

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "../..");
export const outDir = process.env.STEAD_E2E_OUT || path.join(here, "out");

export const CHROMIUM = "/usr/bin/chromium";
export const CHROMIUM_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--disable-quic",
];
export const INSTALL_HINT = "install Chromium with: apt-get update && apt-get install -y chromium";

// Conditions are waited for, never slept on: this is the longest wait.
export const WAIT = 20_000;

// chromiumMissing says why the browser tests cannot run, or "" when they
// can. With CI=true a missing browser is a failure, not a skip.
export function chromiumMissing() {
  if (existsSync(CHROMIUM)) return "";
  const why = `${CHROMIUM} is missing; ${INSTALL_HINT}`;
  if (process.env.CI === "true") throw new Error(why);
  return why;
}

// defer runs fn when the test ends, last registered first: pages close
// before the server they talk to stops.
const cleanups = new WeakMap();
export function defer(t, fn) {
  let list = cleanups.get(t);
  if (!list) {
    list = [];
    cleanups.set(t, list);
    t.after(async () => {
      const errors = [];
      while (list.length) {
        try { await list.pop()(); } catch (e) { errors.push(e); }
      }
      if (errors.length) throw errors.length === 1 ? errors[0] : new AggregateError(errors, errors.map((e) => e.message).join("\n"));
    });
  }
  list.push(fn);
}

let built = null;

// steadBinary is $STEAD_BIN, or `go build ./cli/stead` once into a temp dir.
export async function steadBinary() {
  if (process.env.STEAD_BIN) return process.env.STEAD_BIN;
  if (!built) {
    built = (async () => {
      const dir = await mkdtemp(path.join(tmpdir(), "stead-bin-"));
      const bin = path.join(dir, "stead");
      await run("go", ["build", "-o", bin, "./cli/stead"], { cwd: repoRoot });
      return bin;
    })();
  }
  return built;
}

// startStead starts `stead dev --example` on 127.0.0.1:0 with its own data
// folder and CLI config, and stops it when the test ends; args are more
// flags (--smtp HOST:PORT).
export async function startStead(t, { args = [] } = {}) {
  const bin = await steadBinary();
  const dir = await mkdtemp(path.join(tmpdir(), "stead-e2e-"));
  const env = { ...process.env, STEAD_CONFIG: path.join(dir, "config.json"), STEAD_URL: "", STEAD_KEY: "", NO_COLOR: "1" };
  const child = spawn(bin, ["dev", "--json", "--example", "--addr", "127.0.0.1:0", "--sweep-interval", "200ms", "--data", path.join(dir, "data"), "--workers", "2", ...args], {
    env, stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (b) => { stderr += b; });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const started = await new Promise((resolve, reject) => {
    let out = "";
    const fail = (why) => reject(new Error(`stead dev did not start: ${why}\n${stderr}`));
    const timer = setTimeout(() => fail("no output in 20s"), WAIT);
    child.stdout.on("data", (b) => {
      out += b;
      const nl = out.indexOf("\n");
      if (nl < 0) return;
      clearTimeout(timer);
      try { resolve(JSON.parse(out.slice(0, nl))); } catch (e) { fail(e.message + ": " + out); }
    });
    child.once("exit", (code) => { clearTimeout(timer); fail("exit " + code); });
  });
  const stead = {
    url: started.url,
    key: started.ownerKey,
    dir,
    env,
    // cli runs the stead command against this server; resolves stdout.
    async cli(...args) {
      try {
        const { stdout } = await run(bin, args, { env, cwd: dir, timeout: WAIT });
        return stdout;
      } catch (e) {
        throw new Error(`stead ${args.join(" ")}: ${e.message}\n${e.stdout || ""}${e.stderr || ""}`);
      }
    },
    async cliJSON(...args) {
      return JSON.parse(await stead.cli("--json", ...args));
    },
    // api calls the API with the owner key.
    async api(method, p, body) {
      const res = await fetch(stead.url + p, {
        method,
        headers: { Authorization: "Bearer " + stead.key, "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const doc = await res.json().catch(() => null);
      if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(doc)}`);
      return doc;
    },
    // startRefund starts the refunds agent for an order and waits until it
    // awaits approval; returns the run.
    async startRefund(orderId, { endUser = "demo-user", reason = "damaged", wait = true } = {}) {
      const args = ["run", "refunds", "--input", JSON.stringify({ orderId, reason }), "--end-user", endUser];
      if (wait) args.push("--wait");
      return stead.cliJSON(...args);
    },
    logs: () => stderr,
  };
  defer(t, async () => {
    if (child.exitCode === null) child.kill("SIGTERM");
    await exited;
    await rm(dir, { recursive: true, force: true });
  });
  return stead;
}

// deployExample deploys a copy of examples/refunds whose stead.json edit
// has changed (edit gets the parsed config and changes it in place).
export async function deployExample(stead, name, edit) {
  const dir = path.join(stead.dir, name);
  await mkdir(dir, { recursive: true });
  await cp(path.join(repoRoot, "examples/refunds/handlers.js"), path.join(dir, "handlers.js"));
  const cfg = JSON.parse(await readFile(path.join(repoRoot, "examples/refunds/stead.json"), "utf8"));
  edit(cfg);
  await writeFile(path.join(dir, "stead.json"), JSON.stringify(cfg, null, 2));
  return stead.cliJSON("deploy", dir);
}

// deployRefunds deploys a copy of examples/refunds whose refunds agent's
// refundOrder has the given approvals settings.
export async function deployRefunds(stead, name, approvals) {
  return deployExample(stead, name, (cfg) => { cfg.agents.refunds.tools.refundOrder.approvals = approvals; });
}

// deployRefundsAgent deploys a copy of examples/refunds whose refunds
// agent's approvals (for all its tools) also have the given settings.
export async function deployRefundsAgent(stead, name, approvals) {
  return deployExample(stead, name, (cfg) => { Object.assign(cfg.agents.refunds.approvals, approvals); });
}

// deployWithTimeout deploys a copy of examples/refunds whose refundOrder
// approvals time out after `timeout`.
export async function deployWithTimeout(stead, timeout) {
  return deployRefunds(stead, "refunds-quick", { timeout });
}

// addMember adds a member with a key through the API (the owner key);
// resolves the member with key, the key's secret, and keyId.
export async function addMember(stead, name, { role = "approver", email } = {}) {
  const m = await stead.api("POST", "/v1/members", { name, role, key: true, ...(email ? { email } : {}) });
  return { ...m, key: m.key.key, keyId: m.key.id };
}

// asKey calls the API of stead with another key; resolves {status, doc}.
export async function asKey(stead, key, method, p, body) {
  const res = await fetch(stead.url + p, {
    method,
    headers: { Authorization: "Bearer " + key, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, doc: await res.json().catch(() => null) };
}

export async function launchBrowser() {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: WAIT });
}

// openPage opens a page in a fresh context (its own storage) and records
// what must not happen: uncaught errors, CSP violations, console errors
// other than the browser's note of an HTTP error status, and credentials
// in request URLs. The test fails at its end if any happened.
// allowConsole matches console errors the test causes on purpose (a
// request it fails, say); any other console error fails the test.
export async function openPage(t, browser, { width = 1200, height = 900, allowConsole } = {}) {
  const context = await browser.newContext({ viewport: { width, height }, locale: "en-US" });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => {
    const text = m.text();
    if (/Content Security Policy/i.test(text)) problems.push("CSP violation: " + text);
    else if (m.type() === "error" && !/^Failed to load resource: the server responded with a status of (4\d\d)/.test(text) && !allowConsole?.test(text)) {
      problems.push("console error: " + text);
    }
  });
  page.on("request", (r) => {
    if (/stk_|stc_|access_token=/.test(r.url())) problems.push("credential in a URL: " + r.url());
  });
  defer(t, async () => {
    await context.close();
    if (problems.length) throw new Error("the page misbehaved:\n" + problems.join("\n"));
  });
  return page;
}

// screenshot saves a full-page screenshot to out/ and lists it in the
// test output.
export async function screenshot(page, name) {
  await mkdir(outDir, { recursive: true });
  const file = path.join(outDir, name + ".png");
  await page.screenshot({ path: file, fullPage: true });
  const width = page.viewportSize() ? page.viewportSize().width : 0;
  console.log(`# screenshot ${width}px: ${path.relative(process.cwd(), file)}`);
}

// axeProblems runs axe-core (npm @axe-core/playwright) on the page as it
// is now and returns its serious and critical violations, one line each
// (rule, impact, what it says, the first elements it names).
export async function axeProblems(page) {
  const res = await new AxeBuilder({ page }).analyze();
  return res.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(" ") + (n.failureSummary ? " [" + n.failureSummary.replace(/\s+/g, " ").slice(0, 160) + "]" : "")).join("; ")}`);
}

export async function signIn(page, stead, { shot } = {}) {
  await page.goto(stead.url + "/console/");
  await page.getByLabel("API key").fill(stead.key);
  if (shot) await screenshot(page, shot);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Approvals", level: 1 }).waitFor();
}

// markPage tags the window; unmarkedReload says whether it was reloaded since.
export async function markPage(page) {
  await page.evaluate(() => { window.__steadMark = "kept"; });
}

export async function wasReloaded(page) {
  return (await page.evaluate(() => window.__steadMark)) !== "kept";
}

// serveStatic serves one HTML page on another loopback origin
// (127.0.0.2, while Stead listens on 127.0.0.1), for the cross-origin
// embed test.
export async function serveStatic(t, html) {
  const server = createServer((req, res) => {
    if (req.url === "/" || req.url.startsWith("/?")) {
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
      res.end(html);
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.2", resolve));
  defer(t, () => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.2:${server.address().port}/`;
}
