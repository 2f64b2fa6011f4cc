import type { DType } from './ops';

/** A tensor in host memory: the currency between the engine, ONNX Runtime and tests. */
export interface HostTensor {
  dtype: DType;
  shape: number[];
  data: Float32Array | Float64Array | Int32Array | BigInt64Array | Uint8Array;
}

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function hostTensor(dtype: DType, shape: number[], data?: HostTensor['data']): HostTensor {
  const n = numel(shape);
  const d = data ?? allocData(dtype, n);
  if (d.length !== n) throw new Error(`hostTensor: data has ${d.length} elements, shape [${shape.join(',')}] needs ${n}`);
  return { dtype, shape, data: d };
}

export function allocData(dtype: DType, n: number): HostTensor['data'] {
  switch (dtype) {
    case 'float32':
      return new Float32Array(n);
    case 'float64':
      return new Float64Array(n);
    case 'int32':
      return new Int32Array(n);
    case 'int64':
      return new BigInt64Array(n);
    case 'bool':
    case 'uint8':
      return new Uint8Array(n);
  }
}

export const f32 = (shape: number[], data: ArrayLike<number>): HostTensor => hostTensor('float32', shape, Float32Array.from(data));
export const i32 = (shape: number[], data: ArrayLike<number>): HostTensor => hostTensor('int32', shape, Int32Array.from(data));
