/**
 * One protocol, one client: every method of engine/server/protocol.ts called through the
 * client (engine/server/client.ts) against a real engine with a real run, each result checked
 * against the protocol on receipt; and the CLI's read commands answering through the same
 * client, in-process and against a served engine.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createClient, inProcessTransport, type EngineClient } from '../../../engine/server/client';
import { createEngine } from '../../../engine/server/engine';
import { api, type Method } from '../../../engine/server/protocol';
import { EngineServer } from '../../../engine/server/server';
import { serveWebSocket } from '../../../engine/server/transports';
import { descentTemplate } from './fixtures/descent-job';
import { streamTransport } from '../../../engine/cli/engine-client';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
const run = promisify(execFile);
const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** A client that records which methods it called (to check the test covers the protocol). */
function recording(client: EngineClient, called: Set<string>): EngineClient {
  return {
    ...client,
    request: ((m: Method, p?: unknown) => (called.add(m), (client.request as (m: Method, p?: unknown) => Promise<unknown>)(m, p))) as EngineClient['request'],
  };
}

async function trainedEngine() {
  const home = mkdtempSync(join(tmpdir(), 'arbor-client-'));
  const engine = new EngineServer({ home, templates: [descentTemplate] });
  cleanups.push(() => engine.close());
  const id = engine.runs!.start({ template: 'descent', config: { steps: 10, delayMs: 0 }, name: 'd1', tags: ['a'] });
  await engine.runs!.idle();
  return { home, engine, id };
}

