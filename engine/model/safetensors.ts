/**
 * safetensors read/write: 8-byte little-endian header length, a JSON header
 * { name: { dtype, shape, data_offsets: [begin, end] }, __metadata__? }, then the data.
 * F32, F16, BF16 and F64 are read (converted to float32, tensor by tensor in chunks, straight
 * into the caller's array); F32, F16 and BF16 are written, streamed in chunks (no whole-file
 * buffer, so files of any size can be written), rounding to nearest even.
 */
import { closeSync, fstatSync, fsyncSync, openSync, readSync, writeSync } from 'node:fs';

export interface SafeTensor {
  shape: number[];
  data: Float32Array;
}

export type SafeDType = 'F32' | 'F16' | 'BF16' | 'F64';
export const DTYPE_BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2, F64: 8 };

/** A tensor's entry in a file's header; `begin`/`end` are absolute byte offsets in the file. */
export interface SafeTensorInfo {
  name: string;
  dtype: SafeDType;
  shape: number[];
  begin: number;
  end: number;
}

export interface SafeHeader {
  file: string;
  size: number;
  tensors: Map<string, SafeTensorInfo>;
}

/** Elements per conversion chunk (8 Mi: 32 MiB of float32). */
const CHUNK = 8 * 1024 * 1024;

let f16Table: Float32Array | undefined;
function f16ToF32Table(): Float32Array {
  if (f16Table) return f16Table;
  f16Table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const s = h & 0x8000 ? -1 : 1,
      e = (h >> 10) & 0x1f,
      m = h & 0x3ff;
    f16Table[h] = e === 0 ? s * Math.pow(2, -14) * (m / 1024) : e === 31 ? (m ? NaN : s * Infinity) : s * Math.pow(2, e - 15) * (1 + m / 1024);
  }
  return f16Table;
}

/** float32 bits → float16 bits, round to nearest even (overflow → ±inf, NaN kept). */
export function f32BitsToF16(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let m = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (m ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    m |= 0x800000;
    const shift = 14 - e;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1),
      halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (m >>> 13);
  const rem = m & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++; // a carry rounds up into the exponent (to inf at the top)
  return sign | h;
}

