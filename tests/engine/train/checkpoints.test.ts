// Checkpoint retention (config `checkpoint`): the newest `keep`, the best, and every `keep_every`-th
// step, so the replay finds weights near the ones that sampled any step; keep_every's default and
// its refusal when no saved checkpoint could be kept.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../engine/config/experiment';
import { checkpointsKept, listCheckpoints, markBest, retentionOf, saveCheckpoint } from '../../../engine/train/checkpoints';

const save = (runDir: string, step: number, r: Parameters<typeof saveCheckpoint>[3]) =>
  saveCheckpoint(runDir, { step, phase: 'rl', seed: 0 }, (dir) => writeFileSync(join(dir, 'model.safetensors'), 'x'), r);

describe('checkpoint retention', () => {
  it('keeps the newest `keep`, the multiples of keepEvery and the best; a number keeps only the newest', async () => {
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-ck-keep-'));
    const r = { keep: 2, keepEvery: 20 };
    for (let step = 5; step <= 60; step += 5) {
      await save(runDir, step, r);
      if (step === 15) markBest(runDir, { step: 15, metric: 'exact_match', value: 0.5 }, r);
    }
    expect(listCheckpoints(runDir).map((c) => c.step)).toEqual([15, 20, 40, 55, 60]);
    expect(checkpointsKept(60, 5, r, true)).toBe(2 + 3 + 1);
    // Without keepEvery (a plain number, as SFT passes): the newest and the best only.
    await save(runDir, 65, 2);
    expect(listCheckpoints(runDir).map((c) => c.step)).toEqual([15, 60, 65]);
  });

  it('keep_every defaults to about eight checkpoints over the run, a multiple of every; 0 turns it off; another step is refused', () => {
    const cfg = (checkpoint: Record<string, unknown>, steps = 400) => validateConfig({ model: { init: 'tiny' }, steps, checkpoint });
    expect(retentionOf(cfg({ every: 25, keep: 1 }))).toEqual({ keep: 1, keepEvery: 50 });
    expect(retentionOf(cfg({}, 40))).toEqual({ keep: 2, keepEvery: 5 });
    expect(retentionOf(cfg({ every: 7 }, 100))).toEqual({ keep: 2, keepEvery: 14 });
    expect(retentionOf(cfg({ every: 5, keep_every: 0 }))).toEqual({ keep: 2, keepEvery: 0 });
    expect(retentionOf(cfg({ every: 5, keep_every: 100 }))).toEqual({ keep: 2, keepEvery: 100 });
    expect(() => cfg({ every: 5, keep_every: 12 })).toThrow(/checkpoint\.keep_every.*not a multiple of checkpoint\.every \(5\)/);
  });
});