describe('protocol client', () => {
  it("every method answers in the protocol's shape, in-process", async () => {
    const { home, engine, id } = await trainedEngine();
    const called = new Set<string>();
    const events: string[] = [];
    const raw = createClient(inProcessTransport(engine), {
      onProtocolError: (m) => {
        throw new Error(m);
      },
    });
    raw.onEvent((e) => events.push(e.event));
    const c = recording(raw, called);

    expect((await c.request('engine.info')).workspaceError).toBeNull();
    expect((await c.request('templates.list')).map((t) => t.id)).toEqual(['descent']);
    const [r] = await c.request('runs.list');
    expect(r).toMatchObject({ id, name: 'd1', status: 'completed', step: 10, tags: ['a'] });
    expect(r.createdAt).toBeLessThan(Date.now() / 1000 + 1); // seconds on the wire
    expect(r.endedAt).toBeGreaterThanOrEqual(r.startedAt!);
    const detail = await c.request('runs.get', { id });
    expect(detail.checkpoints.map((k) => k.step)).toEqual([5, 10]);
    expect(detail.trajectorySteps).toEqual([5, 10]);
    expect(detail.config).toEqual({ steps: 10, delayMs: 0 });
    await c.request('runs.setNotes', { id, notes: 'lr too high?' });
    await c.request('runs.setTags', { id, tags: ['b', ' b ', 'c'] });
    expect(await c.request('runs.get', { id })).toMatchObject({ notes: 'lr too high?', tags: ['b', 'c'] });
    expect((await c.request('runs.log', { runId: id })).length).toBeGreaterThanOrEqual(10);
    const series = await c.request('metrics.series', { runId: id, keys: ['loss'] });
    expect(series.loss.step).toHaveLength(10);
    const trajs = await c.request('trajectories.list', { runId: id });
    expect(trajs).toHaveLength(2);
    expect(await c.request('trajectories.steps', { runId: id })).toEqual([5, 10]);
    const t = await c.request('trajectories.get', { id: trajs[0].id });
    expect(t.turnsData[0].text).toMatch(/^x = /);
    expect((await c.request('trajectories.group', { runId: id, step: 5, group: 0 })).map((x) => x.id)).toEqual([trajs[0].id]);
    expect((await c.request('checkpoints.list', { runId: id })).length).toBe(2);

    const inProject = await c.request('runs.start', { template: 'descent', config: { steps: 2, delayMs: 0 }, name: 'p', project: 'sweep-1' });
    const fork = await c.request('runs.fork', { id: inProject.id, config: { steps: 3 }, name: 'd2' });
    await engine.runs!.idle();
    expect(await c.request('projects.list')).toEqual([{ name: 'sweep-1', runs: 2 }]); // a fork stays in its project
    expect((await c.request('runs.list', { project: 'sweep-1' })).map((x) => x.name).sort()).toEqual(['d2', 'p']);
    expect(await c.request('runs.diff', { ids: [inProject.id, fork.id] })).toEqual({ steps: { [inProject.id]: '2', [fork.id]: '3' } });
    const started = await c.request('runs.start', { template: 'descent', config: { steps: 400, delayMs: 2 } });
    await expect.poll(async () => (await c.request('runs.list', { status: 'running' })).length).toBe(1);
    await expect.poll(() => events.includes('checkpoint') && events.includes('trajectories'), { timeout: 20_000 }).toBe(true);
    await c.request('runs.pause', { id: started.id });
    await c.request('runs.resume', { id: started.id });
    await c.request('runs.stop', { id: started.id });
    expect((await c.request('runs.get', { id: started.id })).status).toBe('stopped');
    await c.request('runs.delete', { id: started.id });
    await expect(c.request('runs.get', { id: started.id })).rejects.toThrow(`no run with id "${started.id}"`);

    const out = join(home, 'out', 'd1');
    const ex = await c.request('runs.export', { id, prefix: out });
    expect(ex.files.map((f) => [f.kind, f.count])).toEqual([
      ['metrics', 10],
      ['trajectories', 2],
    ]);
    expect(readFileSync(`${out}.metrics.csv`, 'utf8').split('\n')[0]).toBe('step,time,loss,x/norm');
    await expect(c.request('runs.export', { id, prefix: 'relative/path' })).rejects.toThrow(/prefix must be an absolute path/);

    const dump = join(home, 'dump');
    mkdirSync(dump);
    writeFileSync(
      join(dump, '1.jsonl'),
      [
        { input: 'q1', output: 'a', score: 1 },
        { input: 'q1', output: 'b', score: 0 },
      ]
        .map((o) => JSON.stringify(o))
        .join('\n'),
    );
    const imp = await c.request('runs.importVerl', { dir: dump, name: 'v' });
    expect(imp).toMatchObject({ trajectories: 2, steps: [1] });
    writeFileSync(join(dump, '2.jsonl'), '{"input": "q", "output": "x"}\n');
    const before = (await c.request('runs.list')).length;
    await expect(c.request('runs.importVerl', { dir: dump })).rejects.toThrow(`${join(dump, '2.jsonl')}:1: missing field "score"`);
    expect((await c.request('runs.list')).length).toBe(before); // no half-imported run left behind

    await c.request('env.write', { path: 'tools/t.ts', text: 'export const x = 1;' });
    expect(await c.request('env.files')).toEqual([{ path: 'tools/t.ts', kind: 'tool' }]);
    expect(await c.request('env.read', { path: 'tools/t.ts' })).toBe('export const x = 1;');
    // Run groups (seed sweeps): the trained run as a one-run group, through the same client.
    const { createRunGroup, assignRunToRunGroup } = await import('../../../engine/store/groups');
    const { Store } = await import('../../../engine/store/store');
    const { openDatabase } = await import('../../../engine/store/db');
    const gs = new Store(openDatabase(join(home, 'arbor.db')));
    const gid = createRunGroup(gs, { name: 'g', kind: 'seeds', plan: [0, 1].map((seed) => ({ cell: 'base', overrides: {}, seed })) });
    assignRunToRunGroup(gs, id, gid, 'base');
    gs.db.prepare('UPDATE runs SET seed = 0 WHERE id = ?').run(id);
    gs.db.close();
    expect((await c.request('groups.list')).map((g) => [g.id, g.runs, g.planned])).toEqual([[gid, 1, 2]]);
    const rep = await c.request('groups.report', { id: gid, metrics: ['loss'] });
    expect(rep.partial).toBe(true); // seed 1 has no run
    expect(rep.cells[0]!.metrics.loss!.n).toBe(1);
    expect((await c.request('groups.compare', { a: gid, b: gid, metrics: ['loss'] })).cells[0]!.metrics.loss!.diff).toBe(0);
    const band = (await c.request('groups.series', { id: gid, keys: ['loss'] })).base!.loss!;
    expect(band.step.length).toBeGreaterThan(0);
    expect(band.n.every((n) => n === 1)).toBe(true);
    const learning = await c.request('runs.learning', { id });
    expect(learning.steps).toBe(0); // the descent job logs no learn/* figures
    expect(learning.flagged).toEqual([]);
    const ws2 = join(home, 'other.db');
    expect((await c.request('workspace.open', { path: ws2 })).workspaceError).toBeNull();

    // The methods the area handlers provide go through this client in sandbox.test.ts
    // (env.types, sandbox.*), playground.test.ts (playground.*), interop/mcp-try.test.ts (mcp.tryTool)
    // and the workbench's consent dialog in tests/e2e/consent.test.ts (consent.answer); replay.* and
    // live.* in tests/engine/replay/replay.test.ts (a real checkpoint and environment); models.* against a
    // mock Hub in tests/engine/hub/models.test.ts (arbor models) and tests/e2e/models.test.ts (the picker).
    const areas = [
      'models.list',
      'models.pull',
      'models.cancelPull',
      'env.types',
      'sandbox.tryTool',
      'sandbox.tryReward',
      'playground.chat',
      'playground.cancel',
      'mcp.tryTool',
      'consent.answer',
      'replay.fork',
      'replay.forks',
      'replay.drift',
      'replay.topk',
      'live.start',
      'live.step',
      'live.close',
    ];
    expect(Object.keys(api).filter((m) => !called.has(m) && !areas.includes(m))).toEqual([]);
    expect(new Set(events)).toEqual(new Set(['engine', 'queue', 'run', 'metrics', 'log', 'trajectories', 'checkpoint', 'import', 'export']));
  });
});

