// Median time per whole execution of each workload, as JSON on stdout:
// {"W1 return 1 + 2": microseconds, ...}. `node sandbox.mjs [seconds per workload] [filter]`
import { WORKLOADS, execute } from "./workloads.mjs";

const seconds = Number(process.argv[2] ?? 5);
const filter = process.argv[3] ? new RegExp(process.argv[3]) : null;
const figures = {};
for (const [name, code] of Object.entries(WORKLOADS)) {
  if (filter && !filter.test(name)) continue;
  const warmUntil = performance.now() + 1000;
  while (performance.now() < warmUntil) await execute(code);
  const samples = [];
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until && samples.length < 1_000_000) {
    const start = performance.now();
    await execute(code);
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  figures[name] = samples[Math.floor(samples.length / 2)] * 1000;
}
console.log(JSON.stringify(figures));
