// better-sqlite3 is compiled against one Node ABI. The CLI, tests and `arbor serve` use the copy
// in node_modules (built for Node); the Electron utility process uses a second copy rebuilt for
// Electron's ABI by scripts/electron-start.mjs (or at packaging) into build/electron-native/.
// The path reaches the engine through ARBOR_SQLITE_BINDING, which the store passes to
// better-sqlite3's `nativeBinding` option. onnxruntime-node is N-API and needs no second copy.
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export const ELECTRON_NATIVE_DIR = join('build', 'electron-native');

export function electronSqliteBinding(root: string): string {
  return join(root, ELECTRON_NATIVE_DIR, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node');
}

/** The binding for this process, or a readable error naming the missing file and the fix. */
export function findSqliteBinding(roots: string[]): { path: string } | { error: string } {
  for (const r of roots) {
    const p = electronSqliteBinding(r);
    if (existsSync(p)) return { path: p };
  }
  return {
    error: `better-sqlite3 built for Electron not found (looked for ${roots.map(electronSqliteBinding).join(', ')}). Run \`npm start\`, which rebuilds it into ${ELECTRON_NATIVE_DIR}/.`,
  };
}
