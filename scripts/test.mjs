#!/usr/bin/env node
// `npm test`: typecheck, lint (ESLint + typescript-eslint, with the import-boundary rules of
// eslint.config.js), formatting (Prettier --check; `npm run format` fixes it), engine + renderer
// unit tests, then the UI tests in Chromium.
import { spawnSync } from 'node:child_process';

const steps = [
  ['npx', ['tsc', '-p', 'tsconfig.json', '--noEmit']],
  ['npx', ['eslint', '.']],
  ['npx', ['prettier', '--check', '.']],
  ['npx', ['vitest', 'run', '--project', 'engine', '--project', 'renderer']],
  ['npm', ['run', 'test:e2e']],
];
for (const [cmd, args] of steps) {
  console.log(`\n> ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
