#!/usr/bin/env node
// Entry point of the `arbor` CLI. The engine is TypeScript run through tsx's loader, so the
// same sources serve the CLI, the tests, `arbor serve` and the Electron utility process.
// The Node version is checked first, before anything loads a native addon (better-sqlite3,
// onnxruntime-node): one line and exit code 1 on an unsupported Node. (ARBOR_NODE_VERSION
// stands in for process.version, for the test of that check.)
import { nodeVersionProblem } from './node-check.mjs';

const problem = nodeVersionProblem(process.env.ARBOR_NODE_VERSION || process.version);
if (problem) {
  console.error(problem);
  process.exit(1);
}
const { register } = await import('tsx/esm/api');
register();
const { main } = await import('../engine/cli/main.ts');
await main(process.argv.slice(2));
