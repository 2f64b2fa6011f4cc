// The zustand store driven through the real protocol client against a real engine server
// (WebSocket, SQLite workspace, run manager) running a real short job: templates, starting a
// run, live metrics/logs/status arriving as events, readable engine errors, trajectories and
// the keyboard actions over them, compare with a config diff.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineServer } from '../../engine/server/server';
import { serveWebSocket, type WebServer } from '../../engine/server/transports';
import type { Transport } from '../../renderer/src/api/transports';
import type { ArborStore } from '../../renderer/src/store';
import { configDiff } from '../../renderer/src/lib/configDiff';
import { descentTemplate } from '../engine/server/fixtures/descent-job';
import { storeOverWebSocket, until } from '../engine/server/fixtures/ws-store';

let home: string;
let engine: EngineServer;
let web: WebServer;
let transport: Transport;
let store: ArborStore;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'arbor-store-'));
  engine = new EngineServer({ home, templates: [descentTemplate] });
  ({ web, transport, store } = await storeOverWebSocket(engine));
});

afterAll(async () => {
  transport?.close();
  await web?.close();
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('workbench store against a real engine', () => {
  let runId: string;

  it('lists templates, starts a run and follows it live to completion', async () => {
    const s = () => store.getState();
    await s().runListActions.loadTemplates();
    expect(s().runList.templates.map((t) => t.id)).toEqual(['descent']);
    const id = await s().runListActions.start('descent', { steps: 10, lr: 0.1, delayMs: 15 }, 'lr-0.1', ['sweep']);
    expect(id).toBeTruthy();
    runId = id!;
    await s().runActions.open(runId);
    expect(s().nav.view).toBe('run');
    await until(() => s().run.detail?.status === 'completed', 'the run to complete');
    // Points arrived as events while the run was open (and nothing was lost vs the stored series).
    expect(s().run.series.loss.step).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const losses = s().run.series.loss.value as number[];
    expect(losses[9]).toBeLessThan(losses[0]);
    expect(s().run.log.filter((l) => /^step \d+ loss/.test(l.text))).toHaveLength(10);
    expect(s().run.log[0].time).toBeGreaterThan(Date.now() - 60_000); // milliseconds, not seconds
    expect(s().run.detail!.checkpoints.map((c) => c.step)).toEqual([5, 10]);
    // The runs table row was updated by the same events.
    const row = s().runList.runs.find((r) => r.id === runId)!;
    expect(row).toMatchObject({ status: 'completed', tags: ['sweep'] });
    expect(row.metrics.loss).toBeCloseTo(losses[9], 6);
    expect(row.createdAt).toBeGreaterThan(Date.now() - 60_000);
  });

  it('shows engine errors as readable messages with what the UI was doing', async () => {
    const before = store.getState().connection.errors.length;
    const id = await store.getState().runListActions.start('descent', { steps: 0 });
    expect(id).toBeNull();
    const e = store.getState().connection.errors.slice(before);
    expect(e).toHaveLength(1);
    expect(e[0].context).toBe('Starting a run from template "descent"');
    expect(e[0].message).toBe('steps: must be a positive integer');
    await store.getState().runActions.open('no-such-run');
    expect(store.getState().connection.errors.at(-1)!.message).toMatch(/no-such-run/);
  });

  it('opens stored trajectories and moves through samples and turns', async () => {
    const s = () => store.getState();
    await s().trajListActions.open(runId);
    expect(s().trajList.steps).toEqual([5, 10]);
    expect(s().trajList.step).toBe(10);
    expect(s().traj.current?.step).toBe(10);
    expect(s().traj.current?.turnsData[0].text).toMatch(/^x = /);
    await s().trajListActions.setStep(5);
    expect(s().traj.current?.step).toBe(5);
    s().trajActions.cycleChannel();
    expect(s().traj.channel).toBe('entropy');
    await s().trajListActions.setFilter({ minReward: 0 });
    expect(s().trajList.items).toHaveLength(0); // rewards are -loss < 0
    await s().trajListActions.setFilter({ minReward: undefined });
    expect(s().trajList.items).toHaveLength(1);
  });

  it('compares two runs: both series and only the differing config', async () => {
    const s = () => store.getState();
    const other = await s().runListActions.start('descent', { steps: 10, lr: 0.3, delayMs: 1 }, 'lr-0.3');
    await until(() => s().runList.runs.find((r) => r.id === other)?.status === 'completed', 'the second run');
    await s().compareActions.load([runId, other!]);
    expect(s().compare.runs.map((r) => r.name)).toEqual(['lr-0.1', 'lr-0.3']);
    expect(Object.keys(s().compare.series[other!])).toContain('loss');
    expect(configDiff(s().compare.runs.map((r) => r.config)).map((d) => d.path)).toEqual(['delayMs', 'lr']);
  });

  it('stops a running run, resumes it from where it was, and follows its trajectories live', async () => {
    const s = () => store.getState();
    const id = (await s().runListActions.start('descent', { steps: 30, lr: 0.05, delayMs: 40 }, 'long'))!;
    await until(() => s().runList.runs.find((r) => r.id === id)?.status === 'running', 'the run to start');
    await s().trajListActions.open(id);
    await s().trajListActions.setFollow(true);
    await until(() => (s().runList.runs.find((r) => r.id === id)?.step ?? 0) >= 6, 'a few steps');
    await s().runListActions.stop(id);
    expect(s().runList.runs.find((r) => r.id === id)!.status).toBe('stopped');
    const stoppedAt = s().runList.runs.find((r) => r.id === id)!.step!;
    expect(stoppedAt).toBeLessThan(30);
    await s().runListActions.resume(id);
    await until(() => s().runList.runs.find((r) => r.id === id)?.status === 'completed', 'the resumed run to complete');
    // Following: the open step moved to each newly stored one, ending on the last.
    await until(() => s().trajList.step === 30, 'follow to reach step 30');
    expect(s().trajList.steps.at(-1)).toBe(30);
    await until(() => s().traj.current?.step === 30, 'the step-30 trajectory to open');
  });

  it('reloads what is open when the engine comes back on the same address', async () => {
    const s = () => store.getState();
    await s().runActions.open(runId);
    const { port, token } = web;
    await web.close();
    engine.close();
    await until(() => s().connection.status.state === 'closed', 'the loss to be noticed');
    // Meanwhile the run's data is stale; the restarted engine reads the same workspace.
    store.setState({ run: { ...s().run, detail: null }, runList: { ...s().runList, runs: [] } });
    engine = new EngineServer({ home, templates: [descentTemplate] });
    web = await serveWebSocket(engine, { port, token });
    await until(() => s().connection.status.state === 'open', 'the reconnection');
    expect(s().connection.reconnects).toBe(1);
    await until(() => s().run.detail?.id === runId && s().runList.runs.length >= 3, 'the open run and the table to reload');
    expect(s().run.series.loss.step).toHaveLength(10);
  });
});
