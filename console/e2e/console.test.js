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
  deployWithTimeout, deployRefunds, deployRefundsAgent, deployExample, addMember, asKey, serveStatic, axeProblems, WAIT,
} from "./harness.js";
import { mailpitMissing, startMailpit } from "./mailpit.js";
import { startReceiver, signedBy, oracle } from "./receiver.js";

const missing = chromiumMissing();
if (missing) console.log(`# skipping the browser tests: ${missing}`);
const opts = { skip: missing || false, timeout: 90_000 };

let browser;
before(async () => { if (!missing) browser = await launchBrowser(); });
after(async () => { if (browser) await browser.close(); });

// card is the approval card of a run (in the inbox's detail pane, or on
// the approval's own page); row is its row in the inbox's list.
const card = (page, runId) => page.locator(`article.approval[data-run-id="${runId}"]`);
const row = (page, runId) => page.locator(`.inbox-row[data-run-id="${runId}"]`);

// openCard opens a run's approval from the inbox's list into the detail
// pane, as a click on its row does, and returns its card.
async function openCard(page, runId) {
  await row(page, runId).locator(".inbox-row__open").click();
  const c = card(page, runId);
  await c.waitFor();
  return c;
}

// STAMP matches an absolute moment as the console writes it in en-US
// ("Nov 29, 2026, 2:03:04 PM UTC"); STAMP_OPTIONS formats one (format.js).
const STAMP = String.raw`[A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d\d:\d\d [AP]M \S+`;
const STAMP_OPTIONS = { year: "numeric", month: "short", day: "numeric", hour: "numeric", minute: "2-digit", second: "2-digit", timeZoneName: "short" };

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

// holdQueue makes the page's pending queue keep the answer it first got
// until release() is called (then it reads the API again): the page shows
// an approval as a reviewer saw it a moment before someone else acted.
async function holdQueue(page) {
  let held = true, first = null;
  await page.route(/\/v1\/approvals\?/, async (route) => {
    if (!held) return route.continue();
    if (!first) first = await (await route.fetch()).json();
    return route.fulfill({ json: first });
  });
  return { release() { held = false; } };
}

