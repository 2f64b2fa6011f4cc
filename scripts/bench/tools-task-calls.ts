/**
 * `npx tsx scripts/bench/tools-task-calls.ts [calls]`: the two-tool example's own tools
 * (resources/examples/tools-task: lookup reads world.json once, calculator parses arithmetic)
 * through runCall in the sandbox, with V8 vm contexts (before issue 37) and with QuickJS (now):
 * the first call (loading world.json) and the median ms per call after it, 64 in flight.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SandboxHost } from '../../engine/env/sandbox-host';
import { runCall } from '../../engine/env/tool';

const dir = join(import.meta.dirname, '../../resources/examples/tools-task');
const files = ['tools/lookup.ts', 'tools/calculator.ts'].map((p) => ({ path: p, source: readFileSync(join(dir, p), 'utf8') }));
const world = JSON.parse(readFileSync(join(dir, 'world.json'), 'utf8')) as { facts: Record<string, string> };
const entities = Object.keys(world.facts);
const calls = Number(process.argv[2] ?? 2000);
console.log(`two-tool example tools, ${calls} calls (half lookup, half calculator), 64 in flight`);
console.log('engine     first call ms  ms/call');
for (const engine of ['process', 'quickjs'] as const) {
  const host = await SandboxHost.open({ tools: files }, undefined, dir, { engine });
  const call = (i: number) =>
    runCall(
      host.tools,
      i % 2
        ? { name: 'calculator', args: { expression: `${1900 + (i % 97)} - ${1850 + (i % 31)}` } }
        : { name: 'lookup', args: { entity: entities[i % entities.length]! } },
      undefined,
      { episode: {} },
    );
  let t0 = performance.now();
  const first = await call(0);
  if (!first.success) throw new Error(first.error);
  const firstMs = performance.now() - t0;
  t0 = performance.now();
  for (let done = 0; done < calls; done += 64) {
    const outs = await Promise.all(Array.from({ length: Math.min(64, calls - done) }, (_, k) => call(done + k + 1)));
    const bad = outs.find((o) => !o.success);
    if (bad) throw new Error(`${bad.name}: ${bad.error}`);
  }
  console.log(
    `${(engine === 'process' ? 'V8 vm' : 'QuickJS').padEnd(10)} ${firstMs.toFixed(1).padStart(13)}  ${((performance.now() - t0) / calls).toFixed(3).padStart(7)}`,
  );
  await host.close();
}
