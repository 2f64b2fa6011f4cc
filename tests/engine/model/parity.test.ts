/**
 * Parity with an independent PyTorch forward: the folders under tests/fixtures/models (Qwen2,
 * Qwen3, Llama; F32/F16/BF16; RoPE scaling llama3, yarn, dynamic, linear; sharded) and their
 * reference logits were written once by scripts/make_model_fixtures.py (plain torch following
 * transformers' modelling). Arbor's logits must agree to a relative 1e-5.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PolicyModel } from '../../../engine/model/runtime';
import { readSafetensors } from '../../../engine/model/safetensors';

export const FIXTURES = join(__dirname, '..', '..', 'fixtures', 'models');

const models: PolicyModel[] = [];
afterAll(async () => {
  for (const m of models) await m.dispose();
});

function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < b.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-12);
}

export function reference(dir: string): { ids: number[][]; logits: Float32Array; B: number; T: number; V: number } {
  const r = JSON.parse(readFileSync(join(dir, 'reference.json'), 'utf8')) as { input_ids: number[][]; shape: [number, number, number] };
  const [B, T, V] = r.shape;
  return { ids: r.input_ids, logits: readSafetensors(join(dir, 'reference.safetensors')).get('logits')!.data, B, T, V };
}

/** Reference log p(ids[t+1] | ids[..t]) for every row, flattened [B, T-1]. */
function referenceLogprobs(ref: ReturnType<typeof reference>): Float32Array {
  const { ids, logits, B, T, V } = ref;
  const out = new Float32Array(B * (T - 1));
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T - 1; t++) {
      const row = logits.subarray((b * T + t) * V, (b * T + t + 1) * V);
      let m = -Infinity;
      for (const x of row) m = Math.max(m, x);
      let s = 0;
      for (const x of row) s += Math.exp(x - m);
      out[b * (T - 1) + t] = row[ids[b][t + 1]] - m - Math.log(s);
    }
  }
  return out;
}

async function decodeSteps(m: PolicyModel, seq: number[], prefill: number): Promise<Float32Array[]> {
  const c = m.config;
  let past: { k: Float32Array; v: Float32Array }[] = [];
  const out: Float32Array[] = [];
  let P = 0;
  for (let end = prefill; end <= seq.length; end++) {
    const start = P;
    const T = end - start;
    const r = await m.decode({
      batch: 1,
      newLength: T,
      pastLength: P,
      inputIds: Int32Array.from(seq.slice(start, end)),
      attentionMask: new Int32Array(end).fill(1),
      positionIds: Int32Array.from({ length: T }, (_, i) => start + i),
      past: past.length ? past : Array.from({ length: c.numLayers }, () => ({ k: new Float32Array(0), v: new Float32Array(0) })),
    });
    past = r.present;
    P = end;
    out.push(r.logits);
  }
  return out;
}

const names = readdirSync(FIXTURES).sort();

describe('logits parity with PyTorch (fixtures from scripts/make_model_fixtures.py)', () => {
  it('has the fixtures', () => {
    expect(names).toEqual(
      expect.arrayContaining([
        'qwen2-f32',
        'qwen3-bf16',
        'llama-llama3rope-f16',
        'qwen2-yarn-f32',
        'llama-dynamic-f32',
        'llama-linear-bf16',
        'llama-sharded-f32',
      ]),
    );
  });
  for (const name of names) {
    it(name, async () => {
      const dir = join(FIXTURES, name);
      const ref = reference(dir);
      const m = PolicyModel.load(dir, { threads: 1 });
      models.push(m);
      const { B, T, V } = ref;
      // Every position through the score program.
      const refLp = referenceLogprobs(ref);
      const { logprobs } = await m.score(ref.ids);
      expect(relErr(logprobs, refLp)).toBeLessThan(1e-5);
      // Full logits through the decode program: the whole sequence in one call (last position), and
      // (except for dynamic RoPE, whose frequencies depend on each call's length, as in transformers)
      // a prefill followed by single-token steps with the KV cache.
      for (let b = 0; b < B; b++) {
        const rowRef = (t: number) => ref.logits.subarray((b * T + t) * V, (b * T + t + 1) * V);
        const [whole] = await decodeSteps(m, ref.ids[b], T);
        expect(relErr(whole, rowRef(T - 1))).toBeLessThan(1e-5);
        if (m.config.ropeScaling?.rope_type === 'dynamic') continue;
        const steps = await decodeSteps(m, ref.ids[b], T - 3);
        steps.forEach((l, i) => expect(relErr(l, rowRef(T - 4 + i)), `${name} row ${b} position ${T - 4 + i}`).toBeLessThan(1e-5));
      }
      // The RoPE scaling fixtures discriminate: the same weights without scaling are far off.
      if (m.config.ropeScaling) {
        const plain = new PolicyModel({ ...m.config, ropeScaling: null }, m.weights, { threads: 1 });
        models.push(plain);
        expect(relErr((await plain.score(ref.ids)).logprobs, refLp)).toBeGreaterThan(1e-3);
      }
    });
  }
});
