// The two-tool task's reward: 1 when the final answer is the gold number, else 0. It sees the
// whole episode: the task (with its meta), every model turn with its tool calls (name, arguments,
// result, error) and the answer. The components are stored with each trajectory and charted;
// they do not change the reward.
import { exactMatch, type RewardFn } from 'arbor/env';

export const reward: RewardFn = (episode) => {
  const calls = episode.history.flatMap((turn) => turn.calls);
  const worked = (name: string) => (calls.some((c) => c.name === name && c.success) ? 1 : 0);
  return {
    reward: episode.answer === undefined ? 0 : exactMatch(episode.answer, episode.golds),
    components: {
      used_lookup: worked('lookup'),
      used_calculator: worked('calculator'),
      failed_calls: calls.filter((c) => !c.success).length,
    },
  };
};
