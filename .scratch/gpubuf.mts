import { traceGraph } from '../engine/tensor/graph';
import { toOnnx } from '../engine/tensor/onnx';
import * as O from 'onnxruntime-node';
const up = traceGraph([{ name: 'x', dtype: 'float32', shape: ['a', 'b'] }], (o, x) => ({ y: o.mul(x.x, o.scalar(1)) }));
const f = traceGraph([{ name: 'w', dtype: 'float32', shape: ['a', 'b'] }, { name: 'z', dtype: 'float32', shape: ['a', 'b'] }], (o, x) => ({ s: o.add(x.w, x.z), t: o.sum(x.w, [0, 1]) }));
const mk = (g: any, loc: any) => O.InferenceSession.create(toOnnx(g), { executionProviders: ['webgpu'], preferredOutputLocation: loc } as never);
const su = await mk(up, 'gpu-buffer');
const sf = await mk(f, { s: 'gpu-buffer', t: 'cpu' });
const sd = await mk(up, 'cpu');
const w = (await su.run({ x: new O.Tensor('float32', Float32Array.of(1, 2, 3, 4), [2, 2]) })).y;
console.log('w loc', w.location, w.dims);
const r = await sf.run({ w, z: new O.Tensor('float32', Float32Array.of(10, 20, 30, 40), [2, 2]) });
console.log('s loc', r.s.location, 't', r.t.location, r.t.data);
const r2 = await sf.run({ w: r.s, z: new O.Tensor('float32', Float32Array.of(1, 1, 1, 1), [2, 2]) });
const back = await sd.run({ x: r2.s });
console.log('back', back.y.location, back.y.data);
try { const r3 = await sf.run({ w, z: new O.Tensor('float32', Float32Array.of(1, 1, 1, 1), [2, 2]) }, ['t']); console.log('subset ok', r3.t.data, Object.keys(r3)); } catch (e) { console.log('subset err', String(e)); }
r.s.dispose(); r2.s.dispose(); w.dispose();
console.log('disposed ok');
