import type { Episode } from '../../../engine/train/episode';

/**
 * A training Episode for tests: `tokens` with `mask` (1 = a model token the loss sees; default every
 * token), zero rollout logprobs and entropy, no reward, no tools; `fields` sets the rest.
 */
export function testEpisode(
  tokens: ArrayLike<number>,
  mask: ArrayLike<number> = new Uint8Array(tokens.length).fill(1),
  fields: Partial<Episode> = {},
): Episode {
  return {
    group: 0,
    sample: 0,
    taskId: 't',
    tokens: Int32Array.from(tokens),
    lossMask: Uint8Array.from(mask),
    rolloutLogprobs: new Float32Array(tokens.length),
    entropy: new Float32Array(tokens.length),
    reward: 0,
    rewardComponents: {},
    exactMatch: false,
    formatOk: true,
    toolCalls: 0,
    toolErrors: 0,
    turns: 1,
    stepRewards: [],
    truncated: false,
    ...fields,
  };
}
