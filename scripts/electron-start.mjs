#!/usr/bin/env node
// `npm start`: build the renderer if it is missing or older than its sources, make sure
// better-sqlite3 is built for Electron (separate copy, see electron-native.mjs), then launch Electron.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureElectronNative } from './electron-native.mjs';

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
  electronBin = require('electron'); // the package's main export is the path of the binary
} catch {
  console.error(
    'Electron is not installed here. It is an optional dependency whose binary is downloaded at install time;\n' +
      'run `npm install electron` on a machine with network access, or use `npx arbor serve` to open the workbench in a browser.',
  );
  process.exit(1);
}

try {
  await ensureElectronNative();
} catch (err) {
  console.error(`Could not build better-sqlite3 for Electron: ${err.message ?? err}`);
  process.exit(1);
}

const child = spawn(electronBin, [root, ...process.argv.slice(2)], { stdio: 'inherit', env: { ...process.env, ELECTRON_ENABLE_LOGGING: '1' } });
child.on('exit', (code) => process.exit(code ?? 0));
