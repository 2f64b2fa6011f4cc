// scripts/ort-probe.cjs: which CPU kernels ONNX Runtime took (issue #38; run by scripts/avx2-check.sh
// and scripts/avx2-native.sh). Float ops whose rounding depends on MLAS's kernel (vector width, exp/tanh/erf approximations),
// fingerprinted, plus an exact known-answer MatMul.
const path = require('node:path');
const ort = require(path.resolve('node_modules/onnxruntime-node'));
const proto = require(path.resolve('node_modules/onnx-proto'));
const { onnx } = proto.default ?? proto;
const { createHash } = require('node:crypto');
const K = 1000,
  N = 64;
const vi = (name, dims) => ({ name, type: { tensorType: { elemType: 1, shape: { dim: dims.map((d) => ({ dimValue: d })) } } } });
const node = (op, i, o, attribute = []) => ({ opType: op, input: i, output: [o], attribute });
const graph = {
  name: 'probe',
  node: [
    node('MatMul', ['a', 'b'], 'mm'),
    node('Softmax', ['x'], 'sm', [{ name: 'axis', type: 2, i: -1 }]),
    node('Exp', ['x'], 'ex'),
    node('Tanh', ['x'], 'th'),
    node('Erf', ['x'], 'er'),
    node('MatMul', ['ia', 'ib'], 'kat'),
  ],
  input: [vi('a', [3, K]), vi('b', [K, N]), vi('x', [4, K]), vi('ia', [2, 3]), vi('ib', [3, 2])],
  output: [vi('mm', [3, N]), vi('sm', [4, K]), vi('ex', [4, K]), vi('th', [4, K]), vi('er', [4, K]), vi('kat', [2, 2])],
};
const modelBytes = onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 13 }], graph })).finish();
let s = 12345;
const rnd = (n, scale) => Float32Array.from({ length: n }, () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * scale);
(async () => {
  const sess = await ort.InferenceSession.create(modelBytes, { intraOpNumThreads: 1, graphOptimizationLevel: 'disabled' });
  const T = (d, dims) => new ort.Tensor('float32', d, dims);
  const out = await sess.run({
    a: T(rnd(3 * K, 2), [3, K]),
    b: T(rnd(K * N, 2), [K, N]),
    x: T(rnd(4 * K, 8), [4, K]),
    ia: T(Float32Array.from([1, 2, 3, 4, 5, 6]), [2, 3]),
    ib: T(Float32Array.from([7, 8, 9, 10, 11, 12]), [3, 2]),
  });
  const kat = Array.from(out.kat.data);
  const ok = JSON.stringify(kat) === '[58,64,139,154]';
  const fp = ['mm', 'sm', 'ex', 'th', 'er'].map((k) => `${k}:${createHash('sha256').update(Buffer.from(out[k].data.buffer)).digest('hex').slice(0, 8)}`);
  console.log(`known-answer ${ok ? 'ok' : `WRONG ${kat}`}  fingerprint ${fp.join(' ')}`);
  process.exit(ok ? 0 : 1);
})().catch((e) => {
  console.error(e);
  process.exit(2);
});
