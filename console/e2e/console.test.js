// Real-browser tests of the console, the customer status page and
// embed.js: headless Chromium (playwright-core) against a real `stead dev`
// per test, driven like a person would, with the stead CLI doing what the
// developer and the customer's backend would do. Screenshots go to out/.
//
// Every wait is on a condition (Playwright's auto-waiting locators, or
// polling with a deadline), never a fixed sleep.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import {
  chromiumMissing, launchBrowser, openPage, startStead, signIn, screenshot, markPage, wasReloaded,
  deployWithTimeout, serveStatic, WAIT,
} from "./harness.js";

const missing = chromiumMissing();
if (missing) console.log(`# skipping the browser tests: ${missing}`);
const opts = { skip: missing || false, timeout: 90_000 };

let browser;
before(async () => { if (!missing) browser = await launchBrowser(); });
after(async () => { if (browser) await browser.close(); });

// card is the approval card of a run in the queue.
const card = (page, runId) => page.locator(`article.approval[data-run-id="${runId}"]`);

// until polls fn until it returns a truthy value.
async function until(what, fn) {
  const deadline = Date.now() + WAIT;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${last && last.message ? last.message : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 100)); // poll interval, not a wait for an outcome
  }
}

async function runStatus(stead, runId) {
  return (await stead.api("GET", `/v1/runs/${runId}`)).status;
}

test("sign in; a run started with the CLI appears as a pending approval; approving it shows the run succeeded without a reload", opts, async (t) => {
  const stead = await startStead(t);
  const page = await openPage(t, browser);

  // A wrong key is refused in the API's words, and is not kept.
  await page.goto(stead.url + "/console/");
  await page.getByLabel("API key").fill("stk_notarealkey");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "the API key is not valid" }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem("stead.apiKey")), null);

  await signIn(page, stead, { shot: "01-sign-in" });
  await page.getByText("No approvals are waiting.").waitFor();
  await screenshot(page, "02-approvals-empty");
  // The key is kept in sessionStorage only, and never rendered.
  assert.equal(await page.evaluate(() => sessionStorage.getItem("stead.apiKey")), stead.key);
  assert.equal(await page.evaluate(() => document.cookie), "");
  assert.ok(!(await page.content()).includes(stead.key), "the key is rendered in the page");
  await markPage(page);

  const run = await stead.startRefund("o-1001");
  assert.equal(run.status, "awaiting-approval");
  const c = card(page, run.id);
  await c.waitFor(); // the queue refreshes by itself
  await c.getByText("refundOrder requires approval").waitFor();
  await c.getByText('"orderId": "o-1001"').waitFor();
  await c.getByText("demo-user").waitFor();
  assert.match(await c.getByRole("timer").textContent(), /^expires in 1[45]:\d\d$/);
  await screenshot(page, "03-approvals-pending");

  await c.getByLabel("Note (optional, recorded in the trace; on a deny the customer sees it)").fill("checked the photos");
  await c.getByRole("button", { name: "Approve", exact: true }).click();
  await c.locator(".badge", { hasText: "Approved" }).waitFor();
  await c.locator('.result [data-status="succeeded"]').waitFor();
  assert.equal(await runStatus(stead, run.id), "succeeded");

  // The run page, reached by its link: succeeded, with the whole trace.
  await c.getByRole("link", { name: run.id }).first().click();
  await page.locator('[data-run-status="succeeded"]').waitFor();
  await page.locator('.ev[data-type="run.succeeded"]').waitFor();
  const approved = page.locator('.ev[data-type="approval.approved"]');
  await approved.getByText("checked the photos").waitFor();
  await approved.getByText(/Approved by you/).waitFor();
  const refund = page.locator('.ev[data-type="step.completed"][data-step="refund"]');
  await refund.getByText(/^idk_/).waitFor();
  await page.locator('.ev[data-type="log"]').getByText("refunded 89.5 on o-1001").waitFor();
  assert.equal(await wasReloaded(page), false, "the page was reloaded");
  await screenshot(page, "04-run-succeeded");

  // The runs list, filtered.
  await page.getByRole("link", { name: "Runs", exact: true }).click();
  await page.locator(`.run-row[data-run-id="${run.id}"][data-status="succeeded"]`).waitFor();
  await page.getByLabel("Status").selectOption("failed");
  await page.getByText("No runs match these filters.").waitFor();
  await page.getByLabel("Status").selectOption("succeeded");
  await page.getByLabel("Agent").selectOption("refunds");
  await page.locator(`.run-row[data-run-id="${run.id}"]`).waitFor();
  await screenshot(page, "05-runs");
  assert.equal(await wasReloaded(page), false, "the page was reloaded");
});

