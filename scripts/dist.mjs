#!/usr/bin/env node
// `npm run dist`: build the renderer, then package with electron-builder for the current platform (AppImage + deb on Linux, dmg on macOS,
// nsis on Windows; see electron-builder.yml). Needs the Electron binary, so it runs where
// `npm install electron` could download it. Extra arguments go to electron-builder.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const run = (cmd, args) => {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (r.status !== 0) process.exit(r.status ?? 1);
};

run('npm', ['run', 'build:renderer']);
run('npx', ['electron-builder', '--config', 'electron-builder.yml', ...process.argv.slice(2)]);
