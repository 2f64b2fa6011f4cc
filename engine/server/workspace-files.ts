/**
 * The workbench's file API over the workspace folder (`env.read` / `env.write`): paths are
 * relative and must stay under tools/, rewards/ or envs/ of the workspace, and so must whatever
 * they resolve to. A symlink (of the file or of any folder on the way) that leads outside the
 * workspace is refused for reading and for writing: reads open the resolved path with O_NOFOLLOW
 * after checking it (so a link swapped in afterwards is not followed), writes resolve the parent
 * folder, check it, and open the file with O_NOFOLLOW (a symlink there, even one pointing
 * inside, is refused rather than written through; so is a hard link).
 * registerEnvFiles adds `env.files` (the list), `env.read` and `env.write` to the engine.
 */
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  ftruncateSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, isAbsolute, join, normalize, relative, sep } from 'node:path';
import { approveTyped } from '../env/consent';
import type { EngineHost } from './host';
import type { Result } from './protocol';

const NOFOLLOW = constants.O_NOFOLLOW ?? 0;

export interface WorkspaceFiles {
  read(path: string): string;
  write(path: string, text: string): void;
  /** Whether a path (after resolving every symlink on it) is inside the workspace folder. */
  inside(full: string): boolean;
}

export function workspaceFiles(root: string): WorkspaceFiles {
  const realRoot = () => (existsSync(root) ? realpathSync(root) : normalize(root));
  const within = (p: string, r: string) => p === r || p.startsWith(r.endsWith(sep) ? r : r + sep);
  /** The normalised full path of a relative workspace path, or an error naming it. */
  const lexical = (p: string) => {
    const full = normalize(join(root, p));
    if (isAbsolute(p) || !within(full, normalize(root)) || !/^(tools|rewards|envs)[\\/]/.test(relative(root, full)))
      throw new Error(`path "${p}" must be inside tools/, rewards/ or envs/ of the workspace`);
    return full;
  };
  /** The nearest existing folder at or above `dir`, resolved. */
  const resolvedAncestor = (dir: string): string => {
    let d = dir;
    while (!existsSync(d) && dirname(d) !== d) d = dirname(d);
    return realpathSync(d);
  };
  const outside = (p: string) => new Error(`path "${p}" leads outside the workspace (through a symlink); refused`);
  const inside = (full: string) => {
    try {
      return within(realpathSync(full), realRoot());
    } catch {
      return false;
    }
  };
  return {
    inside,
    read(p) {
      const full = lexical(p);
      if (!existsSync(full)) throw new Error(`no file "${p}" in the workspace`);
      const real = realpathSync(full);
      if (!within(real, realRoot())) throw outside(p);
      let fd: number;
      try {
        fd = openSync(real, constants.O_RDONLY | NOFOLLOW);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ELOOP') throw outside(p);
        throw e;
      }
      try {
        if (!fstatSync(fd).isFile()) throw new Error(`"${p}" is not a file`);
        return readFileSync(fd, 'utf8');
      } finally {
        closeSync(fd);
      }
    },
    write(p, text) {
      const full = lexical(p);
      // the workspace folder itself is the engine's own (created on first write); what is below it is checked
      mkdirSync(root, { recursive: true });
      const r = realRoot();
      // the folders on the way: the part that exists must resolve inside before anything is created
      if (!within(resolvedAncestor(dirname(full)), r)) throw outside(p);
      mkdirSync(dirname(full), { recursive: true });
      const parent = realpathSync(dirname(full));
      if (!within(parent, r)) throw outside(p);
      let fd: number;
      try {
        fd = openSync(join(parent, basename(full)), constants.O_WRONLY | constants.O_CREAT | NOFOLLOW, 0o644);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ELOOP') throw new Error(`path "${p}" is a symlink; the workspace API does not write through symlinks`);
        throw e;
      }
      try {
        const st = fstatSync(fd);
        if (!st.isFile()) throw new Error(`"${p}" is not a file`);
        // a hard link shares its content with a file elsewhere (perhaps outside the workspace)
        if (st.nlink > 1) throw new Error(`path "${p}" is a hard link to another file; the workspace API does not write through links`);
        ftruncateSync(fd, 0);
        writeFileSync(fd, text);
      } finally {
        closeSync(fd);
      }
    },
  };
}

/** env.files, env.read and env.write over the workspace folder ($ARBOR_HOME/workspace). */
export function registerEnvFiles(engine: EngineHost): void {
  const envDir = join(engine.opts.home, 'workspace');
  const files = workspaceFiles(envDir);
  engine.on('env.files', () => listEnvFiles(envDir, files));
  engine.on('env.read', (p) => files.read(p.path));
  engine.on('env.write', (p) => {
    files.write(p.path, p.text);
    // Typed (or pasted) in the workbench's editor by the user: approved as theirs (engine/env/consent.ts).
    approveTyped(join(envDir, p.path), p.text);
    return null;
  });
}

/** The files in tools/, rewards/ and envs/ of the workspace folder, each with its kind. */
function listEnvFiles(envDir: string, files: WorkspaceFiles): Result<'env.files'> {
  const out: Result<'env.files'> = [];
  for (const kind of ['tools', 'rewards', 'envs']) {
    const d = join(envDir, kind);
    if (!existsSync(d)) continue;
    for (const f of readdirSync(d)) {
      let st;
      try {
        st = lstatSync(join(d, f));
      } catch {
        continue;
      }
      // a symlink is listed only when it stays inside the workspace (env.read refuses the others)
      if (st.isSymbolicLink() && !files.inside(join(d, f))) continue;
      if (!statSync(join(d, f), { throwIfNoEntry: false })?.isFile()) continue;
      out.push({ path: `${kind}/${f}`, kind: kind === 'tools' ? ('tool' as const) : kind === 'rewards' ? ('reward' as const) : ('env' as const) });
    }
  }
  return out;
}
