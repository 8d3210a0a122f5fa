// An MCP client on the Node SDK (from the conformance suite's
// node_modules) for test_outage.py: one session, one memory_search per line
// of standard input, each answer (or what the SDK threw) as a JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import readline from "node:readline";

const [url, token] = process.argv.slice(2);
const client = new Client({ name: "engram-outage-test", version: "1.0.0" });
await client.connect(
  new StreamableHTTPClientTransport(new URL(url + "/mcp"), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }),
);
console.log(JSON.stringify({ connected: true }));
for await (const line of readline.createInterface({ input: process.stdin })) {
  if (line === "quit") break;
  try {
    const r = await client.callTool({ name: "memory_search", arguments: { query: line } });
    console.log(JSON.stringify({ isError: r.isError ?? false, text: r.content?.[0]?.text ?? "" }));
  } catch (e) {
    console.log(JSON.stringify({ thrown: String(e) }));
  }
}
await client.close();
process.exit(0);
