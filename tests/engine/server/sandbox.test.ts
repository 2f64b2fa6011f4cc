// The editor's engine methods on a real engine: env.types serves the 'arbor/env' declarations,
// sandbox.tryTool runs a tool, sandbox.tryReward scores a stored trajectory (golds kept with it).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine } from '../../../engine/server/engine';
import { createClient, EngineError, inProcessTransport } from '../../../engine/server/client';
import type { Method } from '../../../engine/server/protocol';
import type { EngineServer } from '../../../engine/server/server';
import { writeUserEnvironment } from './fixtures/user-environment';

const home = mkdtempSync(join(tmpdir(), 'arbor-sandbox-srv-'));
let engine: EngineServer;
let trajectoryId: string;

/** A request through the protocol client (its result checked against the protocol on receipt). */
async function call(method: Method, params: unknown): Promise<{ result?: any; error?: { message: string } }> {
  const c = createClient(inProcessTransport(engine));
  try {
    return { result: await (c.request as (m: Method, p: unknown) => Promise<unknown>)(method, params) };
  } catch (e) {
    if (e instanceof EngineError && e.code !== 'bad_result') return { error: { message: e.message } };
    throw e;
  } finally {
    c.close();
  }
}

beforeAll(async () => {
  engine = await createEngine({ home });
  const store = engine.store!;
  const runId = store.createRun({ name: 'r', template: 'multihop', config: {} });
  store.writeTrajectory(runId, {
    step: 1,
    group: 0,
    sample: 0,
    task: 'q1',
    prompt: 'question : where was alvin born ?',
    reward: 0,
    outcome: {
      answer: 'oban',
      golds: ['Oban'],
      components: { exact_match: 1 },
      exactMatch: true,
      formatOk: true,
      toolCalls: 1,
      toolErrors: 0,
      truncated: false,
    },
    turns: [
      { role: 'env', text: 'question : where was alvin born ?', tokenIds: [1], lossMask: [0] },
      { role: 'model', text: '<search> alvin </search>', tokenIds: [2, 3, 4], lossMask: [1, 1, 1] },
      { role: 'tool', text: '<information> alvin was born in oban . </information>', tokenIds: [5], lossMask: [0] },
      { role: 'model', text: '<answer> oban </answer>', tokenIds: [6, 7, 8], lossMask: [1, 1, 1] },
    ],
  });
  trajectoryId = store.searchTrajectories({ runId })[0]!.id;
});

afterAll(() => {
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('editor methods', () => {
  it('env.types serves the arbor/env declarations', async () => {
    const r = await call('env.types', {});
    expect(r.result[0].content).toBe(readFileSync(join(__dirname, '..', '..', '..', 'resources', 'types', 'arbor-env.d.ts'), 'utf8'));
  });

  it('sandbox.tryTool runs a tool; a throwing one reports its line', async () => {
    const source =
      "export const tool = {\n  name: 'echo', description: 'e', parameters: { type: 'object' },\n  execute(a: { q?: string }) {\n    if (!a.q) throw new Error('q is required');\n    return { content: a.q, success: true };\n  },\n};\n";
    const ok = await call('sandbox.tryTool', { source, path: 'tools/echo.ts', args: { q: 'hello' } });
    expect(ok.result).toMatchObject({ ok: true, value: { content: 'hello', success: true } });
    const bad = await call('sandbox.tryTool', { source, path: 'tools/echo.ts', args: {} });
    expect(bad.result).toMatchObject({ ok: false, error: { path: 'tools/echo.ts', line: 4 } });
    expect(bad.result.error.message).toContain('q is required');
  }, 60_000);

  it('sandbox.tryReward scores a stored trajectory with its gold answers and turns', async () => {
    const source =
      "import { exactMatch } from 'arbor/env';\nexport const reward = (e: { answer?: string; golds: string[]; turns: string[] }) => exactMatch(e.answer ?? '', e.golds) * 10 + e.turns.length;\n";
    const r = await call('sandbox.tryReward', { source, path: 'rewards/x.ts', trajectoryId });
    expect(r.result).toMatchObject({ ok: true, value: { reward: 12 } });
  }, 60_000);
});

describe('user environment template', () => {
  it('rejects an environment naming a missing file', async () => {
    writeUserEnvironment(join(home, 'workspace'));
    const r = await call('runs.start', {
      template: 'user-env',
      config: { model: { init: 'tiny' }, task: { kind: 'qa', dataset: 'envs/qa.jsonl' }, environment: { tools: ['tools/nope.ts'] } },
    });
    expect(r.error?.message).toMatch(/environment: no file tools\/nope\.ts in the workspace/);
  });

  it('trains with the user search tool and reward running in the sandbox', async () => {
    writeUserEnvironment(join(home, 'workspace'));
    const config = {
      model: { init: 'tiny' },
      task: { kind: 'qa', dataset: 'envs/qa.jsonl' },
      steps: 1,
      rollout: { prompts_per_step: 2, n: 2, max_turns: 3, max_new_tokens: 12 },
      sft: { warm_start: true, epochs: 1, demos: 4, batch_size: 4 },
      eval: { every: 0, n_questions: 2 },
      checkpoint: { every: 1, keep: 1 },
      environment: { tools: ['tools/search.ts'], reward: 'rewards/r.ts' },
    };
    const started = await call('runs.start', { template: 'user-env', config });
    expect(started.error).toBeUndefined();
    const id = started.result.id as string;
    let run: any;
    for (let i = 0; i < 600; i++) {
      run = (await call('runs.get', { id })).result;
      if (['completed', 'failed', 'stopped'].includes(run.status)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(run.status, run.error).toBe('completed');
    const logs = ((await call('runs.log', { runId: id })).result as { text: string }[]).map((l) => l.text);
    expect(logs).toContain('environment: format search-r1; tools tools/search.ts; reward rewards/r.ts');
    // The expert's demonstrations searched through the user's tool, in the sandbox.
    expect(logs.some((l) => /^sandbox: searched /.test(l))).toBe(true);
    const t = engine.store!.searchTrajectories({ runId: id })[0]!;
    const o = engine.store!.getTrajectory(t.id).outcomeData as { components: Record<string, number> };
    expect(o.components).toHaveProperty('user_reward');
    expect(o.components).toHaveProperty('searched');

    // A reward that throws fails the run with its file and TypeScript line.
    writeFileSync(
      join(home, 'workspace', 'rewards', 'bad.ts'),
      'export function reward(e: { golds: string[] }) {\n  const g = e.golds[9];\n  return g.length;\n}\n',
    );
    const bad = (await call('runs.start', { template: 'user-env', config: { ...config, environment: { reward: 'rewards/bad.ts' } } })).result.id as string;
    for (let i = 0; i < 600; i++) {
      run = (await call('runs.get', { id: bad })).result;
      if (['completed', 'failed', 'stopped'].includes(run.status)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/rewards\/bad\.ts:3:\d+: .*length/);
  }, 300_000);
});
