// A scripted degeneration as a run in a workspace (issue 40): the training loop with the tabular
// policy (tests/engine/train/tabular.ts) and a reward that pays for long answers, whose rollouts
// from DEGENERATES_AT on run long, loop a phrase, hit the length limit and drop the format, as a
// policy that found the length reward would. Written through the store API the engine uses, into
// the workspace database of a running `arbor serve`; the Run view must flag it at that step.
import { join } from 'node:path';
import { validateConfig } from '../../engine/config/experiment';
import { advantagePort } from '../../engine/train/advantage';
import { runTrainingLoop } from '../../engine/train/loop';
import { storeSink } from '../../engine/run/store-sink';
import { Store } from '../../engine/store/store';
import { openDatabase } from '../../engine/store/db';
import type { Episode } from '../../engine/train/episode';
import { TabularPolicy } from '../engine/train/tabular';

export const DEGENERATES_AT = 5;
const STEPS = 7;
/** Tokens a long answer adds: a 3-gram looped 6 times (the repeated n-gram detector needs 4). */
const LOOP = [1, 2, 3];
const LONG = 18;

/** Writes the run into `<home>/arbor.db`; returns its id. */
export async function seedDegeneratingRun(home: string, name = 'degenerating'): Promise<string> {
  const cfg = validateConfig({
    model: { init: 'tiny' },
    steps: STEPS,
    seed: 3,
    rollout: { prompts_per_step: 2, n: 4 },
    algorithm: { ppo_epochs: 1, mini_batches: 1, micro_batches: 1 },
    optim: { lr: 0.05, warmup_steps: 0 },
    checkpoint: { every: 100, keep: 1 },
    logging: { full_trajectories_every: 1 },
  });
  const db = openDatabase(join(home, 'arbor.db'));
  try {
    const store = new Store(db);
    const runId = store.createRun({ name, config: cfg as unknown as Record<string, unknown>, status: 'running' });
    const sink = storeSink(store, runId, { decode: (ids) => ids.map((i) => `w${i}`).join(' ') });
    const policy = new TabularPolicy({ prompts: 4, length: 3, vocab: 6, seed: 5 }, cfg);
    const sample = policy.sample.bind(policy);
    const rollout = {
      sample: async (a: Parameters<typeof sample>[0]): Promise<Episode[]> =>
        (await sample(a)).map((e) => {
          const long = a.step >= DEGENERATES_AT;
          const extra = long ? Array.from({ length: LONG - 3 }, (_, i) => LOOP[i % LOOP.length]!) : [];
          const n = e.tokens.length + extra.length;
          const grow = <T extends Int32Array | Float32Array | Uint8Array>(src: T, make: (n: number) => T, fill: number): T => {
            const out = make(n);
            out.set(src);
            out.fill(fill, src.length);
            return out;
          };
          const tokens = grow(e.tokens, (k) => new Int32Array(k), 0);
          tokens.set(extra, e.tokens.length);
          const answer = n - 1;
          // The reward pays for length: the long answers earn more whatever else they get right.
          const length = Math.min(1, answer / LONG);
          return {
            ...e,
            tokens,
            lossMask: grow(e.lossMask, (k) => new Uint8Array(k), 1),
            rolloutLogprobs: grow(e.rolloutLogprobs, (k) => new Float32Array(k), -0.05),
            entropy: grow(e.entropy, (k) => new Float32Array(k), 0.1),
            reward: (e.reward + length) / 2,
            rewardComponents: { ...e.rewardComponents, length },
            truncated: long,
            formatOk: !long,
          };
        }),
    };
    await runTrainingLoop(cfg, { rollout, policy, advantage: advantagePort(cfg), sink }, { runDir: join(home, 'runs', runId) });
    sink.flush();
    store.setStatus(runId, 'completed');
    return runId;
  } finally {
    db.close();
  }
}
