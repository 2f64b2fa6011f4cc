#!/usr/bin/env node
// `npm run bench:<name> -- [args]`: runs scripts/bench/<name>.ts through tsx.
import { register } from 'tsx/esm/api';
import { dirname, join } from 'node:path';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const name = process.argv[2];
const file = join(dirname(fileURLToPath(import.meta.url)), `${name ?? ''}.ts`);
if (!name || !existsSync(file)) {
  console.error(`usage: node scripts/bench/run.mjs <name> [args]  (no benchmark ${file})`);
  process.exit(2);
}
register();
process.argv.splice(2, 1);
await import(pathToFileURL(file).href);
