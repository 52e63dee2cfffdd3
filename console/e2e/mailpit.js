// mailpit (github.com/axllent/mailpit), a real SMTP server whose HTTP API
// reads what it received, on free loopback ports for one test: the email
// tests point `stead dev --smtp` at it and read the mail a person would.
// The binary is $STEAD_MAILPIT, else bin/mailpit (make mailpit builds it,
// pinned); without it the test is skipped, and with CI=true it fails.

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { defer, repoRoot, WAIT } from "./harness.js";

export const MAILPIT = process.env.STEAD_MAILPIT || path.join(repoRoot, "bin", "mailpit");

// mailpitMissing says why the email tests cannot run, or "" when they can.
export function mailpitMissing() {
  if (existsSync(MAILPIT)) return "";
  const why = `${MAILPIT} is missing; build it with: make mailpit`;
  if (process.env.CI === "true") throw new Error(why);
  return why;
}

async function freePort() {
  const srv = createServer();
  await new Promise((resolve, reject) => srv.once("error", reject).listen(0, "127.0.0.1", resolve));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

// startMailpit starts a server until the test ends; resolves {smtp
// ("127.0.0.1:PORT"), api, messages(), message(id), waitFor(to)}.
export async function startMailpit(t) {
  const dir = await mkdtemp(path.join(tmpdir(), "stead-mailpit-"));
  const smtpPort = await freePort();
  const httpPort = await freePort();
  const child = spawn(MAILPIT, [
    "--database", path.join(dir, "mailpit.db"), "--smtp", `127.0.0.1:${smtpPort}`, "--listen", `127.0.0.1:${httpPort}`,
    "--smtp-disable-rdns", "--disable-version-check",
  ], { env: { PATH: process.env.PATH, HOME: dir, TMPDIR: dir }, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout.on("data", (b) => { log += b; });
  child.stderr.on("data", (b) => { log += b; });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  defer(t, async () => {
    if (child.exitCode === null) child.kill("SIGTERM");
    await exited;
    await rm(dir, { recursive: true, force: true });
  });
  const api = `http://127.0.0.1:${httpPort}`;
  const get = async (p) => {
    const res = await fetch(api + p);
    if (!res.ok) throw new Error(`mailpit GET ${p}: ${res.status}`);
    return res.json();
  };
  const mp = {
    smtp: `127.0.0.1:${smtpPort}`,
    api,
    async messages() { return (await get("/api/v1/messages?limit=500")).messages; },
    async message(id) { return get("/api/v1/message/" + encodeURIComponent(id)); },
    // waitFor resolves the first message to address, read in full.
    async waitFor(address) {
      const deadline = Date.now() + WAIT;
      for (;;) {
        const found = (await mp.messages()).find((m) => m.To.some((a) => a.Address === address));
        if (found) return mp.message(found.ID);
        if (Date.now() > deadline) throw new Error(`no mail to ${address} in ${WAIT} ms; mailpit has ${JSON.stringify(await mp.messages())}`);
        await new Promise((r) => setTimeout(r, 100)); // poll interval, not a wait for an outcome
      }
    },
  };
  const deadline = Date.now() + WAIT;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`mailpit exited: ${log}`);
    try {
      await mp.messages();
      return mp;
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`mailpit did not answer in ${WAIT} ms: ${e.message}\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 50)); // poll interval, not a wait for an outcome
  }
}
