// The workbench's Pause: the trainer awaits `beforeStep` before every step, so a paused run
// takes no step until it is resumed, then continues where it was (no step lost or repeated).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { advantagePort } from '../../../engine/train/advantage';
import { validateConfig } from '../../../engine/config/experiment';
import { runTrainingLoop } from '../../../engine/train/loop';
import { JsonlSink } from '../../../engine/run/sinks';
import { TabularPolicy } from './tabular';

describe('pause between steps', () => {
  it('holds the loop before a step until resumed', async () => {
    const cfg = validateConfig({ model: { init: 'tiny' }, steps: 4, rollout: { prompts_per_step: 2, n: 4 }, checkpoint: { every: 10, keep: 1 } });
    const policy = new TabularPolicy({ prompts: 2, length: 3, vocab: 6, seed: 5 }, cfg);
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-pause-'));
    const ports = { rollout: policy, policy, advantage: advantagePort(cfg), sink: new JsonlSink(runDir) };
    const steps: number[] = [];
    let release!: () => void;
    let paused!: () => void;
    const reachedPause = new Promise<void>((r) => (paused = r));
    let calls = 0;
    const done = runTrainingLoop(cfg, ports, {
      runDir,
      onStep: (s) => steps.push(s),
      beforeStep: () => {
        calls++;
        if (calls !== 3) return Promise.resolve();
        paused();
        return new Promise<void>((r) => (release = r));
      },
    });
    await reachedPause;
    // Let every pending task run: the loop stays held before step 3.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(steps).toEqual([1, 2]);
    release();
    const res = await done;
    expect(steps).toEqual([1, 2, 3, 4]);
    expect(res.stopped).toBe(false);
  });
});