// quorumSetup adds members with keys and a group of them, and deploys the
// example with refundOrder approved by min of that group.
async function quorumSetup(stead, group, names, min) {
  const members = [];
  for (const name of names) members.push(await addMember(stead, name));
  await stead.api("POST", "/v1/groups", { name: group, members: members.map((m) => m.id) });
  await deployRefunds(stead, "refunds-" + group, { approvers: { group, min } });
  return members;
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
  await row(page, run.id).waitFor(); // the queue refreshes by itself
  const c = await openCard(page, run.id);
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
  const c = await openCard(page, run.id);
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
  const stale = await openCard(page, other.id);
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
  const c = await openCard(page, run.id);
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
  const c = await openCard(page, run.id);
  await c.getByRole("button", { name: "Edit input" }).click();
  const editor = c.getByLabel("Input for refundOrder (JSON)");
  const approveEdited = c.getByRole("button", { name: "Approve with this input" });

  // Not JSON: said at once, and the button waits for valid JSON.
  await editor.fill('{"orderId": ');
  await c.getByText(/^Not valid JSON/).waitFor();
  assert.equal(await approveEdited.isDisabled(), true);

  // Valid JSON, but not what the tool accepts: said as it is typed (the
  // API's check of an edit), and on approve the API's words, nothing decided.
  await editor.fill('{"orderId": 1002, "reason": "late"}');
  await c.locator(".syntax.bad").getByText(/^Does not match the tool's input schema: .*orderId.*must be a string/).waitFor();
  assert.equal(await editor.getAttribute("aria-invalid"), "true");
  await editor.fill('{"orderId": "o-1002", "reason": "late", "extra": 1}');
  await c.locator(".syntax.bad").getByText(/^Does not match the tool's input schema: .*extra/).waitFor();
  await editor.fill('{"orderId": "o-1002"}');
  await c.locator(".syntax.ok").getByText("Matches the input schema of refundOrder.").waitFor();
  assert.equal((await stead.api("GET", `/v1/approvals/${run.approval.id}`)).status, "pending", "a check decided");
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
  for (const r of runs) await row(page, r.id).waitFor();
  for (const r of runs) await page.getByLabel(`Select refundOrder for run ${r.id}`).check();
  // Editing a card's input takes it out of the bulk selection (bulk approval
  // would run the original input, not the edit on screen), until the edit
  // is cancelled.
  const first = await openCard(page, runs[0].id);
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
  for (const r of runs) await (await openCard(page, r.id)).locator('.result [data-status="succeeded"]').waitFor();
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
  await row.getByText("2 min", { exact: true }).waitFor();
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
    ["26-narrow-members", "#/members", "tr.member"],
    ["27-narrow-groups", "#/groups", "#create-group-title"],
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
  const c = await openCard(page, run.id);
  await c.getByRole("button", { name: "Approve", exact: true }).click();
  await c.locator(".badge", { hasText: "Approved" }).waitFor();
  await c.locator('.result [data-status="succeeded"]').waitFor();
  await screenshot(page, "10-approver");
  // The owner reads the decision with her name.
  const decided = await stead.api("GET", `/v1/approvals/${run.approval.id}`);
  assert.equal(decided.decidedByName, "Ana Diaz");
  assert.equal(decided.decidedBy, ana.key.id);
});

test("quorum: two of finance approve; after the first vote the run still waits, the second resumes it", opts, async (t) => {
  const stead = await startStead(t);
  const [ana, bo] = await quorumSetup(stead, "finance", ["Ana Diaz", "Bo Li"], 2);
  const run = await stead.startRefund("o-1001");
  assert.equal(run.status, "awaiting-approval");

  // The owner is not in finance: told so, and offered nothing to click.
  const owner = await openPage(t, browser);
  await signIn(owner, stead);
  const oc = await openCard(owner, run.id);
  await oc.getByText("You are not among the approvers of this approval").waitFor();
  assert.equal(await oc.getByRole("button", { name: "Approve", exact: true }).isDisabled(), true);
  assert.equal(await oc.getByRole("button", { name: "Deny" }).isDisabled(), true);

  const first = await openPage(t, browser);
  await signIn(first, { ...stead, key: ana.key });
  const c = await openCard(first, run.id);
  await c.locator('.chip[data-group="finance"]').getByText("0/2 finance").waitFor();
  await c.locator(".quorum__text").getByText(/^0 of 2 from finance — waiting on (Ana Diaz, Bo Li|Bo Li, Ana Diaz)$/).waitFor();
  await c.getByRole("button", { name: "Approve", exact: true }).click();
  await c.getByText("Your vote is counted; waiting on Bo Li.").waitFor();
  await c.locator(".quorum__text").getByText("1 of 2 from finance — waiting on Bo Li", { exact: true }).waitFor();
  await c.locator(".chip").getByText("1/2 finance").waitFor();
  // Still pending, in the list, and the run still waits.
  assert.equal(await c.getAttribute("data-status"), "pending");
  assert.equal(await c.locator(".badge", { hasText: "Pending" }).count(), 1);
  assert.equal(await c.getByRole("button", { name: "Approve", exact: true }).isDisabled(), true, "Approve is offered twice");
  assert.equal(await runStatus(stead, run.id), "awaiting-approval");
  await screenshot(first, "28-quorum-first-vote");

  // The approval's page: who was counted, who it waits on, each vote.
  await c.getByRole("link", { name: run.approval.id }).click();
  const d = first.locator(`article.approval[data-approval-id="${run.approval.id}"]`);
  await d.locator('.req[data-group="finance"] .req__counted').getByText("Ana Diaz").waitFor();
  await d.locator('.req[data-group="finance"] .req__counted').getByText("(you)").waitFor();
  await d.locator('.req[data-group="finance"] .req__waiting').getByText("Bo Li").waitFor();
  await d.locator(`.votes li[data-member="${ana.id}"]`).getByText(new RegExp(`approved ${STAMP}`)).waitFor();
  await screenshot(first, "29-quorum-detail");

  const second = await openPage(t, browser);
  await signIn(second, { ...stead, key: bo.key });
  const c2 = await openCard(second, run.id);
  await c2.locator(".quorum__text").getByText("1 of 2 from finance — waiting on Bo Li", { exact: true }).waitFor();
  await c2.getByRole("button", { name: "Approve", exact: true }).click();
  await c2.locator(".badge", { hasText: "Approved" }).waitFor();
  await c2.getByText("Quorum met: 2 of 2 from finance.").waitFor();
  await c2.locator('.result [data-status="succeeded"]').waitFor();
  assert.equal(await runStatus(stead, run.id), "succeeded");
  await screenshot(second, "30-quorum-approved");

  // The first member's page learns it was settled elsewhere.
  await d.getByText("No longer in the pending queue").waitFor();
  const decided = await stead.api("GET", `/v1/approvals/${run.approval.id}`);
  assert.equal(decided.status, "approved");
  assert.deepEqual(decided.votes.map((v) => v.name), ["Ana Diaz", "Bo Li"]);
  // The trace shows the vote and the approval with the quorum.
  await second.goto(stead.url + `/console/#/runs/${run.id}`);
  await second.locator('.ev[data-type="approval.vote"]').getByText("1 of 2 from finance").waitFor();
  await second.locator('.ev[data-type="approval.approved"]').getByText("2 of 2 from finance").waitFor();
});

test("a vote lands only on the input shown: an edit by another approver is shown to review again; a second vote is refused in words", opts, async (t) => {
  const stead = await startStead(t);
  const [ana, bo, cy] = await quorumSetup(stead, "finance", ["Ana Diaz", "Bo Li", "Cy Ng"], 3);
  const run = await stead.startRefund("o-1002", { reason: "late" });
  const shown = await stead.api("GET", `/v1/approvals/${run.approval.id}`);

  // Ana reads the approval; before she decides, Bo edits its input (his
  // vote counts for the edit).
  const page = await openPage(t, browser);
  const held = await holdQueue(page);
  await signIn(page, { ...stead, key: ana.key });
  const c = await openCard(page, run.id);
  await c.getByText('"reason": "late"').waitFor();
  const edit = await asKey(stead, bo.key, "POST", `/v1/approvals/${run.approval.id}/approve`,
    { input: { orderId: "o-1002", reason: "edited by Bo" }, inputDigest: shown.inputDigest });
  assert.equal(edit.status, 200, JSON.stringify(edit.doc));
  assert.equal(edit.doc.status, "pending");

  // Her approve names the input she saw: refused, nothing decided, and the
  // card shows the new input and says why.
  await c.getByRole("button", { name: "Approve", exact: true }).click();
  held.release();
  const changed = c.locator(".changed");
  await changed.getByText("The input was edited by another approver (Bo Li); review it again.").waitFor();
  await changed.getByText("approval_changed").waitFor();
  await c.locator(".input").getByText('"reason": "edited by Bo"').waitFor();
  await c.locator(".quorum__text").getByText(/^1 of 3 from finance — waiting on/).waitFor();
  const after = await stead.api("GET", `/v1/approvals/${run.approval.id}`);
  assert.equal(after.status, "pending");
  assert.deepEqual(after.votes.map((v) => v.name), ["Bo Li"]);
  await screenshot(page, "31-approval-changed");

  // A second tab of hers, read now; she approves the new input in the first.
  const other = await openPage(t, browser);
  const heldOther = await holdQueue(other);
  await signIn(other, { ...stead, key: ana.key });
  const oc = await openCard(other, run.id);
  await oc.getByText('"reason": "edited by Bo"').waitFor();
  await c.getByRole("button", { name: "Approve", exact: true }).click();
  await c.getByText("Your vote is counted; waiting on Cy Ng.").waitFor();

  // The second tab did not see her vote: the API's refusal, in its words.
  await oc.getByRole("button", { name: "Approve", exact: true }).click();
  heldOther.release();
  const refusal = oc.getByRole("alert");
  await refusal.getByText("Already voted:").waitFor();
  await refusal.getByText(/you have already approved apr_\w+; it stands at 2 of 3 from finance — waiting on Cy Ng/).waitFor();
  await oc.getByText("Your vote is counted; waiting on Cy Ng.").waitFor();
  assert.equal(await oc.getAttribute("data-status"), "pending");
  await screenshot(other, "32-already-voted");

  // Cy's vote completes it; the run refunds with Bo's edit.
  const last = await asKey(stead, cy.key, "POST", `/v1/approvals/${run.approval.id}/approve`, { inputDigest: after.inputDigest });
  assert.equal(last.doc.status, "approved", JSON.stringify(last.doc));
  await until("the run to succeed", async () => (await runStatus(stead, run.id)) === "succeeded");
  assert.equal((await stead.api("GET", `/v1/runs/${run.id}`)).output.reason, "edited by Bo");
});

test("a requirement that cannot be met says so, and can be denied", opts, async (t) => {
  const stead = await startStead(t);
  const [ana] = await quorumSetup(stead, "legal", ["Ana Diaz"], 2);
  const run = await stead.startRefund("o-1003");
  const page = await openPage(t, browser);
  await signIn(page, { ...stead, key: ana.key });
  const c = await openCard(page, run.id);
  await c.locator('.chip[data-quorum="short"]').getByText("0/2 legal").waitFor();
  await c.locator(".quorum__short").getByText("cannot be met: only 1 eligible — deny it or let it expire.").waitFor();
  await screenshot(page, "33-quorum-short");
  await c.getByLabel(/^Note/).fill("legal has one reviewer");
  await c.getByRole("button", { name: "Deny" }).click();
  await c.locator(".badge", { hasText: "Denied" }).waitFor();
  await until("the run to fail", async () => (await runStatus(stead, run.id)) === "failed");
});

test("members and groups: the owner adds, changes and removes members and manages a group; errors sit next to their fields; others read", opts, async (t) => {
  const stead = await startStead(t);
  const ana = await addMember(stead, "Ana Diaz", { email: "ana@example.com" });
  const page = await openPage(t, browser);
  await signIn(page, stead);

  await page.getByRole("link", { name: "Members", exact: true }).click();
  const anaRow = page.locator(`tr.member[data-member-id="${ana.id}"]`);
  await anaRow.getByText("ana@example.com").waitFor();
  await anaRow.getByText("1 key", { exact: true }).waitFor();

  // Add a member with a key: a bad email is named next to the email field.
  const form = page.locator("form", { has: page.getByRole("heading", { name: "Add a member" }) });
  await form.getByLabel("Name", { exact: true }).fill("Cy Ng");
  await form.getByLabel("Email (optional)").fill("cy.example.com");
  await form.getByLabel("Role").selectOption("approver");
  await form.getByRole("button", { name: "Add member" }).click();
  await form.locator('[data-field="email"] .field__error').getByText(/must be an email address like ana@example.com/).waitFor();
  assert.equal(await form.getByLabel("Email (optional)").getAttribute("aria-invalid"), "true");
  await screenshot(page, "34-members-field-error");
  await form.getByLabel("Email (optional)").fill("cy@example.com");
  await form.getByRole("button", { name: "Add member" }).click();
  await form.getByText("was added as approver.").waitFor();
  const secret = await form.getByLabel(/^API key of Cy Ng .* shown this once/).inputValue();
  assert.match(secret, /^stk_/);
  const me = await asKey(stead, secret, "GET", "/v1/me");
  assert.equal(me.doc.memberName, "Cy Ng");
  const cy = page.locator("tr.member", { hasText: "Cy Ng" });
  await cy.getByText("1 key", { exact: true }).waitFor();

  // Change her role; then remove her, after a confirmation.
  await cy.getByLabel("Role of Cy Ng").selectOption("viewer");
  await cy.getByRole("button", { name: "Change role" }).click();
  await page.locator('tr.member[data-role="viewer"]', { hasText: "Cy Ng" }).waitFor();
  await page.getByRole("button", { name: "Remove Cy Ng" }).click();
  await page.getByRole("group", { name: "Confirm removing Cy Ng" }).getByRole("button", { name: "Remove Cy Ng" }).click();
  await page.locator('tr.member[data-removed="true"]', { hasText: "Cy Ng" }).getByText("removed", { exact: true }).waitFor();
  assert.equal((await asKey(stead, secret, "GET", "/v1/me")).status, 401, "a removed member's key still works");

  // The last owner cannot stop being one: said next to the role.
  const ownerId = (await stead.api("GET", "/v1/me")).memberId;
  const ownerRow = page.locator(`tr.member[data-member-id="${ownerId}"]`);
  await ownerRow.getByText("(you)").waitFor();
  await ownerRow.locator("select").selectOption("developer");
  await ownerRow.getByRole("button", { name: "Change role" }).click();
  await ownerRow.locator(".field__error").getByText(/last owner; make another member an owner/).waitFor();
  await screenshot(page, "35-members");

  // Groups: a bad name is named next to the name field; then create one.
  await page.getByRole("link", { name: "Groups", exact: true }).click();
  await page.getByText("No groups yet.").waitFor();
  const create = page.locator("form", { has: page.getByRole("heading", { name: "Create a group" }) });
  await create.getByLabel("Name", { exact: true }).fill("Finance Team");
  await create.getByLabel("Ana Diaz (approver)").check();
  await create.getByRole("button", { name: "Create group" }).click();
  await create.locator('[data-field="name"] .field__error').getByText(/must start with a lowercase letter/).waitFor();
  await create.getByLabel("Name", { exact: true }).fill("finance");
  await create.getByLabel("Description (optional)").fill("Refunds over $500");
  await create.getByRole("button", { name: "Create group" }).click();
  const g = page.locator('article.group[data-group="finance"]');
  await g.getByRole("list", { name: "Members of finance" }).getByText("Ana Diaz").waitFor();
  await g.getByText("Refunds over $500").waitFor();
  // The same name again is refused next to the name.
  await create.getByLabel("Name", { exact: true }).fill("finance");
  await create.getByRole("button", { name: "Create group" }).click();
  await create.locator('[data-field="name"] .field__error').getByText(/group finance already exists/).waitFor();

  // Add the owner, remove Ana.
  await g.getByLabel("Add a member to finance").selectOption(ownerId);
  await g.getByRole("button", { name: "Add", exact: true }).click();
  await g.locator(`.group-member[data-member-id="${ownerId}"]`).waitFor();
  await g.getByRole("button", { name: "Remove Ana Diaz from finance" }).click();
  await g.locator(`.group-member[data-member-id="${ana.id}"]`).waitFor({ state: "detached" });
  const stored = await stead.api("GET", "/v1/groups/finance");
  assert.deepEqual(stored.members.map((m) => m.id), [ownerId]);
  await g.getByRole("button", { name: "Add", exact: true }).waitFor();
  await screenshot(page, "36-groups");

  // An approver reads both pages, and is offered no change.
  await stead.api("PATCH", "/v1/groups/finance", { add: [ana.id] });
  const reader = await openPage(t, browser);
  await signIn(reader, { ...stead, key: ana.key });
  await reader.getByRole("link", { name: "Members", exact: true }).click();
  await reader.locator(`tr.member[data-member-id="${ana.id}"]`).getByText("(you)").waitFor();
  assert.equal(await reader.getByRole("heading", { name: "Add a member" }).count(), 0);
  assert.equal(await reader.getByRole("button", { name: /^Remove/ }).count(), 0);
  assert.equal(await reader.getByText("ana@example.com").count(), 0, "an approver sees emails");
  // Her own email setting: all by default; requests only once she saves it.
  const mine = reader.locator("form", { has: reader.getByRole("heading", { name: "My notifications" }) });
  assert.equal(await mine.getByLabel("Email about approvals").inputValue(), "all");
  await mine.getByLabel("Email about approvals").selectOption("requests");
  await mine.getByRole("button", { name: "Save" }).click();
  await mine.getByText("Saved.").waitFor();
  assert.equal((await asKey(stead, ana.key, "GET", "/v1/me")).doc.notify.email, "requests");
  await reader.getByRole("link", { name: "Groups", exact: true }).click();
  await reader.locator('article.group[data-group="finance"]').getByText("Ana Diaz").waitFor();
  assert.equal(await reader.getByRole("heading", { name: "Create a group" }).count(), 0);
  assert.equal(await reader.getByRole("button").filter({ hasText: /Remove|Delete|Add/ }).count(), 0);
  await screenshot(reader, "37-groups-read-only");

  // Delete the group, after a confirmation.
  await g.getByRole("button", { name: "Delete group finance" }).click();
  await g.getByRole("button", { name: "Delete finance" }).click();
  await page.getByText("No groups yet.").waitFor();
  assert.equal((await stead.api("GET", "/v1/groups")).groups.length, 0);
});

test("remembered decisions: approve and allow again for 1h, the end user's next run goes through naming the rule, revoked on the Rules page the next asks again; refusals (no opt-in, over the max) sit next to what they name and decide nothing", opts, async (t) => {
  const stead = await startStead(t);
  const page = await openPage(t, browser);
  await signIn(page, stead);

  // The example as shipped does not opt in: the refusal names the setting,
  // in the form's own alert, and decides nothing.
  const plain = await stead.startRefund("o-1001", { endUser: "demo-user" });
  const c0 = await openCard(page, plain.id);
  await c0.getByRole("button", { name: "Approve and allow again for…" }).click();
  const form0 = c0.getByRole("group", { name: "Approve refundOrder and allow it again" });
  await form0.getByRole("button", { name: "Approve and allow again", exact: true }).click();
  await form0.getByRole("alert").getByText(/refundOrder of agent refunds does not allow remembered decisions in deployment 1; to allow them, set "approvals": \{"remember": \{"max": "24h"\}\}/).waitFor();
  assert.equal(await c0.getAttribute("data-status"), "pending");
  await screenshot(page, "38-remember-not-allowed");
  assert.equal((await stead.api("GET", `/v1/approvals/${plain.approval.id}`)).status, "pending");
  await c0.getByRole("button", { name: "Deny" }).click();
  await c0.locator(".badge", { hasText: "Denied" }).waitFor();

  await deployRefundsAgent(stead, "refunds-remember", { remember: { max: "24h" } });

  // Approve the first run's refund and allow it again for an hour.
  const first = await stead.startRefund("o-1001", { endUser: "demo-user" });
  assert.equal(first.status, "awaiting-approval");
  const c = await openCard(page, first.id);
  const open = c.getByRole("button", { name: "Approve and allow again for…" });
  await open.click();
  assert.equal(await open.getAttribute("aria-expanded"), "true");
  const form = c.getByRole("group", { name: "Approve refundOrder and allow it again" });
  await form.getByLabel("1 hour").check();
  assert.equal(await form.getByLabel("Any input for this end user").isChecked(), true, "any input is not the default scope");
  // While the form is open, Approve alone waits (the decision is the form's).
  assert.equal(await c.getByRole("button", { name: "Approve", exact: true }).isDisabled(), true);
  await screenshot(page, "39-remember-form");
  await form.getByRole("button", { name: "Approve and allow again", exact: true }).click();
  await c.locator(".badge", { hasText: "Approved" }).waitFor();
  const note = c.locator(".remembered");
  await note.getByText(new RegExp(`^Remembered: refundOrder for demo-user is allowed without asking until ${STAMP} \\(in (1 hour|5\\d minutes)\\) \\(revoke\\)$`)).waitFor();
  const ruleId = await note.getAttribute("data-rule-id");
  assert.match(ruleId, /^rul_/);
  await c.locator('.result [data-status="succeeded"]').waitFor();
  await screenshot(page, "40-remembered");
  const rule = await stead.api("GET", `/v1/rules/${ruleId}`);
  assert.equal(rule.approvalId, first.approval.id);
  assert.equal(rule.endUserId, "demo-user");
  assert.equal(rule.scope, "any");
  assert.equal(rule.state, "active");
  assert.equal(new Date(rule.expiresAt) - new Date(rule.createdAt), 3600_000);

  // The next run of the same end user (demo-user: the example seeds its
  // orders), started through the API, runs without asking; its trace names
  // the rule, and the run page links it.
  const second = await stead.api("POST", "/v1/agents/refunds/runs?wait=30s", { input: { orderId: "o-1002", reason: "late" }, endUserId: "demo-user" });
  assert.equal(second.status, "succeeded", JSON.stringify(second));
  const { events } = await stead.api("GET", `/v1/runs/${second.id}/events`);
  assert.equal(events.some((e) => e.type === "approval.requested"), false, "the second run asked for approval");
  const started = events.find((e) => e.type === "step.started" && e.step === "refund");
  assert.equal(started.data.policy.remembered, ruleId);
  await page.goto(stead.url + `/console/#/runs/${second.id}`);
  const policy = page.locator('.ev[data-type="step.started"][data-step="refund"] .policy--remembered');
  await policy.getByText(/^allow — allowed by remembered decision rul_\w+ \(owner, from approval apr_\w+, until /).waitFor();
  await screenshot(page, "41-run-remembered");
  await policy.getByRole("link", { name: ruleId }).click();
  await page.getByRole("heading", { name: `Rule ${ruleId}` }).waitFor();
  await page.locator(`.rule-card[data-rule-id="${ruleId}"]`).getByText("in force").waitFor();
  await screenshot(page, "42-rule");

  // The Rules page: the rule, who made it from which approval, its expiry;
  // revoked after a confirmation.
  await page.getByRole("link", { name: "Rules", exact: true }).click();
  const row = page.locator(`tr.rule[data-rule-id="${ruleId}"]`);
  await row.locator("th").getByText("refundOrder").waitFor();
  await row.getByRole("cell", { name: "refunds", exact: true }).waitFor();
  await row.locator(".rule__end-user").getByText("demo-user").waitFor();
  await row.getByText("any input").waitFor();
  await row.locator(".rule__maker").getByText("owner").waitFor();
  await row.getByRole("link", { name: first.approval.id }).waitFor();
  assert.match(await row.locator(".rule__expires").textContent(), /^in (1 hour|5\d minutes)$/);
  await row.locator('.badge[data-state="active"]').getByText("in force").waitFor();
  await screenshot(page, "43-rules");
  await row.getByRole("button", { name: `Revoke refundOrder for demo-user (${ruleId})` }).click();
  await row.getByRole("group", { name: `Confirm revoking ${ruleId}` }).getByRole("button", { name: "Revoke rule" }).click();
  const revokedRow = page.locator(`tr.rule[data-rule-id="${ruleId}"][data-state="revoked"]`);
  await revokedRow.getByText(/^by you \(owner, key_\w+\)/).waitFor();
  await page.getByText(`Revoked ${ruleId}: the next call of refundOrder for demo-user asks for approval again.`).waitFor();
  assert.equal((await stead.api("GET", `/v1/rules/${ruleId}`)).state, "revoked");
  await screenshot(page, "44-rule-revoked");
  // Revoked, it leaves the rules in force; "Show all" lists it.
  await page.getByRole("button", { name: "Refresh" }).click();
  await page.getByText("No rule is in force.").waitFor();
  await page.getByLabel("Show all (expired and revoked too)").check();
  await revokedRow.waitFor();

  // A viewer reads the rules, and is offered no revoke.
  const vi = await addMember(stead, "Vi Reed", { role: "viewer" });
  const reader = await openPage(t, browser, { width: 360, height: 740 });
  await signIn(reader, { ...stead, key: vi.key });
  await reader.getByRole("link", { name: "Rules", exact: true }).click();
  await reader.getByLabel("Show all (expired and revoked too)").check();
  await reader.locator(`tr.rule[data-rule-id="${ruleId}"][data-state="revoked"]`).waitFor();
  assert.equal(await reader.getByRole("button", { name: /^Revoke/ }).count(), 0);
  const width = await reader.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 360, `the rules page is ${width}px wide at 360px`);
  await screenshot(reader, "45-narrow-rules");

  // The third run asks again. On the approval's page, remembering it for
  // longer than the tool's max is refused next to the duration, and
  // decides nothing.
  const third = await stead.startRefund("o-1003", { endUser: "demo-user" });
  assert.equal(third.status, "awaiting-approval");
  await page.goto(stead.url + `/console/#/approvals/${third.approval.id}`);
  await page.getByRole("heading", { name: `Approval ${third.approval.id}` }).waitFor();
  const c3 = card(page, third.id);
  await c3.getByRole("button", { name: "Approve and allow again for…" }).click();
  const form3 = c3.getByRole("group", { name: "Approve refundOrder and allow it again" });
  await form3.getByLabel("Custom duration").fill("48h");
  assert.equal(await form3.getByLabel("Custom:").isChecked(), true, "typing a duration does not choose Custom");
  await form3.getByRole("button", { name: "Approve and allow again", exact: true }).click();
  const forError = form3.locator(".remember__for + .field__error");
  await forError.getByText("48h is longer than refundOrder allows: its approvals.remember.max is 24h; remember it for 24h or less").waitFor();
  assert.equal(await form3.getByLabel("Custom duration").getAttribute("aria-invalid"), "true");
  assert.equal(await form3.locator(".remember__for").getAttribute("aria-invalid"), "true");
  assert.equal(await c3.getAttribute("data-status"), "pending");
  await c3.locator(".badge", { hasText: "Pending" }).waitFor();
  assert.equal((await stead.api("GET", `/v1/approvals/${third.approval.id}`)).status, "pending");
  assert.equal(await runStatus(stead, third.id), "awaiting-approval");
  assert.equal((await stead.api("GET", "/v1/rules?status=all")).rules.length, 1, "a refused remember made a rule");
  await screenshot(page, "46-remember-refused");

  // Closed, the form leaves a plain Approve, which decides as before.
  await form3.getByRole("button", { name: "Cancel" }).click();
  await c3.getByRole("button", { name: "Approve", exact: true }).click();
  await c3.locator('.result [data-status="succeeded"]').waitFor();
  assert.equal(await c3.locator(".remembered").count(), 0);
});

test("email: the review link in the received mail opens a page that shows the call; approving there resumes the run, and the link is refused afterwards", opts, async (t) => {
  const noMailpit = mailpitMissing();
  if (noMailpit) return t.skip(noMailpit);
  const mp = await startMailpit(t);
  const stead = await startStead(t, { args: ["--smtp", mp.smtp] });
  const ana = await addMember(stead, "Ana Diaz", { email: "ana@example.com" });
  const run = await stead.startRefund("o-1001");
  assert.equal(run.status, "awaiting-approval");

  // The mail as Ana's mail client has it, fetched from mailpit's API.
  const mail = await mp.waitFor("ana@example.com");
  assert.equal(mail.Subject, "Approval needed: refundOrder for refunds (end user demo-user)");
  const links = [mail.Text, mail.HTML].map((part) => (part.match(/http:\/\/127\.0\.0\.1:\d+\/review\/rvw_[A-Za-z0-9_.-]+/) || [""])[0]);
  assert.ok(links[0].startsWith(stead.url + "/review/"), "no review link in the mail's text: " + mail.Text);
  assert.equal(links[1], links[0], "the HTML and text parts link differently");

  // Chromium opens it, as a click in the mail would: the call, and a form.
  const page = await openPage(t, browser);
  await page.goto(links[0]);
  await page.getByRole("heading", { name: "Review: refundOrder for refunds", level: 1 }).waitFor();
  await page.getByText('"orderId": "o-1001"').waitFor();
  await page.getByText("demo-user").first().waitFor();
  await page.getByText("You decide as Ana Diaz (approver)").waitFor();
  await screenshot(page, "email-01-review-page");
  // Opening it decided nothing (a mail scanner fetching it does no more).
  assert.equal((await stead.api("GET", `/v1/approvals/${run.approval.id}`)).status, "pending");

  await page.getByLabel(/^Note/).fill("approved from the mail");
  await page.getByRole("button", { name: "Approve", exact: true }).click();
  await page.getByRole("heading", { name: "Approved", level: 1 }).waitFor();
  await page.getByText("the run continues with exactly the input shown below").waitFor();
  await screenshot(page, "email-02-approved");
  await until("the run to succeed", async () => (await runStatus(stead, run.id)) === "succeeded");
  const a = await stead.api("GET", `/v1/approvals/${run.approval.id}`);
  assert.equal(a.status, "approved");
  assert.equal(a.decidedBy, "review:" + ana.id);
  assert.equal(a.decidedByName, "Ana Diaz");
  assert.equal(a.note, "approved from the mail");

  // The same link again: refused, saying who decided, with no form.
  const res = await page.goto(links[0]);
  assert.equal(res.status(), 409);
  await page.getByRole("heading", { name: "Already approved", level: 1 }).waitFor();
  await page.getByText(/was already approved by Ana Diaz/).waitFor();
  assert.equal(await page.getByRole("button", { name: "Approve", exact: true }).count(), 0);
  await screenshot(page, "email-03-refused");
});

test("webhooks: the owner adds an endpoint (its secret shown once and copied), a ping's 500 is shown and retried from the log, a gated run's approval.requested arrives signed with that secret, a range is retried, a disabled endpoint is enabled, the secret rotated and the endpoint deleted; a developer has no Webhooks entry", { ...opts, timeout: 180_000 }, async (t) => {
  const stead = await startStead(t);
  const rx = await startReceiver(t); // 500 to its first request, 200 after
  const verify = oracle();
  if (!verify) t.diagnostic("notify/oracle is not installed (make webhook-oracle): signatures are checked with node's crypto only");
  const page = await openPage(t, browser);
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: stead.url });
  await signIn(page, stead);
  await page.getByRole("link", { name: "Webhooks", exact: true }).click();
  await page.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
  await page.getByText("No endpoints yet.").waitFor();
  const form = page.locator("form", { has: page.getByRole("heading", { name: "Add an endpoint" }) });

  // The event types offered are the API's, in its order.
  const unknown = await asKey(stead, stead.key, "POST", "/v1/webhooks", { url: rx.url, events: ["no.such-type"] });
  assert.equal(unknown.status, 400);
  const apiTypes = unknown.doc.error.details.fields[0].message.match(/the types are (.*)$/)[1].split(", ");
  await form.getByLabel("approval.requested", { exact: true }).waitFor();
  assert.deepEqual(await form.locator("#webhook-events input[type=checkbox]").evaluateAll((bs) => bs.map((b) => b.value)), apiTypes);

  // A URL the API refuses: its words next to the URL, nothing added.
  await form.getByLabel("URL", { exact: true }).fill("ftp://127.0.0.1/hooks");
  await form.getByRole("button", { name: "Add endpoint" }).click();
  await form.locator('[data-field="url"] .field__error').getByText(/^must be an absolute http or https URL such as https:\/\/hooks\.example\.com\/stead \(got "ftp:\/\/127\.0\.0\.1\/hooks"\)$/).waitFor();
  assert.equal(await form.getByLabel("URL", { exact: true }).getAttribute("aria-invalid"), "true");
  assert.equal((await stead.api("GET", "/v1/webhooks")).webhooks.length, 0);
  await screenshot(page, "webhooks-01-url-error");

  // Add it: two event types, one agent, with inputs.
  await form.getByLabel("URL", { exact: true }).fill(rx.url);
  await form.getByLabel("approval.requested", { exact: true }).check();
  await form.getByLabel("approval.approved", { exact: true }).check();
  await form.getByLabel("refunds", { exact: true }).check();
  await form.getByLabel("Include the tool's input in approval events").check();
  await form.getByRole("button", { name: "Add endpoint" }).click();
  await form.getByText(/^Added whe_\w+\. Copy its secret below now, then ping it\.$/).waitFor();
  const card = page.locator("article.webhook").first();
  const id = await card.getAttribute("data-webhook-id");
  assert.match(id, /^whe_/);
  assert.equal(await form.locator('[data-field="url"] .field__error').isVisible(), false);
  const secretField = card.getByLabel(`Signing secret of ${id} — shown this once`);
  const secret = await secretField.inputValue();
  assert.match(secret, /^whsec_[A-Za-z0-9+/=]+$/);
  await card.locator(".secret-once").getByText("it is not shown again").waitFor();
  await card.getByRole("button", { name: "Copy" }).click();
  await card.getByText("Copied.").waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
  assert.equal(await card.getAttribute("data-state"), "enabled");
  assert.deepEqual(await card.locator('[data-fact="Events"] dd .tag').allTextContents(), ["approval.requested", "approval.approved"]);
  assert.equal(await card.locator('[data-fact="Agents"] dd').textContent(), "refunds");
  assert.equal(await card.locator('[data-fact="Tool input"] dd').textContent(), "included in approval events");
  await screenshot(page, "webhooks-02-added");
  const stored = await stead.api("GET", `/v1/webhooks/${id}`);
  assert.deepEqual([stored.url, stored.events, stored.agents, stored.includeInput], [rx.url, ["approval.requested", "approval.approved"], ["refunds"], true]);

  // Ping: the receiver fails its first request, and the card says so.
  await card.getByRole("button", { name: `Ping ${rx.url}` }).click();
  const pinged = card.locator(".webhook__ping");
  await pinged.getByText(/^Ping failed: 500 Internal Server Error in \d+ ms/).waitFor();
  await pinged.getByText("receiver not ready yet (it fails its first request)").waitFor();
  assert.equal(rx.received.length, 1);
  const ping = rx.received[0];
  assert.equal(ping.payload.type, "webhook.ping");
  assert.equal(ping.status, 500);
  assert.match(ping.id, /^msg_/);
  assert.ok(signedBy(ping, secret).ok, "the ping is not signed with the secret shown: " + ping.signature);
  if (verify) assert.equal(verify(ping, secret).type, "webhook.ping");
  await screenshot(page, "webhooks-03-ping-failed");

  // The secret was shown once: after a reload it is nowhere on the page.
  await page.reload();
  await page.locator(`article.webhook[data-webhook-id="${id}"]`).waitFor();
  assert.equal(await page.locator(".secret-once").count(), 0);
  assert.ok(!(await page.content()).includes(secret.slice(6)), "the secret is on the page after a reload");

  // The delivery log: the failed ping, with its attempt; retried, it is
  // delivered under the same webhook-id.
  await page.getByRole("link", { name: `Delivery log of ${rx.url}` }).click();
  await page.getByRole("heading", { name: `Webhook ${id}`, level: 1 }).waitFor();
  const pingItem = page.locator(`li.delivery[data-delivery-id="${ping.id}"]`);
  await pingItem.locator('[data-status="failed"]').first().waitFor();
  assert.equal(await pingItem.getAttribute("data-status"), "failed");
  await pingItem.getByText("webhook.ping", { exact: true }).waitFor();
  await pingItem.getByText("1 try", { exact: true }).waitFor();
  await pingItem.locator(".attempt").getByText(/^500 Internal Server Error in \d+ ms$/).waitFor();
  await pingItem.locator(".attempt__response").getByText("receiver not ready yet (it fails its first request)").waitFor();
  await screenshot(page, "webhooks-04-log-ping-failed");
  await pingItem.getByRole("button", { name: "Retry" }).click();
  await page.locator(`li.delivery[data-delivery-id="${ping.id}"][data-status="delivered"]`).waitFor();
  await pingItem.getByText("2 tries", { exact: true }).waitFor();
  await pingItem.locator(".attempt").nth(1).getByText(/^200 OK in \d+ ms$/).waitFor();
  const again = await rx.waitFor("the retried ping", (r) => r.status === 200);
  assert.equal(again.id, ping.id, "a retry changed the webhook-id");

  // A gated run started through the API: its approval.requested arrives,
  // with the input, signed with the secret copied above, and the log
  // (following by itself) shows it delivered, newest first.
  const run = await stead.api("POST", "/v1/agents/refunds/runs", { input: { orderId: "o-1001", reason: "damaged" }, endUserId: "demo-user" });
  const requested = await rx.waitFor("approval.requested", (r) => r.payload && r.payload.type === "approval.requested");
  assert.equal(requested.status, 200);
  assert.equal(requested.payload.data.runId, run.id);
  assert.equal(requested.payload.data.tool, "refundOrder");
  assert.deepEqual(requested.payload.data.input, { orderId: "o-1001", reason: "damaged" });
  assert.equal(requested.headers["content-type"], "application/json");
  const sig = signedBy(requested, secret);
  assert.ok(sig.ok && sig.count === 1, `webhook-signature ${requested.signature} is not the HMAC of id.timestamp.body with the secret shown`);
  assert.ok(Math.abs(Number(requested.timestamp) - Date.now() / 1000) < 60, "webhook-timestamp is not now: " + requested.timestamp);
  if (verify) assert.equal(verify(requested, secret).data.runId, run.id);
  const reqItem = page.locator(`li.delivery[data-delivery-id="${requested.id}"]`);
  await page.locator(`li.delivery[data-delivery-id="${requested.id}"][data-status="delivered"][data-type="approval.requested"]`).waitFor();
  assert.equal(await page.locator("li.delivery").first().getAttribute("data-delivery-id"), requested.id);
  await reqItem.getByRole("link", { name: run.id }).waitFor();
  await reqItem.getByRole("button", { name: "Show body" }).click();
  await reqItem.locator(".delivery__body pre").getByText('"type": "approval.requested"').waitFor();
  await reqItem.locator(".delivery__body pre").getByText(`"runId": "${run.id}"`).waitFor();
  await screenshot(page, "webhooks-05-log-delivered");

  // Paged: one a page, Show more brings the older one.
  await page.goto(stead.url + `/console/#/webhooks/${id}?limit=1`);
  await page.locator(`li.delivery[data-delivery-id="${requested.id}"]`).waitFor();
  assert.equal(await page.locator("li.delivery").count(), 1);
  await page.getByRole("button", { name: "Show more" }).click();
  await page.locator(`li.delivery[data-delivery-id="${ping.id}"]`).waitFor();
  assert.deepEqual(await page.locator("li.delivery").evaluateAll((ls) => ls.map((l) => l.dataset.deliveryId)), [requested.id, ping.id]);
  await page.getByRole("button", { name: "Show more" }).waitFor({ state: "hidden" });

  // Retry a time range: an until before the since is refused next to it;
  // the last hour retries both, each under its webhook-id.
  await page.getByText("Retry a time range", { exact: true }).click();
  const range = page.getByRole("form", { name: "Retry a time range" });
  const twoHoursAgo = await page.evaluate(() => {
    const d = new Date(Date.now() - 7200_000), p = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  });
  await range.getByLabel("Until (optional)").fill(twoHoursAgo);
  await range.getByRole("button", { name: "Retry the range" }).click();
  await range.locator('[data-field="until"] .field__error').getByText(/^must not be before since/).waitFor();
  await range.getByLabel("Until (optional)").fill("");
  const before = rx.received.length;
  await range.getByRole("button", { name: "Retry the range" }).click();
  await range.getByText("Retrying 2 deliveries now, each under its webhook-id.").waitFor();
  await until("both deliveries again", () => {
    const ids = rx.received.slice(before).map((r) => r.id);
    return ids.includes(ping.id) && ids.includes(requested.id);
  });
  await page.locator(`li.delivery[data-delivery-id="${requested.id}"][data-status="delivered"]`).getByText("2 tries", { exact: true }).waitFor();

  // Disabled by hand (through the API): the card, followed by itself,
  // stands out with who and when; a retry is refused; Enable turns it on.
  await stead.api("PATCH", `/v1/webhooks/${id}`, { enabled: false });
  const detail = page.locator(`article.webhook[data-webhook-id="${id}"]`);
  await page.locator(`article.webhook[data-webhook-id="${id}"][data-state="disabled"]`).waitFor();
  await detail.locator(".webhook__disabled").getByText(new RegExp(`^Disabled ${STAMP} \\((just now|\\d+ seconds ago)\\): disabled by .*key_\\w+.*\\.$`)).waitFor();
  assert.equal(await detail.locator(".badge").textContent(), "disabled");
  const reqAgain = page.locator(`li.delivery[data-delivery-id="${requested.id}"]`);
  await reqAgain.getByRole("button", { name: "Retry" }).click();
  await reqAgain.getByRole("alert").getByText(/is disabled \(disabled by .*\); enable it first/).waitFor();
  await screenshot(page, "webhooks-06-disabled");
  await detail.getByRole("button", { name: `Enable ${rx.url}` }).click();
  await page.locator(`article.webhook[data-webhook-id="${id}"][data-state="enabled"]`).waitFor();
  assert.equal(await detail.locator(".webhook__disabled .msg").isVisible(), false);
  assert.equal((await stead.api("GET", `/v1/webhooks/${id}`)).state, "enabled");

  // Rotate: a new secret, shown once; the previous one signs beside it for
  // a day, and a ping carries both signatures, the new one first.
  await detail.getByRole("button", { name: `Rotate the secret of ${rx.url}` }).click();
  await detail.getByRole("group", { name: `Confirm rotating the secret of ${id}` }).getByRole("button", { name: "Make a new secret" }).click();
  const rotated = await detail.getByLabel(`New signing secret of ${id} — shown this once`).inputValue();
  assert.match(rotated, /^whsec_/);
  assert.notEqual(rotated, secret);
  await detail.locator(".webhook__previous").getByText(new RegExp(`^signs beside the current one until ${STAMP} \\(in (24|23) hours\\)$`)).waitFor();
  const after = await stead.api("GET", `/v1/webhooks/${id}`);
  const overlap = new Date(after.previousSecretUntil) - Date.now();
  assert.ok(overlap > 23.9 * 3600_000 && overlap <= 24 * 3600_000, "previousSecretUntil is not a day away: " + after.previousSecretUntil);
  assert.equal(await detail.locator(".webhook__previous").textContent(), `signs beside the current one until ${await page.evaluate(([iso, o]) => new Intl.DateTimeFormat(undefined, o).format(new Date(iso)), [after.previousSecretUntil, STAMP_OPTIONS])} (in 24 hours)`);
  await detail.getByRole("button", { name: `Ping ${rx.url}` }).click();
  await detail.locator(".webhook__ping").getByText(/^Ping delivered: 200 OK in \d+ ms/).waitFor();
  const last = rx.received.at(-1);
  assert.equal(last.payload.type, "webhook.ping");
  assert.deepEqual([signedBy(last, rotated).index, signedBy(last, secret).index, signedBy(last, secret).count], [0, 1, 2]);
  if (verify) {
    assert.equal(verify(last, rotated).type, "webhook.ping");
    assert.equal(verify(last, secret).type, "webhook.ping");
  }
  // The log (still one a page) put the new ping on top of those shown.
  await page.locator(`li.delivery[data-delivery-id="${last.id}"][data-status="delivered"]`).waitFor();
  assert.deepEqual(await page.locator("li.delivery").evaluateAll((ls) => ls.map((l) => l.dataset.deliveryId)), [last.id, requested.id, ping.id]);
  await screenshot(page, "webhooks-07-rotated");

  // At 390 px: the list and the log, a body open, nothing scrolls sideways.
  const narrow = await openPage(t, browser, { width: 390, height: 844 });
  await signIn(narrow, stead);
  await narrow.goto(stead.url + "/console/#/webhooks");
  await narrow.locator(`article.webhook[data-webhook-id="${id}"]`).getByText("signs beside the current one", { exact: false }).waitFor();
  let width = await narrow.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `#/webhooks is ${width}px wide at 390px`);
  await screenshot(narrow, "webhooks-08-narrow");
  await narrow.goto(stead.url + `/console/#/webhooks/${id}`);
  const narrowReq = narrow.locator(`li.delivery[data-delivery-id="${requested.id}"]`);
  await narrowReq.getByRole("button", { name: "Show body" }).click();
  await narrowReq.locator(".delivery__body pre").waitFor();
  await narrow.getByText("Retry a time range", { exact: true }).click();
  await narrow.getByLabel("Until (optional)").waitFor();
  width = await narrow.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `#/webhooks/${id} is ${width}px wide at 390px`);
  await screenshot(narrow, "webhooks-09-narrow-log");

  // A developer has no Webhooks entry, and the page says whose it is.
  const dev = await addMember(stead, "Dev Okafor", { role: "developer" });
  const devPage = await openPage(t, browser);
  await signIn(devPage, { ...stead, key: dev.key });
  await devPage.getByRole("link", { name: "Runs", exact: true }).waitFor();
  assert.equal(await devPage.getByRole("link", { name: "Webhooks", exact: true }).count(), 0, "a developer sees the Webhooks entry");
  assert.equal(await devPage.locator('nav a[data-section="webhooks"]').isHidden(), true);
  await devPage.goto(stead.url + "/console/#/webhooks");
  await devPage.getByText(/^Owners only\. Webhook endpoints choose where the project's events/).waitFor();
  assert.equal(await devPage.locator("article.webhook").count(), 0);
  assert.equal((await asKey(stead, dev.key, "GET", "/v1/webhooks")).status, 403);
  await screenshot(devPage, "webhooks-10-developer");

  // Delete, after a confirmation: the endpoint and its log are gone.
  await page.getByRole("link", { name: "Webhooks", exact: true }).click();
  const listed = page.locator(`article.webhook[data-webhook-id="${id}"]`);
  await listed.getByRole("button", { name: `Delete ${rx.url}` }).click();
  const confirm = listed.getByRole("group", { name: `Confirm deleting ${id}` });
  await confirm.getByText(/its delivery log is deleted with it/).waitFor();
  await screenshot(page, "webhooks-11-delete-confirm");
  await confirm.getByRole("button", { name: "Cancel" }).click();
  await listed.getByRole("button", { name: `Delete ${rx.url}` }).click();
  await confirm.getByRole("button", { name: "Delete endpoint" }).click();
  await page.getByText("No endpoints yet.").waitFor();
  await page.getByText(`Deleted the endpoint ${rx.url} and its delivery log.`).waitFor();
  assert.equal((await stead.api("GET", "/v1/webhooks")).webhooks.length, 0);
  assert.equal((await asKey(stead, stead.key, "GET", `/v1/webhooks/${id}/deliveries`)).status, 404);
});

