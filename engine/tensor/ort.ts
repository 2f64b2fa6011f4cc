/**
 * ONNX Runtime execution. ORT's run() blocks its thread, so by default a session lives in a
 * worker thread (./ort-worker.ts) and the engine's main thread stays free for the protocol.
 * Feeds backed by SharedArrayBuffer cross to the worker without a copy; outputs are
 * transferred back (no second copy).
 */
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { InferenceSession, Tensor } from 'onnxruntime-node';
import type { Graph } from './graph';
import type { HostTensor } from './host';
import { toOnnx } from './onnx';

const require = createRequire(import.meta.url);
type Ort = typeof import('onnxruntime-node');
let ortModule: Ort | null = null;
export function ort(): Ort {
  if (!ortModule) ortModule = require('onnxruntime-node') as Ort;
  return ortModule;
}

export interface RunnerOptions {
  /** intra-op threads (default: all cores, at most 8). */
  threads?: number;
  /** Execution providers in order of preference, e.g. ['cuda', 'cpu']. Default ['cpu']. */
  providers?: string[];
  /** Run the session in a worker thread (default true). */
  inWorker?: boolean;
  /** Write ORT's JSON profile with this file prefix. */
  profilePrefix?: string;
}

export function defaultThreads(): number {
  return Math.max(1, Math.min(8, availableParallelism()));
}

export function sessionOptions(opts: RunnerOptions): InferenceSession.SessionOptions {
  return {
    executionProviders: (opts.providers ?? ['cpu']) as InferenceSession.SessionOptions['executionProviders'],
    intraOpNumThreads: opts.threads ?? defaultThreads(),
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    enableProfiling: !!opts.profilePrefix,
    profileFilePrefix: opts.profilePrefix,
  };
}

export function toOrtTensor(t: HostTensor): Tensor {
  const O = ort();
  const type = t.dtype === 'float32' ? 'float32' : t.dtype === 'float64' ? 'float64' : t.dtype === 'int32' ? 'int32' : t.dtype === 'int64' ? 'int64' : 'bool';
  return new O.Tensor(type, t.data as never, t.shape);
}

export function fromOrtTensor(t: Tensor): HostTensor {
  const dtype = t.type === 'float32' ? 'float32' : t.type === 'float64' ? 'float64' : t.type === 'int32' ? 'int32' : t.type === 'int64' ? 'int64' : 'bool';
  return { dtype, shape: t.dims.slice(), data: t.data as HostTensor['data'] };
}

interface Pending {
  resolve: (v: Record<string, HostTensor>) => void;
  reject: (e: Error) => void;
  t0?: number;
  posted?: number;
}

/** Where one worker run's time went, measured in the worker (absolute times comparable across threads). */
export interface WorkerTiming {
  received: number;
  /** Wrapping the feeds as ORT tensors. */
  feedsMs: number;
  /** session.run: ORT's kernels plus copying each output into a new JS buffer. */
  runMs: number;
  /** Collecting outputs for transfer. */
  outputsMs: number;
  sent: number;
}

/** Cumulative time of a runner's calls (see OrtRunner.stats). */
export interface RunnerStats {
  calls: number;
  /** Whole call as the caller sees it. */
  callMs: number;
  /** Serialising the feeds into the message (postMessage on the caller's thread: copies every non-shared feed). */
  postMs: number;
  /** From posting to the worker picking the message up (queueing, deserialising feeds). */
  toWorkerMs: number;
  feedsMs: number;
  runMs: number;
  outputsMs: number;
  /** From the worker posting the result to the caller resolving (transfer, deserialising). */
  backMs: number;
}

export const emptyRunnerStats = (): RunnerStats => ({ calls: 0, callMs: 0, postMs: 0, toWorkerMs: 0, feedsMs: 0, runMs: 0, outputsMs: 0, backMs: 0 });
const wallNow = () => performance.timeOrigin + performance.now();

export class OrtRunner {
  private session: InferenceSession | null = null;
  private worker: Worker | null = null;
  private pending = new Map<number, Pending>();
  private nextId = 1;
  private persistent: Record<string, HostTensor> = {};
  private staging = new Map<string, SharedArrayBuffer>();
  /** Cumulative timing of run() calls (reset freely). */
  stats: RunnerStats = emptyRunnerStats();
  inputNames: string[] = [];
  outputNames: string[] = [];

  private constructor() {}

