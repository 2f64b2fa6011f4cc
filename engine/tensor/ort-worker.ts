/**
 * Worker thread hosting ONNX Runtime sessions (see ./ort.ts): any number of sessions, created by
 * 'create' messages, that share this worker's persistent feeds (the weights, held once here).
 *
 * On the WebGPU provider the persistent feeds are uploaded to the device once per version (an
 * identity session whose outputs stay `gpu-buffer`) and fed to every WebGPU session as device
 * tensors, so the weights do not cross per run; runs on the device take a process-wide lock
 * (concurrent runs of two WebGPU sessions have crashed ORT 1.30: one queue per process).
 *
 * Handlers: a module loaded by a 'loadHandler' message (its URL given by the caller, e.g.
 * engine/rollout/worker-kv.ts) gets a WorkerApi and handles messages whose type starts with its
 * prefix, in arrival order. So this layer imports nothing above it.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { InferenceSession, Tensor } from 'onnxruntime-node';
import { allocData, type HostTensor } from './host';
import { fromOrtTensor, ort, sessionOptions, type RunnerOptions, toOrtTensor, type WorkerTiming } from './ort';
import { traceGraph } from './graph';
import { toOnnx } from './onnx';

/** Wall-clock milliseconds comparable across threads. */
const now = () => performance.timeOrigin + performance.now();

/** A feed or output that is either on the host or an ORT tensor (a `gpu-buffer` one stays on the device). */
export type WorkerValue = HostTensor | Tensor;

/** Bytes that crossed between host and device in one run (WebGPU sessions; on the CPU nothing "crosses"). */
export interface Crossing {
  /** Host → device: CPU-located feeds of a device session, and persistent feeds uploaded for it. */
  toDevice: number;
  /** Device → host: CPU-located outputs of a device session. */
  toHost: number;
}

/** What a handler module gets (see the module comment). */
export interface WorkerApi {
  /** Run a session; feeds may be device tensors, outputs located on the device are returned as ORT tensors (never read them). */
  run(sid: number, feeds: Record<string, WorkerValue>, outputs: string[], crossing?: Crossing): Promise<Record<string, WorkerValue>>;
  /** The session runs on the WebGPU provider. */
  onDevice(sid: number): boolean;
  /** Create a session in this worker (the caller's options, e.g. output locations); returns its id. */
  create(model: Uint8Array, opts: RunnerOptions): Promise<number>;
  /** A device tensor's values on the host (an identity session with CPU output; counted in `crossing`). */
  toHost(t: Tensor, crossing?: Crossing): Promise<HostTensor>;
  /** Post a reply to message `id`. */
  reply(id: number | undefined, outputs: unknown, transfer?: ArrayBuffer[], timing?: WorkerTiming): void;
  replyError(id: number | undefined, e: unknown): void;
}

export interface WorkerHandler {
  prefix: string;
  handle(m: { type: string; id?: number; session: number } & Record<string, unknown>): Promise<void>;
}

const persistent: Record<string, HostTensor> = {};
/** Device copies of persistent feeds (WebGPU), dropped when the feed is replaced. */
const deviceCopies = new Map<string, Tensor>();
/** Device tensors to dispose once no run is in flight. */
const retired: Tensor[] = [];
/** Sessions replaced while a run was in flight (released when none is). */
const retiredSessions: InferenceSession[] = [];
let inFlight = 0;
const sessions = new Map<number, { s: InferenceSession; device: boolean }>();
let nextLocalSession = 1e6;
const handlers: WorkerHandler[] = [];

/** The process-wide device lock (a SharedArrayBuffer from ./ort.ts): one WebGPU run at a time in the process. */
const lockWord: Int32Array | null = workerData?.deviceLock ? new Int32Array(workerData.deviceLock as SharedArrayBuffer) : null;
async function withDevice<T>(device: boolean, f: () => Promise<T>): Promise<T> {
  if (!device || !lockWord) return f();
  while (Atomics.compareExchange(lockWord, 0, 0, 1) !== 0) {
    const w = (Atomics as unknown as { waitAsync(a: Int32Array, i: number, v: number): { async: boolean; value: Promise<unknown> | string } }).waitAsync(
      lockWord,
      0,
      1,
    );
    if (w.async) await w.value;
  }
  try {
    return await f();
  } finally {
    Atomics.store(lockWord, 0, 0);
    Atomics.notify(lockWord, 0);
  }
}

