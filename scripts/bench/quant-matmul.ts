/**
 * `npm run bench:quant-matmul -- [--layers N] [modes…]`
 *
 * Which ONNX Runtime operator a quantized decode session should use (engine/model/quantize.ts):
 * a standalone graph of `--layers` (default 7) pairs of matmuls [M, 512] × [512, 1408] and
 * [M, 1408] × [1408, 512] (the 25M model's MLP shape), timed at M = 1, 8 and 64 rows on 2 threads,
 * for each mode (default: all):
 *   f32-input / f32-init           float32 MatMul, weights as graph inputs (Arbor's float32 sessions) / initializers
 *   nb<bits>-<acc>-<sym|zp>-<init|input>  com.microsoft.MatMulNBits, 8 or 4 bits, accuracy_level 0 or 4, symmetric or
 *                                  with zero points, codes as initializers or as graph inputs
 *   dq-<init|input>                com.microsoft.DynamicQuantizeMatMul, per-column int8 weights
 * Each row: session creation time, ms per run at each M, and the relative error of the output
 * against the first mode's (float32 by default).
 */
import { createRequire } from 'node:module';
import onnxProto from 'onnx-proto';
import type { Tensor } from 'onnxruntime-node';
import { quantizeBlockwise } from '../../engine/model/quantize';

const ort = createRequire(import.meta.url)('onnxruntime-node') as typeof import('onnxruntime-node');
const { onnx } = onnxProto;
const args = process.argv.slice(2);
const li = args.indexOf('--layers');
const L = li >= 0 ? Number(args[li + 1]) : 7;
const modes = args.filter((a, i) => !a.startsWith('--') && (li < 0 || i !== li + 1));
const MODES = modes.length
  ? modes
  : ['f32-input', 'f32-init', 'nb8-0-sym-init', 'nb8-4-sym-init', 'nb4-0-sym-init', 'nb4-4-sym-init', 'nb4-4-zp-init', 'nb8-4-sym-input', 'dq-init'];
const D = 512,
  F = 1408,
  BS = 32;

function rand(n: number, s: number): Float32Array {
  const a = new Float32Array(n);
  let x = 12345 + s;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    a[i] = (x / 0x7fffffff - 0.5) * 0.1;
  }
  return a;
}

/** Asymmetric block quantization with zero points (the `zp` modes only; Arbor's is symmetric: quantizeBlockwise). */
function quantZp(w: Float32Array, N: number, K: number, bits: number) {
  const kb = Math.ceil(K / BS),
    blob = (BS * bits) / 8,
    qmax = (1 << bits) - 1;
  const q = new Uint8Array(N * kb * blob),
    sc = new Float32Array(N * kb),
    zp = new Uint8Array(bits === 8 ? N * kb : N * Math.ceil(kb / 2));
  for (let n = 0; n < N; n++)
    for (let b = 0; b < kb; b++) {
      let mn = 0,
        mx = 0;
      for (let k = b * BS; k < Math.min(K, b * BS + BS); k++) {
        mn = Math.min(mn, w[n * K + k]!);
        mx = Math.max(mx, w[n * K + k]!);
      }
      const s = (mx - mn) / qmax || 1,
        z = Math.round(-mn / s);
      sc[n * kb + b] = s;
      if (bits === 8) zp[n * kb + b] = z;
      else zp[n * Math.ceil(kb / 2) + (b >> 1)] |= z << ((b & 1) * 4);
      for (let j = 0; j < BS; j++) {
        const k = b * BS + j;
        const v = Math.max(0, Math.min(qmax, Math.round((k < K ? w[n * K + k]! : 0) / s) + z));
        if (bits === 8) q[(n * kb + b) * blob + j] = v;
        else q[(n * kb + b) * blob + (j >> 1)] |= v << ((j & 1) * 4);
      }
    }
  return { q, sc, zp, kb, blob };
}

