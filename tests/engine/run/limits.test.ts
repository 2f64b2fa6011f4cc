// Defaults that fit (#28): a config written from README's "Write your own environment" (Hermes,
// two tools, meta.demo turns, no rollout limits) whose prompt renders to ~330 tokens gets limits
// sized from its prompts and demonstrations, so SFT trains on complete demonstrations; with the old
// defaults written out explicitly it is flagged, naming the keys and the numbers (a prompt longer
// than the limit is refused); demonstrations a limit cuts are flagged.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../engine/config/experiment';
import { openTaskSession } from '../../../engine/run/open';
import { cutDemosWarning, demoNeeds, demoWasCut, fitLimits } from '../../../engine/run/limits';
import type { Trajectory } from '../../../engine/rollout/types';

const FIXTURE = join(__dirname, '..', 'cli', 'fixtures', 'open-env');
const BIN = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
const home = mkdtempSync(join(tmpdir(), 'arbor-limits-home-'));
const arbor = (...args: string[]) =>
  spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 240_000 });
const REPEAT = 7;

/** The open-env fixture with a long preamble before each question, so the Hermes prompt renders to ~330 tokens. */
function readmeEnv(rollout?: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-limits-'));
  cpSync(FIXTURE, dir, { recursive: true });
  // The tiny model's tokenizer has a token for each word the training tasks share: a preamble of REPEAT × ~45 tokens makes a long prompt.
  const words =
    'the exact text as written in the question, one call per entity; read the whole result before the next step, it holds the year of founding, the founder and the year of birth';
  const file = join(dir, 'tasks.jsonl');
  const rows = readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { prompt: string });
  writeFileSync(file, rows.map((r) => JSON.stringify({ ...r, prompt: `${Array(REPEAT).fill(words).join('; ')}: ${r.prompt}` })).join('\n') + '\n');
  writeFileSync(
    join(dir, 'c.yaml'),
    [
      'model: { init: tiny }',
      'task: { kind: custom }',
      'environment:',
      '  format: hermes',
      '  tools: [lookup.ts, calculator.ts]',
      '  reward: reward.ts',
      '  tasks: tasks.jsonl',
      'sft: { warm_start: true, demos: 12, epochs: 1, batch_size: 4 }',
      'steps: 1',
      ...(rollout ? [`rollout: ${rollout}`] : []),
    ].join('\n'),
  );
  return join(dir, 'c.yaml');
}

