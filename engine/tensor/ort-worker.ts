/** Worker thread hosting one ONNX Runtime session (see ./ort.ts). */
import { parentPort, workerData } from 'node:worker_threads';
import type { Tensor } from 'onnxruntime-node';
import { allocData, type HostTensor } from './host';
import { fromOrtTensor, ort, sessionOptions, toOrtTensor, type RunnerOptions } from './ort';

const { model, opts } = workerData as { model: Uint8Array; opts: RunnerOptions };
const persistent: Record<string, HostTensor> = {};
let inFlight = 0;

async function start(): Promise<void> {
  let session;
  try {
    session = await ort().InferenceSession.create(model, sessionOptions(opts));
  } catch (e) {
    parentPort!.postMessage({ type: 'initError', error: e instanceof Error ? e.message : String(e) });
    return;
  }
  const s = session;
  parentPort!.on('message', async (m: { type: string; id: number; feeds: Record<string, HostTensor>; outputs: string[]; staged: Record<string, { dtype: HostTensor['dtype']; shape: number[]; shared: SharedArrayBuffer }> }) => {
    if (m.type === 'persist') {
      // Copy each staged feed into this worker's own buffer (allocated once per size). While a
      // run is in flight its feeds may still be read (ORT runs them in a later tick), so then
      // the new values go to fresh buffers and the run keeps the ones it was given.
      for (const [name, st] of Object.entries(m.staged)) {
        const cur = persistent[name];
        if (inFlight > 0 || !cur || cur.dtype !== st.dtype || cur.data.byteLength !== st.shared.byteLength) {
          const data = allocData(st.dtype, st.shared.byteLength / allocData(st.dtype, 0).BYTES_PER_ELEMENT);
          persistent[name] = { dtype: st.dtype, shape: st.shape, data };
        } else persistent[name] = { ...cur, shape: st.shape };
        const d = persistent[name].data;
        new Uint8Array(d.buffer, d.byteOffset, d.byteLength).set(new Uint8Array(st.shared));
      }
      return;
    }
    if (m.type === 'endProfiling') {
      try {
        s.endProfiling();
        parentPort!.postMessage({ type: 'result', id: m.id, outputs: {} });
      } catch (e) {
        parentPort!.postMessage({ type: 'result', id: m.id, error: e instanceof Error ? e.message : String(e) });
      }
      return;
    }
    if (m.type !== 'run') return;
    try {
      const all = { ...persistent, ...m.feeds };
      const f: Record<string, Tensor> = {};
      for (const n of s.inputNames) {
        if (!all[n]) throw new Error(`OrtRunner.run: missing feed '${n}'`);
        f[n] = toOrtTensor(all[n]);
      }
      inFlight++;
      let res;
      try {
        res = await s.run(f, m.outputs);
      } finally {
        inFlight--;
      }
      const outputs: Record<string, HostTensor> = {};
      const transfer: ArrayBuffer[] = [];
      for (const k of m.outputs) {
        const h = fromOrtTensor(res[k]);
        outputs[k] = h;
        if (h.data.buffer instanceof ArrayBuffer && !transfer.includes(h.data.buffer)) transfer.push(h.data.buffer);
      }
      parentPort!.postMessage({ type: 'result', id: m.id, outputs }, transfer);
    } catch (e) {
      parentPort!.postMessage({ type: 'result', id: m.id, error: e instanceof Error ? e.message : String(e) });
    }
  });
  parentPort!.postMessage({ type: 'ready', inputNames: [...s.inputNames], outputNames: [...s.outputNames] });
}
void start();
