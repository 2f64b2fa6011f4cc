#!/usr/bin/env node
// `npm run dist`: build the renderer, rebuild better-sqlite3 for Electron (separate copy), then
// package with electron-builder for the current platform (AppImage + deb on Linux, dmg on macOS,
// nsis on Windows; see electron-builder.yml). Needs the Electron binary, so it runs where
// `npm install electron` could download it. Extra arguments go to electron-builder.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureElectronNative } from './electron-native.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const run = (cmd, args) => {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (r.status !== 0) process.exit(r.status ?? 1);
};

run('npm', ['run', 'build:renderer']);
try {
  await ensureElectronNative({ force: process.argv.includes('--force-native') });
} catch (err) {
  console.error(`Could not build better-sqlite3 for Electron: ${err.message ?? err}`);
  process.exit(1);
}
run('npx', ['electron-builder', '--config', 'electron-builder.yml', ...process.argv.slice(2).filter((a) => a !== '--force-native')]);
