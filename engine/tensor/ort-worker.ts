/** Worker thread hosting one ONNX Runtime session (see ./ort.ts). */
import { parentPort, workerData } from 'node:worker_threads';
import type { Tensor } from 'onnxruntime-node';
import type { HostTensor } from './host';
import { fromOrtTensor, ort, sessionOptions, toOrtTensor, type RunnerOptions } from './ort';

const { model, opts } = workerData as { model: Uint8Array; opts: RunnerOptions };
const persistent: Record<string, HostTensor> = {};

async function start(): Promise<void> {
  let session;
  try {
    session = await ort().InferenceSession.create(model, sessionOptions(opts));
  } catch (e) {
    parentPort!.postMessage({ type: 'initError', error: e instanceof Error ? e.message : String(e) });
    return;
  }
  const s = session;
  parentPort!.on('message', async (m: { type: string; id: number; feeds: Record<string, HostTensor>; outputs: string[] }) => {
    if (m.type === 'persist') {
      Object.assign(persistent, m.feeds);
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
      const res = await s.run(f, m.outputs);
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
