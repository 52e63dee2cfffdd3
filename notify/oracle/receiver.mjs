// A webhook receiver that checks every delivery with the Standard Webhooks
// reference library (npm standardwebhooks): the oracle of Stead's signatures.
//
//   WEBHOOK_SECRET=whsec_… node receiver.mjs
//
// It listens on 127.0.0.1 on a free port and prints "listening <port>",
// then one JSON line per request: {path, id, timestamp, signature, type,
// verified, error, status}. What it answers depends on the path:
//   /ok         200
//   /fail-once  500 to the first try of each webhook-id, then 200
//   /retry-after 503 with Retry-After: 7 to the first try, then 200
//   /gone       410
//   /fail       500, always
// WEBHOOK_SECRET may hold several secrets separated by spaces (after a
// rotation): a delivery verifies if it verifies with one of them.
import http from "node:http";
import { Webhook } from "standardwebhooks";

const secrets = (process.env.WEBHOOK_SECRET || "").split(" ").filter(Boolean);
if (secrets.length === 0) {
  console.error("set WEBHOOK_SECRET");
  process.exit(2);
}
const hooks = secrets.map((s) => new Webhook(s));
const tried = new Set();

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const headers = {
      "webhook-id": req.headers["webhook-id"],
      "webhook-timestamp": req.headers["webhook-timestamp"],
      "webhook-signature": req.headers["webhook-signature"],
    };
    let verified = false;
    let error = "";
    let type = "";
    for (const h of hooks) {
      try {
        const payload = h.verify(body, headers);
        verified = true;
        type = payload.type;
        break;
      } catch (e) {
        error = String(e.message || e);
      }
    }
    const id = headers["webhook-id"] || "";
    const path = req.url;
    let status = 200;
    const extra = {};
    if (path === "/gone") {
      status = 410;
    } else if (path === "/fail") {
      status = 500;
    } else if ((path === "/fail-once" || path === "/retry-after") && !tried.has(id)) {
      tried.add(id);
      status = path === "/fail-once" ? 500 : 503;
      if (path === "/retry-after") extra["Retry-After"] = "7";
    }
    if (!verified) status = 401;
    console.log(JSON.stringify({ path, id, timestamp: headers["webhook-timestamp"], signature: headers["webhook-signature"], type, verified, error: verified ? "" : error, status }));
    res.writeHead(status, { "Content-Type": "text/plain", ...extra });
    res.end(verified ? "ok" : "bad signature: " + error);
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log("listening " + server.address().port);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
