/**
 * What-if replay on a real model folder (`arbor init-model --tiny --task multihop`, layers silenced,
 * lm_head a bigram table so greedy decoding is known: <search> city </search>, then after the
 * observation <answer> country </answer>). The parent is a real multi-turn episode of the run's
 * task, stored the way training stores it (episodeToRecord); `arbor replay` forks it at its tool
 * turn with an edited observation, through the real CLI and engine protocol.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../../engine/cli/main';
import { generateWorld } from '../../../engine/tasks/multihop/world';
import { createEngine } from '../../../engine/server/engine';
import { createClient, inProcessTransport } from '../../../engine/server/client';
import type { EngineServer } from '../../../engine/server/server';
import { PolicyModel } from '../../../engine/model/runtime';
import { policyDecodeBackend, eosTokenIds } from '../../../engine/rollout/model-backend';
import { rollout } from '../../../engine/rollout/engine';
import { episodeToRecord } from '../../../engine/run/store-sink';
import { trajectoryToEpisode } from '../../../engine/train/trajectories';
import { findTask, openRunEnvironment, runConfig } from '../../../engine/run/stored';
import { planFork } from '../../../engine/replay/fork';
import { detectDrift, firstDifference, recordedDrift, recordedDriftOf } from '../../../engine/replay/drift';
import { stepRollout } from '../../../engine/cli/step';
import { Readable, Writable } from 'node:stream';
import { bigramModel } from '../server/fixtures/bigram-model';

const home = mkdtempSync(join(tmpdir(), 'arbor-replay-'));
const modelDir = join(home, 'model');
const WORLD = 1001;
const world = generateWorld(WORLD);
const city = world.cities[0]!.name.toLowerCase();
const country = world.cities[0]!.country.toLowerCase();
let engine: EngineServer;
let runId: string;
let checkpointId: string;
let parentId: string;
let encode: (s: string) => number[];

async function cli(args: string[]): Promise<string> {
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void lines.push(a.map(String).join(' '));
  const prev = process.env.ARBOR_HOME;
  process.env.ARBOR_HOME = home;
  try {
    const program = await buildProgram();
    program.exitOverride();
    await program.parseAsync(args, { from: 'user' });
  } finally {
    console.log = log;
    if (prev === undefined) delete process.env.ARBOR_HOME;
    else process.env.ARBOR_HOME = prev;
  }
  return lines.join('\n');
}

beforeAll(async () => {
  engine = await createEngine({ home });
  const store = engine.store!;
  runId = store.createRun({
    name: 'trained',
    template: 'multihop',
    config: { model: { init: 'tiny' }, task: { kind: 'multihop', eval_seed: WORLD }, rollout: { max_turns: 3, max_new_tokens: 8, max_total_length: 256 } },
  });
  checkpointId = store.addCheckpoint(runId, 2, modelDir);
  // The parent: a real episode of the run's first task with the checkpoint, stored as training stores it.
  const loaded = runConfig(store, runId, home);
  const { cfg } = loaded;
  const env = await openRunEnvironment(loaded);
  const { kit } = env;
  encode = (s) => kit.tokenizer.encode(s);
  // The checkpoint: the run's tiny model with the task's tokenizer (as training saves it), made a bigram table.
  const init = PolicyModel.init(kit.tinyModel(cfg), 5, { tokenizerFolder: kit.tokenizerFolder });
  init.save(modelDir);
  await init.dispose();
  bigramModel(modelDir, [
    ['?', '<search>'],
    ['<search>', city],
    [city, '</search>'],
    ['</information>', '<answer>'],
    ['<answer>', country],
    [country, '</answer>'],
  ]);
  const model = PolicyModel.load(modelDir, { threads: 1 });
  const backend = policyDecodeBackend(model, { maxBatch: 1, maxLength: 256 });
  const task = findTask(kit, kit.evalTasks[0]!.id);
  const { trajectories } = await rollout(backend, {
    tasks: [task],
    n: 1,
    seed: 1,
    sampling: { temperature: 0 },
    tokenizer: kit.tokenizer,
    limits: { maxNewTokens: 8, maxTurns: 3, maxTotalLength: 256 },
    stop: { strings: kit.stop.strings, tokenIds: [...kit.stop.tokenIds, ...eosTokenIds(model.config)] },
  });
  await backend.close?.();
  await model.dispose();
  await env.close();
  const rec = episodeToRecord(3, trajectoryToEpisode(trajectories[0]!), undefined, (ids) => kit.tokenizer.decode(ids));
  parentId = String(store.writeTrajectory(runId, rec));
}, 60_000);

afterAll(() => {
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('arbor replay', () => {
  it('the parent is a multi-turn episode: prompt, model, tool, model', () => {
    const p = engine.store!.getTrajectory(parentId);
    expect(p.turnsData.map((u) => u.role)).toEqual(['env', 'model', 'tool', 'model']);
    expect(p.turnsData[1]!.text).toContain(`<search> ${city} </search>`);
  });

  it('forks at the tool turn with an edited observation: the stored ids up to the fork, then the edit tokenised, stored with the parent link, listed by arbor show', async () => {
    const store = engine.store!;
    const parent = store.getTrajectory(parentId);
    const edited = 'nothing about that place';
    const out = await cli(['replay', parentId, '--at-turn', '3', '--observation', edited, '--model', checkpointId, '--n', '3', '--temperature', '0', '--json']);
    const r = JSON.parse(out) as {
      fork: { turn: number; prefixTokens: number; edit: { ids: number[]; replaced: string } };
      children: { id: string; reward: number; answer?: string; tokenIds: number[]; forkAt: number }[];
      prefix: { ids: number[]; original: (number | null)[]; checkpoint: number[] };
    };
    expect(r.children).toHaveLength(3);
    const shared = parent.turnsData.slice(0, 2).flatMap((u) => u.tokenIds);
    expect(r.fork.turn).toBe(2);
    expect(r.fork.prefixTokens).toBe(shared.length);
    // The edit: the observation with the tool's result replaced, tokenised as the environment tokenises observations.
    const plan = planFork(parent.turnsData, { turn: 2, observation: edited }, encode);
    expect(plan.edit!.replaced).toBe('result');
    expect(plan.edit!.rendered).toContain(edited);
    expect(plan.edit!.rendered).toContain('</information>');
    expect(r.fork.edit.ids).toEqual(encode(plan.edit!.rendered));
    for (const ch of r.children) {
      const c = store.getTrajectory(ch.id);
      const ids = c.turnsData.flatMap((u) => u.tokenIds);
      expect(ids.slice(0, shared.length)).toEqual(shared);
      expect(ids.slice(shared.length, shared.length + r.fork.edit.ids.length)).toEqual(r.fork.edit.ids);
      expect(c.fork?.parent).toBe(parentId);
      expect(c.fork?.checkpoint.id).toBe(checkpointId);
      expect(c.fork?.sampling.temperature).toBe(0);
      // Greedy bigram continuation after </information>: the answer, scored by the task's reward.
      expect(c.turnsData.at(-1)!.text).toContain(`<answer> ${country} </answer>`);
      expect(c.outcome).toBe(country);
      expect(c.reward).toBe(ch.reward);
    }
    // The prefix scored by the checkpoint: a value for every token after the first.
    expect(r.prefix.ids.length).toBe(shared.length + r.fork.edit.ids.length);
    expect(r.prefix.checkpoint.slice(1).every((v) => Number.isFinite(v) && v <= 0)).toBe(true);
    // Forks are not rollouts of the step: the step's list and group do not show them.
    expect(store.searchTrajectories({ runId }).map((t) => t.id)).toEqual([parentId]);
    expect(store.forks({ trajectoryId: parentId }).map((t) => t.id)).toEqual(r.children.map((c) => c.id));
    const shown = await cli(['show', runId]);
    expect(shown).toContain('replays: 3 continuation(s) of 1 trajectory(ies)');
    for (const ch of r.children) expect(shown).toContain(`${ch.id} ← ${parentId} at turn 3 (observation edited), checkpoint ${checkpointId}`);
  }, 60_000);

  it('forks inside a model turn with text appended, continuing the same turn', async () => {
    const parent = engine.store!.getTrajectory(parentId);
    const out = await cli([
      'replay',
      parentId,
      '--at-turn',
      '2',
      '--at-token',
      '1',
      '--text',
      city,
      '--model',
      modelDir,
      '--n',
      '1',
      '--temperature',
      '0',
      '--json',
    ]);
    const r = JSON.parse(out) as { children: { id: string }[]; fork: { edit: { ids: number[] } } };
    const c = engine.store!.getTrajectory(r.children[0]!.id);
    const kept = [...parent.turnsData[0]!.tokenIds, parent.turnsData[1]!.tokenIds[0]!];
    const turn = c.turnsData[1]!;
    expect(turn.role).toBe('model');
    expect(turn.tokenIds.slice(0, 1)).toEqual(kept.slice(-1));
    expect(turn.tokenIds.slice(1, 1 + r.fork.edit.ids.length)).toEqual(encode(city));
    // The edit is written, not sampled: loss mask 0 there.
    expect(turn.lossMask!.slice(1, 1 + r.fork.edit.ids.length)).toEqual(r.fork.edit.ids.map(() => 0));
    expect(turn.text).toContain(`<search> ${city} </search>`);
  }, 60_000);

  it("drift: none on the engine's own trajectories; a trajectory whose ids differ from its re-rendered text is marked with both sequences, and arbor show counts it", async () => {
    const store = engine.store!;
    const c = createClient(inProcessTransport(engine));
    try {
      const own = await c.request('replay.drift', { trajectoryId: parentId });
      expect(own.trajectory!.drifted).toBe(false);
      expect(own.trajectory!.checked).toBe(4);
      // An external agent's record: the text the API returned, the ids its sampler produced (a repeated token the text does not have).
      const parent = store.getTrajectory(parentId);
      const text = `<search> ${city} </search>`;
      const sampled = encode(`<search> ${city} ${city} </search>`);
      const id = String(
        store.writeTrajectory(runId, {
          step: 3,
          group: 1,
          sample: 0,
          task: parent.task,
          reward: 0,
          turns: [
            { role: 'env', text: parent.turnsData[0]!.text, tokenIds: parent.turnsData[0]!.tokenIds, lossMask: parent.turnsData[0]!.tokenIds.map(() => 0) },
            { role: 'model', text, tokenIds: sampled, lossMask: sampled.map(() => 1) },
          ],
        }),
      );
      const d = (await c.request('replay.drift', { trajectoryId: id })).trajectory!;
      expect(d.drifted).toBe(true);
      expect(d.turns).toEqual([{ turn: 1, role: 'model', stored: sampled, rendered: encode(text), firstDiff: 2 }]);
      const run = (await c.request('replay.drift', { runId })).run!;
      expect(run.drifted).toBe(1);
      expect(run.ids).toEqual([id]);
      expect(run.checked).toBe(2 + 4); // the two stored trajectories and the four forks, all from the engine but this one
      const shown = await cli(['show', runId]);
      expect(shown).toContain(`drift: 1 of 6 stored trajectories have turns whose ids differ from their re-rendered text (${id})`);
      store.db.prepare('DELETE FROM trajectories WHERE id = ?').run(Number(id));
    } finally {
      c.close();
    }
  });

  it('top-k at a stored position under the checkpoint that sampled the step', async () => {
    const c = createClient(inProcessTransport(engine));
    try {
      const r = await c.request('replay.topk', { trajectoryId: parentId, turn: 1, token: 0, k: 3 });
      // The parent is of step 3; the run's checkpoint at step 2 sampled it.
      expect(r.checkpoint).toEqual({ id: checkpointId, step: 2, exact: true });
      expect(r.alternatives).toHaveLength(3);
      expect(r.alternatives[0]!.token).toBe('<search>');
      expect(r.sampled).toMatchObject({ token: '<search>', rank: 1 });
      expect(r.alternatives[0]!.prob).toBeGreaterThan(r.alternatives[1]!.prob);
      expect((await c.request('replay.forks', { trajectoryId: parentId })).length).toBeGreaterThan(0);
      await expect(c.request('replay.topk', { trajectoryId: parentId, turn: 1, token: 99 })).rejects.toThrow(/token: turn 1 has tokens 0\.\./);
    } finally {
      c.close();
    }
  });

  it('refuses what does not fit, naming the option', async () => {
    await expect(cli(['replay', parentId, '--at-turn', '2', '--observation', 'x', '--model', checkpointId, '--n', '1'])).rejects.toThrow(
      /observation: turn 1 is a model turn/,
    );
    await expect(cli(['replay', parentId, '--at-turn', '9', '--model', checkpointId, '--n', '1'])).rejects.toThrow(/turn: the trajectory has turns 0\.\.3/);
    await expect(cli(['replay', parentId, '--at-turn', '3', '--model', 'nope', '--n', '1'])).rejects.toThrow(/no checkpoint "nope"/);
  });

  it('scores the prefix under the policy the continuations sample from (softmax(logits / temperature))', async () => {
    const out = await cli(['replay', parentId, '--at-turn', '3', '--model', modelDir, '--n', '1', '--temperature', '0.5', '--seed', '3', '--json']);
    const r = JSON.parse(out) as { prefix: { ids: number[]; checkpoint: number[] } };
    const m = PolicyModel.load(modelDir, { threads: 1 });
    try {
      const at = await m.score([r.prefix.ids], { temperature: 0.5 });
      const plain = await m.score([r.prefix.ids]);
      let apart = 0;
      for (let i = 1; i < r.prefix.ids.length; i++) {
        expect(r.prefix.checkpoint[i], `token ${i}`).toBeCloseTo(at.logprobs[i - 1]!, 4);
        apart = Math.max(apart, Math.abs(plain.logprobs[i - 1]! - at.logprobs[i - 1]!));
      }
      expect(apart, 'the checkpoint at 1 is another policy').toBeGreaterThan(1e-3);
    } finally {
      await m.dispose();
    }
  }, 60_000);
});

describe('live rollout you can pause', () => {
  it('pauses in the model turn with top-k, takes a forced token, pauses after the tool, takes an edited result, finishes and stores the episode (replayable)', async () => {
    const c = createClient(inProcessTransport(engine));
    try {
      let st = await c.request('live.start', { checkpoint: checkpointId, temperature: 0, k: 5 });
      expect(st.phase).toBe('model');
      expect(st.turns.map((u) => u.role)).toEqual(['env', 'model']);
      // The bigram table: after the prompt's "?" comes <search>, the top alternative.
      expect(st.next).toHaveLength(5);
      expect(st.next![0]!.token).toBe('<search>');
      expect(st.next![0]!.prob).toBeGreaterThan(0.5);
      st = await c.request('live.step', { sessionId: st.sessionId, action: 'token' });
      expect(st.turns[1]!.tokens).toEqual(['<search>']);
      // Force the city (the greedy one anyway) by its text, then finish the turn.
      st = await c.request('live.step', { sessionId: st.sessionId, action: 'force', text: city });
      expect(st.turns[1]!.forced).toEqual([1]);
      st = await c.request('live.step', { sessionId: st.sessionId, action: 'turn' });
      expect(st.phase).toBe('tool');
      expect(st.turns[1]!.text).toBe(`<search> ${city} </search>`);
      expect(st.pending!.calls[0]!.name).toBe('search');
      expect(st.pending!.text).toContain('<information>');
      const edited = st.pending!.text.replace(st.pending!.calls[0]!.result!, 'nothing here');
      st = await c.request('live.step', { sessionId: st.sessionId, action: 'observation', text: edited });
      expect(st.phase).toBe('model');
      expect(st.turns[2]!.edited).toBe(true);
      expect(st.turns[2]!.ids).toEqual(encode(edited));
      st = await c.request('live.step', { sessionId: st.sessionId, action: 'finish' });
      expect(st.phase).toBe('done');
      expect(st.result!.answer).toBe(country);
      const t = engine.store!.getTrajectory(st.result!.trajectoryId);
      expect(t.step).toBe(-1);
      expect(t.turnsData.flatMap((u) => u.tokenIds)).toEqual(st.turns.flatMap((u) => u.ids));
      expect((t.outcomeData.live as { forced: unknown[]; edited: number[] }).forced).toEqual([{ turn: 1, token: 1 }]);
      expect((t.outcomeData.live as { edited: number[] }).edited).toEqual([2]);
      // The task's gold answers are stored with it, as a training step's are (the Step-through result shows them).
      expect((t.outcomeData.golds as string[]).length).toBeGreaterThan(0);
      expect(t.outcomeData.golds).toEqual((t.outcomeData.meta as { answers: string[] }).answers);
      expect(st.result!.golds).toEqual(t.outcomeData.golds);
      // Stored like any other: it can be forked.
      const f = await c.request('replay.fork', { trajectoryId: t.id, turn: 2, checkpoint: checkpointId, n: 1, temperature: 0 });
      expect(f.children[0]!.answer).toBe(country);
      await expect(c.request('live.step', { sessionId: st.sessionId, action: 'token' })).rejects.toThrow(/no live rollout/);
    } finally {
      c.close();
    }
  }, 60_000);
});

describe('arbor rollout --step', () => {
  it('steps an episode from the terminal: a token, a forced token, the turn, an edited result, to the end; stored', async () => {
    const out: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        out.push(String(chunk));
        cb();
      },
    });
    const prev = process.env.ARBOR_HOME;
    process.env.ARBOR_HOME = home;
    try {
      const st = await stepRollout(
        { checkpoint: checkpointId, temperature: 0 },
        Readable.from(['\n', `f ${city}\n`, 't\n', 'e <information> nothing </information>\n', 'r\n']),
        sink,
      );
      const text = out.join('');
      expect(text).toContain('next: 1 "<search>"');
      expect(text).toContain(`model turn 1: "<search> ${city}" (1 forced)`);
      expect(text).toMatch(/result \(the model has not seen it\): " ?<information> /);
      expect(st.phase).toBe('done');
      expect(text).toContain(`stored as trajectory ${st.result!.trajectoryId}`);
      const t = engine.store!.getTrajectory(st.result!.trajectoryId);
      expect(t.turnsData[2]!.tokenIds).toEqual(encode('<information> nothing </information>'));
      expect((t.outcomeData.live as { forced: unknown[] }).forced).toEqual([{ turn: 1, token: 1 }]);
    } finally {
      if (prev === undefined) delete process.env.ARBOR_HOME;
      else process.env.ARBOR_HOME = prev;
    }
  }, 60_000);
  it('refuses flags it would ignore, and needs a checkpoint', async () => {
    await expect(cli(['rollout', '--step', '--checkpoint', checkpointId, '--model', modelDir])).rejects.toThrow(/--model: not with --step/);
    await expect(cli(['rollout', '--step'])).rejects.toThrow(/--step: give --checkpoint/);
  });
});

describe('detectDrift', () => {
  it('keeps both sequences and where they part; a turn without ids is not checked', () => {
    const enc = (t: string) => t.split(' ').map((w) => w.length);
    const r = detectDrift(
      [
        { role: 'env', text: 'ab c', tokenIds: [2, 1] },
        { role: 'model', text: 'abc de', tokenIds: [3, 1, 1] },
        { role: 'tool', text: '', tokenIds: [] },
      ],
      enc,
    );
    expect(r).toEqual({ drifted: true, checked: 2, turns: [{ turn: 1, role: 'model', stored: [3, 1, 1], rendered: [3, 2], firstDiff: 1 }] });
    expect(firstDifference([1, 2], [1, 2, 3])).toBe(2);
    expect(firstDifference([1, 2], [1, 2])).toBe(-1);
  });

  it("places the agent endpoint's recorded drift on the stored turn holding its position; malformed records are skipped", () => {
    const turns = [
      { role: 'env', tokenIds: [9, 9, 9] },
      { role: 'model', tokenIds: [4, 5, 6] },
      { role: 'tool', tokenIds: [7] },
      { role: 'model', tokenIds: [8, 1] },
    ];
    const meta = {
      drift: [
        { kind: 'template', turn: 1, position: 4, sampled: [4, 5, 6], rendered: [4, 3, 6] },
        { kind: 'altered', turn: 3, position: 99, sampled: [8, 1], rendered: [8] },
        { kind: 'other', turn: 1, position: 0, sampled: [], rendered: [] },
        { kind: 'template', turn: 1, position: 0, sampled: ['x'], rendered: [] },
      ],
    };
    expect(recordedDrift(turns, recordedDriftOf(meta))).toEqual([
      { turn: 1, role: 'model', stored: [4, 5, 6], rendered: [4, 3, 6], firstDiff: 1, endpoint: { kind: 'template', message: 1, position: 4 } },
      { turn: 3, role: 'model', stored: [8, 1], rendered: [8], firstDiff: 1, endpoint: { kind: 'altered', message: 3, position: 99 } },
    ]);
    expect(recordedDriftOf(undefined)).toEqual([]);
    expect(recordedDriftOf({ drift: 'no' })).toEqual([]);
  });
});
