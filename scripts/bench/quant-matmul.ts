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
 *   dql4-input                     int4 codes (uint4, zero point 8) as graph inputs → opset-21 DequantizeLinear
 *                                  (block_size) → Gemm: what the score and train sessions run on the CPU
 *   gbq4-input                     the same codes as uint8 inputs → com.microsoft.GatherBlockQuantized of every
 *                                  row (bits 4) → Gemm
 *   ew4-input                      the same codes as uint8 inputs dequantized by elementwise ops → Gemm
 *                                  (the earlier lowering, d03a338)
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
      /** One node of this product's dequantization chain, its output named after the node count. */
      const e = (op: string, ins: string[], attribute: onnxProto.onnx.IAttributeProto[] = []) => {
        const o = `${nm}_${nodes.length}`;
        nodes.push({ opType: op, input: ins, output: [o], attribute });
        return o;
      };
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
      } else if (['dql4-input', 'ew4-input', 'gbq4-input', 'lut4-input', 'bs4-input', 'bsf4-input'].includes(mode)) {
        const m = quantizeBlockwise(w, N, K, 4, BS);
        const kb = Math.ceil(K / BS);
        const i64 = (nm2: string, v: number[]) => {
          inits.push({ name: nm2, dataType: 7, dims: [v.length], int64Data: v });
          return nm2;
        };
        const f32 = (nm2: string, v: number) => {
          inits.push({ name: nm2, dataType: 1, dims: [], floatData: [v] });
          return nm2;
        };
        let wq: string;
        if (mode === 'dql4-input') {
          // onnxruntime-node takes no uint4 feed: the codes are an initializer, the scales a graph input (so no
          // constant folding of the dequantization, and no fusion into a pre-packed MatMulNBits).
          inits.push({ name: `${nm}_q`, dataType: 21, dims: [N, kb * BS], rawData: m.codes });
          inputs.push(vi(`${nm}_s`, 1, [N, kb]));
          feeds[`${nm}_s`] = new ort.Tensor('float32', m.scales, [N, kb]);
          inits.push({ name: `${nm}_z`, dataType: 21, dims: [N, kb], rawData: new Uint8Array(Math.ceil((N * kb) / 2)).fill(0x88) });
          nodes.push({
            opType: 'DequantizeLinear',
            input: [`${nm}_q`, `${nm}_s`, `${nm}_z`],
            output: [`${nm}_w`],
            attribute: [
              { name: 'axis', type: 2, i: 1 },
              { name: 'block_size', type: 2, i: BS },
            ],
          });
          wq = `${nm}_w`;
        } else if (mode === 'lut4-input' || mode === 'bs4-input' || mode === 'bsf4-input') {
          add(`${nm}_q`, 2, [N, kb, BS / 2], m.codes, 'uint8');
          add(`${nm}_s`, 1, [N * kb], m.scales, 'float32');
          if (mode === 'lut4-input') {
            const lut = new Float32Array(512);
            for (let c = 0; c < 256; c++) {
              lut[2 * c] = (c & 15) - 8;
              lut[2 * c + 1] = (c >> 4) - 8;
            }
            inits.push({ name: `${nm}_lut`, dataType: 1, dims: [256, 2], rawData: new Uint8Array(lut.buffer) });
            const idx = e('Cast', [`${nm}_q`], [{ name: 'to', type: 2, i: 6 }]);
            const pair = e('Gather', [`${nm}_lut`, idx], [{ name: 'axis', type: 2, i: 0 }]); // [N, kb, BS/2, 2]
            const ww = e('Mul', [e('Reshape', [pair, i64(`${nm}_r1`, [N, kb, BS])]), e('Reshape', [`${nm}_s`, i64(`${nm}_r2`, [N, kb, 1])])]);
            wq = e('Reshape', [ww, i64(`${nm}_r3`, [N, kb * BS])]);
          } else {
            inits.push({ name: `${nm}_u4`, dataType: 2, dims: [], rawData: new Uint8Array([4]) });
            inits.push({ name: `${nm}_u15`, dataType: 2, dims: [], rawData: new Uint8Array([15]) });
            const hi = e('BitShift', [`${nm}_q`, `${nm}_u4`], [{ name: 'direction', type: 3, s: new TextEncoder().encode('RIGHT') }]);
            const lo = e('BitwiseAnd', [`${nm}_q`, `${nm}_u15`]);
            const pair = e(
              'Concat',
              [e('Unsqueeze', [lo, i64(`${nm}_a3`, [3])]), e('Unsqueeze', [hi, i64(`${nm}_b3`, [3])])],
              [{ name: 'axis', type: 2, i: 3 }],
            );
            const c8 = e('Reshape', [pair, i64(`${nm}_r1`, [N, kb * BS])]);
            if (mode === 'bs4-input') {
              inits.push({ name: `${nm}_z`, dataType: 2, dims: [N, kb], rawData: new Uint8Array(N * kb).fill(8) });
              wq = e(
                'DequantizeLinear',
                [c8, e('Reshape', [`${nm}_s`, i64(`${nm}_r2`, [N, kb])]), `${nm}_z`],
                [
                  { name: 'axis', type: 2, i: 1 },
                  { name: 'block_size', type: 2, i: BS },
                ],
              );
            } else {
              const cf = e('Cast', [e('Reshape', [c8, i64(`${nm}_r4`, [N, kb, BS])])], [{ name: 'to', type: 2, i: 1 }]);
              const ww = e('Mul', [e('Sub', [cf, f32(`${nm}_c8`, 8)]), e('Reshape', [`${nm}_s`, i64(`${nm}_r2`, [N, kb, 1])])]);
              wq = e('Reshape', [ww, i64(`${nm}_r3`, [N, kb * BS])]);
            }
          }
        } else if (mode === 'gbq4-input') {
          add(`${nm}_q`, 2, [N, (kb * BS) / 2], m.codes, 'uint8');
          add(`${nm}_s`, 1, [N, kb], m.scales, 'float32');
          nodes.push({
            opType: 'GatherBlockQuantized',
            domain: 'com.microsoft',
            input: [
              `${nm}_q`,
              i64(
                `${nm}_rows`,
                Array.from({ length: N }, (_, i) => i),
              ),
              `${nm}_s`,
            ],
            output: [`${nm}_w`],
            attribute: [
              { name: 'gather_axis', type: 2, i: 0 },
              { name: 'quantize_axis', type: 2, i: 1 },
              { name: 'block_size', type: 2, i: BS },
              { name: 'bits', type: 2, i: 4 },
            ],
          });
          wq = `${nm}_w`;
        } else {
          add(`${nm}_q`, 2, [N, kb, BS / 2], m.codes, 'uint8');
          add(`${nm}_s`, 1, [N * kb], m.scales, 'float32');
          const c = e('Cast', [`${nm}_q`], [{ name: 'to', type: 2, i: 1 }]);
          const hi = e('Floor', [e('Div', [c, f32(`${nm}_c16a`, 16)])]);
          const lo = e('Sub', [c, e('Mul', [hi, f32(`${nm}_c16b`, 16)])]);
          const pair = e('Concat', [e('Unsqueeze', [lo, i64(`${nm}_a3`, [3])]), e('Unsqueeze', [hi, i64(`${nm}_b3`, [3])])], [{ name: 'axis', type: 2, i: 3 }]);
          const cc = e('Reshape', [pair, i64(`${nm}_r1`, [N, kb, BS])]);
          const ww = e('Mul', [e('Sub', [cc, f32(`${nm}_c8`, 8)]), e('Reshape', [`${nm}_s`, i64(`${nm}_r2`, [N, kb, 1])])]);
          wq = e('Reshape', [ww, i64(`${nm}_r3`, [N, kb * BS])]);
        }
        nodes.push({ opType: 'Gemm', input: [h, wq], output: [out], attribute: [{ name: 'transB', type: 2, i: 1 }] });
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
      { domain: '', version: mode.startsWith('dql') || mode.startsWith('bs4') ? 21 : 18 },
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
