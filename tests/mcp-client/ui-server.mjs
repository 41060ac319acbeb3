// An upstream MCP server with an MCP App (io.modelcontextprotocol/ui,
// SEP-1865), built with the official TypeScript SDK's McpServer, for
// tests/tests/mcp_apps.rs. Streamable HTTP on 127.0.0.1 (a free port),
// stateless (a new server for each request), JSON answers.
//
//   node ui-server.mjs KEY
//
// Each path /<name>/mcp is one server whose views are ui://<name>/view.html
// and ui://<name>/radar.html: tools `forecast` (linked to the view, visible
// to model and app), `refresh` (app only, the same view) and `radar` (the
// radar view), the views themselves (text/html;profile=mcp-app, with
// _meta.ui on their listings and their contents), and a plain file://
// resource that is no UI. Every request must carry `X-Api-Key: KEY` (else 401), so a
// read that succeeds came with the source's credentials. Prints one line,
// {"base": "http://127.0.0.1:PORT"}, once listening; every resources/read
// it answers is logged on stderr as `read <uri>`.
import http from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const [key] = process.argv.slice(2);
const MIME = 'text/html;profile=mcp-app';
const UI = { prefersBorder: true, csp: { connectDomains: ['https://api.weather.example'] } };

function registerView(mcp, name, uri, title) {
  mcp.registerResource(
    `${name}_${title}`,
    uri,
    { title: `The ${name} ${title}`, description: 'An interactive forecast', mimeType: MIME, _meta: { ui: UI } },
    async (read) => {
      console.error(`read ${read.href}`);
      const html = `<!DOCTYPE html><html><body><h1>${name} ${title}</h1></body></html>`;
      return { contents: [{ uri: read.href, mimeType: MIME, text: html, _meta: { ui: UI } }] };
    },
  );
}

function server(name) {
  const view = `ui://${name}/view.html`;
  const radar = `ui://${name}/radar.html`;
  const mcp = new McpServer({ name: `${name}-app`, version: '1.0.0' });
  mcp.registerTool(
    'forecast',
    {
      description: `The forecast for a city, shown in the ${name} view.`,
      inputSchema: { city: z.string() },
      annotations: { readOnlyHint: true },
      _meta: { ui: { resourceUri: view, visibility: ['model', 'app'] } },
    },
    async ({ city }) => {
      const forecast = { city, sky: 'clear' };
      return { content: [{ type: 'text', text: JSON.stringify(forecast) }], structuredContent: forecast };
    },
  );
  mcp.registerTool(
    'refresh',
    {
      description: 'Refresh the view (called by the view itself).',
      inputSchema: {},
      annotations: { readOnlyHint: true },
      _meta: { ui: { resourceUri: view, visibility: ['app'] } },
    },
    async () => ({ content: [{ type: 'text', text: 'refreshed' }] }),
  );
  mcp.registerTool(
    'radar',
    {
      description: 'The rain radar, shown in its own view.',
      inputSchema: {},
      annotations: { readOnlyHint: true },
      _meta: { ui: { resourceUri: radar } },
    },
    async () => ({ content: [{ type: 'text', text: 'dry' }] }),
  );
  registerView(mcp, name, view, 'forecast');
  registerView(mcp, name, radar, 'radar');
  mcp.registerResource('readme', 'file:///readme.txt', { mimeType: 'text/plain' }, async (uri) => {
    console.error(`read ${uri.href}`);
    return { contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'not a UI' }] };
  });
  return mcp;
}

const listener = http.createServer(async (req, res) => {
  const name = /^\/([a-z]+)\/mcp$/.exec(req.url ?? '')?.[1];
  if (!name) {
    res.writeHead(404).end();
    return;
  }
  if (req.headers['x-api-key'] !== key) {
    res.writeHead(401, { 'content-type': 'text/plain' }).end('X-Api-Key required');
    return;
  }
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST' }).end();
    return;
  }
  const mcp = server(name);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => {
    transport.close();
    mcp.close();
  });
  try {
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  } catch (error) {
    console.error(error);
    if (!res.headersSent) res.writeHead(500).end();
  }
});
listener.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ base: `http://127.0.0.1:${listener.address().port}` }));
});
