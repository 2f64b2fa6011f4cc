/**
 * The `model.lora` block of the experiment config: defaults filled on validation, bad modules
 * named, shown by the launch form's schema (as a block of its own, not turned on by the form's
 * defaults) and by `arbor train --print-config`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { experimentJsonSchema, validateConfig } from '../../../engine/config/experiment';
import { defaultsOf, fieldKind, unwrap, type JsonSchema } from '../../../renderer/src/lib/jsonSchema';

describe('model.lora config', () => {
  it('fills the defaults and names a bad module', () => {
    expect(validateConfig({ model: { init: 'tiny', lora: {} } }).model.lora).toEqual({ rank: 16, alpha: 32, dropout: 0, target_modules: 'all-linear' });
    expect(validateConfig({ model: { init: 'tiny', lora: { rank: 8, target_modules: ['q_proj', 'v_proj'] } } }).model.lora).toEqual({
      rank: 8,
      alpha: 32,
      dropout: 0,
      target_modules: ['q_proj', 'v_proj'],
    });
    expect(validateConfig({ model: { init: 'tiny' } }).model.lora).toBeUndefined();
    expect(() => validateConfig({ model: { init: 'tiny', lora: { target_modules: ['lm_head'] } } })).toThrow(/model\.lora\.target_modules/);
    expect(() => validateConfig({ model: { init: 'tiny', lora: { dropout: 1 } } })).toThrow(/model\.lora\.dropout/);
    expect(() => validateConfig({ model: { init: 'tiny', lora: { rnak: 8 } } })).toThrow(/model\.lora\.rnak: unknown field/);
  });

  it('model.recompute_layers: accepted for ORT, refused with the tfjs backend', () => {
    expect(validateConfig({ model: { init: 'tiny', recompute_layers: true } }).model.recompute_layers).toBe(true);
    expect(validateConfig({ model: { init: 'tiny', recompute_layers: 12 } }).model.recompute_layers).toBe(12);
    for (const bad of [-1, 2.5, 'all'])
      expect(() => validateConfig({ model: { init: 'tiny', recompute_layers: bad } }), String(bad)).toThrow(/model\.recompute_layers/);
    expect(() => validateConfig({ backend: 'tfjs', model: { init: 'tiny', recompute_layers: true } })).toThrow(
      /model\.recompute_layers: has no effect with backend "tfjs"/,
    );
  });

  it('the launch form shows the block, and its defaults leave LoRA off', () => {
    const schema = experimentJsonSchema() as JsonSchema;
    const model = unwrap(schema.properties!.model!, schema);
    const lora = unwrap(model.properties!.lora!, schema);
    expect(fieldKind(lora, schema)).toBe('object');
    expect(Object.keys(lora.properties!)).toEqual(['rank', 'alpha', 'dropout', 'target_modules']);
    expect(fieldKind(lora.properties!.rank!, schema)).toBe('integer');
    expect(lora.description).toMatch(/LoRA/);
    const d = defaultsOf(schema) as { model?: { lora?: unknown } };
    expect(d.model?.lora).toBeUndefined();
  });

  it('arbor train --print-config shows it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-lora-cfg-'));
    writeFileSync(join(dir, 'c.yaml'), 'model: { init: tiny, lora: { rank: 32 } }\n');
    const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
    const r = spawnSync(process.execPath, [bin, 'train', join(dir, 'c.yaml'), '--print-config'], {
      encoding: 'utf8',
      env: { ...process.env, ARBOR_HOME: dir },
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).model.lora).toEqual({ rank: 32, alpha: 32, dropout: 0, target_modules: 'all-linear' });
  });
});
