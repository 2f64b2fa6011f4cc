// The scripted experts' deliberate mistakes in SFT demonstrations (#28): with
// sft.imitate_mistakes: false a mistake turn stays in its demonstration as context (the recovery
// after it is learned) with loss mask 0; with true (the default) it is a target like every other
// expert turn. Checked on the multihop
// and the two-tool experts through the same session the trainer opens.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, validateConfig } from '../../../engine/config/experiment';
import { openTaskSession } from '../../../engine/run/open';
import { expertMistake, toolsExpertStep } from '../../../engine/tasks/tools/world';

const CONFIGS = join(__dirname, '..', '..', '..', 'resources', 'configs');

/** Per demonstration: the loss-mask value of each model turn's tokens (taken from the demo's mask), in order. */
async function turnMasks(file: string, sft: Record<string, unknown>) {
  const cfg = await loadConfig(file, (raw) => {
    raw.sft = { ...(raw.sft as object), ...sft };
  });
  const s = await openTaskSession(cfg);
  try {
    return await s.demos();
  } finally {
    await s.close();
  }
}

/** Runs of equal non-zero-length segments of 1s in a mask: one per model turn learned. */
const learnedTurns = (mask: ArrayLike<number>) => {
  let runs = 0;
  for (let i = 0; i < mask.length; i++) if (mask[i] && !mask[i - 1]) runs++;
  return runs;
};

describe('deliberate mistakes in SFT demonstrations', () => {
  it('multihop: with mistake_rate 1 every demonstration has one unlearned turn with imitate_mistakes false, none by default', async () => {
    const file = join(CONFIGS, 'demo.yaml');
    const masked = await turnMasks(file, { demos: 12, mistake_rate: 1, imitate_mistakes: false });
    const imitated = await turnMasks(file, { demos: 12, mistake_rate: 1 });
    expect(masked).toHaveLength(12);
    masked.forEach((d, i) => {
      // Same tokens either way; only the mistake turn's mask differs.
      expect(Array.from(d.tokens)).toEqual(Array.from(imitated[i]!.tokens));
      expect(learnedTurns(imitated[i]!.lossMask) - learnedTurns(d.lossMask)).toBe(1);
      const lost = Array.from(imitated[i]!.lossMask).reduce((a, m, k) => a + (m && !d.lossMask[k] ? 1 : 0), 0);
      expect(lost).toBeGreaterThan(0);
    });
  }, 120_000);

  it('tools expert: exactly the turn that makes the episode’s mistake is flagged', () => {
    const q = 'how old was the founder of the delta institute when it was founded ?';
    let flaggedEpisodes = 0;
    for (let seed = 0; seed < 400; seed++) {
      const kind = expertMistake(seed, 0.5);
      const obs: string[] = [];
      const turns: string[] = [];
      const flags: boolean[] = [];
      for (let k = 0; k < 6; k++) {
        const t = toolsExpertStep(q, obs, turns, seed, { mistakeRate: 0.5, decoys: ['wade york'] });
        turns.push(t.text);
        flags.push(t.mistake);
        if (t.text.startsWith('<answer>')) break;
        // Observations as the lookup/calculator would give them.
        if (t.text.includes('"name"') && t.text.includes('"arguments": {"name"')) obs.push(' <tool_response> Error: invalid arguments </tool_response> ');
        else if (t.text.includes('delta institute')) obs.push(' <tool_response> the delta institute was founded in 1950 by vera knox . </tool_response> ');
        else if (t.text.includes('vera knox')) obs.push(' <tool_response> vera knox was born in 1911 . </tool_response> ');
        else if (t.text.includes('calculator')) obs.push(` <tool_response> ${t.text.includes('+') ? 3861 : 39} </tool_response> `);
        else obs.push(' <tool_response> no entry </tool_response> ');
      }
      const n = flags.filter(Boolean).length;
      expect(n).toBe(kind ? 1 : 0);
      if (kind === 'wrong-lookup') expect(flags[0]).toBe(true);
      if (kind === 'no-calculator') expect(flags[flags.length - 1]).toBe(true);
      if (kind === 'added') expect(turns[flags.indexOf(true)]).toContain('+');
      if (kind === 'bad-arguments') expect(turns[flags.indexOf(true)]).toContain('"arguments": {"name"');
      flaggedEpisodes += n;
    }
    expect(flaggedEpisodes).toBeGreaterThan(100);
  });

  it('refuses imitate_mistakes where it has no effect, naming it', () => {
    expect(() =>
      validateConfig({ model: { init: 'tiny' }, task: { kind: 'multihop' }, sft: { warm_start: true, mistake_rate: 0, imitate_mistakes: false } }),
    ).toThrow(/sft.imitate_mistakes/);
    expect(() => validateConfig({ model: { init: 'tiny' }, task: { kind: 'multihop' }, sft: { warm_start: true, imitate_mistakes: false } })).not.toThrow();
  });
});
