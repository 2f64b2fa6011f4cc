/**
 * Arbor reads a PEFT adapter it did not write: tests/engine/model/fixtures/qwen2-f32-peft-lora
 * was laid out by scripts/make_lora_fixture.py as PEFT's save_pretrained does (config fields,
 * `base_model.model.…lora_A.weight` names, A [r, in], B [out, r], relative base path), with
 * reference logits of base + adapter from the plain-torch forward using PEFT's arithmetic
 * (W + B·A·alpha/r). Arbor's unmerged forward and `arbor merge`'s folder must both agree to a
 * relative 1e-5; a refused layout names its field.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PolicyModel } from '../../../engine/model/runtime';
import { readSafetensors } from '../../../engine/model/safetensors';
import { readPeftConfig } from '../../../engine/model/peft';
import { mergeAdapterFolder } from '../../../engine/cli/commands/merge';

const DIR = join(__dirname, 'fixtures', 'qwen2-f32-peft-lora');
const BASE = join(__dirname, '..', '..', 'fixtures', 'models', 'qwen2-f32');
const models: PolicyModel[] = [];
afterAll(async () => {
  for (const m of models) await m.dispose();
});

function reference() {
  const r = JSON.parse(readFileSync(join(DIR, 'reference.json'), 'utf8')) as { input_ids: number[][]; shape: [number, number, number] };
  const [B, T, V] = r.shape;
  const logits = readSafetensors(join(DIR, 'reference.safetensors')).get('logits')!.data;
  // log p(ids[t+1] | ids[..t]) per row, flattened [B, T-1]
  const lp = new Float32Array(B * (T - 1));
  for (let b = 0; b < B; b++)
    for (let t = 0; t < T - 1; t++) {
      const row = logits.subarray((b * T + t) * V, (b * T + t + 1) * V);
      const m = Math.max(...row);
      let s = 0;
      for (const x of row) s += Math.exp(x - m);
      lp[b * (T - 1) + t] = row[r.input_ids[b]![t + 1]!]! - m - Math.log(s);
    }
  return { ids: r.input_ids, lp, T };
}

function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < b.length; i++) {
    num += (a[i]! - b[i]!) ** 2;
    den += b[i]! ** 2;
  }
  return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-12);
}

describe('a PEFT adapter written by another tool', () => {
  it('loads onto its base and matches the PyTorch reference; so does the merged folder', async () => {
    const ref = reference();
    const m = PolicyModel.load(DIR, { threads: 1 });
    models.push(m);
    expect(m.lora).toMatchObject({ rank: 4, alpha: 8, targets: ['q_proj', 'v_proj', 'o_proj', 'up_proj', 'down_proj'] });
    const got = (await m.score(ref.ids)).logprobs;
    expect(relErr(got, ref.lp)).toBeLessThan(1e-5);
    const out = join(mkdtempSync(join(tmpdir(), 'arbor-peft-merge-')), 'merged');
    mergeAdapterFolder(BASE, DIR, out);
    const merged = PolicyModel.load(out, { threads: 1 });
    models.push(merged);
    expect(merged.lora).toBeUndefined();
    expect(relErr((await merged.score(ref.ids)).logprobs, ref.lp)).toBeLessThan(1e-5);
    // The base alone differs (the adapter matters).
    const base = PolicyModel.load(BASE, { threads: 1 });
    models.push(base);
    expect(relErr((await base.score(ref.ids)).logprobs, ref.lp)).toBeGreaterThan(1e-3);
  });

  it('refuses what it cannot represent, naming the field', () => {
    const conf = JSON.parse(readFileSync(join(DIR, 'adapter_config.json'), 'utf8'));
    const bad = (patch: Record<string, unknown>) => {
      const d = mkdtempSync(join(tmpdir(), 'arbor-peft-bad-'));
      cpSync(DIR, d, { recursive: true });
      writeFileSync(join(d, 'adapter_config.json'), JSON.stringify({ ...conf, ...patch }));
      return () => readPeftConfig(d);
    };
    expect(bad({ use_dora: true })).toThrow(/'use_dora'/);
    expect(bad({ use_rslora: true })).toThrow(/'use_rslora'/);
    expect(bad({ rank_pattern: { q_proj: 8 } })).toThrow(/'rank_pattern'/);
    expect(bad({ modules_to_save: ['lm_head'] })).toThrow(/'modules_to_save'/);
    expect(bad({ target_modules: ['q_proj', 'c_attn'] })).toThrow(/'target_modules'.*"c_attn"/);
    expect(bad({ peft_type: 'IA3' })).toThrow(/'peft_type'/);
  });
});
