// The official MCP TypeScript SDK's client against Stead's POST /mcp, for
// the Go end-to-end tests. One command per process; the outcome is printed
// as one JSON line on stdout.
//
//   node client.mjs URL KEY list
//   node client.mjs URL KEY call TOOL ARGS_JSON
//
// The MCP key is sent as Authorization: Bearer. The SDK negotiates its own
// protocol version (2025-11-25 in @modelcontextprotocol/sdk 1.32.2).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, command, ...rest] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "stead-e2e", version: "1.0.0" });

try {
  await client.connect(transport);
  let out;
  switch (command) {
    case "list":
      out = await client.listTools();
      break;
    case "call":
      out = await client.callTool({ name: rest[0], arguments: JSON.parse(rest[1] ?? "{}") }, undefined, { timeout: 90_000 });
      break;
    default:
      throw new Error(`unknown command ${command}`);
  }
  out.protocolVersion = transport.protocolVersion;
  process.stdout.write(JSON.stringify(out) + "\n");
  await client.close();
} catch (err) {
  process.stdout.write(JSON.stringify({ clientError: String(err?.message ?? err) }) + "\n");
  process.exitCode = 1;
}
