/**
 * The optimizer the trainer (engine/train/model-port.ts) steps after accumulating and clipping
 * gradients: AdamW, with its state saved next to a checkpoint's weights.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Weights } from '../model/checkpoint';

export interface OptimizerPort {
  /** Apply one update in place; `grads` are already clipped. */
  step(weights: Weights, grads: Weights, lr: number): void;
  save(dir: string): void;
  load(dir: string): void;
}

/** AdamW (decoupled weight decay), bias-corrected; state saved as JSON-free binary per tensor. */
export class AdamW implements OptimizerPort {
  private m = new Map<string, Float32Array>();
  private v = new Map<string, Float32Array>();
  private t = 0;
  constructor(private readonly o: { beta1: number; beta2: number; weight_decay: number; eps?: number }) {}
  step(weights: Weights, grads: Weights, lr: number): void {
    this.t++;
    const { beta1: b1, beta2: b2, weight_decay: wd } = this.o;
    const eps = this.o.eps ?? 1e-8;
    const c1 = 1 - b1 ** this.t;
    const c2 = 1 - b2 ** this.t;
    for (const [name, g] of grads) {
      const w = weights.get(name)!;
      let m = this.m.get(name);
      let v = this.v.get(name);
      if (!m || !v) {
        m = new Float32Array(w.length);
        v = new Float32Array(w.length);
        this.m.set(name, m);
        this.v.set(name, v);
      }
      // w ← w − lr·(m̂ / (√v̂ + ε) + wd·w), with m̂ = m/c1 and √v̂ = √v/√c2 folded into constants
      // (one pass, no divisions but the one per element).
      const a1 = 1 - b1,
        a2 = 1 - b2,
        decay = 1 - lr * wd,
        step = lr / c1,
        rc2 = 1 / Math.sqrt(c2);
      for (let i = 0; i < w.length; i++) {
        const gi = g[i]!;
        const mi = b1 * m[i]! + a1 * gi;
        const vi = b2 * v[i]! + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        w[i] = w[i]! * decay - (step * mi) / (Math.sqrt(vi) * rc2 + eps);
      }
    }
  }
  save(dir: string): void {
    const names = [...this.m.keys()];
    const parts: Float32Array[] = [];
    for (const n of names) parts.push(this.m.get(n)!, this.v.get(n)!);
    const total = parts.reduce((a, p) => a + p.length, 0);
    const buf = new Float32Array(total);
    let off = 0;
    for (const p of parts) {
      buf.set(p, off);
      off += p.length;
    }
    writeFileSync(join(dir, 'optimizer.bin'), Buffer.from(buf.buffer));
    writeFileSync(join(dir, 'optimizer.json'), JSON.stringify({ t: this.t, tensors: names.map((n) => [n, this.m.get(n)!.length]) }));
  }
  load(dir: string): void {
    const meta = join(dir, 'optimizer.json');
    if (!existsSync(meta)) throw new Error(`checkpoint ${dir}: optimizer.json missing`);
    const { t, tensors } = JSON.parse(readFileSync(meta, 'utf8')) as { t: number; tensors: [string, number][] };
    const raw = readFileSync(join(dir, 'optimizer.bin'));
    const buf = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
    this.t = t;
    this.m.clear();
    this.v.clear();
    let off = 0;
    for (const [n, len] of tensors) {
      this.m.set(n, buf.slice(off, off + len));
      off += len;
      this.v.set(n, buf.slice(off, off + len));
      off += len;
    }
  }
}
