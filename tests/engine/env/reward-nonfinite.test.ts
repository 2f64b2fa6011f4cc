// A reward returning NaN or ±Infinity is reported by that name (JSON alone would say "null").
import { describe, expect, it } from 'vitest';
import { callRewardInContext, loadSandboxModule } from '../../../engine/env/sandbox-context';

const reward = (body: string) => loadSandboxModule(`module.exports.reward = function (s) { ${body} };`, 'rewards/r.ts', 1000);

describe('reward return values', () => {
  it('names NaN, Infinity and null as returned', async () => {
    await expect(callRewardInContext(reward('return NaN;'), 'rewards/r.ts', {}, 1000)).rejects.toThrow(
      'rewards/r.ts: the reward function returned NaN; expected a finite number',
    );
    await expect(callRewardInContext(reward('return { reward: -Infinity };'), 'rewards/r.ts', {}, 1000)).rejects.toThrow('returned {"reward":-Infinity}');
    await expect(callRewardInContext(reward('return null;'), 'rewards/r.ts', {}, 1000)).rejects.toThrow('returned null;');
    await expect(callRewardInContext(reward('return { reward: 0.5, components: { em: 1 } };'), 'rewards/r.ts', {}, 1000)).resolves.toMatchObject({
      reward: 0.5,
    });
  });
});