test("deny with a note: the run fails approval-denied with the note, for the owner and the customer", opts, async (t) => {
  const stead = await startStead(t);
  const page = await openPage(t, browser);
  await signIn(page, stead);
  const run = await stead.startRefund("o-1002");
  const c = card(page, run.id);
  // The example's refunds agent shows deny notes to customers, and the
  // console says so where the note is written.
  await c.getByLabel("Note (optional, recorded in the trace; on a deny the customer sees it)").fill("Order was already replaced");
  await c.getByRole("button", { name: "Deny" }).click();
  await c.locator(".badge", { hasText: "Denied" }).waitFor();
  await c.locator('.result [data-status="failed"]').waitFor();
  await c.locator(".result").getByText("approval-denied").waitFor();

  await page.goto(stead.url + `/console/#/runs/${run.id}`);
  await page.locator('[data-run-status="failed"]').waitFor();
  const err = page.locator(".run-error");
  await err.getByText("approval-denied").waitFor();
  await err.getByText(/Order was already replaced/).waitFor();
  await page.locator('.ev[data-type="approval.denied"]').getByText("Order was already replaced").waitFor();
  await screenshot(page, "06-run-denied");

  await page.getByRole("link", { name: "Approvals", exact: true }).click();
  await page.getByRole("link", { name: "Decided" }).click();
  const decided = page.locator(`article.approval[data-run-id="${run.id}"][data-status="denied"]`);
  await decided.getByText("Order was already replaced").waitFor();
  await screenshot(page, "07-approvals-decided");

  // A stale card: decided elsewhere (the CLI) while shown here. Denying it
  // gets the API's refusal in its own words, and nothing changes.
  await page.getByRole("link", { name: "Pending" }).click();
  const other = await stead.startRefund("o-1003");
  const stale = card(page, other.id);
  await stale.waitFor();
  await stead.cli("approve", other.approval.id);
  await stale.getByRole("button", { name: "Deny" }).click();
  await stale.getByRole("alert").getByText(/was already approved by owner \(key_\w+\) at .*; check the run trace instead of deciding again/).waitFor();
  await stale.getByRole("alert").getByText("approval_not_pending").waitFor();
  await until("the approved run to succeed", async () => (await runStatus(stead, other.id)) === "succeeded");
  await screenshot(page, "08-approval-stale-refused");

  // The customer sees the decline in plain words.
  const token = (await stead.cli("token", "demo-user")).trim();
  const status = await openPage(t, browser);
  await status.goto(`${stead.url}/status/${run.id}#token=${token}`);
  await status.locator('[data-stead-status="declined"]').getByText("Declined: Order was already replaced").waitFor();
  await screenshot(status, "09-status-declined");
});

