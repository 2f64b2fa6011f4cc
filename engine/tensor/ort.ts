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
import { hardwareVulkanPossible, webgpuBundled, webgpuFix, webgpuInfo } from './webgpu';

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
  /**
   * ORT's memory pattern (default true): after the first run of an input shape ORT plans one
   * block for all its intermediate tensors and allocates it on later runs, besides the arena
   * chunks the first run left (the arena keeps them). For train/score graphs with large
   * activations that block is extra peak memory (~150 MB per block of a Qwen2.5-0.5B LoRA step
   * at 4 × 512, docs/BENCHMARKS.md); `false` lets every run reuse the arena's chunks instead.
   */
  memPattern?: boolean;
  /**
   * ORT's intra-op threads spin-wait for the next op after each one (default true). `false` lets
   * them sleep: for decode sessions on a busy machine, whose worker hands each call's result back
   * to the engine's thread, spinning pool threads held the cores that thread needed (see
   * engine/model/runtime.ts decodeSpins).
   */
  spin?: boolean;
  /** Per-output location (WebGPU): 'gpu-buffer' outputs stay on the device (read them only in a worker handler). */
  outputLocation?: Record<string, 'cpu' | 'gpu-buffer'>;
  /**
   * Persistent feeds of the session's worker that back the model's external initializers (each
   * stored under the feed's name as its location, engine/tensor/onnx.ts OnnxInitializer.external):
   * ORT reads their bytes at creation, so the model carries no copy (a quantized base's codes baked
   * into a CPU decode session). Worker sessions only; the feeds must be sent before the session is made.
   */
  externalFeeds?: string[];
}

let processProviders: string[] | undefined;
/**
 * The execution providers of sessions created without `providers` in this process (a CLI's
 * `--device`, resolved by resolveProviders). Default ['cpu'].
 */
export function setDefaultProviders(providers: string[] | undefined): void {
  processProviders = providers?.slice();
}
export function defaultProviders(): string[] {
  return processProviders ?? ['cpu'];
}

export function defaultThreads(): number {
  return Math.max(1, Math.min(8, availableParallelism()));
}

const GRAPH_OPT_LEVELS = ['disabled', 'basic', 'extended', 'all'] as const;
type GraphOptLevel = (typeof GRAPH_OPT_LEVELS)[number];

/**
 * The numerics variant every session of the process runs under, for checking that results do not
 * hinge on one accumulation order (ORT's CPU provider picks AVX-512 or AVX2 kernels by CPU and has
 * no switch to avoid AVX-512; other thread counts and graph optimisations change the order the way
 * another kernel does): ARBOR_ORT_THREADS (intra-op threads, overriding each session's own) and
 * ARBOR_ORT_GRAPH_OPT (disabled | basic | extended | all; default all). `npm run test:variants`
 * runs the numerics tests under each (docs/areas/tooling.md).
 */
export function ortVariant(env: NodeJS.ProcessEnv = process.env): { threads?: number; graphOpt: GraphOptLevel } {
  const t = env.ARBOR_ORT_THREADS;
  const g = env.ARBOR_ORT_GRAPH_OPT;
  if (t !== undefined && t !== '' && !/^[1-9]\d*$/.test(t)) throw new Error(`ARBOR_ORT_THREADS must be a whole number ≥ 1 (got "${t}")`);
  if (g !== undefined && g !== '' && !(GRAPH_OPT_LEVELS as readonly string[]).includes(g))
    throw new Error(`ARBOR_ORT_GRAPH_OPT must be one of ${GRAPH_OPT_LEVELS.join(', ')} (got "${g}")`);
  return { ...(t ? { threads: Number(t) } : {}), graphOpt: (g || 'all') as GraphOptLevel };
}

export function sessionOptions(opts: RunnerOptions): InferenceSession.SessionOptions {
  const variant = ortVariant();
  return {
    executionProviders: (opts.providers ?? ['cpu']) as InferenceSession.SessionOptions['executionProviders'],
    intraOpNumThreads: variant.threads ?? opts.threads ?? defaultThreads(),
    interOpNumThreads: 1,
    graphOptimizationLevel: variant.graphOpt,
    executionMode: 'sequential',
    enableProfiling: !!opts.profilePrefix,
    profileFilePrefix: opts.profilePrefix,
    ...(opts.memPattern === false ? { enableMemPattern: false } : {}),
    ...(opts.outputLocation ? { preferredOutputLocation: opts.outputLocation } : {}),
    ...(opts.spin === false ? { extra: { session: { intra_op: { allow_spinning: '0' } } } } : {}),
  };
}