describe('CLI through the protocol client', () => {
  it('arbor runs / show / export / note / tag read the workspace in-process and from `arbor serve`', async () => {
    const { home, engine, id } = await trainedEngine();
    const loss = engine.store!.latest(id).loss;
    engine.close(); // the CLI opens the workspace itself
    const env = { ...process.env, ARBOR_HOME: home };
    const arbor = async (...args: string[]) => (await run(process.execPath, [bin, ...args], { env, encoding: 'utf8', timeout: 120_000 })).stdout;

    await arbor('note', id, 'first', 'try');
    await arbor('tag', id, 'x', 'y');
    const list = JSON.parse(await arbor('runs', '--json')) as { id: string; tags: string[]; metrics: Record<string, number> }[];
    expect(list.map((r) => r.id)).toEqual([id]);
    expect(list[0].tags).toEqual(['x', 'y']);
    expect(list[0].metrics.loss).toBe(loss);
    expect(JSON.parse(await arbor('runs', '--json', '--project', 'elsewhere'))).toEqual([]);
    const show = JSON.parse(await arbor('show', id, '--json')) as { notes: string; trajectorySteps: number[] };
    expect(show).toMatchObject({ notes: 'first try', trajectorySteps: [5, 10] });
    const text = await arbor('export', id, '--out', join(home, 'e1'));
    expect(text).toContain(`${join(home, 'e1')}.metrics.csv: 10 steps`);
    expect(existsSync(join(home, 'e1.trajectories.jsonl'))).toBe(true);

    // The same commands against a served engine (another workspace: the served one).
    const served = await createEngine({ home: mkdtempSync(join(tmpdir(), 'arbor-served-')) });
    const web = await serveWebSocket(served);
    cleanups.push(async () => {
      await web.close();
      served.close();
    });
    served.store!.createRun({ name: 'served-run', status: 'completed' });
    const remote = JSON.parse(await arbor('runs', '--json', '--engine', web.url)) as { id: string; name: string }[];
    expect(remote.map((r) => r.name)).toEqual(['served-run']);
    await expect(arbor('runs', '--engine', `http://127.0.0.1:${web.port}/?token=wrong`)).rejects.toThrow(/rejected the access token/);
    await expect(arbor('show', 'nope')).rejects.toThrow(/no run with id "nope"/);
  }, 180_000);
});

describe('stdio transport', () => {
  it('`arbor serve --stdio` speaks the protocol as JSON lines; a malformed line gets an error and the engine keeps serving', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-stdio-'));
    const child = spawn(process.execPath, [bin, 'serve', '--stdio'], { env: { ...process.env, ARBOR_HOME: home }, stdio: ['pipe', 'pipe', 'inherit'] });
    cleanups.push(() => child.kill());
    const refused: string[] = [];
    const c = createClient(streamTransport(child.stdout!, child.stdin!), { onProtocolError: (m) => refused.push(m) });
    const seen: string[] = [];
    c.onEvent((e) => seen.push(e.event));
    expect((await c.request('engine.info')).home).toBe(home);
    child.stdin!.write('{not json\n');
    await expect.poll(() => refused).toEqual(['the engine refused a message: malformed message: not JSON']);
    expect(await c.request('runs.list')).toEqual([]);
    expect(seen).toContain('engine'); // the state every client gets on connect
    c.close();
  }, 60_000);
});