function sessionOf(id: number): InferenceSession {
  const s = sessions.get(id);
  if (!s) throw new Error(`ORT session ${id} is not open in this worker`);
  return s.s;
}

const isOrtTensor = (v: WorkerValue): v is Tensor => typeof (v as Tensor).location === 'string';
const bytesOf = (v: WorkerValue): number => (isOrtTensor(v) ? (v.location === 'cpu' || v.location === 'cpu-pinned' ? v.size * 4 : 0) : v.data.byteLength);

/** Identity sessions on the device by rank and direction: 'up' outputs stay on the device, 'down' outputs come to the host. */
const identity = new Map<string, Promise<InferenceSession>>();
function identitySession(rank: number, dtype: HostTensor['dtype'], dir: 'up' | 'down'): Promise<InferenceSession> {
  const key = `${dir}:${rank}:${dtype}`;
  let s = identity.get(key);
  if (!s) {
    const shape = Array.from({ length: rank }, (_, i) => `d${i}`);
    // uint8 (quantized weights' codes): an Identity node (WebGPU has no uint8 arithmetic kernels; Identity runs on the device).
    const g = traceGraph([{ name: 'x', dtype, shape }], (o, x) => ({
      y: dtype === 'float32' ? o.mul(x.x, o.scalar(1)) : dtype === 'uint8' ? o.stopGradient(x.x) : o.add(x.x, o.scalar(0, dtype)),
    }));
    s = ort().InferenceSession.create(toOnnx(g), {
      ...sessionOptions({ providers: ['webgpu'], threads: 1 }),
      preferredOutputLocation: dir === 'up' ? 'gpu-buffer' : 'cpu',
    } as InferenceSession.SessionOptions);
    identity.set(key, s);
  }
  return s;
}

/** A persistent feed's device copy, uploaded on first use after it was set. */
async function deviceCopy(name: string, crossing?: Crossing): Promise<Tensor> {
  let t = deviceCopies.get(name);
  if (t) return t;
  const h = persistent[name]!;
  const s = await identitySession(h.shape.length, h.dtype, 'up');
  t = (await s.run({ x: toOrtTensor(h) })).y!;
  if (crossing) crossing.toDevice += h.data.byteLength;
  deviceCopies.set(name, t);
  return t;
}

async function toHost(t: Tensor, crossing?: Crossing): Promise<HostTensor> {
  if (t.location === 'cpu') return fromOrtTensor(t);
  const dtype = t.type as HostTensor['dtype'];
  const s = await identitySession(t.dims.length, dtype, 'down');
  const out = fromOrtTensor((await withDevice(true, () => s.run({ x: t }))).y!);
  if (crossing) crossing.toHost += out.data.byteLength;
  return out;
}

