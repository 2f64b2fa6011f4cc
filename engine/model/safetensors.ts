/**
 * safetensors read/write: 8-byte little-endian header length, a JSON header
 * { name: { dtype, shape, data_offsets: [begin, end] }, __metadata__? }, then the data.
 * F32 is written; F32, F16, BF16 and F64 are read (converted to float32).
 */
import { closeSync, fstatSync, openSync, readSync, writeFileSync } from 'node:fs';

export interface SafeTensor { shape: number[]; data: Float32Array }

const BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2, F64: 8 };

function f16ToF32(h: number): number {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * Math.pow(2, -14) * (m / 1024);
  if (e === 31) return m ? NaN : s * Infinity;
  return s * Math.pow(2, e - 15) * (1 + m / 1024);
}

export function readSafetensors(file: string): Map<string, SafeTensor> {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size < 8) throw new Error(`${file}: not a safetensors file (${size} bytes, shorter than its 8-byte header length)`);
    const lenBuf = Buffer.alloc(8);
    readSync(fd, lenBuf, 0, 8, 0);
    const headerLen = Number(lenBuf.readBigUInt64LE(0));
    if (headerLen <= 0 || 8 + headerLen > size) {
      throw new Error(`${file}: corrupted or truncated safetensors: header length ${headerLen} exceeds the file size ${size}`);
    }
    const hb = Buffer.alloc(headerLen);
    readSync(fd, hb, 0, headerLen, 8);
    let header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
    try {
      header = JSON.parse(hb.toString('utf8'));
    } catch (e) {
      throw new Error(`${file}: corrupted safetensors header (invalid JSON: ${(e as Error).message})`);
    }
    const base = 8 + headerLen;
    const out = new Map<string, SafeTensor>();
    for (const [name, info] of Object.entries(header)) {
      if (name === '__metadata__') continue;
      const bytes = BYTES[info.dtype];
      if (!bytes) throw new Error(`${file}: tensor '${name}' has unsupported dtype ${info.dtype} (supported: ${Object.keys(BYTES).join(', ')})`);
      const [b, e] = info.data_offsets;
      const n = info.shape.reduce((p, q) => p * q, 1);
      if (e - b !== n * bytes) throw new Error(`${file}: tensor '${name}' has ${e - b} bytes of data, shape [${info.shape}] ${info.dtype} needs ${n * bytes}`);
      if (base + e > size) throw new Error(`${file}: truncated: tensor '${name}' ends at byte ${base + e}, the file has ${size}`);
      const raw = Buffer.alloc(e - b);
      readSync(fd, raw, 0, e - b, base + b);
      const data = new Float32Array(n);
      if (info.dtype === 'F32') data.set(new Float32Array(raw.buffer, raw.byteOffset, n));
      else if (info.dtype === 'F64') for (let i = 0; i < n; i++) data[i] = raw.readDoubleLE(i * 8);
      else if (info.dtype === 'F16') for (let i = 0; i < n; i++) data[i] = f16ToF32(raw.readUInt16LE(i * 2));
      else {
        const u = new Uint32Array(n);
        for (let i = 0; i < n; i++) u[i] = raw.readUInt16LE(i * 2) << 16;
        data.set(new Float32Array(u.buffer));
      }
      out.set(name, { shape: info.shape, data });
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

export function writeSafetensors(file: string, tensors: Map<string, SafeTensor>, metadata: Record<string, string> = { format: 'pt' }): void {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let off = 0;
  const names = [...tensors.keys()].sort();
  for (const name of names) {
    const t = tensors.get(name)!;
    const n = t.data.length * 4;
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [off, off + n] };
    off += n;
  }
  let hs = JSON.stringify(header);
  hs += ' '.repeat((8 - (hs.length % 8)) % 8);
  const hb = Buffer.from(hs, 'utf8');
  const buf = Buffer.alloc(8 + hb.length + off);
  buf.writeBigUInt64LE(BigInt(hb.length), 0);
  hb.copy(buf, 8);
  let p = 8 + hb.length;
  for (const name of names) {
    const t = tensors.get(name)!;
    Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).copy(buf, p);
    p += t.data.byteLength;
  }
  writeFileSync(file, buf);
}
