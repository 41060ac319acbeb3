// The official TypeScript MCP SDK client driving MCP tasks (protocol
// 2025-11-25) against executor, for cli/tests/long.rs. Each run is a new
// connection (a new session): tasks belong to the owner, not the session.
//
//   node tasks.mjs URL TOKEN stream     (code on stdin)  callToolStream of execute as a task
//   node tasks.mjs URL TOKEN start      (code on stdin)  tools/call of execute as a task, answered at once
//   node tasks.mjs URL TOKEN get ID | result ID | cancel ID
//
// Prints one JSON object: what the server declared and what it answered
// (errors as {error: message}).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, token, command, id] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'executor-tasks-test', version: '1.0.0' }, { defaultTaskPollInterval: 200 });
await client.connect(transport);
const out = { capabilities: client.getServerCapabilities() ?? null };
const tasks = client.experimental.tasks;
const settled = async (promise) => {
  try {
    return await promise;
  } catch (error) {
    return { error: error.message };
  }
};

const stdin = async () => {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return text;
};

if (command === 'stream') {
  const { tools } = await client.listTools(); // the SDK learns execute's taskSupport here
  out.execution = tools.find((tool) => tool.name === 'execute')?.execution ?? null;
  const code = await stdin();
  out.messages = [];
  for await (const message of tasks.callToolStream({ name: 'execute', arguments: { code } })) {
    out.messages.push(message.type === 'error' ? { type: 'error', error: message.error.message } : message);
  }
} else if (command === 'start') {
  const request = { method: 'tools/call', params: { name: 'execute', arguments: { code: await stdin() } } };
  out.answer = await settled(client.request(request, CreateTaskResultSchema, { task: {} }));
} else if (command === 'get') {
  out.answer = await settled(tasks.getTask(id));
} else if (command === 'result') {
  out.answer = await settled(tasks.getTaskResult(id, CallToolResultSchema));
} else if (command === 'cancel') {
  out.answer = await settled(tasks.cancelTask(id));
} else {
  throw new Error(`unknown command ${command}`);
}
console.log(JSON.stringify(out));
await client.close();
