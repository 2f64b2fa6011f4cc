/**
 * The PyTorch peer harness every bench shares: which python runs it, whether it has torch, the
 * thread/BLAS settings PyTorch is measured in (the ratio is always taken against its best), and a
 * `--serve` child process that answers one JSON line per request.
 *
 * OpenBLAS's core type: Debian's OpenBLAS picks its kernels by CPU, and on an AVX-512 machine it
 * runs its GEMM ~2× faster when told `OPENBLAS_CORETYPE=SkylakeX`, so that setting is measured
 * too. On a CPU without AVX-512 the SkylakeX kernels die of SIGILL (this is what made the rollout
 * peer hang on the AVX2-only machine), so there it is never offered.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFileSync } from 'node:fs';

export const PYTHON = '/usr/bin/python3';

/** Why the peer cannot run (a note for the table), or undefined when /usr/bin/python3 imports torch. */
export function torchMissing(): string | undefined {
  const r = spawnSync(PYTHON, ['-c', 'import torch'], { encoding: 'utf8' });
  if (r.error) return `${PYTHON} not found (apt-get install -y python3-torch libopenblas0-pthread)`;
  if (r.status !== 0) return `${PYTHON} has no torch (apt-get install -y python3-torch libopenblas0-pthread): ${r.stderr.trim().split('\n').pop()}`;
  return undefined;
}

/** Whether this CPU has AVX-512 (OpenBLAS's SkylakeX kernels need it). */
export function hasAvx512(): boolean {
  try {
    return /\bavx512f\b/.test(readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    return false;
  }
}

/** A PyTorch setting: its intra-op pool, OpenBLAS's pool and core type, OpenMP's wait policy. */
export interface TorchSetting {
  torchThreads: number;
  coretype?: string;
  passive?: boolean;
}

/**
 * The settings PyTorch is measured in at `threads` threads: as installed; with the SkylakeX core
 * type where the CPU has AVX-512; and, above one thread, torch's own pool at 1 with an N-thread
 * OpenBLAS and torch's N-thread pool with OMP_WAIT_POLICY=PASSIVE (its 2-thread pool otherwise
 * stalls on some machines).
 */
export function torchSettings(threads: number): TorchSetting[] {
  const skx = hasAvx512() && process.env.OPENBLAS_CORETYPE !== 'SkylakeX' ? 'SkylakeX' : undefined;
  const out: TorchSetting[] = [{ torchThreads: threads }];
  if (skx) out.push({ torchThreads: threads, coretype: skx });
  if (threads > 1) out.push({ torchThreads: 1, coretype: skx }, { torchThreads: threads, coretype: skx, passive: true });
  return out;
}

export const torchLabel = (t: TorchSetting, threads: number): string =>
  `${t.torchThreads === threads ? `${threads} threads` : `torch ${t.torchThreads} + BLAS ${threads} threads`}, OPENBLAS_CORETYPE=${t.coretype ?? process.env.OPENBLAS_CORETYPE ?? 'unset'}${t.passive ? ', OMP_WAIT_POLICY=PASSIVE' : ''}`;

export function torchEnv(t: TorchSetting, threads: number): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, OMP_NUM_THREADS: String(t.torchThreads), OPENBLAS_NUM_THREADS: String(threads) };
  if (t.coretype) env.OPENBLAS_CORETYPE = t.coretype;
  if (t.passive) env.OMP_WAIT_POLICY = 'PASSIVE';
  return env;
}

/** A python peer in `--serve` mode: `request(line)` writes one line to its stdin and resolves with its next JSON line. */
export interface ServedPeer {
  /** The first line it printed (its `ready` line, with what it built). */
  ready: Record<string, unknown>;
  request(line: string): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

/**
 * Start `script args…` and wait for its first JSON line. If the process dies (a crash, a signal
 * such as SIGILL), every pending and later request rejects with its exit code, signal and stderr,
 * instead of waiting for a line that never comes.
 */
export async function servePeer(script: string, args: string[], env: NodeJS.ProcessEnv): Promise<ServedPeer> {
  const p: ChildProcessWithoutNullStreams = spawn(PYTHON, [script, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  let buf = '';
  const lines: string[] = [];
  const waiting: { resolve: (s: string) => void; reject: (e: Error) => void }[] = [];
  let dead: Error | undefined;
  p.stderr.on('data', (d) => (stderr += d));
  p.stdout.on('data', (d) => {
    buf += d;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (!line.trim()) continue;
      const w = waiting.shift();
      if (w) w.resolve(line);
      else lines.push(line);
    }
  });
  const exited = new Promise<void>((res) =>
    p.on('close', (code, signal) => {
      dead = new Error(
        `${script.split('/').pop()} exited (${signal ? `signal ${signal}` : `code ${code}`}): ${stderr.trim().split('\n').slice(-5).join('\n')}`,
      );
      for (const w of waiting.splice(0)) w.reject(dead);
      res();
    }),
  );
  p.on('error', (e) => {
    dead = e;
    for (const w of waiting.splice(0)) w.reject(e);
  });
  const next = (): Promise<Record<string, unknown>> => {
    const l = lines.shift();
    if (l !== undefined) return Promise.resolve(JSON.parse(l) as Record<string, unknown>);
    if (dead) return Promise.reject(dead);
    return new Promise<string>((resolve, reject) => waiting.push({ resolve, reject })).then((s) => JSON.parse(s) as Record<string, unknown>);
  };
  const ready = await next();
  return {
    ready,
    request(line) {
      if (dead) return Promise.reject(dead);
      p.stdin.write(`${line}\n`);
      return next();
    },
    async close() {
      p.stdin.end();
      await exited;
    },
  };
}
