import { traceGraph } from '../engine/tensor/graph';
import { toOnnx } from '../engine/tensor/onnx';
import * as O from 'onnxruntime-node';
const g = traceGraph([{ name: 'x', dtype: 'float32', shape: ['n'] }], (o, x) => ({ s: o.sin(x.x), c: o.cos(x.x), e: o.exp(x.x), l: o.log(o.add(x.x, o.scalar(1))) }));
const s = await O.InferenceSession.create(toOnnx(g), { executionProviders: ['webgpu'] } as never);
const n = 2000; const x = Float32Array.from({ length: n }, (_, i) => (i / n) * 6.28 - 3.14);
const r = await s.run({ x: new O.Tensor('float32', x, [n]) });
const err = (a: any, f: (v: number) => number) => { let m = 0; for (let i = 0; i < n; i++) m = Math.max(m, Math.abs(a[i] - f(x[i]!)) / Math.max(1, Math.abs(f(x[i]!)))); return m; };
console.log('sin', err(r.s.data, Math.sin), 'cos', err(r.c.data, Math.cos), 'exp', err(r.e.data, Math.exp), 'log', err(r.l.data, (v) => Math.log(v + 1)));