describe('rollout limits sized from the task', () => {
  it('a README config with a ~330-token Hermes prompt gets limits that hold its demonstrations whole', async () => {
    const loaded = await loadConfig(readmeEnv());
    const { cfg } = loaded;
    expect([cfg.rollout.max_new_tokens, cfg.rollout.max_total_length]).toEqual([32, 384]); // the schema defaults
    expect([...loaded.defaults].sort()).toEqual(['max_new_tokens', 'max_total_length', 'max_turns']);
    const s = await openTaskSession(loaded);
    try {
      const sized = (s.warnings ?? []).filter((w) => w.startsWith('limits sized from the task'));
      expect(sized.length).toBeGreaterThan(0);
      expect(sized.join('\n')).toMatch(/rollout.max_total_length 384 → \d+ \(the longest demonstration is \d+ tokens \(its prompt (\d+)\)\)/);
      const prompt = Number(/its prompt (\d+)/.exec(sized.join('\n'))![1]);
      expect(prompt).toBeGreaterThan(300);
      expect(prompt).toBeLessThan(384);
      expect(cfg.rollout.max_total_length).toBeGreaterThan(prompt + cfg.rollout.max_new_tokens);
      // Every SFT demonstration is whole (demos() refuses cut ones) and ends its last turn with the answer.
      const demos = await s.demos();
      expect(demos.length).toBe(12);
    } finally {
      await s.close();
    }
  }, 120_000);

  it('the old defaults written out are flagged, naming the keys and the needed numbers; a prompt longer than the limit is refused', async () => {
    const loaded = await loadConfig(readmeEnv('{ max_new_tokens: 32, max_total_length: 384 }'));
    const { cfg } = loaded;
    expect([...loaded.defaults]).toEqual(['max_turns']);
    const s = await openTaskSession(loaded);
    try {
      expect((s.warnings ?? []).join('\n')).toMatch(
        /demonstrations would be cut: rollout.max_total_length is 384, the longest demonstration is \d+ tokens .*set rollout.max_total_length ≥ \d+/,
      );
      expect(cfg.rollout.max_total_length).toBe(384); // an explicit limit is the researcher's
    } finally {
      await s.close();
    }
    await expect(openTaskSession(await loadConfig(readmeEnv('{ max_new_tokens: 16, max_total_length: 200 }')))).rejects.toThrow(
      /rollout.max_total_length is 200, the longest prompt is \d+ tokens: set rollout.max_total_length ≥ \d+/,
    );
  }, 120_000);

  it('arbor eval and arbor rollout with --config size the limits it leaves out as training does (none cut at the schema defaults)', () => {
    const cfg = readmeEnv();
    const sized = /warning: limits sized from the task: rollout\.max_total_length 384 → (\d+)/;
    // The scripted expert's episodes: whole (at the schema's 384 tokens every one stopped at max_total_length).
    const out = join(home, 'expert.jsonl');
    const r = arbor('rollout', '--config', cfg, '--policy', 'expert', '--n', '1', '--questions', '3', '--out', out, '--json');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(sized);
    const eps = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { truncated: boolean; totalLength?: number; turns: { role: string; text: string }[] });
    expect(eps).toHaveLength(3);
    for (const e of eps) {
      expect(e.truncated).toBe(false);
      expect(e.turns.filter((t) => t.role === 'model').at(-1)!.text).toMatch(/<answer>/);
    }
    // A model folder evaluated with the training config: the same sizing (was: the schema's defaults, every call cut).
    const model = join(home, 'model');
    expect(arbor('init-model', '--tiny', '--config', cfg, model).status).toBe(0);
    const e = arbor('eval', model, '--config', cfg, '--n', '2', '--json');
    expect(e.status, e.stderr).toBe(0);
    expect(e.stderr).toMatch(sized);
    const m = arbor('rollout', '--config', cfg, '--model', model, '--n', '1', '--questions', '2', '--out', join(home, 'model.jsonl'), '--json');
    expect(m.status, m.stderr).toBe(0);
    expect(m.stderr).toMatch(sized);
    // A limit given as a flag is the researcher's: not sized, checked against the task (too small: flagged with the number it needs).
    const f = arbor(
      'rollout',
      '--config',
      cfg,
      '--policy',
      'expert',
      '--n',
      '1',
      '--questions',
      '1',
      '--max-total-length',
      '384',
      '--out',
      join(home, 'f.jsonl'),
      '--json',
    );
    expect(f.status, f.stderr).toBe(0);
    expect(f.stderr).not.toMatch(sized);
    expect(f.stderr).toMatch(/demonstrations would be cut: rollout\.max_total_length is 384, .*set rollout\.max_total_length ≥ \d+/);
  }, 240_000);

  it('fitLimits and cutDemosWarning by hand', async () => {
    const { cfg, defaults } = await loadConfig(readmeEnv());
    const { changes, problems } = fitLimits(cfg.rollout, defaults, { prompt: 330, turn: 40, total: 450, turns: 3, demos: 10 });
    expect(problems).toEqual([]);
    expect(changes).toEqual([
      'rollout.max_new_tokens 32 → 56 (the longest demonstration turn is 40 tokens)',
      'rollout.max_total_length 384 → 512 (the longest demonstration is 450 tokens (its prompt 330))',
    ]);
    const turn = (n: number, reason: 'stop_token' | 'max_new_tokens') => ({
      role: 'model' as const,
      tokenIds: Array(n).fill(1),
      text: '',
      logprobs: [],
      entropy: [],
      lossMask: [],
      stop: { reason },
    });
    const t = (reason: 'stop_token' | 'max_new_tokens'): Trajectory =>
      ({ taskId: 'a', promptIds: Array(330).fill(1), turns: [turn(32, reason)], truncated: false }) as unknown as Trajectory;
    expect(demoWasCut(t('stop_token'))).toBe(false);
    expect(demoWasCut(t('max_new_tokens'))).toBe(true);
    expect(demoNeeds([t('stop_token')], [10])).toMatchObject({ prompt: 330, turn: 32, total: 362, turns: 1 });
    expect(cutDemosWarning([t('max_new_tokens'), t('stop_token')], cfg.rollout, { prompt: 330, turn: 60, total: 480, turns: 1, demos: 1 })).toMatch(
      /1 of 2 demonstrations were cut .*stopped at max_new_tokens.*rollout.max_new_tokens ≥ 60 \(is 56\)/,
    );
    expect(cutDemosWarning([t('stop_token')], cfg.rollout, { prompt: 330, turn: 60, total: 480, turns: 1, demos: 1 })).toBeUndefined();
  });
});