/** HostTensor dtypes and ORT tensor types share their names; any other is a boolean tensor. */
const SHARED_DTYPES: ReadonlySet<string> = new Set(['float32', 'float64', 'int32', 'int64', 'uint8']);
const dtypeOf = (name: string): HostTensor['dtype'] => (SHARED_DTYPES.has(name) ? name : 'bool') as HostTensor['dtype'];

export function toOrtTensor(t: HostTensor): Tensor {
  return new (ort().Tensor)(dtypeOf(t.dtype), t.data as never, t.shape);
}

export function fromOrtTensor(t: Tensor): HostTensor {
  return { dtype: dtypeOf(t.type), shape: t.dims.slice(), data: t.data as HostTensor['data'] };
}

interface Pending {
  resolve: (v: Record<string, HostTensor>) => void;
  reject: (e: Error) => void;
  t0?: number;
  posted?: number;
  account?: (p: Pending, t: WorkerTiming | undefined) => void;
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
  /** Bytes copied host → device and device → host by the run (WebGPU sessions only). */
  toDevice?: number;
  toHost?: number;
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
  /** Bytes copied host → device (CPU feeds of a WebGPU session, weights uploaded for it) and back (its CPU outputs). */
  toDeviceBytes: number;
  toHostBytes: number;
}

export const emptyRunnerStats = (): RunnerStats => ({
  calls: 0,
  callMs: 0,
  postMs: 0,
  toWorkerMs: 0,
  feedsMs: 0,
  runMs: 0,
  outputsMs: 0,
  backMs: 0,
  toDeviceBytes: 0,
  toHostBytes: 0,
});
const wallNow = () => performance.timeOrigin + performance.now();

/**
 * One word shared by every ORT worker of the process: a WebGPU run holds it (ORT 1.30 has crashed
 * on concurrent runs of two WebGPU sessions, so the device gets one queue per process).
 */
const DEVICE_LOCK = new SharedArrayBuffer(4);

/** A staged or transferred persistent feed on its way to the worker. */
type PersistMsg =
  { dtype: HostTensor['dtype']; shape: number[]; shared: SharedArrayBuffer } | { dtype: HostTensor['dtype']; shape: number[]; moved: HostTensor['data'] };

/**
 * One worker thread hosting any number of ORT sessions (OrtRunner.create with `worker`). Its
 * persistent feeds (the weights) are held once in the worker and read by every session there,
 * so the score, decode and train sessions of a model share one copy.
 */
export class OrtWorker {
  private pending = new Map<number, Pending>();
  private nextId = 1;
  private nextSession = 1;
  private staging = new Map<string, SharedArrayBuffer>();
  private handlers = new Map<string, Promise<void>>();
  private closed = false;

  private constructor(readonly worker: Worker) {
    worker.on('message', (m: { type: string; id: number; outputs?: Record<string, HostTensor>; error?: string; timing?: WorkerTiming }) => {
      if (m.type !== 'reply' && m.type !== 'result') return;
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      p.account?.(p, m.timing);
      if (this.pending.size === 0) worker.unref();
      if (m.error) p.reject(new Error(m.error));
      else p.resolve(m.outputs!);
    });
    worker.on('error', (e: Error) => {
      for (const p of this.pending.values()) p.reject(e);
      this.pending.clear();
    });
    worker.unref();
  }

  static create(): OrtWorker {
    return new OrtWorker(
      new Worker(new URL('../worker-bootstrap.mjs', import.meta.url), {
        workerData: { __module: new URL('./ort-worker.ts', import.meta.url).href, deviceLock: DEVICE_LOCK },
      }),
    );
  }

  /**
   * Load a handler module into the worker (it exports attachWorkerHandler(api), see
   * ./ort-worker.ts); once per module, before its first message.
   */
  loadHandler(moduleUrl: string): Promise<void> {
    let p = this.handlers.get(moduleUrl);
    if (!p) {
      p = this.call<unknown>({ type: 'loadHandler', module: moduleUrl }).then(() => undefined);
      this.handlers.set(moduleUrl, p);
    }
    return p;
  }

