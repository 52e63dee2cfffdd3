// End to end against a running Stead with the example deployed: node
// dist-test/test/e2e.js URL OWNER_KEY. Prints one JSON line of what it saw;
// the Go test (cli TestTypeScriptClient) checks it.
import { createStead, SteadError, type Event } from "../src/index.js";

declare const process: { argv: string[] };

const [baseUrl, ownerKey] = process.argv.slice(2);
const owner = createStead({ baseUrl, token: ownerKey });

const started = await owner.startRun("refunds", { endUserId: "demo-user", input: { orderId: "o-1001", reason: "damaged" } }, { wait: "30s" });
const again = await owner.startRun("refunds", { endUserId: "demo-user", input: { orderId: "o-1001", reason: "damaged" } }, { idempotencyKey: "ts-1" });
const replay = await owner.startRun("refunds", { endUserId: "demo-user", input: { orderId: "o-1001", reason: "damaged" } }, { idempotencyKey: "ts-1" });
const approvals = await owner.listApprovals({ status: "pending" });
const mine = approvals.approvals.find((a) => a.runId === started.id);
if (!mine) throw new Error(`no pending approval of ${started.id}`);
await owner.approve(mine.id, { note: "from the TypeScript client" });
const ended = await owner.waitForEnd(started.id);

const token = await owner.createCustomerToken("demo-user", 600);
const customer = createStead({ baseUrl, token: token.token });
const seen = await customer.getRun(started.id);

const all: Event[] = [];
for await (const ev of owner.events(started.id)) all.push(ev);
const resumed: Event[] = [];
for await (const ev of owner.events(started.id, { after: 3 })) resumed.push(ev);

let notFound = "";
try {
  await owner.getRun("run_nope");
} catch (e) {
  if (e instanceof SteadError) notFound = `${e.status} ${e.code}`;
}

console.log(JSON.stringify({
  startedStatus: started.status,
  sameRun: again.id === replay.id,
  endedStatus: ended.status,
  customerStatus: seen.status,
  events: all.map((e) => `${e.seq} ${e.type}`),
  resumedFirst: resumed[0]?.seq,
  resumedCount: resumed.length,
  notFound,
}));
