// The sandbox workloads, the same code as shared/sandbox/benches/execution.rs
// runs, and how the reference runs one: a fresh QuickJS runtime and context
// per execution, tool calls as host promises settled asynchronously.
import { getQuickJS } from "quickjs-emscripten";

export const WORKLOADS = {
  "W1 return 1 + 2": "return 1 + 2",
  "W2 loop 100k": "let s = 0; for (let i = 0; i < 100000; i++) s += i % 7; return s",
  "W3 1000 objects JSON":
    "const items = []; for (let i = 0; i < 1000; i++) items.push({id: i, name: 'item ' + i, tags: ['a', 'b', 'c']});\n" +
    "return JSON.parse(JSON.stringify(items)).length",
  "W4 20 tool calls": "for (let i = 0; i < 20; i++) await tools.echo({i}); return 'done'",
};

const QuickJS = await getQuickJS();

/** Run `code` as the body of an async function; resolve to its JSON result. */
export async function execute(code) {
  const runtime = QuickJS.newRuntime();
  runtime.setMemoryLimit(64 * 1024 * 1024);
  const vm = runtime.newContext();
  try {
    const tools = vm.newObject();
    const echo = vm.newFunction("echo", (argHandle) => {
      const args = vm.dump(argHandle);
      const deferred = vm.newPromise();
      // Settle on a later tick, as a real tool's answer would arrive.
      setImmediate(() => {
        const result = vm.unwrapResult(vm.evalCode(`(${JSON.stringify(args)})`));
        deferred.resolve(result);
        result.dispose();
        deferred.dispose();
        runtime.executePendingJobs();
      });
      return deferred.handle;
    });
    vm.setProp(tools, "echo", echo);
    vm.setProp(vm.global, "tools", tools);
    echo.dispose();
    tools.dispose();

    const started = vm.unwrapResult(vm.evalCode(`(async () => { ${code} })().then(JSON.stringify)`));
    const settled = vm.resolvePromise(started);
    started.dispose();
    runtime.executePendingJobs();
    const outcome = vm.unwrapResult(await settled);
    const text = vm.getString(outcome);
    outcome.dispose();
    return JSON.parse(text);
  } finally {
    vm.dispose();
    runtime.dispose();
  }
}