// brand deploys the example with a customer-facing label on refundOrder and
// the project's branding (a data: logo, an accent colour).
const LOGO = "data:image/svg+xml;base64," + Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32"><rect width="32" height="32" rx="6" fill="#0a7d5a"/></svg>').toString("base64");
async function brand(stead) {
  return deployExample(stead, "refunds-branded", (cfg) => {
    cfg.branding = { name: "Acme Shop", logoUrl: LOGO, accentColor: "#0a7d5a" };
    cfg.agents.refunds.tools.refundOrder.label = "Refund";
  });
}

test("the status page and embed speak to customers: the tool's label, the project's name, logo and accent; no \"updates by itself\" once nothing will change", opts, async (t) => {
  const stead = await startStead(t);
  await brand(stead);
  const run = await stead.startRefund("o-1001");
  const token = (await stead.cli("token", "demo-user")).trim();

  const page = await openPage(t, browser, { width: 390, height: 844 });
  await page.goto(`${stead.url}/status/${run.id}#token=${token}`);
  const status = page.locator('#status[data-stead-status="awaiting-approval"]');
  await status.getByText(/^Waiting for approval of Refund — requested (just now|\d+ seconds? ago)$/).waitFor();
  assert.equal(await page.getByText("refundOrder").count(), 0, "the export name is shown to the customer");
  await page.locator("#brand-name").getByText("Acme Shop", { exact: true }).waitFor();
  await page.getByRole("heading", { name: "Your request to Acme Shop", level: 1 }).waitFor();
  assert.equal(await page.locator("#brand-logo").getAttribute("src"), LOGO);
  assert.equal(await page.locator("#brand-logo").getAttribute("alt"), "Acme Shop logo");
  assert.equal(await page.evaluate(() => getComputedStyle(document.getElementById("brand")).borderBottomColor), "rgb(10, 125, 90)");
  await page.getByText("This page updates by itself.").waitFor();
  assert.match(await page.title(), /· Acme Shop$/);
  assert.deepEqual(await axeProblems(page), [], "axe: the status page, waiting");
  await screenshot(page, "status-01-branded-waiting-390");

  await stead.cli("approve", run.approval.id);
  await page.locator('#status[data-stead-status="succeeded"]').getByText("Done", { exact: true }).waitFor();
  await page.getByText("This page updates by itself.").waitFor({ state: "hidden" });
  assert.deepEqual(await axeProblems(page), [], "axe: the status page, done");
  await screenshot(page, "status-02-branded-done-390");

  // An invalid link: no promise of updates either.
  const bad = await openPage(t, browser, { width: 1280, height: 800 });
  await bad.goto(`${stead.url}/status/${run.id}`);
  await bad.locator('[data-stead-status="unauthenticated"]').waitFor();
  assert.equal(await bad.getByText("This page updates by itself.").isVisible(), false);
  const other = (await stead.cli("token", "someone-else")).trim();
  const wrong = await openPage(t, browser, { width: 1280, height: 800 });
  await wrong.goto(`${stead.url}/status/${run.id}#token=${other}`);
  await wrong.locator('[data-stead-status="not-found"]').waitFor();
  assert.equal(await wrong.getByText("This page updates by itself.").isVisible(), false);
  assert.deepEqual(await axeProblems(wrong), [], "axe: the status page, not found");
  await screenshot(wrong, "status-03-not-found-1280");

  // embed.js on another origin: the label and the accent.
  const second = await stead.startRefund("o-1002");
  const template = await readFile(fileURLToPath(new URL("fixtures/embed-example.html", import.meta.url)), "utf8");
  const html = template.replaceAll("{{STEAD_URL}}", stead.url).replaceAll("{{RUN_ID}}", second.id).replaceAll("{{CUSTOMER_TOKEN}}", token);
  const site = await serveStatic(t, html);
  const embed = await openPage(t, browser, { width: 1280, height: 800 });
  await embed.goto(site);
  await embed.locator('#refund-status [data-state="awaiting-approval"]').getByText(/^Waiting for approval of Refund/).waitFor();
  await until("the accent", () => embed.evaluate(() => getComputedStyle(document.querySelector(".stead-status")).borderTopColor === "rgb(10, 125, 90)"));
  assert.deepEqual(await axeProblems(embed), [], "axe: embed.js on a customer page");
  await screenshot(embed, "status-04-embed-branded-1280");
});

