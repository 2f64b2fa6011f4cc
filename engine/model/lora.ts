/**
 * LoRA (Hu et al. 2021) on the transformer's linear layers, as PEFT defines it:
 *
 *   y = x·Wᵀ (+ b) + (alpha / rank) · dropout(x)·Aᵀ·Bᵀ
 *
 * with A [rank, in] (Kaiming-uniform, a = √5, as PEFT's default init) and B [out, rank] (zeros),
 * so a fresh adapter leaves the model's outputs bit-identical to the base model's. Adapter
 * tensors are extra graph inputs named after the layer they adapt,
 * `model.layers.N.self_attn.q_proj.lora_A.weight` (PEFT's file names add `base_model.model.`,
 * engine/model/peft.ts). The base weights stay graph inputs too, and are frozen: gradients are
 * asked only for the adapter tensors (PolicyModel.trainableNames).
 *
 * Dropout on the adapter's input is applied in the train program only (score and decode run
 * without it, as in eval mode). Its mask comes from a counter-based hash of (row, column, seed,
 * module) computed inside the graph, so no mask crosses into ONNX Runtime; the seed is a scalar
 * input that changes on every training call. It is not torch's random stream: masks differ from
 * PEFT's, with the same keep probability and 1/(1−p) scaling.
 */
import { mulberry32 } from '../base/rng';
import type { Ops } from '../tensor/ops';
import type { ModelConfig } from './config';
import type { Weights } from './checkpoint';

/** The linear layers of a Llama/Qwen block, in PEFT's (and HF's) module names. `all-linear` = all of them (not lm_head, as in PEFT). */
export const LORA_TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

/** The experiment config's `model.lora` block (engine/config/experiment.ts). */
export interface LoraSettings {
  rank: number;
  alpha: number;
  dropout: number;
  target_modules: 'all-linear' | string[];
}

/** A resolved adapter layout. */
export interface LoraSpec {
  rank: number;
  alpha: number;
  dropout: number;
  targets: LoraTarget[];
}

export function resolveLora(s: LoraSettings, field = 'model.lora'): LoraSpec {
  if (!Number.isInteger(s.rank) || s.rank <= 0) throw new Error(`${field}.rank: must be a positive integer, got ${s.rank}`);
  if (!(s.alpha > 0)) throw new Error(`${field}.alpha: must be positive, got ${s.alpha}`);
  if (!(s.dropout >= 0 && s.dropout < 1)) throw new Error(`${field}.dropout: must be in [0, 1), got ${s.dropout}`);
  let targets: LoraTarget[];
  if (s.target_modules === 'all-linear') targets = [...LORA_TARGETS];
  else {
    const bad = s.target_modules.filter((t) => !(LORA_TARGETS as readonly string[]).includes(t));
    if (bad.length)
      throw new Error(
        `${field}.target_modules: unknown module ${bad.map((b) => JSON.stringify(b)).join(', ')}; allowed: all-linear or a list of ${LORA_TARGETS.join(', ')}`,
      );
    if (s.target_modules.length === 0) throw new Error(`${field}.target_modules: give at least one module (or all-linear)`);
    targets = LORA_TARGETS.filter((t) => s.target_modules.includes(t));
  }
  return { rank: s.rank, alpha: s.alpha, dropout: s.dropout, targets };
}

export const loraScale = (s: LoraSpec): number => s.alpha / s.rank;

function modulePrefix(target: LoraTarget): string {
  return target === 'gate_proj' || target === 'up_proj' || target === 'down_proj' ? 'mlp' : 'self_attn';
}

/** [out, in] of a targeted linear layer. */
export function moduleShape(c: ModelConfig, target: LoraTarget): [number, number] {
  const D = c.hiddenSize,
    q = c.numHeads * c.headDim,
    kv = c.numKvHeads * c.headDim,
    F = c.intermediateSize;
  switch (target) {
    case 'q_proj':
      return [q, D];
    case 'k_proj':
    case 'v_proj':
      return [kv, D];
    case 'o_proj':
      return [D, q];
    case 'gate_proj':
    case 'up_proj':
      return [F, D];
    case 'down_proj':
      return [D, F];
  }
}

/** Every adapted module: its HF module path (`model.layers.N.self_attn.q_proj`), target and [out, in]. */
export function adaptedModules(c: ModelConfig, s: LoraSpec): { module: string; target: LoraTarget; layer: number; out: number; in: number }[] {
  const out: { module: string; target: LoraTarget; layer: number; out: number; in: number }[] = [];
  for (let i = 0; i < c.numLayers; i++) {
    for (const t of s.targets) {
      const [o, n] = moduleShape(c, t);
      out.push({ module: `model.layers.${i}.${modulePrefix(t)}.${t}`, target: t, layer: i, out: o, in: n });
    }
  }
  return out;
}

/** Adapter tensor names → shapes (A [rank, in], B [out, rank]). */
export function adapterShapes(c: ModelConfig, s: LoraSpec): Record<string, number[]> {
  const r: Record<string, number[]> = {};
  for (const m of adaptedModules(c, s)) {
    r[`${m.module}.lora_A.weight`] = [s.rank, m.in];
    r[`${m.module}.lora_B.weight`] = [m.out, s.rank];
  }
  return r;
}

export const isAdapterName = (name: string): boolean => /\.lora_[AB]\.weight$/.test(name);

