import { describe, expect, it } from 'vitest';
import { rollout } from '../../../engine/rollout/engine';
import { RecomputeBackend } from '../../../engine/rollout/recompute';
import { EOS, RnnBackend, VOCAB, WordTokenizer, searchTasks } from './helpers';

describe('RecomputeBackend', () => {
  it('gives the same trajectories as the cached decoder it recomputes', async () => {
    const tok = new WordTokenizer();
    // Full forward = a fresh RNN run over the whole sequence (slot 0 of a scratch model).
    const scratch = new RnnBackend(1);
    const forward = async (seqs: number[][]) => {
      const out: Float32Array[] = [];
      for (const s of seqs) {
        scratch.release(0);
        out.push((await scratch.extend([{ slot: 0, tokens: s }]))[0]!);
      }
      return out;
    };
    const o = {
      tasks: searchTasks(tok),
      n: 3,
      seed: 5,
      sampling: { temperature: 0.9 },
      tokenizer: tok,
      limits: { maxNewTokens: 16, maxTurns: 3, maxTotalLength: 120 },
      stop: { strings: ['</answer>'], tokenIds: [EOS] },
    };
    const cached = await rollout(new RnnBackend(4), o);
    const recomputed = await rollout(new RecomputeBackend(forward, VOCAB.length, 4, 512), o);
    const ids = (r: typeof cached) => r.trajectories.map((t) => t.turns.map((u) => u.tokenIds));
    expect(ids(recomputed)).toEqual(ids(cached));
    expect(recomputed.trajectories.map((t) => t.turns.flatMap((u) => u.logprobs))).toEqual(cached.trajectories.map((t) => t.turns.flatMap((u) => u.logprobs)));
  });
});