  static async create(model: Graph | Uint8Array, opts: RunnerOptions = {}): Promise<OrtRunner> {
    const bytes = model instanceof Uint8Array ? model : toOnnx(model);
    const r = new OrtRunner();
    if (opts.inWorker === false) {
      const s = await ort().InferenceSession.create(bytes, sessionOptions(opts));
      r.session = s;
      r.inputNames = [...s.inputNames];
      r.outputNames = [...s.outputNames];
      return r;
    }
    const w = new Worker(new URL('../worker-bootstrap.mjs', import.meta.url), {
      workerData: { __module: new URL('./ort-worker.ts', import.meta.url).href, model: bytes, opts },
    });
    r.worker = w;
    await new Promise<void>((resolve, reject) => {
      const onMsg = (m: { type: string; inputNames?: string[]; outputNames?: string[]; error?: string }) => {
        if (m.type === 'ready') {
          r.inputNames = m.inputNames!;
          r.outputNames = m.outputNames!;
          w.off('message', onMsg);
          resolve();
        } else if (m.type === 'initError') reject(new Error(`ONNX Runtime session: ${m.error}`));
      };
      w.on('message', onMsg);
      w.once('error', (e: Error) => reject(e));
    });
    w.on('message', (m: { type: string; id: number; outputs?: Record<string, HostTensor>; error?: string; timing?: WorkerTiming }) => {
      if (m.type === 'reply') {
        const p = r.pending.get(m.id);
        if (!p) return;
        r.pending.delete(m.id);
        r.account(p, m.timing);
        if (r.pending.size === 0) w.unref();
        if (m.error) p.reject(new Error(m.error));
        else p.resolve(m.outputs!);
        return;
      }
      if (m.type !== 'result') return;
      const p = r.pending.get(m.id);
      if (!p) return;
      r.pending.delete(m.id);
      r.account(p, m.timing);
      if (m.error) p.reject(new Error(m.error));
      else p.resolve(m.outputs!);
    });
    w.on('error', (e: Error) => {
      for (const p of r.pending.values()) p.reject(e);
      r.pending.clear();
    });
    w.unref();
    return r;
  }

  /**
   * Feeds that stay the same across calls (weights). With a worker they are sent once; keep
   * them in SharedArrayBuffer-backed arrays to update them in place without resending.
   */
  setPersistentFeeds(feeds: Record<string, HostTensor>): void {
    Object.assign(this.persistent, feeds);
    if (!this.worker) return;
    // Through one SharedArrayBuffer per feed, reused across updates when no run is queued: a memcpy here and one into
    // the worker's own buffers (ORT rejects shared memory as input), instead of structured
    // cloning fresh buffers every update (measured 65-200 ms per update of 25M weights, mostly
    // allocation, page faults and GC).
    const staged: Record<string, { dtype: HostTensor['dtype']; shape: number[]; shared: SharedArrayBuffer }> = {};
    for (const [name, t] of Object.entries(feeds)) {
      const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
      let shared = this.staging.get(name);
      // While runs are queued the worker may not have copied out the previous update yet, and
      // a run between the two must see that one: use a fresh buffer then.
      if (!shared || shared.byteLength !== bytes.byteLength || this.pending.size > 0) {
        shared = new SharedArrayBuffer(bytes.byteLength);
        this.staging.set(name, shared);
      }
      new Uint8Array(shared).set(bytes);
      staged[name] = { dtype: t.dtype, shape: t.shape.slice(), shared };
    }
    this.worker.postMessage({ type: 'persist', staged });
  }

  private account(p: Pending, t: WorkerTiming | undefined): void {
    if (!t || p.t0 === undefined || p.posted === undefined) return;
    const st = this.stats,
      end = wallNow();
    st.calls++;
    st.callMs += end - p.t0;
    st.postMs += p.posted - p.t0;
    st.toWorkerMs += t.received - p.posted;
    st.feedsMs += t.feedsMs;
    st.runMs += t.runMs;
    st.outputsMs += t.outputsMs;
    st.backMs += end - t.sent;
  }

  /**
   * A request to a handler in the worker (engine/tensor/ort-worker.ts: the KV host messages);
   * resolves with its reply. Requests and posts reach the worker in the order they are made.
   */
  async request<T>(msg: { type: string } & Record<string, unknown>): Promise<T> {
    const w = this.worker;
    if (!w) throw new Error(`OrtRunner.request(${msg.type}): only sessions in a worker handle requests`);
    const id = this.nextId++;
    w.ref();
    return new Promise<T>((resolve, reject) => {
      const p: Pending = { resolve: resolve as (v: unknown) => void as Pending['resolve'], reject, t0: wallNow() };
      this.pending.set(id, p);
      w.postMessage({ ...msg, id });
      p.posted = wallNow();
    });
  }

  /** A message to the worker with no reply (its errors surface at the next request that depends on it). */
  post(msg: { type: string } & Record<string, unknown>): void {
    if (!this.worker) throw new Error(`OrtRunner.post(${msg.type}): only sessions in a worker handle messages`);
    this.worker.postMessage(msg);
  }

