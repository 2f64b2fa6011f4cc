/**
 * ctx.readFile: a tool's read-only view of its workspace folder. Used inside the sandbox process
 * (./sandbox-child.ts, where Node's permission model also limits reads to the workspace) and by
 * built-in tools; kept apart from ./tool.ts so the sandbox's bundle carries no validator.
 */
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';

/** Largest file a tool may read through ctx.readFile. */
export const MAX_READ_BYTES = 64 * 1024 * 1024;

/** ctx.readFile over a workspace folder: relative paths only, no escape (symlinks resolved), size-capped. */
export function workspaceReader(root: string | undefined): (path: string) => string {
  return (path: string) => {
    if (!root) throw new Error(`readFile("${path}"): this environment has no workspace folder`);
    const p = String(path);
    if (isAbsolute(p)) throw new Error(`readFile("${p}"): give a path relative to the workspace`);
    const escapes = (base: string, full: string) => {
      const rel = relative(base, full);
      return rel === '' || rel.startsWith('..') || isAbsolute(rel) || rel.split(sep)[0] === '..';
    };
    const outside = () => new Error(`readFile("${p}"): outside the workspace`);
    // The path as written first ("../x" is outside whether or not x exists: Node's permission model
    // in the sandbox process may refuse even to resolve it), then with its symlinks resolved.
    if (escapes(resolve(root), resolve(root, p))) throw outside();
    let base: string, full: string;
    try {
      base = realpathSync(root);
      full = realpathSync(resolve(base, p));
    } catch {
      throw new Error(`readFile("${p}"): no such file in the workspace`);
    }
    if (escapes(base, full)) throw outside();
    const st = statSync(full);
    if (!st.isFile()) throw new Error(`readFile("${p}"): not a file`);
    if (st.size > MAX_READ_BYTES) throw new Error(`readFile("${p}"): ${st.size} bytes, more than the ${MAX_READ_BYTES} a tool may read`);
    return readFileSync(full, 'utf8');
  };
}
