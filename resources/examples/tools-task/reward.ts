// The two-tool task's reward. It sees the whole episode: the task (with its meta: the entities a
// correct episode looks up and the expression it computes), every model turn with its tool calls
// (name, arguments, result, error) and the answer.
//  - 1 when the final answer is the gold number (exact match);
//  - plus 0.1 for each expected call the episode made (the organisation looked up, the person
//    looked up, the expression computed; at most 0.3), so that GRPO still has a signal in groups
//    where every answer is wrong. A right answer always outscores a wrong one.
//  - steps: one per tool call, in order (used as process rewards when the config sets
//    algorithm.process_rewards): +1 for an expected call made for the first time, -1 for a failed
//    call (a tool error or an invalid call), 0 for a successful call that was not expected (a
//    repeat, another entity). Process rewards are not relative to the group, so a step penalty on
//    calls that worked makes not calling the cheapest way out: with -1 there, a weaker SFT model
//    learned to stop looking things up (docs/areas/train.md, "Two-tool task", run 10).
// A call failed when its tool said so (success false) or when its result is one of the tools'
// failure texts ("no entry for …", "error: …"): an external agent (environment.agent) runs its own
// copies of the tools, and a tool message in the OpenAI API carries no error flag, so there the
// result text is all the episode shows (in-process the two agree).
// The components are stored with each trajectory and charted.
import { exactMatch, type RewardFn } from 'arbor/env';

const entityOf = (args: unknown) =>
  String((args as { entity?: unknown })?.entity ?? '')
    .trim()
    .toLowerCase()
    .replace(/^the /, '');
const expressionOf = (args: unknown) => String((args as { expression?: unknown })?.expression ?? '').replace(/\s+/g, '');

export const reward: RewardFn = (episode) => {
  const meta = (episode.task.meta ?? {}) as { entities?: string[]; expression?: string };
  const expected = new Set([
    ...(meta.entities ?? []).map((e) => `lookup:${e}`),
    ...(meta.expression ? [`calculator:${meta.expression.replace(/\s+/g, '')}`] : []),
  ]);
  const calls = episode.history
    .flatMap((turn) => turn.calls)
    .map((c) => ({ ...c, success: c.success && !/^(no entry for |error: )/.test(String(c.result ?? '')) }));
  const done = new Set<string>();
  const steps = calls.map((c) => {
    const key = c.name === 'lookup' ? `lookup:${entityOf(c.args)}` : c.name === 'calculator' ? `calculator:${expressionOf(c.args)}` : '';
    const right = c.success && expected.has(key) && !done.has(key);
    if (right) done.add(key);
    return right ? 1 : c.success ? 0 : -1;
  });
  const answered = episode.answer === undefined ? 0 : exactMatch(episode.answer, episode.golds);
  return {
    reward: answered + 0.1 * done.size,
    steps,
    components: {
      answer_right: answered,
      right_calls: done.size,
      failed_calls: calls.filter((c) => !c.success).length,
    },
  };
};