test("a 1s approval timeout: the approval shows as expired, and approving it shows the API's refusal", opts, async (t) => {
  const stead = await startStead(t);
  const page = await openPage(t, browser);
  await signIn(page, stead);
  await deployWithTimeout(stead, "1s");
  const run = await stead.startRefund("o-1003");
  assert.equal(run.status, "awaiting-approval");
  await page.getByRole("button", { name: "Refresh" }).click();
  const c = card(page, run.id);
  await c.waitFor();
  await c.locator(".badge", { hasText: "Expired" }).waitFor();
  await c.getByText("nobody decided in time").waitFor();
  // The sweeper expires it on the server too.
  await until("the run to fail", async () => (await runStatus(stead, run.id)) === "failed");

  await c.getByRole("button", { name: "Approve", exact: true }).click();
  const refusal = c.getByRole("alert");
  await refusal.getByText(/expired at .*; it can no longer be approved/).waitFor();
  await refusal.getByText("approval_expired").waitFor();
  await screenshot(page, "10-approve-expired-refused");

  await page.getByRole("link", { name: "Expired" }).click();
  const expired = page.locator(`article.approval[data-run-id="${run.id}"][data-status="expired"]`);
  await expired.getByText("Expired: nobody decided in time.").waitFor();
  await screenshot(page, "11-approvals-expired");
  await page.getByRole("link", { name: "Decided" }).click();
  await page.getByText("Nothing decided yet.").waitFor();
  assert.equal(await page.locator(`article.approval[data-run-id="${run.id}"]`).count(), 0, "an expired approval is listed as decided");

  await page.goto(stead.url + `/console/#/runs/${run.id}`);
  await page.locator(".run-error").getByText("approval-expired").waitFor();
  await page.locator('.ev[data-type="approval.expired"]').waitFor();

  const token = (await stead.cli("token", "demo-user")).trim();
  const status = await openPage(t, browser);
  await status.goto(`${stead.url}/status/${run.id}#token=${token}`);
  await status.locator('[data-stead-status="expired"]').getByText("Expired: nobody decided in time").waitFor();
});

test("edit the input: a schema violation shows the tool's error and decides nothing; a valid edit is what runs", opts, async (t) => {
  const stead = await startStead(t);
  const page = await openPage(t, browser);
  await signIn(page, stead);
  const run = await stead.startRefund("o-1002", { reason: "late" });
  const c = card(page, run.id);
  await c.getByRole("button", { name: "Edit input" }).click();
  const editor = c.getByLabel("Input for refundOrder (JSON)");
  const approveEdited = c.getByRole("button", { name: "Approve with this input" });

  // Not JSON: said at once, and the button waits for valid JSON.
  await editor.fill('{"orderId": ');
  await c.getByText(/^Not valid JSON/).waitFor();
  assert.equal(await approveEdited.isDisabled(), true);

  // Valid JSON, but not what the tool accepts: the API's words, nothing decided.
  await editor.fill('{"orderId": 1002, "reason": "late"}');
  await approveEdited.click();
  const problem = c.locator(".editor").getByRole("alert");
  await problem.getByText("input.orderId: must be a string").waitFor();
  assert.equal((await stead.api("GET", `/v1/approvals/${run.approval.id}`)).status, "pending");
  assert.equal(await runStatus(stead, run.id), "awaiting-approval");
  assert.equal(await c.getAttribute("data-status"), "pending");
  await screenshot(page, "12-edit-schema-error");

  await editor.fill('{"orderId": "o-1002", "reason": "edited by the reviewer"}');
  await approveEdited.click();
  await c.locator(".badge", { hasText: "Approved" }).waitFor();
  await c.locator('.result [data-status="succeeded"]').waitFor();

  const done = await stead.api("GET", `/v1/runs/${run.id}`);
  assert.equal(done.output.reason, "edited by the reviewer");
  await page.goto(stead.url + `/console/#/runs/${run.id}`);
  const approved = page.locator('.ev[data-type="approval.approved"]');
  await approved.getByText("Input edited before approval; it runs with:").waitFor();
  await approved.getByText('"reason": "edited by the reviewer"').waitFor();
  await approved.getByText('"reason": "late"').waitFor();
  await page.locator('.ev[data-type="step.started"][data-step="refund"]').getByText('"reason": "edited by the reviewer"').waitFor();
  await screenshot(page, "13-run-edited-input");
});

