// The workbench's consent question and runs.stop (issue 37, item 8): a run waiting at its question
// stops when asked (the question is answered no), and a question whose window has gone is answered
// no; the dialog's texts have control characters escaped. On a real engine, in-process.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setConsentAsker } from '../../../engine/env/consent';
import { workbenchAsker } from '../../../engine/server/consent';
import { createEngine } from '../../../engine/server/engine';
import type { EngineServer } from '../../../engine/server/server';
import { writeUserEnvironment } from './fixtures/user-environment';

const home = mkdtempSync(join(tmpdir(), 'arbor-consent-stop-'));
let engine: EngineServer;
const saved = process.env.ARBOR_HOME;
beforeAll(async () => {
  process.env.ARBOR_HOME = home;
  engine = await createEngine({ home });
  setConsentAsker(workbenchAsker(engine));
  writeUserEnvironment(join(home, 'workspace'));
});
afterAll(() => {
  setConsentAsker(null);
  process.env.ARBOR_HOME = saved;
  rmSync(home, { recursive: true, force: true });
});

const config = {
  model: { init: 'tiny' },
  task: { kind: 'qa', dataset: 'envs/qa.jsonl' },
  steps: 1,
  sft: { warm_start: false },
  environment: { tools: ['tools/search.ts'], reward: 'rewards/r.ts' },
};

/** A client that records events and answers requests through engine.handle. */
function client() {
  const events: { event: string; data: any }[] = [];
  const replies = new Map<number, (m: any) => void>();
  const c = { send: (m: any) => (typeof m?.id === 'number' ? replies.get(m.id)?.(m) : 'event' in m ? events.push(m) : undefined) };
  const off = engine.connect(c);
  let seq = 0;
  const request = (method: string, params: unknown) =>
    new Promise<any>((resolve) => {
      const id = ++seq;
      replies.set(id, resolve);
      void engine.handle(c, { id, method, params });
    });
  return { events, request, off };
}

async function status(request: (m: string, p: unknown) => Promise<any>, id: string): Promise<string> {
  for (let i = 0; i < 600; i++) {
    const s = (await request('runs.get', { id })).result.status as string;
    if (['completed', 'failed', 'stopped'].includes(s)) return s;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('run did not end');
}

describe('a consent question and runs.stop', () => {
  it('runs.stop answers while the question waits; the run ends without running anything', async () => {
    const win = client();
    const started = await win.request('runs.start', { template: 'user-env', config });
    const id = started.result.id as string;
    for (let i = 0; i < 600 && !win.events.some((e) => e.event === 'consent' && !e.data.done); i++) await new Promise((r) => setTimeout(r, 50));
    const q = win.events.find((e) => e.event === 'consent' && !e.data.done)!;
    expect(q.data.items.map((i: { kind: string }) => i.kind)).toEqual(['tool', 'reward']);
    // (Unanswered, the question would hold the stop for 10 minutes, past this test's limit.)
    const stopped = await win.request('runs.stop', { id });
    expect(stopped.error).toBeUndefined();
    expect(['stopped', 'failed']).toContain(await status(win.request, id));
    expect(win.events.some((e) => e.event === 'consent' && e.data.done && e.data.id === q.data.id)).toBe(true);
    win.off();
  }, 120_000);

  it('a question whose window has gone is answered no; the dialog shows control characters escaped', async () => {
    writeFileSync(join(home, 'workspace', 'tools', 'x\u001b[2K.ts'), 'export const t = 1;\n');
    const win = client();
    const started = await win.request('runs.start', {
      template: 'user-env',
      config: { ...config, environment: { ...config.environment, tools: ['tools/x\u001b[2K.ts'] } },
    });
    const id = started.result.id as string;
    for (let i = 0; i < 600 && !win.events.some((e) => e.event === 'consent' && !e.data.done); i++) await new Promise((r) => setTimeout(r, 50));
    const q = win.events.find((e) => e.event === 'consent' && !e.data.done)!;
    expect(JSON.stringify(q.data)).not.toMatch(/\\u001b/);
    expect(q.data.items[0].label).toContain('\\x1b[2K');
    // The window goes: no client is left to answer (the run's status is read from the store, not through a connection).
    win.off();
    expect(engine.clientCount).toBe(0);
    let s = '';
    for (let i = 0; i < 1200 && !['failed', 'stopped', 'completed'].includes(s); i++) {
      await new Promise((r) => setTimeout(r, 100));
      s = engine.store!.getRun(id).status;
    }
    expect(s).toBe('failed');
    expect(engine.store!.getRun(id).error).toMatch(/not approved, nothing was started/);
  }, 120_000);
});
