/**
 * On-policy distillation (algorithm.distill, engine/train/distill.ts) on a tiny teacher/student
 * pair of transformers with the same tokenizer: the advantages equal −coef · (log π_student −
 * log π_teacher) computed by hand from each model's next-token logprobs of every prefix; added to
 * the task reward's with mix_with_reward; a teacher with another vocabulary is refused naming
 * both; a 2-step run stores the teacher channel with the trajectories.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { planInputFromConfig } from '../../../engine/cli/commands/plan';
import { validateConfig } from '../../../engine/config/experiment';
import { buildTaskSession } from '../../../engine/run/compose';
import { runExperiment } from '../../../engine/run/runner';
import { storeSink } from '../../../engine/run/store-sink';
import { readModelConfig } from '../../../engine/model/checkpoint';
import { parameterCount } from '../../../engine/model/config';
import { memoryPlan } from '../../../engine/model/memory-plan';
import { PolicyModel } from '../../../engine/model/runtime';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';
import type { TaskKit } from '../../../engine/tasks/kit';
import { advantagePort } from '../../../engine/train/advantage';
import { checkSameTokenizer, openTeacher } from '../../../engine/train/distill';
import type { Episode } from '../../../engine/train/episode';
import { toolsModelFolder } from '../openai/helpers';
import { sequenceTasks, tabularTargets, tabularTokenizer } from './tabular';
import { testEpisode } from './episode-fixture';

const home = mkdtempSync(join(tmpdir(), 'arbor-distill-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));
const student = join(home, 'student');
const teacher = join(home, 'teacher');
toolsModelFolder(student, 1);
toolsModelFolder(teacher, 2);

const episode = (tokens: number[], mask: number[], group: number, sample: number, reward: number): Episode =>
  testEpisode(tokens, mask, { group, sample, taskId: `t${group}`, reward });

/** log p(tokens[t] | tokens[<t]) from the model's score of the prefix alone (no packing, no alignment shared with the port). */
async function byPrefix(model: PolicyModel, tokens: number[], t: number): Promise<number> {
  const r = await model.score([tokens.slice(0, t + 1)]);
  return r.logprobs[t - 1]!;
}

const cfgWith = (distill: Record<string, unknown>) =>
  validateConfig({ model: { path: student }, rollout: { prompts_per_step: 2, n: 2 }, algorithm: { distill: { teacher, ...distill } } });

