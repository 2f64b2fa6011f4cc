#!/usr/bin/env node
// `npm run test:variants [-- --all | <test files…>]`: the tests whose results hang on float
// rounding, run again under other ONNX Runtime numerics (engine/tensor/ort.ts ortVariant): 1 and 2
// intra-op threads, graph optimisations all and disabled. ORT's CPU provider picks AVX-512 or AVX2
// kernels by CPU and has no switch to avoid AVX-512; these variants change the accumulation order
// the way another kernel does, so a test that passes under each does not hinge on one CPU's
// rounding (docs/areas/tooling.md). `--all`: the whole engine project under each variant.
import { spawnSync } from 'node:child_process';

/** Goldens, parity with recorded references, and the tests that train the real transformer. */
const NUMERICS = [
  'tests/engine/rollout/golden.test.ts',
  'tests/engine/rollout/golden-quant.test.ts',
  'tests/engine/model/parity.test.ts',
  'tests/engine/model/lora-peft.test.ts',
  'tests/engine/model/quantize-quality.test.ts',
  'tests/engine/model/model.test.ts',
  'tests/engine/rollout/model.test.ts',
  'tests/engine/rollout/branch-rollout.test.ts',
  'tests/engine/tasks/tools-task.test.ts',
  'tests/engine/train/model-grpo.test.ts',
  'tests/engine/run/session.test.ts',
  'tests/engine/rl/ppo-critic.test.ts',
];

const VARIANTS = [
  { ARBOR_ORT_THREADS: '1', ARBOR_ORT_GRAPH_OPT: 'all' },
  { ARBOR_ORT_THREADS: '2', ARBOR_ORT_GRAPH_OPT: 'all' },
  { ARBOR_ORT_THREADS: '1', ARBOR_ORT_GRAPH_OPT: 'disabled' },
  { ARBOR_ORT_THREADS: '2', ARBOR_ORT_GRAPH_OPT: 'disabled' },
];

const args = process.argv.slice(2);
const files = args.includes('--all') ? [] : args.length ? args : NUMERICS;
const failed = [];
for (const v of VARIANTS) {
  const name = Object.entries(v)
    .map(([k, x]) => `${k}=${x}`)
    .join(' ');
  console.log(`\n> ${name} vitest run --project engine ${files.join(' ')}`);
  const r = spawnSync('npx', ['vitest', 'run', '--project', 'engine', ...files], { stdio: 'inherit', env: { ...process.env, ...v } });
  if (r.status !== 0) failed.push(name);
}
if (failed.length) {
  console.error(`\nfailed under: ${failed.join('; ')}`);
  process.exit(1);
}
console.log(`\nall ${VARIANTS.length} numerics variants passed`);
