/**
 * `arbor import-verl` reads verl agent-loop outputs with token ids (prompt_ids, response_ids,
 * response_mask, response_logprobs, reward_score, num_turns, uid): each sample becomes a
 * trajectory whose model and tool turns carry their exact ids, logprobs and loss masks, so it
 * replays token by token; decoded-text dumps keep importing as before.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { HfTokenizer } from '../../../engine/model/tokenizer';
import { openDatabase } from '../../../engine/store/db';
import { importVerlDump } from '../../../engine/store/io';
import { Store } from '../../../engine/store/store';
import { multihopTokenizerFolder } from '../../../engine/tasks/multihop/kit';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '../../../bin/arbor.mjs');
let home: string;
let tokDir: string;
let tok: HfTokenizer;
let dir: string;

const line = (o: Record<string, unknown>) => JSON.stringify(o);

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), 'arbor-vimport-'));
  process.env.ARBOR_HOME = home;
  tokDir = multihopTokenizerFolder();
  tok = HfTokenizer.load(tokDir);
  dir = mkdtempSync(join(tmpdir(), 'arbor-agentloop-'));
});

function sample(uid: string, answer: string, reward: number, step: number) {
  const prompt = tok.encode('question : where was alvin born ?');
  const call = tok.encode('<search> alvin </search>');
  const obs = tok.encode('<information> alvin was born in paris . </information>');
  const ans = tok.encode(`<answer> ${answer} </answer>`);
  const response = [...call, ...obs, ...ans];
  const mask = [...call.map(() => 1), ...obs.map(() => 0), ...ans.map(() => 1)];
  const logprobs = response.map((_, i) => (mask[i] ? -0.125 * (i + 1) : 0));
  return {
    uid,
    step,
    prompt_ids: prompt,
    response_ids: response,
    response_mask: mask,
    response_logprobs: logprobs,
    reward_score: reward,
    num_turns: 3,
    acc: reward,
    parts: { call, obs, ans, prompt },
  };
}

describe('import of verl agent-loop outputs (token ids)', () => {
  it('replays each sample token by token: turns split at the mask, ids, logprobs, loss masks, groups by uid', async () => {
    const a = sample('q1', 'paris', 1, 3),
      b = sample('q1', 'alvin', 0, 3),
      c = sample('q2', 'paris', 1, 4);
    const file = join(dir, 'outputs.jsonl');
    writeFileSync(file, [a, b, c].map(({ parts: _p, ...o }) => line(o)).join('\n') + '\n');
    const store = new Store(openDatabase(join(home, 'a.db')));
    const r = await importVerlDump(store, file, { decode: (ids) => tok.decode(ids) });
    expect(r).toMatchObject({ trajectories: 3, steps: [3, 4] });
    const list = store.searchTrajectories({ runId: r.runId });
    const second = list.find((t) => t.step === 3 && t.sample === 1)!;
    expect(second.group).toBe(0);
    expect(list.find((t) => t.step === 4)!.group).toBe(0);
    const t = store.getTrajectory(second.id);
    expect(t.reward).toBe(0);
    expect(t.turnsData.map((u) => u.role)).toEqual(['env', 'model', 'tool', 'model']);
    expect(t.turnsData.map((u) => u.tokenIds)).toEqual([b.parts.prompt, b.parts.call, b.parts.obs, b.parts.ans]);
    expect(t.turnsData[1]!.lossMask).toEqual(b.parts.call.map(() => 1));
    expect(t.turnsData[2]!.lossMask).toEqual(b.parts.obs.map(() => 0));
    const n = b.parts.call.length + b.parts.obs.length;
    expect(t.turnsData[3]!.logprob).toEqual(b.parts.ans.map((_, i) => -0.125 * (n + i + 1)));
    expect(t.turnsData[3]!.text).toBe('<answer> alvin </answer>');
    expect(t.turnsData[1]!.tokens).toEqual(['<search>', 'alvin', '</search>']);
    expect(t.outcomeData).toMatchObject({ components: { acc: 0 }, numTurns: 3 });
    expect(store.metricSeries(r.runId, 'reward/mean').value).toEqual([0.5, 1]);
    store.db.close();
  });

  it('names the file, line and field of a bad line, and leaves no half-imported run', async () => {
    const store = new Store(openDatabase(join(home, 'b.db')));
    const { parts: _p, ...ok } = sample('q1', 'paris', 1, 1);
    const file = join(dir, 'bad.jsonl');
    writeFileSync(file, [line(ok), line({ ...ok, response_mask: ok.response_mask.slice(1) })].join('\n'));
    await expect(importVerlDump(store, file, { decode: (ids) => tok.decode(ids) })).rejects.toThrow(
      `${file}:2: field "response_mask" has ${ok.response_ids.length - 1} entries for ${ok.response_ids.length} response_ids`,
    );
    await expect(importVerlDump(store, file)).rejects.toThrow(/bad\.jsonl:1: token ids need the model's tokenizer .*--tokenizer/);
    expect(store.listRuns()).toEqual([]);
    store.db.close();
  });

  it('arbor import-verl <file> --tokenizer <model folder> (through the protocol), and text dumps still import', () => {
    const { parts: _p, ...o } = sample('q9', 'paris', 1, 7);
    const file = join(dir, 'cli.jsonl');
    writeFileSync(file, line(o) + '\n');
    const env = { ...process.env, ARBOR_HOME: home };
    const r = spawnSync(process.execPath, [BIN, 'import-verl', file, '--tokenizer', tokDir], { encoding: 'utf8', env, timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/run \S+: 1 trajectories over 1 steps/);
    const textDir = mkdtempSync(join(tmpdir(), 'arbor-textdump-'));
    writeFileSync(join(textDir, '1.jsonl'), line({ input: 'q', output: '<answer> a </answer>', score: 1, gts: 'a' }) + '\n');
    const t = spawnSync(process.execPath, [BIN, 'import-verl', textDir], { encoding: 'utf8', env, timeout: 60_000 });
    expect(t.status, t.stderr).toBe(0);
    expect(t.stdout).toMatch(/1 trajectories over 1 steps/);
  }, 60_000);
});
