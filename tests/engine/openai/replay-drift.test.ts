/**
 * Acceptance (#24, drift, the endpoint half): trajectories made through the OpenAI-compatible
 * endpoint with the conversation sent back verbatim show no drift in the replay's check, and an
 * agent that alters its history is shown drifted. The path is training's: the run's config with
 * `environment.agent`, the run's task kit, the agent session compose.ts opens (openAgentSession:
 * the endpoint, one agent process per episode, its calls turned into trajectories and episodes),
 * each episode stored as the store sink stores it (episodeToRecord), then `replay.drift` through
 * the engine protocol and `arbor show`'s count. The model is a scripted decode backend (each
 * request greedily writes the next scripted turn: two Hermes tool calls, then the answer), so the
 * conversation is known; everything between it and the store is the real code.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildProgram } from '../../../engine/cli/main';
import type { ExperimentConfig } from '../../../engine/config/experiment';
import { episodeToRecord } from '../../../engine/run/store-sink';
import { openAgentSession } from '../../../engine/openai/agent-session';
import { openRunEnvironment, runConfig } from '../../../engine/run/stored';
import type { Trajectory } from '../../../engine/rollout/types';
import { createClient, inProcessTransport } from '../../../engine/server/client';
import { createEngine } from '../../../engine/server/engine';
import type { EngineServer } from '../../../engine/server/server';
import { ScriptedBackend } from './scripted';

const root = join(__dirname, '..', '..', '..');
const example = join(root, 'resources', 'examples', 'external-agent');
const home = mkdtempSync(join(tmpdir(), 'arbor-agent-drift-'));
let engine: EngineServer;
let runId: string;

const SCRIPTS = [
  '<tool_call>{"name": "lookup", "arguments": {"entity": "iron bridge guild"}}</tool_call>',
  '<tool_call>{"name": "calculator", "arguments": {"expression": "1804 - 1764"}}</tool_call>',
  '<answer> 40 </answer>',
];

/** The example's config with absolute paths (as `arbor train` resolves them), stored as a run's. */
function exampleConfig(): Record<string, unknown> {
  const cfg = parse(readFileSync(join(example, 'train.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  const env = cfg.environment!;
  env.tools = (env.tools as string[]).map((p) => join(example, p));
  for (const k of ['reward', 'tasks', 'workspace']) env[k] = join(example, env[k] as string);
  env.agent = { ...(env.agent as object), cwd: example, concurrency: 1, mode: 'process' };
  cfg.rollout = { ...cfg.rollout, max_new_tokens: 48 };
  return cfg;
}

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

/**
 * One training step's rollout through the agent (one task, one episode), stored as training stores
 * it; returns the stored ids, the trajectories the session made and the scripted turns' ids.
 */
async function agentStep(step: number, command: string[]) {
  const store = engine.store!;
  const { cfg: base, dir } = runConfig(store, runId, home);
  const cfg: ExperimentConfig = { ...base, environment: { ...base.environment, agent: { ...base.environment.agent!, command } } };
  const env = await openRunEnvironment({ cfg, dir });
  const { kit } = env;
  const tok = kit.tokenizer;
  const hf = (tok as unknown as { hf: { tokenId(t: string): number | undefined; vocabSize: number } }).hf;
  const end = hf.tokenId('<|im_end|>')!;
  const scripted = SCRIPTS.map((s) => [...tok.encode(s), end]);
  const backend = new ScriptedBackend(
    hf.vocabSize,
    scripted.map((s) => s.slice()),
  );
  let made: Trajectory[] = [];
  const session = openAgentSession(cfg, kit, backend, kit.tinyModel(cfg), (_, t) => (made = t));
  try {
    const episodes = await session.rollout.sample({ step, seed: 7, prompts: 1, n: 1, round: 0 });
    expect(session.takeLogs()).toEqual([]);
    const ids = episodes.map((e) =>
      String(
        store.writeTrajectory(
          runId,
          episodeToRecord(step, e, undefined, (x) => tok.decode(x)),
        ),
      ),
    );
    return { ids, made, scripted, backend };
  } finally {
    await session.close();
    await env.close();
  }
}

beforeAll(async () => {
  engine = await createEngine({ home });
  runId = engine.store!.createRun({ name: 'agent', template: 'tools', config: exampleConfig() });
}, 60_000);

afterAll(() => {
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('drift on trajectories made through the OpenAI-compatible endpoint', () => {
  it('the example agent (openai client, history sent back verbatim, two tool calls) makes one trajectory of the sampled ids; the replay shows no drift', async () => {
    const { ids, made, scripted } = await agentStep(1, [process.execPath, 'agent.ts']);
    expect(ids.length).toBe(1);
    expect(made[0]!.meta?.drift).toBeUndefined();
    const c = createClient(inProcessTransport(engine));
    try {
      const t = engine.store!.getTrajectory(ids[0]!);
      expect(t.turnsData.map((u) => u.role)).toEqual(['env', 'model', 'tool', 'model', 'tool', 'model']);
      // The model turns are the ids the endpoint sampled: the scripted turns, the tool calls with their
      // <|im_end|>, the answer ended by the task's stop string </answer> (as in-process episodes end).
      expect(t.turnsData.filter((u) => u.role === 'model').map((u) => Array.from(u.tokenIds))).toEqual([scripted[0], scripted[1], scripted[2]!.slice(0, -1)]);
      expect(t.turnsData[2]!.text).toContain('<tool_response>');
      expect(t.reward).toBe(made[0]!.outcome.reward);
      const d = (await c.request('replay.drift', { trajectoryId: ids[0]! })).trajectory!;
      expect(d).toEqual({ drifted: false, checked: 6, turns: [] });
      const run = (await c.request('replay.drift', { runId })).run!;
      expect(run).toMatchObject({ checked: 1, drifted: 0, ids: [] });
    } finally {
      c.close();
    }
  }, 120_000);

  it('an agent that rewrites its first tool call before the third request: the replay shows the drift on the stored trajectory, and arbor show counts it', async () => {
    const { ids, made, scripted } = await agentStep(2, [process.execPath, join(__dirname, 'fixtures', 'alter-agent.mjs')]);
    // The third call no longer continues the sampled turns: two trajectories, the second carries the endpoint's record.
    expect(ids.length).toBe(2);
    const c = createClient(inProcessTransport(engine));
    try {
      const reports = await Promise.all(ids.map(async (id) => (await c.request('replay.drift', { trajectoryId: id })).trajectory!));
      expect(reports[0]).toEqual({ drifted: false, checked: 4, turns: [] });
      const d = reports[1]!;
      expect(d.drifted).toBe(true);
      expect(d.turns.length).toBe(1);
      const turn = d.turns[0]!;
      // On the prompt (the whole history re-rendered from the agent's text), as the assistant turn was sampled and as the agent sent it.
      expect(turn).toMatchObject({ turn: 0, role: 'env', endpoint: { kind: 'altered', message: 1 } });
      expect(turn.stored).toEqual(scripted[0]);
      const tok = (await openRunEnvironment(runConfig(engine.store!, runId, home))).kit.tokenizer;
      expect(tok.decode(turn.rendered)).toContain('"the iron bridge guild"');
      expect(turn.rendered.slice(0, turn.firstDiff)).toEqual(turn.stored.slice(0, turn.firstDiff));
      expect(turn.rendered[turn.firstDiff]).not.toBe(turn.stored[turn.firstDiff]);
      // The position is where the stored prompt holds the changed turn.
      const prompt = Array.from(engine.store!.getTrajectory(ids[1]!).turnsData[0]!.tokenIds);
      expect(prompt.slice(turn.endpoint!.position - turn.firstDiff, turn.endpoint!.position - turn.firstDiff + turn.rendered.length)).toEqual(turn.rendered);
      expect(made[1]!.meta?.drift).toHaveLength(1);
      const run = (await c.request('replay.drift', { runId })).run!;
      expect(run).toMatchObject({ checked: 3, drifted: 1, ids: [ids[1]] });
      expect(await cli(['show', runId])).toContain(`drift: 1 of 3 stored trajectories have turns whose ids differ from their re-rendered text (${ids[1]})`);
    } finally {
      c.close();
    }
  }, 120_000);
});