// colours reads CSS colours as the page paints them (through a canvas, so
// oklch() and relative colours come out as sRGB) and the WCAG contrast
// ratio of the first against each other: {rgb: [[r, g, b], …], contrast: […]}.
async function colours(page, ...css) {
  return page.evaluate((list) => {
    const ctx = Object.assign(document.createElement("canvas"), { width: 1, height: 1 }).getContext("2d", { willReadFrequently: true });
    const rgb = list.map((c) => {
      ctx.clearRect(0, 0, 1, 1);
      ctx.fillStyle = "#000";
      ctx.fillStyle = c;
      ctx.fillRect(0, 0, 1, 1);
      return [...ctx.getImageData(0, 0, 1, 1).data.slice(0, 3)];
    });
    const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
      .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
    const ratio = (x, y) => { const [a, b] = [lum(x), lum(y)].sort((p, q) => q - p); return (a + 0.05) / (b + 0.05); };
    return { rgb, contrast: rgb.slice(1).map((c) => ratio(rgb[0], c)) };
  }, css);
}

test("the status page and embed in dark mode (prefers-color-scheme): a dark surface, the project's accent kept in its hue and readable (3:1 against its background, a near-black accent too), the light look unchanged; axe-core clean at 1280 and 390 px", opts, async (t) => {
  const stead = await startStead(t);
  await brand(stead);
  const green = await stead.startRefund("o-1001");
  // A near-black accent: on a dark page it must be lifted to be seen.
  await deployExample(stead, "refunds-dark-accent", (cfg) => {
    cfg.branding = { name: "Night Owl Books", accentColor: "#14202e" };
    cfg.agents.refunds.tools.refundOrder.label = "Refund";
  });
  const navy = await stead.startRefund("o-1002");
  const token = (await stead.cli("token", "demo-user")).trim();

  // Light, as before: the accent exactly as configured, a light surface.
  const light = await openPage(t, browser, { width: 1280, height: 800 });
  await light.emulateMedia({ colorScheme: "light" });
  await light.goto(`${stead.url}/status/${navy.id}#token=${token}`);
  await light.locator('#status[data-stead-status="awaiting-approval"]').waitFor();
  await light.locator("#brand-name").getByText("Night Owl Books", { exact: true }).waitFor();
  assert.equal(await light.evaluate(() => getComputedStyle(document.getElementById("brand")).borderBottomColor), "rgb(20, 32, 46)");
  assert.equal(await light.evaluate(() => getComputedStyle(document.body).backgroundColor), "rgb(246, 247, 249)");

  for (const [width, height] of [[1280, 800], [390, 844]]) {
    for (const [name, r, hue] of [["green", green, 1], ["navy", navy, 2]]) {
      const page = await openPage(t, browser, { width, height });
      await page.emulateMedia({ colorScheme: "dark" });
      await page.goto(`${stead.url}/status/${r.id}#token=${token}`);
      const box = page.locator('#status[data-stead-status="awaiting-approval"]');
      await box.getByText(/^Waiting for approval of Refund/).waitFor();
      const look = await page.evaluate(() => {
        const cs = (el) => getComputedStyle(el);
        const brandEl = document.getElementById("brand"), statusBox = document.querySelector(".stead-status");
        return {
          body: cs(document.body).backgroundColor, text: cs(document.body).color, scheme: cs(document.documentElement).colorScheme,
          header: cs(brandEl).backgroundColor, accent: cs(brandEl).borderBottomColor,
          box: cs(statusBox).backgroundColor, boxAccent: cs(statusBox).borderTopColor,
        };
      });
      assert.equal(look.body, "rgb(13, 17, 23)", `the status page's dark background (${name}, ${width}px)`);
      assert.equal(look.text, "rgb(230, 237, 243)");
      assert.match(look.scheme, /dark/);
      // The accent against the header it underlines, and against the status box it tops.
      const c = await colours(page, look.accent, look.header, look.body);
      assert.ok(c.contrast.every((x) => x >= 3), `the ${name} accent ${look.accent} is not readable on the dark page: ${c.contrast}`);
      const [rgb] = c.rgb;
      assert.equal(rgb.indexOf(Math.max(...rgb)), hue, `the ${name} accent lost its hue: ${rgb}`);
      const b = await colours(page, look.boxAccent, look.box);
      assert.ok(b.contrast[0] >= 3, `the ${name} accent on the status box: ${b.contrast[0]}`);
      assert.deepEqual(await axeProblems(page), [], `axe: the status page in dark (${name}, ${width}px)`);
      await screenshot(page, `status-dark-${name}-${width}`);
    }

    // embed.js on another origin's page, dark.
    const template = await readFile(fileURLToPath(new URL("fixtures/embed-example.html", import.meta.url)), "utf8");
    const html = template.replaceAll("{{STEAD_URL}}", stead.url).replaceAll("{{RUN_ID}}", navy.id).replaceAll("{{CUSTOMER_TOKEN}}", token);
    const site = await serveStatic(t, html);
    const embed = await openPage(t, browser, { width, height });
    await embed.emulateMedia({ colorScheme: "dark" });
    await embed.goto(site);
    await embed.locator('#refund-status [data-state="awaiting-approval"]').getByText(/^Waiting for approval of Refund/).waitFor();
    await until("the embed's dark look", () => embed.evaluate(() => getComputedStyle(document.querySelector(".stead-status")).backgroundColor === "rgb(43, 33, 17)"));
    const look = await embed.evaluate(() => {
      const cs = getComputedStyle(document.querySelector(".stead-status"));
      return { bg: cs.backgroundColor, text: cs.color, accent: cs.borderTopColor, detail: getComputedStyle(document.querySelector(".stead-status__detail")).color };
    });
    const c = await colours(embed, look.accent, look.bg);
    assert.ok(c.contrast[0] >= 3, `the embed's accent ${look.accent} on ${look.bg}: ${c.contrast[0]}`);
    assert.equal(c.rgb[0].indexOf(Math.max(...c.rgb[0])), 2, `the embed's accent lost its hue: ${c.rgb[0]}`);
    assert.ok((await colours(embed, look.text, look.bg)).contrast[0] >= 4.5, "the embed's text on its dark background");
    assert.deepEqual(await axeProblems(embed), [], `axe: embed.js in dark (${width}px)`);
    await screenshot(embed, `status-dark-embed-${width}`);
  }

  // Done, in dark at 390 px.
  await stead.cli("approve", green.approval.id);
  const done = await openPage(t, browser, { width: 390, height: 844 });
  await done.emulateMedia({ colorScheme: "dark" });
  await done.goto(`${stead.url}/status/${green.id}#token=${token}`);
  await done.locator('#status[data-stead-status="succeeded"]').getByText("Done", { exact: true }).waitFor();
  assert.equal(await done.evaluate(() => getComputedStyle(document.querySelector(".stead-status")).backgroundColor), "rgb(16, 38, 26)");
  assert.deepEqual(await axeProblems(done), [], "axe: the status page, done, in dark");
  await screenshot(done, "status-dark-done-390");
});

