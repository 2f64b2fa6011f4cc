// environment.reward_errors: a reward file that throws fails the run by default; with `zero` the
// episode scores 0, the error is reported (naming the task) and counted (component reward_error).
import { describe, expect, it } from 'vitest';
import { formatByName } from '../../../engine/env/formats';
import { ToolEnv } from '../../../engine/env/toolenv';
import { validateConfig } from '../../../engine/config/experiment';

const tok = { encode: (s: string) => Array.from(s, (c) => c.charCodeAt(0) % 50) };
const episode = async (rewardErrors: 'fail' | 'zero' | undefined, onRewardError?: (m: string) => void) => {
  const env = new ToolEnv({
    task: { id: 'q7', prompt: 'what is 1 + 2 ?', answers: ['3'] },
    tools: [],
    format: formatByName('tags', { tools: [] }),
    tokenizer: tok,
    userReward: (s) => {
      if (s.answer === '3') throw new Error('rewards/r.ts:4:11: boom');
      return 1;
    },
    userRewardName: 'rewards/r.ts',
    rewardErrors,
    onRewardError,
  });
  await env.prompt();
  await env.step({ text: '<answer> 3 </answer>' });
  return env.outcome();
};

describe('environment.reward_errors', () => {
  it('fail (default): the error propagates with its file and line', async () => {
    await expect(episode(undefined)).rejects.toThrow('rewards/r.ts:4:11: boom');
  });
  it('zero: the episode scores 0, the error is logged with the task and counted', async () => {
    const logged: string[] = [];
    const o = await episode('zero', (m) => logged.push(m));
    expect(o.reward).toBe(0);
    expect(o.components).toMatchObject({ reward_error: 1, user_reward: 0, exact_match: 1 });
    expect(logged).toEqual([expect.stringMatching(/rewards\/r\.ts:4:11: boom \(task q7: scored 0/)]);
  });
  it('is refused without a reward file (nothing to apply to)', () => {
    expect(() => validateConfig({ model: { init: 'tiny' }, environment: { reward_errors: 'zero' } }, { checkFiles: false })).toThrow(
      /environment\.reward_errors: has no effect without environment\.reward/,
    );
  });
});