describe('on-policy distillation', () => {
  it('advantages are −coef · (log π_student − log π_teacher) on model tokens, by hand; mix_with_reward adds the reward advantage', async () => {
    const eps = [
      episode([5, 9, 14, 3, 22, 8], [0, 0, 1, 1, 0, 1], 0, 0, 1),
      episode([5, 9, 30, 31], [0, 0, 1, 1], 0, 1, 0),
      episode([7, 2, 40, 41, 42], [0, 1, 1, 0, 1], 1, 0, 0.5),
      episode([7, 2, 12], [0, 1, 1], 1, 1, 0.5),
    ];
    const cfg = cfgWith({ coef: 0.5 });
    const s = PolicyModel.load(student, { threads: 1 });
    const t = openTeacher(cfg, student, { threads: 1 });
    try {
      const scoredS = await s.score(eps.map((e) => Array.from(e.tokens)));
      const T = scoredS.batch.length;
      const old = new Map(
        eps.map((e, b) => {
          const lp = new Float32Array(e.tokens.length);
          for (let k = 1; k < lp.length; k++) lp[k] = scoredS.logprobs[b * T + k - 1]!;
          return [e, lp] as const;
        }),
      );
      const tl = await t.score(eps);
      const teacherLp = new Map(eps.map((e, i) => [e, tl.logprobs[i]!] as const));
      const res = advantagePort(cfg).compute({ episodes: eps, oldLogprobs: old, teacherLogprobs: teacherLp });
      for (const e of eps) {
        const toks = Array.from(e.tokens);
        const a = res.advantages.get(e)!;
        for (let k = 0; k < toks.length; k++) {
          if (!e.lossMask[k]) {
            expect(a[k]).toBe(0);
            continue;
          }
          const ls = await byPrefix(s, toks, k);
          const lt = await byPrefix(t.model, toks, k);
          expect(Math.abs(ls - lt), 'the two models differ').toBeGreaterThan(1e-4);
          expect(a[k]).toBeCloseTo(-0.5 * (ls - lt), 4);
        }
      }
      expect(res.metrics!['distill/reverse_kl']).toBeDefined();
      // mix_with_reward: GRPO's advantage of the reward plus the teacher's, token by token.
      const mixed = advantagePort(cfgWith({ coef: 0.5, mix_with_reward: true })).compute({ episodes: eps, oldLogprobs: old, teacherLogprobs: teacherLp });
      const grpo = advantagePort(validateConfig({ model: { path: student }, rollout: { prompts_per_step: 2, n: 2 } })).compute({
        episodes: eps,
        oldLogprobs: old,
      });
      for (const e of eps) {
        const m = mixed.advantages.get(e)!;
        m.forEach((x, k) => expect(x).toBeCloseTo(grpo.advantages.get(e)![k]! + res.advantages.get(e)![k]!, 6));
      }
    } finally {
      await s.dispose();
      await t.close();
    }
  }, 120_000);

  it('the teacher scores at rollout.temperature, as the student is scored', async () => {
    const cfg = validateConfig({ model: { path: student }, rollout: { prompts_per_step: 2, n: 2, temperature: 0.6 }, algorithm: { distill: { teacher } } });
    const t = openTeacher(cfg, student, { threads: 1 });
    try {
      const e = episode([5, 9, 14, 3, 22, 8], [0, 0, 1, 1, 0, 1], 0, 0, 1);
      const got = (await t.score([e])).logprobs[0]!;
      const at = await t.model.score([Array.from(e.tokens)], { temperature: 0.6 });
      const plain = await t.model.score([Array.from(e.tokens)]);
      for (let k = 1; k < e.tokens.length; k++) expect(got[k]).toBeCloseTo(at.logprobs[k - 1]!, 5);
      let apart = 0;
      for (let k = 1; k < e.tokens.length; k++) apart = Math.max(apart, Math.abs(got[k]! - plain.logprobs[k - 1]!));
      expect(apart, 'the teacher at 1 is another policy').toBeGreaterThan(1e-3);
    } finally {
      await t.close();
    }
  });

  it('arbor plan counts the teacher: its weights and its scoring of a step', () => {
    const cfg = cfgWith({});
    const { input } = planInputFromConfig(cfg, 0);
    const plan = memoryPlan(input);
    const item = plan.items.find((i) => i.id === 'teacher')!;
    const tp = parameterCount(readModelConfig(teacher));
    expect(item.key).toBe('algorithm.distill.teacher');
    expect(item.bytes).toBeGreaterThan(tp * 8);
    expect(memoryPlan({ ...input, teacher: undefined }).total).toBe(plan.total - item.bytes);
  });

  it('refuses a teacher whose vocabulary is not the student’s, naming both', () => {
    const other = join(home, 'other');
    mkdirSync(other, { recursive: true });
    for (const f of ['config.json', 'model.safetensors', 'tokenizer_config.json']) copyFileSync(join(teacher, f), join(other, f));
    const tok = JSON.parse(readFileSync(join(teacher, 'tokenizer.json'), 'utf8')) as { model: { vocab: Record<string, number> } };
    const [first] = Object.entries(tok.model.vocab).sort((x, y) => x[1] - y[1]);
    delete tok.model.vocab[first![0]];
    tok.model.vocab['zzz-not-the-same'] = first![1];
    writeFileSync(join(other, 'tokenizer.json'), JSON.stringify(tok));
    expect(() => checkSameTokenizer(student, other)).toThrow(
      new RegExp(
        `^algorithm\\.distill\\.teacher: the teacher's vocabulary \\(${other}/tokenizer\\.json, \\d+ tokens\\) is not the student's \\(${student}/tokenizer\\.json, \\d+ tokens\\): id ${first![1]} is .* in the student's and "zzz-not-the-same" in the teacher's`,
      ),
    );
    expect(() => checkSameTokenizer(student, teacher)).not.toThrow();
    expect(() => checkSameTokenizer(undefined, teacher)).toThrow(/the student has no tokenizer folder/);
    expect(() => validateConfig({ model: { path: student }, algorithm: { distill: { teacher: join(home, 'nowhere') } } })).toThrow(
      /algorithm\.distill\.teacher/,
    );
    // The teacher's advantage alone: what shapes only the reward's is refused, naming the key.
    expect(() => validateConfig({ model: { path: student }, algorithm: { distill: { teacher }, dynamic_sampling: { enabled: true } } })).toThrow(
      /algorithm\.dynamic_sampling\.enabled: drops groups by their rewards/,
    );
    expect(() =>
      validateConfig({ model: { path: student }, algorithm: { distill: { teacher, mix_with_reward: true }, dynamic_sampling: { enabled: true } } }),
    ).not.toThrow();
  });

  it('a 2-step distillation run stores the teacher channel and distill/* metrics', async () => {
    const VOCAB = 6;
    const targets = tabularTargets({ prompts: 4, length: 3, vocab: VOCAB, seed: 4 });
    const kit: TaskKit = {
      tokenizer: tabularTokenizer,
      trainTasks: sequenceTasks(targets, VOCAB),
      evalTasks: sequenceTasks(targets, VOCAB),
      stop: { strings: [], tokenIds: [] },
      tinyModel: () => {
        throw new Error('model.path is given');
      },
    };
    const cfg = validateConfig({
      model: { path: student },
      steps: 2,
      seed: 1,
      threads: 1,
      rollout: { prompts_per_step: 2, n: 2, max_turns: 1, max_new_tokens: 3, max_total_length: 6 },
      algorithm: { distill: { teacher, coef: 1 } },
      eval: { every: 0, n_questions: 2 },
      checkpoint: { every: 2, keep: 1 },
    });
    const store = new Store(openDatabase(join(home, 'distill.db')));
    const runId = store.createRun({ name: 'distill' });
    const session = await buildTaskSession({ cfg, defaults: new Set() }, kit);
    try {
      await runExperiment(cfg, { runDir: mkdtempSync(join(home, 'run-')), session, sink: storeSink(store, runId, { decode: (ids) => ids.join(' ') }) });
    } finally {
      await session.close();
    }
    expect(store.metricSeries(runId, 'distill/reverse_kl').step).toEqual([1, 2]);
    const trajs = store.searchTrajectories({ runId });
    expect(trajs).toHaveLength(8);
    for (const s of trajs) {
      const full = store.getTrajectory(s.id);
      for (const u of full.turnsData) {
        expect(u.teacherLogprob).not.toBeNull();
        expect(u.teacherLogprob).toHaveLength(u.tokenIds.length);
        if (u.role !== 'model') continue;
        u.teacherLogprob!.forEach((lt, k) => {
          expect(lt).toBeLessThanOrEqual(0);
          // The advantage is minus the per-token reverse KL (the student's logprob here is the sampler's, equal to the recomputed one within rounding).
          expect(u.advantage![k]).toBeCloseTo(-(u.logprob![k]! - lt), 3);
        });
      }
    }
  }, 180_000);
});