test("the inbox by keyboard: j/k move, x selects, a approves, d denies, e edits (and keys typed into the editor stay there)", opts, async (t) => {
  const stead = await startStead(t);
  const runs = [];
  for (const id of ["o-1001", "o-1002", "o-1003"]) runs.push(await stead.startRefund(id, { reason: "keys " + id }));
  const page = await openPage(t, browser, { width: 1280, height: 900 });
  await signIn(page, stead);
  for (const r of runs) await row(page, r.id).waitFor();
  // Newest first: the third run's approval is current.
  const current = page.locator('.inbox-row[aria-current="true"]');
  assert.equal(await current.getAttribute("data-run-id"), runs[2].id);
  await card(page, runs[2].id).waitFor();
  for (const r of runs) {
    const cells = row(page, r.id);
    await cells.locator(".inbox-row__tool").getByText("refundOrder").waitFor();
    await cells.locator(".inbox-row__agent").getByText("refunds").waitFor();
    await cells.locator(".inbox-row__user").getByText("demo-user").waitFor();
    assert.match(await cells.locator(".inbox-row__age").textContent(), /^requested (just now|\d+ seconds ago)$/);
    assert.match(await cells.locator(".inbox-row__expires").textContent(), /^expires in 1[45]:\d\d$/);
  }
  await page.locator("body").click({ position: { x: 5, y: 300 } });
  await page.keyboard.press("j");
  assert.equal(await current.getAttribute("data-run-id"), runs[1].id);
  await card(page, runs[1].id).waitFor();
  await page.keyboard.press("j");
  await page.keyboard.press("j"); // stays on the last
  assert.equal(await current.getAttribute("data-run-id"), runs[0].id);
  await page.keyboard.press("k");
  assert.equal(await current.getAttribute("data-run-id"), runs[1].id);
  // The detail pane: input, reason, run link and history.
  const c1 = card(page, runs[1].id);
  await c1.getByText('"reason": "keys o-1002"').waitFor();
  await c1.getByText("refundOrder requires approval").waitFor();
  await c1.getByRole("link", { name: runs[1].id }).waitFor();
  const hist = page.getByRole("region", { name: `History of run ${runs[1].id}` });
  await hist.locator('.history__item[data-type="approval.requested"]').waitFor();
  await hist.locator('.history__item[data-type="run.created"]').getByText(/for end user demo-user/).waitFor();

  // x selects the current row for bulk approval, and again unselects it.
  await page.keyboard.press("x");
  await page.getByRole("button", { name: "Approve selected (1)" }).waitFor();
  assert.equal(await page.getByLabel(`Select refundOrder for run ${runs[1].id}`).isChecked(), true);
  await page.keyboard.press("x");
  await page.getByRole("button", { name: "Approve selected (0)" }).waitFor();
  await screenshot(page, "keys-01-inbox-1280");

  // a approves the current one; its run succeeds; its row says so.
  await page.keyboard.press("a");
  await c1.locator(".badge", { hasText: "Approved" }).waitFor();
  await c1.locator('.result [data-status="succeeded"]').waitFor();
  await row(page, runs[1].id).locator(".badge", { hasText: "approved" }).waitFor();
  assert.equal(await runStatus(stead, runs[1].id), "succeeded");

  // e opens the editor on the next; keys typed there are text, not commands.
  await page.keyboard.press("j");
  const c0 = card(page, runs[0].id);
  await c0.waitFor();
  await page.keyboard.press("e");
  const editor = c0.getByLabel("Input for refundOrder (JSON)");
  await editor.waitFor();
  assert.equal(await editor.evaluate((el) => el === document.activeElement), true, "e did not focus the editor");
  await editor.fill('{"orderId": "o-1001", "reason": "keys edited"}');
  await page.keyboard.type(" ad");
  await c0.locator(".syntax.bad").waitFor();
  assert.equal((await stead.api("GET", `/v1/approvals/${runs[0].approval.id}`)).status, "pending", "a key typed in the editor decided");
  await editor.fill('{"orderId": "o-1001", "reason": "keys edited"}');
  await c0.locator(".syntax.ok").getByText("Matches the input schema of refundOrder.").waitFor();
  await screenshot(page, "keys-02-editing-1280");
  await c0.getByRole("button", { name: "Cancel edit" }).click();

  // d denies it.
  await page.keyboard.press("d");
  await c0.locator(".badge", { hasText: "Denied" }).waitFor();
  await until("the denied run to fail", async () => (await runStatus(stead, runs[0].id)) === "failed");

  // Filters: by tool and age; nothing matches an agent with no approvals.
  await page.getByLabel("Tool", { exact: true }).selectOption("refundOrder");
  await page.getByLabel("Age", { exact: true }).selectOption("1h");
  await page.getByText("No pending approval matches these filters.").waitFor();
  assert.match(page.url(), /tool=refundOrder&age=1h/);
  await page.getByLabel("Age", { exact: true }).selectOption("new");
  await row(page, runs[2].id).waitFor();
  assert.equal(await page.getByText("No pending approval matches these filters.").isVisible(), false);
  await page.getByLabel("Agent", { exact: true }).selectOption("refunds");
  await page.locator(".inbox__count").getByText("3 approvals").waitFor();
});

