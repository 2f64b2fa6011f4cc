/** model.quantize_base / model.quantize_block: accepted with model.lora only; rollout.quantize folded into it under LoRA. */
import { describe, expect, it } from 'vitest';
import { validateConfig, ConfigError } from '../../../engine/config/experiment';
import { quantizedBytes } from '../../../engine/model/quantize';

const issues = (model: Record<string, unknown>, extra: Record<string, unknown> = {}): string[] => {
  try {
    validateConfig({ model: { init: 'tiny', ...model }, ...extra }, { checkFiles: false });
    return [];
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return e.issues.map((i) => `${i.field}: ${i.message}`);
  }
};

describe('model.quantize_base', () => {
  it('is off by default; int4 / int8 with model.lora', () => {
    const c = validateConfig({ model: { init: 'tiny' } }, { checkFiles: false });
    expect(c.model.quantize_base).toBeUndefined();
    expect(c.model.quantize_block).toBeUndefined();
    expect(issues({ lora: {}, quantize_base: 'int4' })).toEqual([]);
    expect(issues({ lora: {}, quantize_base: 'int8', quantize_block: 64 })).toEqual([]);
  });
  it('is refused without model.lora, on tfjs, and a block that is not a power of two ≥ 16; quantize_block alone is refused', () => {
    expect(issues({ quantize_base: 'int4' })[0]).toMatch(/^model\.quantize_base: has no effect without model\.lora/);
    expect(issues({ lora: {}, quantize_base: 'int4' }, { backend: 'tfjs' })[0]).toMatch(/^model\.quantize_base: has no effect with backend "tfjs"/);
    expect(issues({ lora: {}, quantize_base: 'int4', quantize_block: 48 })[0]).toMatch(/^model\.quantize_block: .*power of two/);
    expect(issues({ lora: {}, quantize_block: 64 })[0]).toMatch(/^model\.quantize_block: has no effect with model\.quantize_base "none"/);
  });
  it('rollout.quantize under model.lora points to model.quantize_base', () => {
    expect(issues({ lora: {} }, { rollout: { quantize: 'int8' } })[0]).toMatch(/^rollout\.quantize: has no effect with model\.lora: use model\.quantize_base/);
    expect(issues({}, { rollout: { quantize: 'int8' } })).toEqual([]);
  });
});

describe('quantizedBytes', () => {
  it('codes plus one float32 scale per block (a partial last block padded)', () => {
    expect(quantizedBytes(2, 64, 4, 32)).toBe(2 * 2 * 16 + 2 * 2 * 4);
    expect(quantizedBytes(1, 40, 8, 32)).toBe(2 * 32 + 2 * 4);
    expect(quantizedBytes(896, 4864, 4)).toBe(896 * 152 * 20);
  });
});