test("bulk approve of three, with every call's input shown before confirming", opts, async (t) => {
  const stead = await startStead(t);
  const page = await openPage(t, browser);
  await signIn(page, stead);
  const runs = [];
  for (const id of ["o-1001", "o-1002", "o-1003"]) runs.push(await stead.startRefund(id, { reason: "bulk " + id }));
  for (const r of runs) await card(page, r.id).waitFor();
  for (const r of runs) await page.getByLabel(`Select refundOrder for run ${r.id}`).check();
  // Editing a card's input takes it out of the bulk selection (bulk approval
  // would run the original input, not the edit on screen), until the edit
  // is cancelled.
  const first = card(page, runs[0].id);
  const firstCheck = page.getByLabel(`Select refundOrder for run ${runs[0].id}`);
  await first.getByRole("button", { name: "Edit input" }).click();
  await page.getByRole("button", { name: "Approve selected (2)" }).waitFor();
  assert.equal(await firstCheck.isChecked(), false);
  assert.equal(await firstCheck.isDisabled(), true);
  await first.getByRole("button", { name: "Cancel edit" }).click();
  await firstCheck.check();
  await page.getByRole("button", { name: "Approve selected (3)" }).click();

  const dialog = page.getByRole("dialog", { name: "Approve 3 calls?" });
  await dialog.waitFor();
  for (const r of runs) {
    const item = dialog.locator(`.bulk__item[data-approval-id="${r.approval.id}"]`);
    await item.getByText(r.id).waitFor();
    await item.getByText(`"reason": "bulk ${r.input.orderId}"`).waitFor();
  }
  await screenshot(page, "14-bulk-confirm");
  await dialog.getByRole("button", { name: "Approve 3 calls" }).click();
  await dialog.getByText("3 of 3 approved.").waitFor();
  await dialog.getByRole("button", { name: "Close" }).click();
  for (const r of runs) await card(page, r.id).locator('.result [data-status="succeeded"]').waitFor();
  for (const r of runs) assert.equal(await runStatus(stead, r.id), "succeeded");
  await screenshot(page, "15-bulk-approved");
});

test("customer status page: from awaiting approval to done, live; another end user's token sees not found", opts, async (t) => {
  const stead = await startStead(t);
  const run = await stead.startRefund("o-1001");
  const token = (await stead.cli("token", "demo-user")).trim();
  const otherToken = (await stead.cli("token", "someone-else")).trim();
  assert.match(token, /^stc_/);

  const page = await openPage(t, browser);
  await page.goto(`${stead.url}/status/${run.id}#token=${token}`);
  await page.locator('#status[data-stead-status="awaiting-approval"]').getByText(/^Waiting for approval of refundOrder — requested (just now|\d+ seconds? ago)$/).waitFor();
  // The token left the address bar (it was never sent in a URL).
  assert.equal(new URL(page.url()).hash, "");
  await markPage(page);
  await screenshot(page, "16-status-waiting");

  await stead.cli("approve", run.approval.id);
  await page.locator('#status[data-stead-status="succeeded"]').getByText("Done", { exact: true }).waitFor();
  assert.equal(await wasReloaded(page), false, "the status page was reloaded");
  await screenshot(page, "17-status-done");

  const other = await openPage(t, browser);
  await other.goto(`${stead.url}/status/${run.id}#token=${otherToken}`);
  await other.locator('[data-stead-status="not-found"]').getByText("Not found", { exact: true }).waitFor();
  await screenshot(other, "18-status-not-found");

  const none = await openPage(t, browser);
  await none.goto(`${stead.url}/status/${run.id}`);
  await none.locator('[data-stead-status="unauthenticated"]').waitFor();
});

test("embed.js renders the live status on another origin's page (the README example)", opts, async (t) => {
  const stead = await startStead(t);
  const run = await stead.startRefund("o-1002");
  const token = (await stead.cli("token", "demo-user")).trim();
  const template = await readFile(fileURLToPath(new URL("fixtures/embed-example.html", import.meta.url)), "utf8");
  const html = template.replaceAll("{{STEAD_URL}}", stead.url).replaceAll("{{RUN_ID}}", run.id).replaceAll("{{CUSTOMER_TOKEN}}", token);
  const site = await serveStatic(t, html);
  assert.notEqual(new URL(site).origin, new URL(stead.url).origin);

  const page = await openPage(t, browser);
  const states = [];
  page.on("console", (m) => { if (m.text().startsWith("refund status:")) states.push(m.text().slice(15)); });
  await page.goto(site);
  const el = page.locator("#refund-status");
  await el.locator('[data-state="awaiting-approval"]').getByText(/^Waiting for approval of refundOrder/).waitFor();
  // embed.css was added, so the box is styled.
  await until("embed.css", () => page.evaluate(() => getComputedStyle(document.querySelector(".stead-status")).borderLeftStyle === "solid"));
  await screenshot(page, "19-embed-waiting");
  await stead.cli("approve", run.approval.id);
  await el.locator('[data-state="succeeded"]').getByText("Done", { exact: true }).waitFor();
  // It went from waiting to done (through queued/running, if it saw them).
  assert.equal(states[0], "awaiting-approval");
  assert.equal(states.at(-1), "succeeded");
  await screenshot(page, "20-embed-done");
});