test("the Decided and Expired tabs: compact rows (who decided, the note's start, the quorum's result), the detail pane (input, reason, run link, history, decision), j/k, filters by agent, tool and age; nothing to decide there", opts, async (t) => {
  const stead = await startStead(t);
  const ana = await addMember(stead, "Ana Diaz");
  const bo = await addMember(stead, "Bo Li");
  await stead.api("POST", "/v1/groups", { name: "finance", members: [ana.id, bo.id] });
  const approved = await stead.startRefund("o-1001", { reason: "settled approved" });
  const longNote = "Checked the order history with the warehouse; the parcel was crushed in transit, refund in full";
  await stead.cli("approve", approved.approval.id, "--note", longNote);
  const denied = await stead.startRefund("o-1002", { reason: "settled denied", endUser: "other-user" });
  await stead.cli("deny", denied.approval.id, "--note", "Order was already replaced");
  // A quorum of two from finance, met.
  await deployRefunds(stead, "refunds-finance", { approvers: { group: "finance", min: 2 } });
  const voted = await stead.startRefund("o-1003", { reason: "settled quorum" });
  for (const m of [ana, bo]) {
    const res = await asKey(stead, m.key, "POST", `/v1/approvals/${voted.approval.id}/approve`, { note: "fine by " + m.name });
    assert.ok(res.status < 300, JSON.stringify(res));
  }
  await until("the quorum's run to succeed", async () => (await runStatus(stead, voted.id)) === "succeeded");
  await until("the approved run to succeed", async () => (await runStatus(stead, approved.id)) === "succeeded");
  // One that nobody decides.
  await deployWithTimeout(stead, "1s");
  const expired = await stead.startRefund("o-1004", { reason: "settled expired" });
  await until("the expired run to fail", async () => (await runStatus(stead, expired.id)) === "failed");

  const page = await openPage(t, browser, { width: 1280, height: 900 });
  await signIn(page, stead);
  await page.getByRole("link", { name: "Decided" }).click();
  for (const r of [voted, denied, approved]) await row(page, r.id).waitFor();
  assert.equal(await row(page, expired.id).count(), 0, "an expired approval is listed as decided");
  assert.equal(await page.locator("article.approval").count(), 1, "the tab shows more than the current approval's card");
  // Most recent first: the quorum's approval is current.
  const current = page.locator('.inbox-row[aria-current="true"]');
  assert.deepEqual(await page.locator(".inbox-row").evaluateAll((rs) => rs.map((r) => r.dataset.runId)), [voted.id, denied.id, approved.id]);
  assert.equal(await current.getAttribute("data-run-id"), voted.id);

  // The rows: tool, agent, end user, what became of it, when, who, the note's start, the quorum.
  const ra = row(page, approved.id);
  await ra.locator(".inbox-row__tool").getByText("refundOrder").waitFor();
  await ra.locator(".inbox-row__agent").getByText("refunds").waitFor();
  await ra.locator(".inbox-row__user").getByText("demo-user").waitFor();
  await ra.locator(".inbox-row__fate .badge").getByText("approved").waitFor();
  assert.match(await ra.locator(".inbox-row__age").textContent(), /^decided (just now|\d+ seconds? ago)$/);
  assert.match(await ra.locator(".inbox-row__age").getAttribute("title"), new RegExp("^" + STAMP + "$"));
  assert.match(await ra.locator(".inbox-row__by").textContent(), /^by you \(.*key_\w+\)$/);
  const noteStart = await ra.locator(".inbox-row__note q").textContent();
  assert.ok(noteStart.endsWith("…") && longNote.startsWith(noteStart.slice(0, -1)) && noteStart.length < longNote.length, "the note's start: " + noteStart);
  assert.equal(await ra.locator(".inbox-row__note").getAttribute("title"), longNote);
  const rd = row(page, denied.id);
  await rd.locator(".inbox-row__fate .badge").getByText("denied").waitFor();
  await rd.locator(".inbox-row__user").getByText("other-user").waitFor();
  assert.equal(await rd.locator(".inbox-row__note q").textContent(), "Order was already replaced");
  const rv = row(page, voted.id);
  await rv.locator(".inbox-row__quorum").getByText("quorum met").waitFor();
  await rv.locator('.inbox-row__quorum .chip[data-group="finance"][data-quorum="met"]').getByText("2/2 finance").waitFor();
  assert.match(await rv.locator(".inbox-row__by").textContent(), /^by (Ana Diaz|Bo Li) \(key_\w+\)$/);

  // The detail pane of the current one: its card, the votes, its history.
  const cv = card(page, voted.id);
  await cv.locator(".badge", { hasText: "Approved" }).waitFor();
  await cv.getByText("settled quorum").first().waitFor();
  await page.getByRole("region", { name: `History of run ${voted.id}` }).locator('.history__item[data-type="approval.requested"]').waitFor();

  // j and k move through the rows, the pane follows.
  await page.locator("body").click({ position: { x: 5, y: 300 } });
  await page.keyboard.press("j");
  assert.equal(await current.getAttribute("data-run-id"), denied.id);
  const cd = card(page, denied.id);
  await cd.locator(".badge", { hasText: "Denied" }).waitFor();
  await cd.locator(".outcome--denied").getByText("Order was already replaced").waitFor();
  await page.keyboard.press("j");
  await page.keyboard.press("j"); // stays on the last
  assert.equal(await current.getAttribute("data-run-id"), approved.id);
  const ca = card(page, approved.id);
  // Every fact the old card had: the outcome and note, agent, end user,
  // run link, step, reason, requested, who and when, the id, the input.
  await ca.locator(".outcome--approved").getByText(longNote).waitFor();
  for (const k of ["Agent", "End user", "Run", "Step", "Reason", "Requested", "Approved by", "Approved at", "Approval"]) {
    await ca.locator("dt", { hasText: new RegExp("^" + k + "$") }).waitFor();
  }
  await ca.getByText("refundOrder requires approval").waitFor();
  await ca.getByRole("link", { name: approved.id }).waitFor();
  await ca.getByText('"reason": "settled approved"').waitFor();
  const hist = page.getByRole("region", { name: `History of run ${approved.id}` });
  await hist.locator('.history__item[data-type="approval.approved"]').waitFor();
  await hist.locator('.history__item[data-type="run.succeeded"]').waitFor();
  assert.equal(await page.locator("#inbox-detail").getByRole("button", { name: /^(Approve|Deny|Edit input)/ }).count(), 0, "a settled approval offers a decision");
  await page.keyboard.press("k");
  assert.equal(await current.getAttribute("data-run-id"), denied.id);
  // A click opens a row too.
  await ra.locator(".inbox-row__open").click();
  assert.equal(await current.getAttribute("data-run-id"), approved.id);
  assert.deepEqual(await axeProblems(page), [], "axe: the Decided tab");
  await screenshot(page, "settled-01-decided-1280");

  // Filters: by agent, tool and age, in the address.
  await page.getByLabel("Age", { exact: true }).selectOption("1h");
  await page.getByText("No decided approval matches these filters.").waitFor();
  assert.match(page.url(), /tab=decided&age=1h/);
  await page.getByLabel("Age", { exact: true }).selectOption("new");
  await page.getByLabel("Tool", { exact: true }).selectOption("refundOrder");
  await page.getByLabel("Agent", { exact: true }).selectOption("refunds");
  await page.locator(".inbox__count").getByText("3 approvals").waitFor();
  assert.match(page.url(), /tab=decided&agent=refunds&tool=refundOrder&age=new/);
  await page.reload();
  await page.locator(".inbox__count").getByText("3 approvals").waitFor();
  assert.equal(await page.getByLabel("Agent", { exact: true }).inputValue(), "refunds");

  // The Expired tab: the same, with nobody having decided.
  await page.getByRole("link", { name: "Expired" }).click();
  const re = row(page, expired.id);
  await re.waitFor();
  assert.equal(await page.locator(".inbox-row").count(), 1);
  await re.locator(".inbox-row__fate .badge").getByText("expired").waitFor();
  await re.locator(".inbox-row__by").getByText("nobody decided in time").waitFor();
  assert.match(await re.locator(".inbox-row__age").textContent(), /^expired (just now|\d+ seconds? ago)$/);
  assert.equal(await current.getAttribute("data-run-id"), expired.id);
  const ce = card(page, expired.id);
  await ce.getByText("Expired: nobody decided in time.").waitFor();
  await ce.getByText('"reason": "settled expired"').waitFor();
  await page.getByRole("region", { name: `History of run ${expired.id}` }).locator('.history__item[data-type="approval.expired"]').waitFor();
  await page.locator("body").click({ position: { x: 5, y: 300 } });
  await page.keyboard.press("j");
  assert.equal(await current.getAttribute("data-run-id"), expired.id);
  assert.deepEqual(await axeProblems(page), [], "axe: the Expired tab");
  await screenshot(page, "settled-02-expired-1280");

  // 390 px: the rows above the pane, nothing scrolls sideways, dark too.
  for (const scheme of ["light", "dark"]) {
    const narrow = await openPage(t, browser, { width: 390, height: 844 });
    await narrow.emulateMedia({ colorScheme: scheme });
    await signIn(narrow, stead);
    for (const tab of ["decided", "expired"]) {
      await narrow.goto(stead.url + "/console/#/approvals?tab=" + tab);
      await narrow.locator('.inbox-row[aria-current="true"]').waitFor();
      await narrow.locator("#inbox-detail article.approval").waitFor();
      const w = await narrow.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(w <= 390, `the ${tab} tab is ${w}px wide at 390px (${scheme})`);
      assert.deepEqual(await axeProblems(narrow), [], `axe: the ${tab} tab at 390 px, ${scheme}`);
      await screenshot(narrow, `settled-${tab}-390-${scheme}`);
    }
  }
});

