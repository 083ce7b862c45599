// The official TypeScript client (`@modelcontextprotocol/sdk` from npm) against `planwright
// serve`'s `/mcp`: lists the tools, calls one whose run pauses, resumes it on the thread the
// result names, and calls an unknown tool. Prints one JSON object with what it saw, for the Rust
// test to check (the same walk as mcp_serve_client.py).
//
// Usage: MCP_SDK_DIR=DIR node mcp_serve_client.mjs URL TOKEN TOOL INPUT_JSON RESUME_JSON
// (DIR: the directory whose node_modules has the SDK, installed by the test.)

import { createRequire } from "node:module";
import path from "node:path";

const [url, token, tool, given, answer] = process.argv.slice(2);
const require = createRequire(path.join(process.env.MCP_SDK_DIR, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

const seen = (r) => ({
  is_error: Boolean(r.isError),
  text: r.content.filter((c) => c.type === "text").map((c) => c.text),
  structured: r.structuredContent ?? null,
});

const client = new Client({ name: "planwright-test", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const listed = await client.listTools();
const tools = Object.fromEntries(
  listed.tools.map((t) => [t.name, { description: t.description, input_schema: t.inputSchema }]),
);
const first = await client.callTool({ name: tool, arguments: JSON.parse(given) });
const thread = first.structuredContent?.thread_id;
const resumed = await client.callTool({
  name: tool,
  arguments: { thread_id: thread, resume: JSON.parse(answer) },
});
let unknown;
try {
  unknown = { result: seen(await client.callTool({ name: "no-such-tool", arguments: {} })) };
} catch (e) {
  unknown = { error: String(e) };
}
const bad = await client.callTool({ name: tool, arguments: { resume: JSON.parse(answer) } });
await client.close();
console.log(
  JSON.stringify({
    server: client.getServerVersion()?.name,
    tools,
    first: seen(first),
    resumed: seen(resumed),
    unknown,
    resume_without_thread: seen(bad),
  }),
);
