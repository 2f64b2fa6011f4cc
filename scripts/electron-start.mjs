#!/usr/bin/env node
// `npm start`: build the renderer if it is missing or older than its sources, then launch Electron.
// (better-sqlite3 and onnxruntime-node are N-API prebuilt addons: Electron loads node_modules' copies.)
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

function newestMtime(dir) {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return t;
}

const distIndex = join(root, 'renderer', 'dist', 'index.html');
const srcTime = Math.max(newestMtime(join(root, 'renderer', 'src')), statSync(join(root, 'renderer', 'index.html')).mtimeMs);
if (!existsSync(distIndex) || statSync(distIndex).mtimeMs < srcTime) {
  console.log('Building the renderer …');
  const r = spawnSync('npm', ['run', 'build:renderer'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

let electronBin;
try {
  // The package's main export is the path of the binary; since Electron 45 requiring it downloads
  // the binary on first use (needs network).
  electronBin = require('electron');
} catch (err) {
  console.error(
    `Electron is not available here (${err?.message ?? err}). It is an optional dependency whose binary is downloaded\n` +
      'on first use: run `npm start` (or `npx install-electron --no`) on a machine with network access, or `npm install electron`\n' +
      'if the package is missing; or use `npx arbor serve` to open the workbench in a browser.',
  );
  process.exit(1);
}

const child = spawn(electronBin, [root, ...process.argv.slice(2)], { stdio: 'inherit', env: { ...process.env, ELECTRON_ENABLE_LOGGING: '1' } });
child.on('exit', (code) => process.exit(code ?? 0));
