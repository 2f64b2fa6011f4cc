/**
 * The workbench page `arbor serve` hands to a browser is the renderer's Vite build. After a fresh
 * `npm install` (or a `git pull` that changed the renderer) there is none, or it is older than
 * its sources: `arbor serve` then builds it on first use, with Vite's progress on stderr, into a
 * temporary folder renamed into place (two engines starting at once never serve a half build).
 * `npm start` does the same for Electron (scripts/electron-start.mjs).
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const RENDERER_ROOT = fileURLToPath(new URL('../../renderer', import.meta.url));
const REPO_ROOT = resolve(RENDERER_ROOT, '..');

/** Where the built workbench lives: ARBOR_RENDERER_DIR, else renderer/dist. */
export function rendererDistDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.ARBOR_RENDERER_DIR ? resolve(env.ARBOR_RENDERER_DIR) : join(RENDERER_ROOT, 'dist');
}

function newestMtime(path: string): number {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let t = 0;
  for (const e of readdirSync(path)) t = Math.max(t, newestMtime(join(path, e)));
  return t;
}

/** Why the build at `outDir` must be (re)built, or null when it is current. */
export function rendererBuildNeeded(outDir: string): string | null {
  const index = join(outDir, 'index.html');
  if (!existsSync(index)) return 'there is no build of the workbench page yet';
  const src = Math.max(
    newestMtime(join(RENDERER_ROOT, 'src')),
    newestMtime(join(RENDERER_ROOT, 'index.html')),
    newestMtime(join(RENDERER_ROOT, 'vite.config.ts')),
  );
  if (src > statSync(index).mtimeMs) return 'the workbench sources changed since the last build';
  return null;
}

/** Build the renderer into `outDir` when it is missing or stale; Vite's output goes to `log`. */
export async function ensureRendererBuild(
  outDir = rendererDistDir(),
  log: (text: string) => void = (t) => process.stderr.write(t),
): Promise<'built' | 'current'> {
  const why = rendererBuildNeeded(outDir);
  if (!why) return 'current';
  const vite = join(REPO_ROOT, 'node_modules', 'vite', 'bin', 'vite.js');
  if (!existsSync(vite)) {
    throw new Error(
      `${why}, and Vite (a dev dependency) is not installed to build it: run \`npm install\` (with dev dependencies) and \`npm run build:renderer\`, or pass --static <dir> with a build`,
    );
  }
  log(`Building the workbench page (${why}); this takes a minute the first time…\n`);
  const t0 = Date.now();
  const tmp = `${outDir}.building-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  const code = await new Promise<number | null>((res, rej) => {
    const child = spawn(
      process.execPath,
      [vite, 'build', '--config', join(RENDERER_ROOT, 'vite.config.ts'), '--outDir', tmp, '--emptyOutDir', '--logLevel', 'info'],
      {
        cwd: REPO_ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    // Vite's progress lines, without its table of output files (hundreds of lines).
    const pass = (d: Buffer) => {
      const text = String(d)
        .split('\n')
        .filter((l) => l.trim() && !/\s[\d,.]+ kB/.test(l))
        .join('\n');
      if (text) log(text + '\n');
    };
    child.stdout.on('data', pass);
    child.stderr.on('data', pass);
    child.on('error', rej);
    child.on('exit', (c) => res(c));
  });
  if (code !== 0 || !existsSync(join(tmp, 'index.html'))) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(`building the workbench page failed (vite exited with code ${code}); run \`npm run build:renderer\` to see why`);
  }
  // Another engine may have finished first: its build is as good as ours.
  if (rendererBuildNeeded(outDir)) {
    rmSync(outDir, { recursive: true, force: true });
    try {
      renameSync(tmp, outDir);
    } catch (e) {
      if (!existsSync(join(outDir, 'index.html'))) throw e;
    }
  }
  rmSync(tmp, { recursive: true, force: true });
  log(`Built the workbench page in ${((Date.now() - t0) / 1000).toFixed(0)} s (${outDir})\n`);
  return 'built';
}
