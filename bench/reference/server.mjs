// The reference MCP host for the wire benchmark: the official TypeScript MCP
// SDK in stateless Streamable HTTP mode (a new server and transport per
// request, JSON responses), with an `execute` tool that runs code the way
// workloads.mjs does. `node server.mjs PORT`; prints "listening" when ready.
import { createServer } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { execute } from "./workloads.mjs";

function mcpServer() {
  const server = new McpServer({ name: "reference", version: "1.0.0" });
  server.registerTool(
    "execute",
    { description: "Run code", inputSchema: { code: z.string() } },
    async ({ code }) => {
      const result = await execute(code);
      return { content: [{ type: "text", text: JSON.stringify({ status: "completed", result }) }] };
    },
  );
  return server;
}

const http = createServer(async (req, res) => {
  if (req.method !== "POST" || req.url !== "/mcp") {
    res.writeHead(404).end();
    return;
  }
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const server = mcpServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
});
http.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => console.log(`listening ${http.address().port}`));