  async run(feeds: Record<string, HostTensor>, outputs?: string[]): Promise<Record<string, HostTensor>> {
    const want = outputs ?? this.outputNames;
    if (this.session) {
      const all = { ...this.persistent, ...feeds };
      const f: Record<string, Tensor> = {};
      for (const n of this.inputNames) {
        if (!all[n]) throw new Error(`OrtRunner.run: missing feed '${n}'`);
        f[n] = toOrtTensor(all[n]);
      }
      const res = await this.session.run(f, want);
      const out: Record<string, HostTensor> = {};
      for (const k of want) out[k] = fromOrtTensor(res[k]);
      return out;
    }
    const id = this.nextId++;
    const w = this.worker!;
    w.ref();
    try {
      return await new Promise((resolve, reject) => {
        const p: Pending = { resolve, reject, t0: wallNow() };
        this.pending.set(id, p);
        w.postMessage({ type: 'run', id, feeds, outputs: want });
        p.posted = wallNow();
      });
    } finally {
      if (this.pending.size === 0) w.unref();
    }
  }

  /** Ends ORT's profiling (session created with `profilePrefix`): writes `<prefix>_<timestamp>.json`. */
  async endProfiling(): Promise<void> {
    if (this.session) {
      this.session.endProfiling();
      return;
    }
    const id = this.nextId++;
    const w = this.worker!;
    w.ref();
    try {
      await new Promise((resolve, reject) => {
        this.pending.set(id, { resolve, reject });
        w.postMessage({ type: 'endProfiling', id });
      });
    } finally {
      if (this.pending.size === 0) w.unref();
    }
  }

  async dispose(): Promise<void> {
    if (this.session) await this.session.release();
    if (this.worker) await this.worker.terminate();
    this.session = null;
    this.worker = null;
  }
}

/**
 * Shared libraries a provider needs next to the ORT binding; when they are absent the provider
 * cannot load, and trying anyway makes the native library print errors to stderr.
 */
const PROVIDER_LIBS: Record<string, string> = { cuda: 'libonnxruntime_providers_cuda.so' };

function providerLibMissing(name: string): string | undefined {
  const lib = PROVIDER_LIBS[name];
  if (!lib) return undefined;
  const dir = join(dirname(require.resolve('onnxruntime-node/package.json')), 'bin', 'napi-v6', process.platform, process.arch);
  return existsSync(join(dir, lib)) ? undefined : `${lib} is not installed in ${dir}`;
}

type OrtInfo = { version: string; providers: { name: string; loads: boolean; error?: string }[] };
let ortInfoCache: Promise<OrtInfo> | undefined;

/** ONNX Runtime's version and which execution providers actually create a session here (probed once per process). */
export function ortInfo(): Promise<OrtInfo> {
  ortInfoCache ??= probeOrt();
  return ortInfoCache;
}

async function probeOrt(): Promise<OrtInfo> {
  const O = ort();
  const { traceGraph } = await import('./graph');
  const g = traceGraph([{ name: 'x', dtype: 'float32', shape: [2] }], (o, x) => ({ y: o.add(x.x, x.x) }));
  const bytes = toOnnx(g);
  const candidates = process.platform === 'win32' ? ['cpu', 'dml'] : process.platform === 'darwin' ? ['cpu', 'coreml'] : ['cpu', 'cuda'];
  const providers: { name: string; loads: boolean; error?: string }[] = [];
  const prevLevel = O.env.logLevel;
  O.env.logLevel = 'fatal'; // a missing provider is reported below, not printed by ORT
  for (const name of candidates) {
    const missing = providerLibMissing(name);
    if (missing) {
      providers.push({ name, loads: false, error: missing });
      continue;
    }
    try {
      const s = await O.InferenceSession.create(bytes, { executionProviders: [name as never] });
      await s.run({ x: new O.Tensor('float32', Float32Array.of(1, 2), [2]) });
      await s.release();
      providers.push({ name, loads: true });
    } catch (e) {
      providers.push({ name, loads: false, error: e instanceof Error ? e.message.split('\n')[0] : String(e) });
    }
  }
  O.env.logLevel = prevLevel;
  return { version: O.env.versions.common ?? 'unknown', providers };
}

/**
 * Execution providers for a device ('auto', 'cpu', 'cuda', 'dml', 'coreml'), checked by creating a session on it: `auto` falls back to
 * the CPU; an explicit device that does not load is an error naming the command that adds it.
 */
export async function resolveProviders(device: string): Promise<string[]> {
  if (device === 'cpu') return ['cpu'];
  const info = await ortInfo();
  if (device === 'auto') {
    const acc = info.providers.find((p) => p.name !== 'cpu' && p.loads);
    return acc ? [acc.name, 'cpu'] : ['cpu'];
  }
  const p = info.providers.find((x) => x.name === device);
  if (!p?.loads) {
    const hint = device === 'cuda' ? ' (run `npm run setup:gpu` on a Linux x64 machine with CUDA 12 and cuDNN 9)' : '';
    throw new Error(`device: "${device}" is not available in onnxruntime-node ${info.version} here${hint}${p?.error ? `: ${p.error}` : ''}`);
  }
  return [device, 'cpu'];
}
