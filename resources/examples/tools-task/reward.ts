// The two-tool task's reward: 1 when the final answer equals the gold number, else 0. The
// components are logged with every trajectory (they do not change the reward): whether the
// episode used each tool and how many calls failed.
import { exactMatch } from 'arbor/env';
import type { Episode } from 'arbor/env';

export function reward(episode: Episode) {
  const calls = episode.turns.flatMap((t) => t.calls);
  const correct = exactMatch(episode.answer ?? '', episode.task.answers ?? []);
  return {
    reward: correct,
    components: {
      used_lookup: calls.some((c) => c.name === 'lookup' && !c.error) ? 1 : 0,
      used_calculator: calls.some((c) => c.name === 'calculator' && !c.error) ? 1 : 0,
      failed_calls: calls.filter((c) => c.error).length,
    },
  };
}