/** Run session `sid` on these feeds plus the persistent ones (weights); `timing` gets the feed and run times. */
async function runRaw(
  sid: number,
  feeds: Record<string, WorkerValue>,
  outputs: string[],
  timing?: { feedsMs: number; runMs: number },
  crossing?: Crossing,
): Promise<Record<string, WorkerValue>> {
  const entry = sessions.get(sid);
  if (!entry) throw new Error(`ORT session ${sid} is not open in this worker`);
  const { s, device } = entry;
  return withDevice(device, async () => {
    const t0 = now();
    const f: Record<string, Tensor> = {};
    for (const n of s.inputNames) {
      const v = feeds[n];
      if (v !== undefined) {
        f[n] = isOrtTensor(v) ? v : toOrtTensor(v);
        if (device && crossing) crossing.toDevice += bytesOf(v);
        continue;
      }
      if (!persistent[n]) throw new Error(`OrtRunner.run: missing feed '${n}'`);
      f[n] = device ? await deviceCopy(n, crossing) : toOrtTensor(persistent[n]);
    }
    inFlight++;
    let res;
    const t1 = now();
    try {
      res = await s.run(f, outputs);
    } finally {
      inFlight--;
      if (inFlight === 0) {
        for (const t of retired.splice(0)) t.dispose();
        for (const r of retiredSessions.splice(0)) void r.release();
      }
      if (timing) {
        timing.feedsMs = t1 - t0;
        timing.runMs = now() - t1;
      }
    }
    const out: Record<string, WorkerValue> = {};
    for (const k of outputs) {
      const t = res[k]!;
      if (t.location === 'cpu' || t.location === 'cpu-pinned') {
        out[k] = fromOrtTensor(t);
        if (device && crossing) crossing.toHost += out[k].data.byteLength;
      } else out[k] = t;
    }
    return out;
  });
}

/** Run with host feeds and outputs only (the 'run' message). */
async function runSession(
  sid: number,
  feeds: Record<string, HostTensor>,
  outputs: string[],
  timing?: { feedsMs: number; runMs: number },
  crossing?: Crossing,
): Promise<Record<string, HostTensor>> {
  const out = await runRaw(sid, feeds, outputs, timing, crossing);
  for (const [k, v] of Object.entries(out))
    if (isOrtTensor(v)) {
      v.dispose();
      throw new Error(`OrtRunner.run: output '${k}' is on the device (${v.location}); read device outputs through a worker handler`);
    }
  return out as Record<string, HostTensor>;
}

async function createSession(id: number, model: Uint8Array, opts: RunnerOptions): Promise<InferenceSession> {
  const device = (opts.providers ?? ['cpu'])[0] === 'webgpu';
  const externalData = opts.externalFeeds?.map((n) => {
    const t = persistent[n];
    if (!t) throw new Error(`external initializer '${n}': this worker holds no persistent feed of that name (send the weights before creating the session)`);
    return { path: n, data: new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength) };
  });
  const s = await withDevice(device, () => ort().InferenceSession.create(model, { ...sessionOptions(opts), ...(externalData ? { externalData } : {}) }));
  // A 'create' for an open id replaces its session (OrtRunner.reload): the old one is released
  // when no run is in flight.
  const old = sessions.get(id);
  sessions.set(id, { s, device });
  if (old) {
    if (inFlight > 0) retiredSessions.push(old.s);
    else await old.s.release();
  }
  return s;
}

const api: WorkerApi = {
  run: (sid, feeds, outputs, crossing) => runRaw(sid, feeds, outputs, undefined, crossing),
  onDevice: (sid) => sessions.get(sid)?.device ?? false,
  create: async (model, opts) => {
    const id = nextLocalSession++;
    await createSession(id, model, opts);
    return id;
  },
  toHost,
  reply: (id, outputs, transfer = [], timing) => parentPort!.postMessage({ type: 'reply', id, outputs, timing }, transfer),
  replyError: (id, e) => {
    if (id !== undefined) parentPort!.postMessage({ type: 'reply', id, error: e instanceof Error ? e.message : String(e) });
  },
};

const CORE_MESSAGES = new Set(['persist', 'create', 'release', 'endProfiling', 'run']);
/** Handler messages (and handler loads) run one at a time, in arrival order. */
let handlerChain: Promise<void> = Promise.resolve();

type Staged =
  { dtype: HostTensor['dtype']; shape: number[]; shared: SharedArrayBuffer } | { dtype: HostTensor['dtype']; shape: number[]; moved: HostTensor['data'] };

function retire(name: string): void {
  const t = deviceCopies.get(name);
  if (!t) return;
  deviceCopies.delete(name);
  if (inFlight > 0) retired.push(t);
  else t.dispose();
}