type Init = onnxProto.onnx.ITensorProto;
function build(mode: string) {
  const nodes: onnxProto.onnx.INodeProto[] = [],
    inits: Init[] = [];
  const vi = (name: string, elemType: number, dims: (number | string)[]) => ({
    name,
    type: { tensorType: { elemType, shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } },
  });
  const inputs = [vi('x', 1, ['M', D])];
  const feeds: Record<string, Tensor> = {};
  const where = mode.endsWith('-init') ? 'init' : 'input';
  const add = (name: string, dataType: number, dims: number[], arr: Float32Array | Uint8Array | Int8Array, type: 'float32' | 'uint8' | 'int8') => {
    if (where === 'init') inits.push({ name, dataType, dims, rawData: new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength) });
    else {
      inputs.push(vi(name, dataType, dims));
      feeds[name] = new ort.Tensor(type, arr, dims);
    }
  };
  let h = 'x';
  for (let l = 0; l < L; l++)
    for (const [K, N, nm] of [
      [D, F, `up${l}`],
      [F, D, `dn${l}`],
    ] as const) {
      const w = rand(N * K, l * 2 + (K === D ? 0 : 1)); // [N, K]
      const out = `${nm}_y`;
      if (mode.startsWith('f32')) {
        const wt = new Float32Array(K * N);
        for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) wt[k * N + n] = w[n * K + k]!;
        add(nm, 1, [K, N], wt, 'float32');
        nodes.push({ opType: 'MatMul', input: [h, nm], output: [out] });
      } else if (mode.startsWith('nb')) {
        const [, bitsS, accS, zpS] = /^nb(\d)-(\d)-(zp|sym)-/.exec(mode)!;
        const bits = Number(bitsS) as 4 | 8;
        const ins = [h, `${nm}_q`, `${nm}_s`];
        if (zpS === 'zp') {
          const z = quantZp(w, N, K, bits);
          add(`${nm}_q`, 2, [N, z.kb, z.blob], z.q, 'uint8');
          add(`${nm}_s`, 1, [N * z.kb], z.sc, 'float32');
          add(`${nm}_z`, 2, [z.zp.length], z.zp, 'uint8');
          ins.push(`${nm}_z`);
        } else {
          const m = quantizeBlockwise(w, N, K, bits, BS);
          const kb = Math.ceil(K / BS);
          add(`${nm}_q`, 2, [N, kb, (BS * bits) / 8], m.codes, 'uint8');
          add(`${nm}_s`, 1, [N * kb], m.scales, 'float32');
        }
        const int = (name: string, i: number) => ({ name, type: 2, i });
        nodes.push({
          opType: 'MatMulNBits',
          domain: 'com.microsoft',
          input: ins,
          output: [out],
          attribute: [int('K', K), int('N', N), int('bits', bits), int('block_size', BS), int('accuracy_level', Number(accS))],
        });
      } else if (mode.startsWith('dq')) {
        const wt = new Int8Array(K * N),
          sc = new Float32Array(N);
        for (let n = 0; n < N; n++) {
          let a = 0;
          for (let k = 0; k < K; k++) a = Math.max(a, Math.abs(w[n * K + k]!));
          sc[n] = a / 127 || 1;
          for (let k = 0; k < K; k++) wt[k * N + n] = Math.round(w[n * K + k]! / sc[n]!);
        }
        add(`${nm}_q`, 3, [K, N], wt, 'int8');
        add(`${nm}_s`, 1, [N], sc, 'float32');
        nodes.push({ opType: 'DynamicQuantizeMatMul', domain: 'com.microsoft', input: [h, `${nm}_q`, `${nm}_s`], output: [out] });
      } else throw new Error(`unknown mode ${mode}`);
      h = out;
    }
  nodes.push({ opType: 'Identity', input: [h], output: ['y'] });
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [
      { domain: '', version: 18 },
      { domain: 'com.microsoft', version: 1 },
    ],
    graph: { name: 'g', node: nodes, initializer: inits, input: inputs, output: [vi('y', 1, ['M', D])] },
  });
  return { bytes: onnx.ModelProto.encode(model).finish(), feeds };
}

const ref: Record<number, Float32Array> = {};
console.log(`bench:quant-matmul — ${L} × (${D}→${F}, ${F}→${D}), 2 threads, block ${BS}`);
for (const mode of MODES) {
  const { bytes, feeds } = build(mode);
  const t0 = performance.now();
  const s = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 2, graphOptimizationLevel: 'all', executionMode: 'sequential' });
  const row = [mode.padEnd(16), `create ${(performance.now() - t0).toFixed(0).padStart(5)} ms`];
  for (const M of [1, 8, 64]) {
    const x = new ort.Tensor('float32', rand(M * D, 3), [M, D]);
    let y: Float32Array = new Float32Array(0);
    for (let i = 0; i < 3; i++) y = (await s.run({ x, ...feeds })).y!.data as Float32Array;
    const n = M === 64 ? 20 : 60;
    const t1 = performance.now();
    for (let i = 0; i < n; i++) await s.run({ x, ...feeds });
    const ms = (performance.now() - t1) / n;
    let err = '';
    if (ref[M]) {
      let num = 0,
        den = 0;
      for (let i = 0; i < y.length; i++) {
        num += (y[i]! - ref[M][i]!) ** 2;
        den += ref[M][i]! ** 2;
      }
      err = ` (rel. err ${Math.sqrt(num / den).toExponential(1)})`;
    } else ref[M] = y;
    row.push(`M=${M} ${ms.toFixed(2)} ms${err}`);
  }
  console.log(row.join('  '));
  await s.release();
}
