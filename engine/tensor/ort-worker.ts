/**
 * Worker thread hosting ONNX Runtime sessions (see ./ort.ts): any number of sessions, created by
 * 'create' messages, that share this worker's persistent feeds (the weights, held once here).
 */
import { parentPort } from 'node:worker_threads';
import type { InferenceSession, Tensor } from 'onnxruntime-node';
import { allocData, type HostTensor } from './host';
import { KvHost, type KvExtendRequest, type KvHostSpec } from '../rollout/worker-kv';
import { fromOrtTensor, ort, sessionOptions, type RunnerOptions, toOrtTensor, type WorkerTiming } from './ort';

/** Wall-clock milliseconds comparable across threads. */
const now = () => performance.timeOrigin + performance.now();

const persistent: Record<string, HostTensor> = {};
let inFlight = 0;
const sessions = new Map<number, InferenceSession>();
/** KV hosts (engine/rollout/worker-kv.ts) by handle, and errors of their fire-and-forget messages. */
const kvHosts = new Map<number, KvHost>();
const kvErrors = new Map<number, Error>();
let nextKv = 1;

function sessionOf(id: number): InferenceSession {
  const s = sessions.get(id);
  if (!s) throw new Error(`ORT session ${id} is not open in this worker`);
  return s;
}

/** Run session `sid` on these feeds plus the persistent ones (weights); `timing` gets the feed and run times. */
async function runSession(
  sid: number,
  feeds: Record<string, HostTensor>,
  outputs: string[],
  timing?: { feedsMs: number; runMs: number },
): Promise<Record<string, HostTensor>> {
  const t0 = now();
  const s = sessionOf(sid);
  const all = { ...persistent, ...feeds };
  const f: Record<string, Tensor> = {};
  for (const n of s.inputNames) {
    if (!all[n]) throw new Error(`OrtRunner.run: missing feed '${n}'`);
    f[n] = toOrtTensor(all[n]);
  }
  inFlight++;
  let res;
  const t1 = now();
  try {
    res = await s.run(f, outputs);
  } finally {
    inFlight--;
    if (timing) {
      timing.feedsMs = t1 - t0;
      timing.runMs = now() - t1;
    }
  }
  const out: Record<string, HostTensor> = {};
  for (const k of outputs) out[k] = fromOrtTensor(res[k]);
  return out;
}

let kvChain: Promise<void> = Promise.resolve();
async function kvMessage(m: {
  type: string;
  id?: number;
  session: number;
  handle?: number;
  spec?: KvHostSpec;
  req?: KvExtendRequest;
  slot?: number;
  from?: number;
  to?: number;
  /** kvFork: copy only the first `length` cached tokens (branching rollouts); kvTruncate: keep only the first `length`. */
  length?: number;
}): Promise<void> {
  const r0 = now();
  const reply = (outputs: unknown, transfer: ArrayBuffer[] = [], timing?: WorkerTiming) =>
    parentPort!.postMessage({ type: 'reply', id: m.id, outputs, timing }, transfer);
  const fail = (e: unknown) => {
    const err = e instanceof Error ? e : new Error(String(e));
    if (m.id !== undefined) parentPort!.postMessage({ type: 'reply', id: m.id, error: err.message });
    else if (m.handle !== undefined) kvErrors.set(m.handle, err);
  };
  try {
    if (m.type === 'kvOpen') {
      const handle = nextKv++;
      sessionOf(m.session);
      kvHosts.set(handle, new KvHost(m.spec!, (feeds, outputs) => runSession(m.session, feeds, outputs)));
      return reply({ handle });
    }
    const host = kvHosts.get(m.handle!);
    if (!host) throw new Error(`KV host ${m.handle} is not open in this worker`);
    if (m.type === 'kvRelease') return host.release(m.slot!);
    if (m.type === 'kvFork') return host.fork(m.from!, m.to!, m.length);
    if (m.type === 'kvTruncate') return host.truncate(m.slot!, m.length!);
    if (m.type === 'kvClose') return void kvHosts.delete(m.handle!);
    if (m.type === 'kvExtend') {
      const pendingErr = kvErrors.get(m.handle!);
      if (pendingErr) {
        kvErrors.delete(m.handle!);
        throw pendingErr;
      }
      const res = await host.extend(m.req!);
      const r3 = now();
      const transfer = [res.ids.buffer, res.logprobs.buffer, res.entropy.buffer, ...(res.logits ? [res.logits.buffer] : [])].filter(
        (b): b is ArrayBuffer => b instanceof ArrayBuffer,
      );
      return reply(res, [...new Set(transfer)], {
        received: r0,
        feedsMs: res.prepMs,
        runMs: res.runMs,
        outputsMs: r3 - r0 - res.prepMs - res.runMs,
        sent: r3,
      });
    }
    throw new Error(`unknown worker message ${m.type}`);
  } catch (e) {
    fail(e);
  }
}

type Staged =
  { dtype: HostTensor['dtype']; shape: number[]; shared: SharedArrayBuffer } | { dtype: HostTensor['dtype']; shape: number[]; moved: HostTensor['data'] };

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
  }) => {
    const result = (outputs: unknown, transfer: ArrayBuffer[] = [], timing?: WorkerTiming) =>
      parentPort!.postMessage({ type: 'result', id: m.id, outputs, timing }, transfer);
    const failed = (e: unknown) => parentPort!.postMessage({ type: 'result', id: m.id, error: e instanceof Error ? e.message : String(e) });
    // KV messages run one at a time, in arrival order (a release or fork never lands mid-step).
    if (m.type.startsWith('kv')) {
      kvChain = kvChain.then(() => kvMessage(m as never));
      return;
    }
    if (m.type === 'persist') {
      for (const [name, st] of Object.entries(m.staged)) {
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
        const s = await ort().InferenceSession.create(m.model!, sessionOptions(m.opts ?? {}));
        sessions.set(m.session, s);
        return result({ inputNames: [...s.inputNames], outputNames: [...s.outputNames] });
      }
      if (m.type === 'release') {
        const s = sessions.get(m.session);
        sessions.delete(m.session);
        if (s) await s.release();
        return result({});
      }
      if (m.type === 'endProfiling') {
        sessionOf(m.session).endProfiling();
        return result({});
      }
      if (m.type !== 'run') return;
      const r0 = now();
      const t = { feedsMs: 0, runMs: 0 };
      const outputs = await runSession(m.session, m.feeds, m.outputs, t);
      const transfer: ArrayBuffer[] = [];
      for (const h of Object.values(outputs)) if (h.data.buffer instanceof ArrayBuffer && !transfer.includes(h.data.buffer)) transfer.push(h.data.buffer);
      const r3 = now();
      result(outputs, transfer, { received: r0, feedsMs: t.feedsMs, runMs: t.runMs, outputsMs: r3 - r0 - t.feedsMs - t.runMs, sent: r3 });
    } catch (e) {
      failed(e);
    }
  },
);