  /** A message with a reply (outputs of a run, or a handler's result). */
  call<T = Record<string, HostTensor>>(
    msg: { type: string } & Record<string, unknown>,
    account?: Pending['account'],
    transfer: ArrayBuffer[] = [],
  ): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`OrtWorker: ${msg.type} after dispose`));
    const id = this.nextId++;
    this.worker.ref();
    return new Promise<T>((resolve, reject) => {
      const p: Pending = { resolve: resolve as unknown as Pending['resolve'], reject, t0: wallNow(), account };
      this.pending.set(id, p);
      this.worker.postMessage({ ...msg, id }, transfer);
      p.posted = wallNow();
    });
  }

  post(msg: { type: string } & Record<string, unknown>): void {
    this.worker.postMessage(msg);
  }

  get busy(): boolean {
    return this.pending.size > 0;
  }

  newSessionId(): number {
    return this.nextSession++;
  }

  /**
   * Set feeds that every session of this worker reads until replaced (weights). `move`: names
   * whose arrays are transferred to the worker without a copy — they are detached (empty) on
   * this thread afterwards, so the worker holds the only copy (the frozen base of a LoRA model).
   * Other feeds go through one SharedArrayBuffer per feed (a memcpy on each side; reused across
   * updates when no run is queued: structured-cloning fresh buffers cost 65–200 ms per update of
   * 25M weights) for names in `keepStaging` (default: all), the tensors that will be sent again;
   * others go as a transferred copy.
   */
  setPersistentFeeds(feeds: Record<string, HostTensor>, opts: { move?: Set<string>; keepStaging?: Set<string> } = {}): void {
    const staged: Record<string, PersistMsg> = {};
    const transfer: ArrayBuffer[] = [];
    for (const [name, t] of Object.entries(feeds)) {
      const d = t.data;
      if (opts.move?.has(name) && d.buffer instanceof ArrayBuffer && d.byteOffset === 0 && d.byteLength === d.buffer.byteLength) {
        staged[name] = { dtype: t.dtype, shape: t.shape.slice(), moved: d };
        transfer.push(d.buffer);
        continue;
      }
      if (opts.keepStaging && !opts.keepStaging.has(name)) {
        // Sent once: a copy transferred to the worker becomes its buffer (two copies at the peak,
        // not three as through a staging buffer the worker copies out of).
        this.staging.delete(name);
        const copy = d.slice();
        staged[name] = { dtype: t.dtype, shape: t.shape.slice(), moved: copy };
        transfer.push(copy.buffer as ArrayBuffer);
        continue;
      }
      const bytes = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
      let shared = this.staging.get(name);
      // While runs are queued the worker may not have copied out the previous update yet, and
      // a run between the two must see that one: use a fresh buffer then.
      if (!shared || shared.byteLength !== bytes.byteLength || this.pending.size > 0) shared = new SharedArrayBuffer(bytes.byteLength);
      this.staging.set(name, shared);
      new Uint8Array(shared).set(bytes);
      staged[name] = { dtype: t.dtype, shape: t.shape.slice(), shared };
    }
    this.worker.postMessage({ type: 'persist', staged }, transfer);
  }

  async dispose(): Promise<void> {
    this.closed = true;
    await this.worker.terminate();
  }
}

export class OrtRunner {
  private session: InferenceSession | null = null;
  private host: OrtWorker | null = null;
  /** Whether this runner created its worker (and so terminates it on dispose). */
  private ownsHost = false;
  private sessionId = 0;
  private persistent: Record<string, HostTensor> = {};
  /** Cumulative timing of run() calls (reset freely). */
  stats: RunnerStats = emptyRunnerStats();
  inputNames: string[] = [];
  outputNames: string[] = [];

  private constructor() {}

  /**
   * A session for `model`: in this thread (`inWorker: false`), in `opts.worker` (shared with
   * that worker's other sessions and its persistent feeds), or in a worker of its own.
   */
  static async create(model: Graph | Uint8Array, opts: RunnerOptions & { worker?: OrtWorker } = {}): Promise<OrtRunner> {
    // WebGPU: ops its provider lacks are written with ops it has (engine/tensor/onnx.ts).
    const onDevice = (opts.providers ?? defaultProviders())[0] === 'webgpu';
    const bytes = model instanceof Uint8Array ? model : toOnnx(model, { webgpu: onDevice });
    const r = new OrtRunner();
    if (opts.inWorker === false) {
      r.createOpts = { ...opts, worker: undefined } as RunnerOptions;
      r.providers = opts.providers ?? defaultProviders();
      const s = await ort().InferenceSession.create(bytes, sessionOptions({ ...opts, providers: opts.providers ?? defaultProviders() }));
      r.session = s;
      r.inputNames = [...s.inputNames];
      r.outputNames = [...s.outputNames];
      return r;
    }
    const { worker, ...rest } = opts;
    const sessionOpts: RunnerOptions = { ...rest, providers: rest.providers ?? defaultProviders() };
    r.host = worker ?? OrtWorker.create();
    r.ownsHost = !worker;
    r.providers = sessionOpts.providers ?? ['cpu'];
    r.sessionId = r.host.newSessionId();
    r.createOpts = sessionOpts;
    try {
      const names = await r.host.call<{ inputNames: string[]; outputNames: string[] }>({
        type: 'create',
        session: r.sessionId,
        model: bytes,
        opts: sessionOpts,
      });
      r.inputNames = names.inputNames;
      r.outputNames = names.outputNames;
    } catch (e) {
      if (r.ownsHost) await r.host.dispose();
      throw new Error(`ONNX Runtime session: ${e instanceof Error ? e.message : String(e)}`);
    }
    return r;
  }

