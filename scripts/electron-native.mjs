// Rebuild better-sqlite3 for Electron's ABI into build/electron-native/ — a SEPARATE copy, so
// node_modules/better-sqlite3 stays built for Node (CLI, tests, `arbor serve`). The engine's
// utility process loads the Electron copy through better-sqlite3's `nativeBinding` option
// (path passed as ARBOR_SQLITE_BINDING by electron/main.ts). Skipped when already built for
// this Electron and better-sqlite3 version.
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
export const NATIVE_DIR = join(root, 'build', 'electron-native');
export const BINDING = join(NATIVE_DIR, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node');

export function electronVersion() {
  try {
    return JSON.parse(readFileSync(require.resolve('electron/package.json'), 'utf8')).version;
  } catch {
    return null;
  }
}

export async function ensureElectronNative({ force = false, arch = process.arch } = {}) {
  const electron = electronVersion();
  if (!electron)
    throw new Error(
      'electron is not installed (it is an optionalDependency whose binary downloads at install time). Install it where it can download: `npm install electron`.',
    );
  const sqliteDir = dirname(require.resolve('better-sqlite3/package.json'));
  const sqliteVersion = JSON.parse(readFileSync(join(sqliteDir, 'package.json'), 'utf8')).version;
  const stampFile = join(NATIVE_DIR, 'stamp.json');
  const stamp = { electron, betterSqlite3: sqliteVersion, arch };
  if (!force && existsSync(BINDING) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === JSON.stringify(stamp)) return BINDING;

  console.log(`Building better-sqlite3 ${sqliteVersion} for Electron ${electron} (${arch}) into ${NATIVE_DIR} …`);
  rmSync(NATIVE_DIR, { recursive: true, force: true });
  const dest = join(NATIVE_DIR, 'node_modules', 'better-sqlite3');
  mkdirSync(dest, { recursive: true });
  for (const part of ['package.json', 'binding.gyp', 'lib', 'src', 'deps']) cpSync(join(sqliteDir, part), join(dest, part), { recursive: true });
  // better-sqlite3 requires `bindings` only when no nativeBinding is given; we always give one.
  writeFileSync(
    join(NATIVE_DIR, 'package.json'),
    JSON.stringify({ name: 'arbor-electron-native', private: true, dependencies: { 'better-sqlite3': sqliteVersion } }, null, 2),
  );
  const { rebuild } = await import('@electron/rebuild');
  await rebuild({ buildPath: NATIVE_DIR, electronVersion: electron, arch, onlyModules: ['better-sqlite3'], force: true, mode: 'sequential' });
  if (!existsSync(BINDING)) throw new Error(`@electron/rebuild finished but ${BINDING} is missing`);
  writeFileSync(stampFile, JSON.stringify(stamp));
  return BINDING;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  ensureElectronNative({ force: process.argv.includes('--force') }).then(
    (p) => console.log(`better-sqlite3 for Electron: ${p}`),
    (err) => {
      console.error(err.message ?? err);
      process.exit(1);
    },
  );
}
