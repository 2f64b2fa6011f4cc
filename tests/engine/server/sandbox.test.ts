// The editor's engine methods on a real engine: env.types serves the 'arbor/env' declarations,
// sandbox.tryTool runs a tool, sandbox.tryReward scores a stored trajectory (golds kept with it).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine } from '../../../engine/server/engine';
import type { EngineServer } from '../../../engine/server/server';

const home = mkdtempSync(join(tmpdir(), 'arbor-sandbox-srv-'));
let engine: EngineServer;
let trajectoryId: string;

function call(method: string, params: unknown): Promise<{ result?: any; error?: { message: string } }> {
  return new Promise((resolve) => {
    void engine.handle({ send: (m: any) => m.id === 1 && resolve(m) } as never, { id: 1, method, params });
  });
}

beforeAll(async () => {
  engine = await createEngine({ home });
  const store = engine.store!;
  const runId = store.createRun({ name: 'r', template: 'multihop', config: {} });
  store.writeTrajectory(runId, {
    step: 1, group: 0, sample: 0, task: 'q1', prompt: 'question : where was alvin born ?', reward: 0,
    outcome: { answer: 'oban', golds: ['Oban'], components: { exact_match: 1 }, exactMatch: true, formatOk: true, toolCalls: 1, toolErrors: 0, truncated: false },
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
    const source = "export const tool = {\n  name: 'echo', description: 'e', parameters: { type: 'object' },\n  execute(a: { q?: string }) {\n    if (!a.q) throw new Error('q is required');\n    return { content: a.q, success: true };\n  },\n};\n";
    const ok = await call('sandbox.tryTool', { source, path: 'tools/echo.ts', args: { q: 'hello' } });
    expect(ok.result).toMatchObject({ ok: true, value: { content: 'hello', success: true } });
    const bad = await call('sandbox.tryTool', { source, path: 'tools/echo.ts', args: {} });
    expect(bad.result).toMatchObject({ ok: false, error: { path: 'tools/echo.ts', line: 4 } });
    expect(bad.result.error.message).toContain('q is required');
  }, 60_000);

  it('sandbox.tryReward scores a stored trajectory with its gold answers and turns', async () => {
    const source = "import { exactMatch } from 'arbor/env';\nexport const reward = (e: { answer?: string; golds: string[]; turns: string[] }) => exactMatch(e.answer ?? '', e.golds) * 10 + e.turns.length;\n";
    const r = await call('sandbox.tryReward', { source, path: 'rewards/x.ts', trajectoryId });
    expect(r.result).toMatchObject({ ok: true, value: { reward: 12 } });
  }, 60_000);
});
