import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { latestCheckpoint } from '../../../engine/train/checkpoints';
import { validateConfig } from '../../../engine/train/config';
import { readTokenDemos, runSft } from '../../../engine/train/sft';
import { TabularPolicy } from '../../../engine/train/tabular';

describe('SFT warm start', () => {
  it('learns from demonstrations that include mistakes, with loss only on model tokens, and checkpoints', async () => {
    const cfg = validateConfig({ model: { init: 'tiny' }, sft: { epochs: 4, lr: 0.1, batch_size: 16 } });
    const policy = new TabularPolicy({ prompts: 5, length: 3, vocab: 6, seed: 2 }, cfg);
    const demos = policy.demos(200, 0.25, 9);
    const em = async () => (await policy.sample({ step: 0, seed: 1, prompts: 20, n: 4 })).filter((e) => e.exactMatch).length / 80;
    const before = await em();
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-sft-'));
    const losses: number[] = [];
    const res = await runSft(cfg, demos, policy, { runDir, onStep: (_s, _t, m) => losses.push(m['sft/loss']!) });
    expect(res.steps).toBe(4 * Math.ceil(200 / 16));
    expect(losses[losses.length - 1]!).toBeLessThan(losses[0]! * 0.5);
    expect(await em()).toBeGreaterThan(before + 0.3);
    expect(latestCheckpoint(runDir)?.state.phase).toBe('sft');
  });

  it('reads token demos and names the line of a bad one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-sft-'));
    const f = join(dir, 'd.jsonl');
    writeFileSync(f, '{"tokens":[1,2,3],"loss_mask":[0,1,1]}\n\n{"tokens":[1,2],"loss_mask":[0]}\n');
    expect(() => readTokenDemos(f)).toThrow(/d\.jsonl:3: tokens \(2\) and loss_mask \(1\) differ/);
    writeFileSync(f, '{"tokens":[1,2,3],"loss_mask":[0,1,1]}\n');
    expect(readTokenDemos(f)[0]!.lossMask).toEqual(Uint8Array.from([0, 1, 1]));
  });
});