/** Fresh adapters: A ~ U(−1/√in, 1/√in) (kaiming_uniform_ with a = √5, PEFT's default), B = 0. Seeded (mulberry32). */
export function initAdapters(c: ModelConfig, s: LoraSpec, seed: number): Weights {
  const rand = mulberry32(seed ^ 0x10a4);
  const w: Weights = new Map();
  for (const m of adaptedModules(c, s)) {
    const a = new Float32Array(s.rank * m.in);
    const bound = 1 / Math.sqrt(m.in);
    for (let i = 0; i < a.length; i++) a[i] = (2 * rand() - 1) * bound;
    w.set(`${m.module}.lora_A.weight`, a);
    w.set(`${m.module}.lora_B.weight`, new Float32Array(m.out * s.rank));
  }
  return w;
}

/** What the transformer needs to add adapters: the layout and, in the train program, the dropout seed input. */
export interface LoraContext<T> {
  spec: LoraSpec;
  /** Scalar float32 seed of this call's dropout masks (train program with dropout > 0 only). */
  seed?: T;
}

export interface LoraApplied<T> {
  a: T;
  b: T;
  scale: number;
  dropout?: { p: number; seed: T; salt: number };
}

/** The adapter of one module (`model.layers.N.self_attn.q_proj`), or undefined when it is not targeted. */
export function loraFor<T>(ctx: LoraContext<T> | undefined, w: Record<string, T>, module: string): LoraApplied<T> | undefined {
  if (!ctx) return undefined;
  const a = w[`${module}.lora_A.weight`];
  const b = w[`${module}.lora_B.weight`];
  if (!a || !b) return undefined;
  const m = /layers\.(\d+)\..*\.([a-z_]+)$/.exec(module);
  const salt = m ? Number(m[1]) * LORA_TARGETS.length + LORA_TARGETS.indexOf(m[2] as LoraTarget) : 0;
  const dropout = ctx.seed && ctx.spec.dropout > 0 ? { p: ctx.spec.dropout, seed: ctx.seed, salt } : undefined;
  return { a, b, scale: loraScale(ctx.spec), dropout };
}

/**
 * Keep-mask / (1−p) for x [B, T, in]: u = frac(|sin(b·12.9898 + t·78.233 + i·37.719 + seed + salt·4.1414)| · 43758.5453),
 * kept where u ≥ p. Only constants and the seed input feed it, so it carries no gradient.
 */
export function loraDropoutScale<T>(o: Ops<T>, x: T, d: { p: number; seed: T; salt: number }): T {
  const [B, T, inp] = o.shape(x);
  const f = (n: typeof B) => o.cast(o.range(n), 'float32');
  const rows = o.reshape(o.mul(f(B), o.scalar(12.9898)), [-1, 1, 1]);
  const cols = o.reshape(o.mul(f(T), o.scalar(78.233)), [1, -1, 1]);
  const feat = o.reshape(o.mul(f(inp), o.scalar(37.719)), [1, 1, -1]);
  const angle = o.add(o.add(o.add(rows, cols), feat), o.add(o.mul(o.stopGradient(d.seed), o.scalar(1.618034)), o.scalar(d.salt * 4.1414)));
  const v = o.mul(o.abs(o.sin(angle)), o.scalar(43758.5453));
  const u = o.sub(v, o.cast(o.cast(v, 'int32'), 'float32'));
  const keep = o.cast(o.greater(u, o.scalar(d.p)), 'float32');
  return o.stopGradient(o.mul(keep, o.scalar(1 / (1 - d.p))));
}

/** scale · dropout(x)·Aᵀ·Bᵀ for x [B, T, in] → [B·T, out] (token-flattened like the base linear). */
export function loraDelta<T>(o: Ops<T>, x: T, l: LoraApplied<T>): T {
  const inp = o.shape(l.a)[1] as number;
  const xin = l.dropout ? o.mul(x, loraDropoutScale(o, x, l.dropout)) : x;
  const flat = o.reshape(xin, [-1, inp]);
  const down = o.matmul(flat, o.transpose(l.a, [1, 0])); // [N, rank]
  const up = o.matmul(down, o.transpose(l.b, [1, 0])); // [N, out]
  return o.mul(up, o.scalar(l.scale));
}

/** Base weights with the adapters folded in: W' = W + (alpha/rank)·B·A (float64 accumulation, rounded once). */
export function mergeAdapters(c: ModelConfig, s: LoraSpec, base: Weights, adapters: Weights): Weights {
  const out: Weights = new Map(base);
  const scale = loraScale(s);
  for (const m of adaptedModules(c, s)) {
    const A = adapters.get(`${m.module}.lora_A.weight`);
    const B = adapters.get(`${m.module}.lora_B.weight`);
    if (!A || !B) throw new Error(`merge: adapter for ${m.module} missing`);
    const W = base.get(`${m.module}.weight`);
    if (!W) throw new Error(`merge: base weight ${m.module}.weight missing`);
    const r = s.rank;
    const merged = new Float32Array(W.length);
    const row = new Float64Array(m.in);
    for (let i = 0; i < m.out; i++) {
      row.fill(0);
      for (let k = 0; k < r; k++) {
        const bik = B[i * r + k]!;
        if (bik === 0) continue;
        const aRow = k * m.in;
        for (let j = 0; j < m.in; j++) row[j] += bik * A[aRow + j]!;
      }
      for (let j = 0; j < m.in; j++) merged[i * m.in + j] = W[i * m.in + j]! + scale * row[j]!;
    }
    out.set(`${m.module}.weight`, merged);
  }
  return out;
}