  /**
   * Replace this runner's session by a session of `model` with the same options (a quantized
   * decode session rebuilt for new weights, engine/model/runtime.ts). The session id stays, so
   * worker handlers bound to it (a KV cache host) keep their state; the old session is released
   * once no run is in flight.
   */
  async reload(model: Uint8Array): Promise<void> {
    if (this.session) {
      const old = this.session;
      this.session = await ort().InferenceSession.create(model, sessionOptions({ ...this.createOpts, providers: this.providers }));
      await old.release();
      return;
    }
    await this.host!.call({ type: 'create', session: this.sessionId, model, opts: this.createOpts });
  }
  private createOpts: RunnerOptions = {};

  /**
   * Feeds that stay the same across calls (weights), sent once. In a shared worker they are the
   * worker's (every session there reads them); see OrtWorker.setPersistentFeeds for `opts`.
   */
  setPersistentFeeds(feeds: Record<string, HostTensor>, opts?: { move?: Set<string>; keepStaging?: Set<string> }): void {
    if (!this.host) {
      Object.assign(this.persistent, feeds);
      return;
    }
    this.host.setPersistentFeeds(feeds, opts);
  }

  private account = (p: Pending, t: WorkerTiming | undefined): void => {
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
    st.toDeviceBytes += t.toDevice ?? 0;
    st.toHostBytes += t.toHost ?? 0;
  };

  /**
   * A request to a handler in the worker (engine/tensor/ort-worker.ts: the KV host messages),
   * bound to this runner's session; resolves with its reply. Requests and posts reach the worker
   * in the order they are made.
   */
  async request<T>(msg: { type: string } & Record<string, unknown>): Promise<T> {
    if (!this.host) throw new Error(`OrtRunner.request(${msg.type}): only sessions in a worker handle requests`);
    return this.host.call<T>({ ...msg, session: this.sessionId }, this.account);
  }

  /** Load a handler module into this runner's worker (OrtWorker.loadHandler). */
  async loadHandler(moduleUrl: string): Promise<void> {
    if (!this.host) throw new Error('OrtRunner.loadHandler: only sessions in a worker have handlers');
    await this.host.loadHandler(moduleUrl);
  }

  /** The providers this runner's session was created with. */
  providers: string[] = ['cpu'];

  /** A message to the worker with no reply (its errors surface at the next request that depends on it). */
  post(msg: { type: string } & Record<string, unknown>): void {
    if (!this.host) throw new Error(`OrtRunner.post(${msg.type}): only sessions in a worker handle messages`);
    this.host.post({ ...msg, session: this.sessionId });
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
    return this.host!.call({ type: 'run', session: this.sessionId, feeds, outputs: want }, this.account);
  }

  /** Ends ORT's profiling (session created with `profilePrefix`): writes `<prefix>_<timestamp>.json`. */
  async endProfiling(): Promise<void> {
    if (this.session) {
      this.session.endProfiling();
      return;
    }
    await this.host!.call({ type: 'endProfiling', session: this.sessionId });
  }

  async dispose(): Promise<void> {
    if (this.session) await this.session.release();
    if (this.host) {
      if (this.ownsHost) await this.host.dispose();
      else await this.host.call({ type: 'release', session: this.sessionId }).catch(() => undefined);
    }
    this.session = null;
    this.host = null;
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
 * Execution providers for a device ('auto', 'cpu', 'cuda', 'webgpu', 'dml', 'coreml'), checked
 * before any run is created: `auto` is CUDA when its provider loads, else WebGPU on a hardware
 * adapter, else DirectML/CoreML when they load, else the CPU (a software WebGPU adapter such as
 * SwiftShader only when asked for by name). An explicit device that is not there is an error
 * naming what to install.
 */
export async function resolveProviders(device: string): Promise<string[]> {
  if (device === 'cpu') return ['cpu'];
  if (device === 'webgpu') {
    const w = await webgpuInfo();
    if (!w.available) throw new Error(`device: "webgpu": no WebGPU adapter here (${w.error ?? 'unknown'}). To get one: ${w.fix ?? webgpuFix()}`);
    return ['webgpu', 'cpu'];
  }
  const info = await ortInfo();
  if (device === 'auto') {
    if (info.providers.find((p) => p.name === 'cuda' && p.loads)) return ['cuda', 'cpu'];
    // Probing WebGPU spawns a process: skip it where only software Vulkan drivers are installed.
    if (webgpuBundled() && (process.platform !== 'linux' || hardwareVulkanPossible())) {
      const w = await webgpuInfo();
      if (w.available && w.adapter && !w.adapter.software) return ['webgpu', 'cpu'];
    }
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