test("every page at 1280 and 390 px, light and dark: the run timeline (steps and the approval wait as bars, a failure's stack and source position), no sideways scrolling at 390 px, and axe-core finds nothing serious or critical", { ...opts, timeout: 240_000 }, async (t) => {
  const stead = await startStead(t);
  await brand(stead);
  const ana = await addMember(stead, "Ana Diaz", { email: "ana@example.com" });
  await stead.api("POST", "/v1/groups", { name: "finance", members: [ana.id] });
  const done = await stead.startRefund("o-1001");
  await stead.cli("approve", done.approval.id);
  await until("the approved run to succeed", async () => (await runStatus(stead, done.id)) === "succeeded");
  // A refund of an order that does not exist: the handler throws.
  const failed = await stead.startRefund("o-9999", { reason: "no such order" });
  await stead.cli("approve", failed.approval.id);
  await until("the handler error", async () => (await runStatus(stead, failed.id)) === "failed");
  const pending = await stead.startRefund("o-1002");
  const token = (await stead.cli("token", "demo-user")).trim();

  // What the trace has of the failure; where it lacks a stack or a source
  // position, one is added on the way to the page, so the rendering of
  // each is checked either way.
  const { events } = await stead.api("GET", `/v1/runs/${failed.id}/events`);
  const stepFailed = events.find((e) => e.type === "step.failed");
  assert.ok(stepFailed, "no step.failed in " + JSON.stringify(events.map((e) => e.type)));
  const shown = { stack: "Error: order o-9999 not found for demo-user\n    at refundOrder (handlers.js:20:11)", file: "handlers.js", line: 20, column: 11, ...stepFailed.data };
  t.diagnostic(`step.failed carries ${["stack", "file", "line", "column"].filter((k) => k in stepFailed.data).join(", ") || "no stack or position"}`);
  async function withStack(page) {
    await page.route(new RegExp(`/v1/runs/${failed.id}/events`), async (route) => {
      const res = await route.fetch();
      const body = (await res.text()).replace(/^data: (.*)$/gm, (_, j) => {
        const ev = JSON.parse(j);
        if (ev.type === "step.failed") ev.data = shown;
        return "data: " + JSON.stringify(ev);
      });
      await route.fulfill({ response: res, body });
    });
  }

  const pages = [
    ["approvals", "#/approvals", `article.approval[data-run-id="${pending.id}"]`],
    ["approval", `#/approvals/${pending.approval.id}`, `article.approval[data-run-id="${pending.id}"]`],
    // The Decided tab lists rows; its detail pane shows the most recent
    // (the failed run's) card, read closely in the settled tabs' test.
    ["decided", "#/approvals?tab=decided", `.inbox-row[data-run-id="${done.id}"][data-status="approved"]`],
    ["run-succeeded", `#/runs/${done.id}`, '.ev[data-type="run.succeeded"]'],
    ["run-failed", `#/runs/${failed.id}`, '.ev[data-type="run.failed"]'],
    ["runs", "#/runs", ".run-row"],
    ["deployments", "#/deployments", ".version"],
    ["members", "#/members", "tr.member"],
    ["groups", "#/groups", 'article.group[data-group="finance"]'],
    ["rules", "#/rules", "h1"],
    ["webhooks", "#/webhooks", "h1"],
  ];
  const problems = [];
  for (const [width, height] of [[1280, 900], [390, 844]]) {
    for (const scheme of ["light", "dark"]) {
      const page = await openPage(t, browser, { width, height });
      await page.emulateMedia({ colorScheme: scheme });
      await withStack(page);
      await signIn(page, stead);
      const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      assert.equal(bg, scheme === "dark" ? "rgb(13, 17, 23)" : "rgb(246, 247, 249)", `the ${scheme} theme's background`);
      for (const [name, hash, ready] of pages) {
        await page.goto(stead.url + "/console/" + hash);
        await page.locator(ready).first().waitFor();
        if (name === "run-failed") await page.locator(".stack").first().waitFor();
        if (width === 390) {
          const w = await page.evaluate(() => document.documentElement.scrollWidth);
          assert.ok(w <= 390, `${hash} is ${w}px wide at 390px (${scheme})`);
        }
        for (const p of await axeProblems(page)) problems.push(`${name} at ${width}px, ${scheme}: ${p}`);
        await screenshot(page, `pages-${name}-${width}-${scheme}`);
      }
      const status = await openPage(t, browser, { width, height });
      await status.emulateMedia({ colorScheme: scheme });
      await status.goto(`${stead.url}/status/${pending.id}#token=${token}`);
      await status.locator('#status[data-stead-status="awaiting-approval"]').waitFor();
      for (const p of await axeProblems(status)) problems.push(`status at ${width}px, ${scheme}: ${p}`);
      await screenshot(status, `pages-status-${width}-${scheme}`);
    }
  }
  assert.deepEqual(problems, [], "axe-core found serious or critical violations");

  // The run timeline, read closely (light, 1280).
  const page = await openPage(t, browser, { width: 1280, height: 900 });
  await withStack(page);
  await signIn(page, stead);
  await page.goto(stead.url + `/console/#/runs/${done.id}`);
  await page.locator('.ev[data-type="run.succeeded"]').waitFor();
  const orders = page.locator('.span[data-kind="step"][data-step="orders"][data-status="succeeded"]');
  const wait = page.locator('.span[data-kind="wait"][data-step="refund"][data-status="approved"]');
  const refund = page.locator('.span[data-kind="step"][data-step="refund"][data-status="succeeded"]');
  for (const sp of [orders, wait, refund]) {
    await sp.waitFor();
    const dur = await sp.locator(".span__dur").textContent();
    assert.match(dur, /^\d+ ms$|^\d+\.\d s$|^\d+ s$|^\d+ min( \d+ s)?$/, "not a humane duration: " + dur);
    const rect = sp.locator("rect");
    assert.ok(Number(await rect.getAttribute("width")) > 0, "a bar with no width");
  }
  await wait.getByText("approval of refundOrder").waitFor();
  // The bars are in order: the wait starts after orders, refund after the wait.
  const xs = await page.locator(".span rect").evaluateAll((rs) => rs.map((r) => Number(r.getAttribute("x"))));
  assert.ok(xs[0] <= xs[1] && xs[1] <= xs[2], "bars out of order: " + xs);
  // JSON folds: the orders output (long) starts folded; short inputs open.
  const ordersOut = page.locator('.ev[data-type="step.completed"][data-step="orders"] details.json-fold');
  assert.equal(await ordersOut.evaluate((d) => d.open), false, "a long JSON block starts open");
  await ordersOut.locator("summary").click();
  await ordersOut.getByText('"item": "Trail running shoes"').waitFor();
  assert.equal(await page.locator('.ev[data-type="run.created"] details.json-fold').evaluate((d) => d.open), true);
  // The id copies.
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: stead.url });
  await page.locator(".run-title").getByRole("button", { name: `Copy ${done.id}` }).click();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), done.id);
  const idBox = await page.locator(".run-title .id__text").evaluate((el) => getComputedStyle(el).whiteSpace);
  assert.equal(idBox, "nowrap");

  // The failed run: the handler's message, where it threw, its stack.
  await page.goto(stead.url + `/console/#/runs/${failed.id}`);
  const sf = page.locator('.ev[data-type="step.failed"]');
  await sf.getByText(/order o-9999 not found for demo-user/).first().waitFor();
  await sf.locator(".source-pos code").getByText(`${shown.file}:${shown.line}${shown.column ? ":" + shown.column : ""}`).waitFor();
  assert.equal((await sf.locator(".stack pre").textContent()).trim(), String(shown.stack).trim());
  await page.locator('.span[data-kind="step"][data-step="refund"][data-status="failed"]').waitFor();
  await screenshot(page, "run-failed-stack-1280");

  // The theme toggle wins over the system's choice, and is kept.
  await page.emulateMedia({ colorScheme: "dark" });
  const toggle = page.getByRole("button", { name: /^Theme: / });
  await toggle.getByText("Theme: system").waitFor();
  await toggle.click();
  await toggle.getByText("Theme: dark").waitFor();
  await toggle.click();
  await toggle.getByText("Theme: light").waitFor();
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "light");
  assert.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), "rgb(246, 247, 249)");
  await page.reload();
  await page.locator('.ev[data-type="run.failed"]').waitFor();
  assert.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), "rgb(246, 247, 249)", "the chosen theme was not kept");
  await toggle.click();
  await toggle.getByText("Theme: system").waitFor();
  assert.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), "rgb(13, 17, 23)");
});
