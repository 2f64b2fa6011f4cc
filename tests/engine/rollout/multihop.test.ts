import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { rollout, rolloutTextPolicy } from '../../../engine/rollout/engine';
import { openRolloutSource } from '../../../engine/tasks/sources';
import { flattenTrajectory, toolCallCount } from '../../../engine/rollout/types';
import { initTinyModel } from '../../../engine/cli/commands/init-model';
import { buildProgram } from '../../../engine/cli/main';
import '../../../engine/tasks/multihop/rollout';

const dir = mkdtempSync(join(tmpdir(), 'arbor-rollout-mh-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('multihop rollouts through the real tools', () => {
  it('the scripted expert solves held-out 2-hop questions with real search calls', async () => {
    const src = await openRolloutSource({ task: 'multihop', policy: 'expert', questions: 40, seed: 7, options: { hops: [2], worldSeed: 2024 } });
    const { trajectories } = await rolloutTextPolicy(src.policy!, { tasks: src.tasks, n: 1, seed: 7, tokenizer: src.tokenizer, limits: src.limits });
    const em = trajectories.filter((t) => t.outcome.exactMatch).length / trajectories.length;
    expect(em).toBeGreaterThanOrEqual(0.95);
    for (const t of trajectories) {
      expect(toolCallCount(t).calls).toBeGreaterThanOrEqual(2);
      expect(toolCallCount(t).errors).toBe(0);
      const f = flattenTrajectory(t);
      // Observations (role tool) carry mask 0, the expert's turns 1.
      let p = t.promptIds.length;
      for (const u of t.turns) {
        for (let i = 0; i < u.tokenIds.length; i++) expect(f.lossMask[p + i]).toBe(u.role === 'model' ? 1 : 0);
        p += u.tokenIds.length;
      }
    }
    await src.close();
  });

  it('naive RAG and base tool calling run the untrained model through the same engine', async () => {
    initTinyModel(dir, { task: 'multihop', seed: 1, hidden: 32, layers: 1, heads: 2, maxLength: 512 });
    const rag = await openRolloutSource({ task: 'multihop', model: dir, questions: 4, seed: 3, mode: 'naive-rag', maxBatch: 8 });
    const r = await rollout(rag.backend!, {
      tasks: rag.tasks,
      n: 2,
      seed: 3,
      sampling: { temperature: 1 },
      tokenizer: rag.tokenizer,
      limits: { ...rag.limits, maxNewTokens: 12 },
      stop: rag.stop,
    });
    for (const t of r.trajectories) {
      expect(t.promptText).toContain('<information>');
      expect(t.turns.filter((u) => u.role === 'model')).toHaveLength(1);
      expect(toolCallCount(t).calls).toBe(0);
    }
    await rag.close();
    const tools = await openRolloutSource({ task: 'multihop', model: dir, questions: 4, seed: 3, maxBatch: 8 });
    const b = await rollout(tools.backend!, {
      tasks: tools.tasks,
      n: 2,
      seed: 3,
      sampling: { temperature: 1 },
      tokenizer: tools.tokenizer,
      limits: { ...tools.limits, maxNewTokens: 12 },
      stop: tools.stop,
    });
    expect(b.trajectories).toHaveLength(8);
    expect(b.trajectories.every((t) => t.promptText.includes('search'))).toBe(true);
    // The untrained model's turns end on the env's feedback and continue: several model turns.
    expect(b.trajectories.some((t) => t.turns.filter((u) => u.role === 'model').length > 1)).toBe(true);
    await tools.close();
  });

  it('arbor rollout writes JSONL trajectories and a JSON summary', async () => {
    const out = join(dir, 'expert.jsonl');
    const logs: string[] = [];
    const orig = console.log;
    console.log = (s: string) => logs.push(s);
    try {
      const program = await buildProgram();
      await program.parseAsync(['rollout', '--task', 'multihop', '--policy', 'expert', '--n', '2', '--questions', '5', '--json', '--out', out], {
        from: 'user',
      });
    } finally {
      console.log = orig;
    }
    const summary = JSON.parse(logs.at(-1)!);
    expect(summary.trajectories).toBe(10);
    expect(summary.exactMatch).toBe(1);
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(10);
    expect(lines.map((l) => l.group).sort()).toEqual([0, 0, 1, 1, 2, 2, 3, 3, 4, 4]);
    expect(lines[0].turns[0].role).toBe('model');
    expect(summary.out).toBe(out);
  });

  it('arbor rollout without --out writes the JSONL into the workspace and names the file', async () => {
    const logs: string[] = [];
    const orig = console.log;
    const home = process.env.ARBOR_HOME;
    console.log = (s: string) => logs.push(s);
    process.env.ARBOR_HOME = join(dir, 'home');
    try {
      const program = await buildProgram();
      await program.parseAsync(['rollout', '--task', 'multihop', '--policy', 'expert', '--n', '1', '--questions', '3', '--json'], { from: 'user' });
    } finally {
      console.log = orig;
      if (home === undefined) delete process.env.ARBOR_HOME;
      else process.env.ARBOR_HOME = home;
    }
    const summary = JSON.parse(logs.at(-1)!);
    expect(summary.out).toMatch(new RegExp(`^${join(dir, 'home', 'rollouts', 'multihop-policy-expert-').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}.*\\.jsonl$`));
    expect(readFileSync(summary.out, 'utf8').trim().split('\n')).toHaveLength(3);
  });
});
