import { traceGraph } from '/work/wt/gpu/engine/tensor/graph';
import { toOnnx } from '/work/wt/gpu/engine/tensor/onnx';
import * as O from 'onnxruntime-node';
const g = traceGraph([{ name: 'x', dtype: 'float32', shape: [2] }], (o, x) => ({ y: o.add(x.x, x.x) }));

const t0 = Date.now();

const s = await O.InferenceSession.create(toOnnx(g), { executionProviders: ['webgpu'], logSeverityLevel: 3 } as never);
const r = await s.run({ x: new O.Tensor('float32', Float32Array.of(1, 2), [2]) });
console.log('OUT', r.y.data, Date.now() - t0, 'ms');
