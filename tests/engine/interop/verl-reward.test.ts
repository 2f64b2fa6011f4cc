/**
 * The reward verl trains with is the reward Arbor computes for the same episode. Episodes are
 * played and stored by Arbor (`arbor rollout --policy expert`, through the task's own ToolEnv and
 * reward) for the multi-hop task, the two-tool task (resources/examples/tools-task, whose reward
 * reads task.meta and scores each call's real success flag) and a custom environment with meta,
 * a tool that fails by returning success: false, and per-call process steps. Each episode is then
 * given to the exported reward.py as verl would give it (the decoded response with special tokens
 * skipped, extra_info with the row's task_id and the tool class's per-call tool_rewards), and the
 * score and its components must be Arbor's stored ones exactly. The prompt rows of the parquet are
 * the conversation Arbor's episodes started from.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parquetReadObjects } from 'hyparquet';
import { describe, expect, it } from 'vitest';
import { formatByName } from '../../../engine/env/formats';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const BIN = join(ROOT, 'bin/arbor.mjs');
const PY = '/usr/bin/python3';
const EX = join(ROOT, 'resources/examples/tools-task');

interface StoredTurn {
  role: string;
  text: string;
  toolCalls?: { name: string; error?: string }[];
}
interface Stored {
  taskId: string;
  promptText: string;
  turns: StoredTurn[];
  outcome: { reward: number; components: Record<string, number> };
}

function arbor(home: string, ...args: string[]) {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 240_000 });
  expect(r.status, `arbor ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

/**
 * What verl hands compute_score for a stored episode: the response (every turn after the prompt,
 * the model's and the tool responses, decoded with special tokens skipped) and, per tool call that
 * verl ran (calls followed by a tool response, without a parse error), the tool class's reward:
 * +1 success, -1 failure.
 */
function asVerl(t: Stored, format: string, maxCalls: number) {
  const fmt = formatByName(format, { tools: [], maxCalls });
  const solution = t.turns
    .map((u) => u.text)
    .join('')
    .replace(/<\|im_(start|end)\|>|<\|endoftext\|>|<\/?s>/g, '');
  const toolRewards: number[] = [];
  t.turns.forEach((u, i) => {
    if (u.role !== 'model' || t.turns[i + 1]?.role !== 'tool') return;
    const parsed = fmt.parse(u.text).calls;
    (u.toolCalls ?? []).forEach((c, k) => {
      if (!parsed[k]?.parseError) toolRewards.push(c.error !== undefined ? -1 : 1);
    });
  });
  return { solution, toolRewards };
}

/** Export the config for verl, replay the stored episodes through reward.py, and compare with Arbor's stored rewards. */
async function replay(home: string, config: string, episodes: Stored[], format: string, maxCalls: number) {
  const out = join(home, 'verl');
  arbor(home, 'export', 'verl', config, out, '--json');
  const samples = episodes.map((t) => ({ ...asVerl(t, format, maxCalls), task: t.taskId }));
  writeFileSync(join(out, 'samples.json'), JSON.stringify(samples));
  const script = [
    'import json, sys',
    `sys.path.insert(0, ${JSON.stringify(out)})`,
    'import reward',
    `samples = json.load(open(${JSON.stringify(join(out, 'samples.json'))}))`,
    'print(json.dumps([reward.compute_score("arbor/x", s["solution"], {"target": []}, {"task_id": s["task"], "tool_rewards": s["toolRewards"]}) for s in samples]))',
  ].join('\n');
  const py = spawnSync(PY, ['-c', script], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 180_000 });
  expect(py.status, py.stderr).toBe(0);
  const scores = JSON.parse(py.stdout.trim().split('\n').pop()!) as Record<string, number>[];
  scores.forEach((s, i) => {
    const want = episodes[i]!.outcome;
    expect({ task: episodes[i]!.taskId, score: s.score }).toEqual({ task: episodes[i]!.taskId, score: want.reward });
    for (const [k, v] of Object.entries(want.components)) expect(s[k], `${episodes[i]!.taskId}: component ${k}`).toBe(v);
  });
  return { out, scores };
}

/**
 * Play the scripted expert through Arbor (arbor rollout: the built-in tiny model's config, since a
 * config with model.path samples from the model) and read the stored episodes. The export then
 * uses the same config with model.path, a tiny model folder for the same task (arbor init-model).
 */
function rollout(home: string, config: string, extra: string[] = []): Stored[] {
  const file = join(home, 'episodes.jsonl');
  arbor(home, 'rollout', '--config', config, '--policy', 'expert', '--n', '2', '--out', file, '--json', ...extra);
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Stored);
}

