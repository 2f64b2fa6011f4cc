/**
 * External agent trajectories in the trainer's maths: episodes from agent programs (two groups of
 * two, rewards that differ within each group) go through trajectoryToEpisode into every advantage
 * estimator of engine/rl's registry; advantages are finite, zero on the tokens the agent added
 * (tool results, user messages), and the group baselines see each group's own rewards.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { validateConfig } from '../../../engine/config/experiment';
import { hermesFormat } from '../../../engine/env/format-hermes';
import { ToolEnv } from '../../../engine/env/toolenv';
import { AgentRollouts } from '../../../engine/openai/agent';
import type { RolloutTask } from '../../../engine/rollout/ports';
import { estimatorNames, getEstimator } from '../../../engine/rl';
import { advantagePort } from '../../../engine/train/advantage';
import { trajectoryToEpisode } from '../../../engine/train/trajectories';
import { toolsTokenizer } from '../../../engine/tasks/tools/kit';
import { ScriptedBackend } from './scripted';

describe('agent trajectories through every estimator', () => {
  it('gives finite advantages on model tokens only, relative to each group', async () => {
    const tok = toolsTokenizer().hf;
    const end = tok.tokenId('<|im_end|>')!;
    const turn = (a: string) => [...tok.encode(`<answer> ${a} </answer>`), end];
    // 4 episodes × 2 calls, in order (concurrency 1): the second call's answer is the episode's.
    const backend = new ScriptedBackend(tok.vocabSize, [turn('1'), turn('40'), turn('1'), turn('7'), turn('2'), turn('40'), turn('2'), turn('9')]);
    const cfg = validateConfig(
      {
        model: { init: 'tiny' },
        task: { kind: 'custom' },
        rollout: { prompts_per_step: 2, n: 2, max_turns: 4, max_new_tokens: 16, max_total_length: 256 },
        environment: { tasks: 'unused.jsonl', agent: { command: [process.execPath, join(__dirname, 'fixtures', 'agent.mjs')], concurrency: 1 } },
      },
      { checkFiles: false },
    );
    const task = (id: string): RolloutTask => ({
      id,
      createEnv: () => new ToolEnv({ task: { id, prompt: 'how old ?', answers: ['40'] }, tools: [], format: hermesFormat(), tokenizer: tok }),
    });
    const agents = new AgentRollouts({ cfg, spec: cfg.environment.agent!, backend, tokenizer: tok, stopTokenIds: [end], endStrings: [], log: () => {} });
    let groups;
    try {
      groups = await agents.run([task('echo-a'), task('echo-b')], 2, 3, { temperature: 1, topP: 1 });
    } finally {
      await agents.close();
    }
    const episodes = groups.flat().flatMap((e) => e.trajectories.map(trajectoryToEpisode));
    expect(episodes.map((e) => [e.group, e.sample, e.reward])).toEqual([
      [0, 0, 1],
      [0, 1, 0],
      [1, 0, 1],
      [1, 1, 0],
    ]);
    const names = estimatorNames();
    expect(names.length).toBeGreaterThan(3);
    for (const name of names) {
      const c = structuredClone(cfg);
      c.algorithm.adv_estimator = name as typeof c.algorithm.adv_estimator;
      const values = getEstimator(name).needsCritic ? { values: async () => episodes.map((e) => new Float32Array(e.tokens.length)) } : undefined;
      const port = advantagePort(c, values);
      const oldLogprobs = new Map(episodes.map((e) => [e, e.rolloutLogprobs] as const));
      const v = port.values ? await port.values(episodes) : undefined;
      const { advantages } = port.compute({ episodes, oldLogprobs, ...(v ? { values: new Map(episodes.map((e, i) => [e, v[i]!] as const)) } : {}) });
      for (const e of episodes) {
        const a = advantages.get(e)!;
        expect(a.length, name).toBe(e.tokens.length);
        for (let i = 0; i < a.length; i++) {
          expect(Number.isFinite(a[i]!), name).toBe(true);
          if (!e.lossMask[i]) expect(a[i], `${name}: a token the agent added`).toBe(0);
        }
      }
      if (name === 'grpo') {
        // The right sample of each group is above its baseline, the wrong one below.
        const first = (e: (typeof episodes)[number]) => advantages.get(e)![e.lossMask.indexOf(1)]!;
        expect(first(episodes[0]!)).toBeGreaterThan(0);
        expect(first(episodes[1]!)).toBeLessThan(0);
      }
    }
  }, 60_000);
});