test("deployments: versions, digests, agents and their tools' posture", opts, async (t) => {
  const stead = await startStead(t);
  const page = await openPage(t, browser);
  await signIn(page, stead);
  await deployWithTimeout(stead, "2m");
  const { deployments } = await stead.api("GET", "/v1/deployments");
  await page.getByRole("link", { name: "Deployments", exact: true }).click();
  for (const d of deployments) await page.locator(`.version[data-version="${d.version}"]`).getByText(d.digest).waitFor();
  await page.getByRole("heading", { name: "Agents of the latest deployment (version 2)" }).waitFor();
  const row = page.locator('.agent[data-agent="refunds"] tr[data-tool="refundOrder"]');
  await row.getByText("write").waitFor();
  await row.getByText("requires approval").waitFor();
  await row.getByText("2m0s").waitFor();
  await page.locator('.agent[data-agent="review-refund"] tr[data-tool="fetchReviews"]').getByText("external").waitFor();
  await screenshot(page, "21-deployments");
});

test("readable at 360 px: no page scrolls sideways", opts, async (t) => {
  const stead = await startStead(t);
  const run = await stead.startRefund("o-1001");
  const page = await openPage(t, browser, { width: 360, height: 740 });
  await signIn(page, stead);
  const pages = [
    ["22-narrow-approvals", "#/approvals", `article.approval[data-run-id="${run.id}"]`],
    ["23-narrow-run", `#/runs/${run.id}`, '.ev[data-type="approval.requested"]'],
    ["24-narrow-runs", "#/runs", ".run-row"],
    ["25-narrow-deployments", "#/deployments", ".version"],
  ];
  for (const [name, hash, ready] of pages) {
    await page.goto(stead.url + "/console/" + hash);
    await page.locator(ready).first().waitFor();
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 360, `${hash} is ${width}px wide at 360px`);
    await screenshot(page, name);
  }
  // Keyboard: the first approval's buttons are reachable with Tab.
  await page.goto(stead.url + "/console/#/approvals");
  const approve = card(page, run.id).getByRole("button", { name: "Approve", exact: true });
  await approve.waitFor();
  let reached = false;
  for (let i = 0; i < 40 && !reached; i++) {
    await page.keyboard.press("Tab");
    reached = await approve.evaluate((b) => b === document.activeElement);
  }
  assert.ok(reached, "the Approve button is not reachable with the keyboard");
});

test("an approver member: the console shows only approvals, and names them when they decide", opts, async (t) => {
  const stead = await startStead(t);
  const ana = await stead.cliJSON("members", "add", "Ana Diaz", "--role", "approver", "--key");
  assert.equal(ana.role, "approver");
  const run = await stead.startRefund("o-1001");
  const page = await openPage(t, browser);
  await signIn(page, { ...stead, key: ana.key.key });
  await page.getByText("Ana Diaz, approver key").waitFor();
  assert.equal(await page.getByRole("link", { name: "Runs", exact: true }).isVisible(), false, "an approver sees the runs section");
  assert.equal(await page.getByRole("link", { name: "Deployments", exact: true }).isVisible(), false, "an approver sees the deployments section");
  const c = card(page, run.id);
  await c.getByRole("button", { name: "Approve", exact: true }).click();
  await c.locator(".badge", { hasText: "Approved" }).waitFor();
  await c.locator('.result [data-status="succeeded"]').waitFor();
  await screenshot(page, "10-approver");
  // The owner reads the decision with her name.
  const decided = await stead.api("GET", `/v1/approvals/${run.approval.id}`);
  assert.equal(decided.decidedByName, "Ana Diaz");
  assert.equal(decided.decidedBy, ana.key.id);
});
