// A user QA dataset as a training task, end to end through the CLI: HotpotQA-style JSONL
// (capitalised text, list-form contexts, supporting facts) → word tokenizer from its words →
// SFT warm start on the supporting-title expert → GRPO steps → held-out evaluation → store.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateQuestions, generateWorld } from '../../../engine/tasks/multihop/world';
import { validateConfig } from '../../../engine/config/experiment';
import { qaKit } from '../../../engine/tasks/qa/kit';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';

const cap = (s: string) => s.replace(/\b[a-z]/g, (c) => c.toUpperCase());

function hotpotFile(): string {
  const world = generateWorld(7);
  const byId = new Map(world.passages.map((p) => [p.id, p]));
  const rows = generateQuestions(world, 25, [1, 2], 24).map((q) => ({
    _id: q.id,
    question: cap(q.question.replace(' ?', '?')),
    answer: cap(q.answers[0]!),
    // The supporting paragraphs plus two distractors, as HotpotQA does.
    context: [...q.supporting, world.passages[0]!.id, world.passages[1]!.id].map((id) => [
      cap(byId.get(id)!.title),
      byId
        .get(id)!
        .text.split(' . ')
        .map((x) => cap(x) + '.'),
    ]),
    supporting_facts: q.supporting.map((id) => [cap(byId.get(id)!.title), 0]),
  }));
  const f = join(mkdtempSync(join(tmpdir(), 'arbor-qa-')), 'qa.jsonl');
  writeFileSync(f, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return f;
}

describe('task.kind qa (a user dataset)', () => {
  it('builds train/held-out tasks, a tokenizer with no unknown words on the data, and an expert', () => {
    const kit = qaKit(validateConfig({ model: { init: 'tiny' }, task: { kind: 'qa', dataset: hotpotFile() } }));
    expect(kit.trainTasks.length).toBe(20);
    expect(kit.evalTasks.length).toBe(5);
    expect(kit.expert).toBeDefined();
    const unk = kit.tokenizer.encode('<unk>')[0];
    const q = kit.trainTasks[0]!.meta!.question as string;
    expect(kit.tokenizer.encode(q)).not.toContain(unk);
    expect(() => validateConfig({ model: { init: 'tiny' }, task: { kind: 'qa' } })).toThrow(/task\.dataset: required for task\.kind "qa"/);
  });

  it('trains from the CLI (SFT warm start, then RL) and records the run', () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-home-'));
    const dir = mkdtempSync(join(tmpdir(), 'arbor-qa-cfg-'));
    const cfg = join(dir, 'qa.yaml');
    writeFileSync(
      cfg,
      [
        'name: my-qa',
        'model: { init: tiny }',
        `task: { kind: qa, dataset: ${hotpotFile()} }`,
        'steps: 2',
        'rollout: { prompts_per_step: 2, n: 2, max_turns: 3, max_new_tokens: 12 }',
        'algorithm: { kl_coef: 0.01 }',
        'sft: { warm_start: true, epochs: 1, demos: 8, batch_size: 4 }',
        'eval: { every: 0, n_questions: 5 }',
        'checkpoint: { every: 1, keep: 1 }',
      ].join('\n'),
    );
    const r = spawnSync(process.execPath, [join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs'), 'train', cfg, '--json'], {
      encoding: 'utf8',
      env: { ...process.env, ARBOR_HOME: home },
      timeout: 240_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string; sft: { steps: number }; eval: Record<string, number>; lastCheckpoint: string };
    expect(out.sft.steps).toBeGreaterThan(0);
    // A fraction of the held-out questions (what the model learned is not asserted: it moves with the CPU).
    expect(Number.isFinite(out.eval.exact_match)).toBe(true);
    expect(out.eval.exact_match).toBeGreaterThanOrEqual(0);
    expect(out.eval.exact_match).toBeLessThanOrEqual(1);
    const store = new Store(openDatabase(join(home, 'arbor.db')));
    expect(store.getRun(out.run).template).toBe('qa');
    expect(store.metricSeries(out.run, 'reward/mean').step).toEqual([1, 2]);
    const t = store.searchTrajectories({ runId: out.run })[0]!;
    const stored = store.getTrajectory(t.id);
    expect(stored.turnsData[0]!.text).toMatch(/^question : /);
    // With a reference policy (kl_coef > 0) every model turn keeps its reference logprobs (the
    // replay's KL channel), and the trajectory its rollout timings.
    const model = stored.turnsData.filter((u) => u.role === 'model');
    expect(model.length).toBeGreaterThan(0);
    for (const u of model) expect(u.refLogprob?.length).toBe(u.tokenIds.length);
    expect(stored.timings.totalMs).toBeGreaterThan(0);
    store.db.close();
    // `arbor eval --task qa --dataset` on the last checkpoint (the final weights) reproduces the
    // run's own greedy held-out evaluation.
    const ev = spawnSync(
      process.execPath,
      [join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs'), 'eval', out.lastCheckpoint, '--task', 'qa', '--dataset', hotpotFile(), '--n', '5', '--json'],
      { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 120_000 },
    );
    expect(ev.status, ev.stderr).toBe(0);
    const evOut = JSON.parse(ev.stdout.trim().split('\n').pop()!) as { policy: Record<string, number> };
    expect(evOut.policy.exact_match).toBe(out.eval.exact_match);
    expect(typeof evOut.policy.tool_calls_per_episode).toBe('number');
    expect(evOut.policy.tool_calls_per_episode).toBe(out.eval.tool_calls_per_episode);
  }, 300_000);
});
