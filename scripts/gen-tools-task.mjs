#!/usr/bin/env node
// Writes the two-tool example's data (world.json, tasks.jsonl) under
// resources/examples/tools-task from engine/tasks/tools/world.ts (deterministic: same seed, same files).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

register();
const { toolsExampleFiles } = await import('../engine/tasks/tools/world.ts');
const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'resources', 'examples', 'tools-task');
for (const [name, text] of Object.entries(toolsExampleFiles())) {
  mkdirSync(dirname(join(dir, name)), { recursive: true });
  writeFileSync(join(dir, name), text);
  console.log(`wrote ${join(dir, name)} (${text.length} bytes)`);
}