/** The parquet's prompt rows are the messages Arbor's episodes started from (the stored prompt text holds each). */
async function checkPrompts(out: string, episodes: Stored[]) {
  const buf = readFileSync(join(out, 'data/train.parquet'));
  const rows = (await parquetReadObjects({ file: buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) })) as {
    prompt: { role: string; content: string }[];
    extra_info: { task_id: string };
  }[];
  const byTask = new Map(rows.map((r) => [r.extra_info.task_id, r.prompt]));
  let checked = 0;
  for (const t of episodes) {
    const prompt = byTask.get(t.taskId);
    if (!prompt) continue;
    checked++;
    for (const m of prompt) expect(t.promptText).toContain(m.content);
  }
  expect(checked).toBeGreaterThan(0);
  return byTask;
}

function modelFor(home: string, config: string): string {
  const folder = join(home, 'model');
  arbor(home, 'init-model', '--tiny', '--config', config, folder);
  return folder;
}

describe('reward.py gives verl the reward Arbor computes for the same episode', () => {
  it('the two-tool task: task meta and real success flags (a right episode scores above 1, with its call bonus, as in Arbor)', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-vr-tools-'));
    const env = [
      'environment:',
      '  format: hermes',
      `  tools: [${EX}/tools/lookup.ts, ${EX}/tools/calculator.ts]`,
      `  reward: ${EX}/reward.ts`,
      `  tasks: ${EX}/tasks.jsonl`,
      `  workspace: ${EX}`,
      '  max_calls_per_turn: 2',
      'rollout: { prompts_per_step: 4, n: 2, max_turns: 6, max_new_tokens: 32, max_total_length: 384 }',
      'algorithm: { process_rewards: true }',
    ];
    const tiny = join(home, 'tiny.yaml');
    writeFileSync(tiny, ['name: tools-verl', 'model: { init: tiny }', 'task: { kind: tools }', ...env].join('\n'));
    const config = join(home, 'c.yaml');
    writeFileSync(config, ['name: tools-verl', `model: { path: ${modelFor(home, tiny)} }`, 'task: { kind: tools }', ...env].join('\n'));
    const episodes = rollout(home, tiny, ['--questions', '12', '--mistake-rate', '0.7']);
    expect(episodes.some((t) => t.outcome.components.right_calls! > 0)).toBe(true);
    expect(episodes.some((t) => t.outcome.components.answer_right === 1 && t.outcome.reward > 1)).toBe(true);
    const { out } = await replay(home, config, episodes, 'hermes', 2);
    await checkPrompts(out, episodes);
  }, 300_000);

  it('the multi-hop task (Search-R1 format)', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-vr-mh-'));
    // two turns: the two-hop questions are cut before their answer (reward 0), and the calls of
    // the cut turn, which Arbor runs and verl does not, are run by the scorer as training ran them
    const common = ['rollout: { prompts_per_step: 4, n: 2, max_turns: 2, max_new_tokens: 24 }'];
    const tiny = join(home, 'tiny.yaml');
    writeFileSync(tiny, ['name: mh-verl', 'model: { init: tiny }', ...common].join('\n'));
    const config = join(home, 'c.yaml');
    writeFileSync(config, ['name: mh-verl', `model: { path: ${modelFor(home, tiny)} }`, ...common].join('\n'));
    const episodes = rollout(home, tiny, ['--questions', '8', '--mistake-rate', '0.6']);
    expect(new Set(episodes.map((t) => t.outcome.reward))).toEqual(new Set([0, 1]));
    await replay(home, config, episodes, 'search-r1', 3);
  }, 300_000);

  it('a custom environment with task meta, a tool that fails with success: false, and process steps', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-vr-custom-'));
    const dir = join(home, 'env');
    mkdirSync(join(dir, 'tools'), { recursive: true });
    writeFileSync(
      join(dir, 'tools', 'check.ts'),
      [
        "import type { Tool } from 'arbor/env';",
        'export const check: Tool = {',
        "  name: 'check',",
        "  description: 'check a word',",
        "  parameters: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },",
        '  execute({ word }) {',
        '    const w = String(word);',
        '    return /^[a-z]+$/.test(w) ? { content: `ok ${w}`, success: true } : { content: `not a word: ${w}`, success: false };',
        '  },',
        '};',
      ].join('\n'),
    );
    writeFileSync(
      join(dir, 'reward.ts'),
      [
        "import { exactMatch, type RewardFn } from 'arbor/env';",
        'export const reward: RewardFn = (e) => {',
        '  const target = String((e.task.meta ?? {}).target ?? "");',
        '  const calls = e.history.flatMap((t) => t.calls);',
        '  const steps = calls.map((c) => (!c.success ? -1 : (c.args as { word?: string }).word === target ? 1 : 0));',
        '  const found = calls.some((c) => c.success && (c.args as { word?: string }).word === target) ? 1 : 0;',
        '  const right = e.answer === undefined ? 0 : exactMatch(e.answer, e.golds);',
        '  const failed = calls.filter((c) => !c.success).length;',
        '  return { reward: right + 0.25 * found - 0.125 * failed, steps, components: { right, found, failed } };',
        '};',
      ].join('\n'),
    );
    const demo = (turns: unknown[]) => turns;
    const tasks = [
      {
        id: 'c1',
        prompt: 'find the fruit',
        answers: ['apple'],
        meta: { target: 'apple', demo: demo([{ calls: [{ name: 'check', args: { word: 'apple' } }] }, { answer: 'apple' }]) },
      },
      {
        id: 'c2',
        prompt: 'find the colour',
        answers: ['red'],
        meta: {
          target: 'red',
          demo: demo([
            {
              calls: [
                { name: 'check', args: { word: 'Red!' } },
                { name: 'check', args: { word: 'red' } },
              ],
            },
            { answer: 'red' },
          ]),
        },
      },
      {
        id: 'c3',
        prompt: 'find the animal',
        answers: ['cat'],
        meta: { target: 'cat', demo: demo([{ calls: [{ name: 'check', args: { word: 'DOG?' } }] }, { answer: 'dog' }]) },
      },
      { id: 'c4', prompt: 'find the tree', answers: ['oak'], meta: { target: 'oak', demo: demo([{ answer: 'oak' }]) } },
      {
        id: 'c5',
        prompt: 'find the stone',
        answers: ['opal'],
        meta: { target: 'opal', demo: demo([{ calls: [{ name: 'check', args: { word: 'opal' } }] }, { answer: 'opal' }]) },
      },
    ];
    writeFileSync(join(dir, 'tasks.jsonl'), tasks.map((t) => JSON.stringify(t)).join('\n') + '\n');
    const env = [
      'task: { kind: custom }',
      'environment:',
      '  format: hermes',
      `  tools: [${dir}/tools/check.ts]`,
      `  reward: ${dir}/reward.ts`,
      `  tasks: ${dir}/tasks.jsonl`,
      `  workspace: ${dir}`,
      'rollout: { prompts_per_step: 4, n: 2, max_turns: 4, max_new_tokens: 48, max_total_length: 512 }',
      'algorithm: { process_rewards: true }',
    ];
    const tiny = join(home, 'tiny.yaml');
    writeFileSync(tiny, ['name: custom-verl', 'model: { init: tiny }', ...env].join('\n'));
    const config = join(home, 'c.yaml');
    writeFileSync(config, ['name: custom-verl', `model: { path: ${modelFor(home, tiny)} }`, ...env].join('\n'));
    const episodes = rollout(home, tiny, ['--questions', '5']);
    const byTask = new Map(episodes.map((t) => [t.taskId, t.outcome]));
    // the stored rewards themselves: meta read, the failing call counted as failed (success: false, no "Error:" prefix)
    expect(byTask.get('c2')).toMatchObject({ reward: 1 + 0.25 - 0.125, components: { right: 1, found: 1, failed: 1 } });
    expect(byTask.get('c3')).toMatchObject({ reward: -0.125, components: { right: 0, found: 0, failed: 1 } });
    const { out } = await replay(home, config, episodes, 'hermes', 3);
    // run_verl.sh's approval step on a machine that has not approved these files: no terminal and
    // no ARBOR_YES refuses, naming what would run; ARBOR_YES=1 (after reading them) opens it
    const fresh = mkdtempSync(join(tmpdir(), 'arbor-vr-fresh-'));
    const check = (yes: string) =>
      spawnSync(process.execPath, [BIN, 'verl-reward', join(out, 'arbor-experiment.json'), '--check'], {
        encoding: 'utf8',
        env: { ...process.env, ARBOR_HOME: fresh, ARBOR_YES: yes },
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 120_000,
      });
    const refused = check('');
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/check\.ts[\s\S]*--yes/);
    const ok = check('1');
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/the environment opens/);
  }, 300_000);
});