parentPort!.on(
  'message',
  async (m: {
    type: string;
    id: number;
    session: number;
    model?: Uint8Array;
    opts?: RunnerOptions;
    feeds: Record<string, HostTensor>;
    outputs: string[];
    staged: Record<string, Staged>;
    module?: string;
  }) => {
    const result = (outputs: unknown, transfer: ArrayBuffer[] = [], timing?: WorkerTiming) =>
      parentPort!.postMessage({ type: 'result', id: m.id, outputs, timing }, transfer);
    const failed = (e: unknown) => parentPort!.postMessage({ type: 'result', id: m.id, error: e instanceof Error ? e.message : String(e) });
    if (m.type === 'loadHandler') {
      handlerChain = handlerChain.then(async () => {
        try {
          const mod = (await import(m.module!)) as { attachWorkerHandler?: (api: WorkerApi) => WorkerHandler };
          if (typeof mod.attachWorkerHandler !== 'function') throw new Error(`${m.module} does not export attachWorkerHandler(api)`);
          const h = mod.attachWorkerHandler(api);
          if (!handlers.some((x) => x.prefix === h.prefix)) handlers.push(h);
          api.reply(m.id, {});
        } catch (e) {
          api.replyError(m.id, e);
        }
      });
      return;
    }
    if (!CORE_MESSAGES.has(m.type)) {
      // A handler's message may arrive while its module is still loading: it waits in the chain.
      handlerChain = handlerChain.then(async () => {
        const h = handlers.find((x) => m.type.startsWith(x.prefix));
        if (!h) return api.replyError(m.id, new Error(`unknown worker message ${m.type}`));
        await h.handle(m as never);
      });
      return;
    }
    if (m.type === 'persist') {
      for (const [name, st] of Object.entries(m.staged)) {
        retire(name);
        if ('moved' in st) {
          // Transferred, not copied: this worker holds the only copy.
          persistent[name] = { dtype: st.dtype, shape: st.shape, data: st.moved };
          continue;
        }
        // Copy each staged feed into this worker's own buffer (allocated once per size): ORT
        // rejects shared memory as input. While a run is in flight its feeds may still be read
        // (ORT runs them in a later tick), so then the new values go to fresh buffers and the run
        // keeps the ones it was given.
        const cur = persistent[name];
        if (inFlight > 0 || !cur || cur.dtype !== st.dtype || cur.data.byteLength !== st.shared.byteLength || cur.data.buffer instanceof SharedArrayBuffer) {
          const data = allocData(st.dtype, st.shared.byteLength / allocData(st.dtype, 0).BYTES_PER_ELEMENT);
          persistent[name] = { dtype: st.dtype, shape: st.shape, data };
        } else persistent[name] = { ...cur, shape: st.shape };
        const d = persistent[name].data;
        new Uint8Array(d.buffer, d.byteOffset, d.byteLength).set(new Uint8Array(st.shared));
      }
      return;
    }
    try {
      if (m.type === 'create') {
        const s = await createSession(m.session, m.model!, m.opts ?? {});
        return result({ inputNames: [...s.inputNames], outputNames: [...s.outputNames] });
      }
      if (m.type === 'release') {
        const s = sessions.get(m.session);
        sessions.delete(m.session);
        if (s) await s.s.release();
        return result({});
      }
      if (m.type === 'endProfiling') {
        sessionOf(m.session).endProfiling();
        return result({});
      }
      if (m.type !== 'run') return;
      const r0 = now();
      const t = { feedsMs: 0, runMs: 0 };
      const crossing: Crossing = { toDevice: 0, toHost: 0 };
      const outputs = await runSession(m.session, m.feeds, m.outputs, t, crossing);
      const transfer: ArrayBuffer[] = [];
      for (const h of Object.values(outputs)) if (h.data.buffer instanceof ArrayBuffer && !transfer.includes(h.data.buffer)) transfer.push(h.data.buffer);
      const r3 = now();
      result(outputs, transfer, { received: r0, feedsMs: t.feedsMs, runMs: t.runMs, outputsMs: r3 - r0 - t.feedsMs - t.runMs, sent: r3, ...crossing });
    } catch (e) {
      failed(e);
    }
  },
);