/** float32 bits → bfloat16 bits, round to nearest even (NaN kept quiet). */
export function f32BitsToBf16(u: number): number {
  if ((u & 0x7f800000) === 0x7f800000 && u & 0x7fffff) return ((u >>> 16) | 0x40) & 0xffff;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

function readFully(fd: number, buf: Uint8Array, position: number): void {
  let done = 0;
  while (done < buf.length) {
    const n = readSync(fd, buf, done, buf.length - done, position + done);
    if (n === 0) throw new Error(`unexpected end of file at byte ${position + done}`);
    done += n;
  }
}

function writeFully(fd: number, buf: Uint8Array): void {
  let done = 0;
  while (done < buf.length) done += writeSync(fd, buf, done, buf.length - done);
}

/** Parse and check a file's header (offsets inside the file, byte counts matching shapes). */
export function readSafetensorsHeader(file: string, fd?: number): SafeHeader {
  const own = fd === undefined;
  const f = fd ?? openSync(file, 'r');
  try {
    const size = fstatSync(f).size;
    if (size < 8) throw new Error(`${file}: not a safetensors file (${size} bytes, shorter than its 8-byte header length)`);
    const lenBuf = Buffer.alloc(8);
    readSync(f, lenBuf, 0, 8, 0);
    const headerLen = Number(lenBuf.readBigUInt64LE(0));
    if (headerLen <= 0 || 8 + headerLen > size) {
      throw new Error(`${file}: corrupted or truncated safetensors: header length ${headerLen} exceeds the file size ${size}`);
    }
    const hb = Buffer.alloc(headerLen);
    readSync(f, hb, 0, headerLen, 8);
    let header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
    try {
      header = JSON.parse(hb.toString('utf8'));
    } catch (e) {
      throw new Error(`${file}: corrupted safetensors header (invalid JSON: ${(e as Error).message})`);
    }
    const base = 8 + headerLen;
    const tensors = new Map<string, SafeTensorInfo>();
    for (const [name, info] of Object.entries(header)) {
      if (name === '__metadata__') continue;
      const bytes = DTYPE_BYTES[info.dtype];
      if (!bytes) throw new Error(`${file}: tensor '${name}' has unsupported dtype ${info.dtype} (supported: ${Object.keys(DTYPE_BYTES).join(', ')})`);
      const [b, e] = info.data_offsets;
      const n = info.shape.reduce((p, q) => p * q, 1);
      if (e - b !== n * bytes) throw new Error(`${file}: tensor '${name}' has ${e - b} bytes of data, shape [${info.shape}] ${info.dtype} needs ${n * bytes}`);
      if (base + e > size) throw new Error(`${file}: truncated: tensor '${name}' ends at byte ${base + e}, the file has ${size}`);
      tensors.set(name, { name, dtype: info.dtype as SafeDType, shape: info.shape, begin: base + b, end: base + e });
    }
    return { file, size, tensors };
  } finally {
    if (own) closeSync(f);
  }
}

/** Read one tensor into `out` (float32), converting chunk by chunk. */
export function readTensorInto(fd: number, file: string, t: SafeTensorInfo, out: Float32Array, from?: number): void {
  const bytes = DTYPE_BYTES[t.dtype];
  const total = (t.end - t.begin) / bytes;
  // The whole tensor, or (from given) the out.length values from value `from` on (a row chunk).
  if (from === undefined ? out.length !== total : from < 0 || from + out.length > total)
    throw new Error(`${file}: tensor '${t.name}' has ${total} values, the destination holds ${out.length}${from === undefined ? '' : ` from ${from}`}`);
  const base = t.begin + (from ?? 0) * bytes;
  const n = out.length;
  const chunk = Math.min(n, CHUNK);
  const raw = new Uint8Array(chunk * bytes);
  const table = t.dtype === 'F16' ? f16ToF32Table() : undefined;
  for (let s = 0; s < n; s += chunk) {
    const len = Math.min(chunk, n - s);
    const view = raw.subarray(0, len * bytes);
    try {
      readFully(fd, view, base + s * bytes);
    } catch (e) {
      throw new Error(`${file}: tensor '${t.name}': ${(e as Error).message}`);
    }
    if (t.dtype === 'F32') out.set(new Float32Array(raw.buffer, 0, len), s);
    else if (t.dtype === 'F64') out.set(new Float64Array(raw.buffer, 0, len), s);
    else {
      const u16 = new Uint16Array(raw.buffer, 0, len);
      if (table) for (let i = 0; i < len; i++) out[s + i] = table[u16[i]];
      else {
        const u32 = new Uint32Array(out.buffer, out.byteOffset + s * 4, len);
        for (let i = 0; i < len; i++) u32[i] = u16[i] << 16;
      }
    }
  }
}

/** Read every tensor of a file (float32). */
export function readSafetensors(file: string): Map<string, SafeTensor> {
  const fd = openSync(file, 'r');
  try {
    const h = readSafetensorsHeader(file, fd);
    const out = new Map<string, SafeTensor>();
    for (const t of h.tensors.values()) {
      const data = new Float32Array((t.end - t.begin) / DTYPE_BYTES[t.dtype]);
      readTensorInto(fd, file, t, data);
      out.set(t.name, { shape: t.shape, data });
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

/** Bytes a tensor of `n` values takes in `dtype`. */
export const tensorBytes = (n: number, dtype: SafeDType): number => n * DTYPE_BYTES[dtype];

/**
 * Write tensors (float32 in memory) as `dtype`, streamed: the header, then each tensor in
 * chunks of at most 32 MiB, then fsync. `onTensor` is called after each tensor (progress).
 */
export function writeSafetensors(
  file: string,
  tensors: Map<string, SafeTensor>,
  metadata: Record<string, string> = { format: 'pt' },
  dtype: Exclude<SafeDType, 'F64'> = 'F32',
  onTensor?: (name: string, bytes: number) => void,
): void {
  const bytesPer = DTYPE_BYTES[dtype];
  const header: Record<string, unknown> = { __metadata__: metadata };
  let off = 0;
  const names = [...tensors.keys()].sort();
  for (const name of names) {
    const t = tensors.get(name)!;
    const n = t.shape.reduce((p, q) => p * q, 1);
    if (n !== t.data.length) throw new Error(`${file}: tensor '${name}' has ${t.data.length} values, shape [${t.shape}] needs ${n}`);
    header[name] = { dtype, shape: t.shape, data_offsets: [off, off + n * bytesPer] };
    off += n * bytesPer;
  }
  let hs = JSON.stringify(header);
  hs += ' '.repeat((8 - (Buffer.byteLength(hs) % 8)) % 8);
  const hb = Buffer.from(hs, 'utf8');
  const fd = openSync(file, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(hb.length), 0);
    writeFully(fd, len);
    writeFully(fd, hb);
    const scratch = dtype === 'F32' ? undefined : new Uint16Array(Math.min(CHUNK, Math.max(1, ...names.map((k) => tensors.get(k)!.data.length))));
    for (const name of names) {
      const d = tensors.get(name)!.data;
      for (let s = 0; s < d.length; s += CHUNK) {
        const len = Math.min(CHUNK, d.length - s);
        if (!scratch) {
          writeFully(fd, new Uint8Array(d.buffer, d.byteOffset + s * 4, len * 4));
          continue;
        }
        const u32 = new Uint32Array(d.buffer, d.byteOffset + s * 4, len);
        if (dtype === 'BF16') for (let i = 0; i < len; i++) scratch[i] = f32BitsToBf16(u32[i]);
        else for (let i = 0; i < len; i++) scratch[i] = f32BitsToF16(u32[i]);
        writeFully(fd, new Uint8Array(scratch.buffer, 0, len * 2));
      }
      onTensor?.(name, d.length * bytesPer);
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
