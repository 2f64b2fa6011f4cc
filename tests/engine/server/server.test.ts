/** The engine protocol over a real WebSocket and MessagePort, and the run manager with a real job. */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import WebSocket from 'ws';
import { EngineServer } from '../../../engine/server/server';
import { attachPort, serveWebSocket, type WebServer } from '../../../engine/server/transports';
import { tokenProtocols } from '../../../engine/server/client';
import { descentTemplate } from './fixtures/descent-job';
import type { RunTemplate } from '../../../engine/server/runs';

const servers: { s: WebServer; e: EngineServer }[] = [];
afterAll(async () => {
  for (const x of servers) {
    await x.s.close();
    x.e.close();
  }
});

async function boot() {
  const home = mkdtempSync(join(tmpdir(), 'arbor-srv-'));
  const e = new EngineServer({ home, templates: [descentTemplate] });
  const s = await serveWebSocket(e);
  servers.push({ s, e });
  return { e, s, home };
}

class WsClient {
  ws: WebSocket;
  next = 1;
  pending = new Map<number, (m: any) => void>();
  events: any[] = [];
  closed: Promise<number>;
  constructor(url: string, token?: string) {
    this.ws = token === undefined ? new WebSocket(url) : new WebSocket(url, tokenProtocols(token));
    this.ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      if (m.event) this.events.push(m);
      else if (m.id != null && this.pending.has(m.id)) {
        this.pending.get(m.id)!(m);
        this.pending.delete(m.id);
      } else this.events.push(m);
    });
    this.closed = new Promise((r) => this.ws.on('close', (code) => r(code)));
  }
  open() {
    return new Promise<void>((r, j) => {
      this.ws.once('open', () => r());
      this.ws.once('error', j);
    });
  }
  call(method: string, params?: unknown): Promise<any> {
    const id = this.next++;
    return new Promise((r) => {
      this.pending.set(id, r);
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }
  raw(text: string) {
    this.ws.send(text);
  }
  async waitFor(pred: (e: any) => boolean, ms = 10000) {
    const t0 = Date.now();
    while (Date.now() - t0 < ms) {
      const e = this.events.find(pred);
      if (e) return e;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('event not seen');
  }
}

const wsUrl = (s: WebServer) => `ws://127.0.0.1:${s.port}/ws`;

describe('protocol', () => {
  it('refuses a wrong or missing token and keeps serving other clients', async () => {
    const { s } = await boot();
    const good = new WsClient(wsUrl(s), s.token);
    await good.open();
    const bad = new WsClient(wsUrl(s), 'nope');
    expect(await bad.closed).toBe(4401);
    const none = new WsClient(`ws://127.0.0.1:${s.port}/ws`);
    expect(await none.closed).toBe(4401);
    // the token in the URL is no longer accepted (it would sit in logs and history)
    const inUrl = new WsClient(`ws://127.0.0.1:${s.port}/ws?token=${s.token}`);
    expect(await inUrl.closed).toBe(4401);
    expect((await good.call('engine.info')).result).toMatchObject({ workspaceError: null });
  });
  it('answers malformed messages, unknown methods and bad params with errors', async () => {
    const { s } = await boot();
    const c = new WsClient(wsUrl(s), s.token);
    await c.open();
    c.raw('{not json');
    expect((await c.waitFor((m) => m.error && m.id === null)).error).toMatchObject({ code: 'bad_request', message: 'malformed message: not JSON' });
    expect((await c.call('runs.explode')).error).toMatchObject({ code: 'unknown_method', message: 'unknown method "runs.explode"' });
    expect((await c.call('runs.get', { id: 5 })).error.message).toMatch(/^invalid params for runs.get: id: /);
    expect((await c.call('runs.get', { id: 'missing' })).error.message).toBe('no run with id "missing"');
    expect((await c.call('templates.list')).result.map((t: any) => t.id)).toEqual(['descent']);
  });
  it('a corrupted workspace keeps the engine up and offers to open another', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-srv-'));
    writeFileSync(join(home, 'arbor.db'), Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(4096, 0x33)]));
    const e = new EngineServer({ home, templates: [descentTemplate] });
    const msgs: any[] = [];
    const client = { send: (m: unknown) => msgs.push(m) };
    await e.handle(client, { id: 1, method: 'runs.list' });
    expect(msgs[0].error).toMatchObject({ code: 'workspace', details: { offer: 'workspace.open' } });
    expect(msgs[0].error.message).toContain(join(home, 'arbor.db'));
    await e.handle(client, { id: 2, method: 'workspace.open', params: { path: join(home, 'fresh.db') } });
    await e.handle(client, { id: 3, method: 'runs.list' });
    expect(msgs[2]).toEqual({ id: 3, result: [] });
    e.close();
  });
});

describe('run manager', () => {
  it('runs a real job with live events, queues a second run with its position, pauses, stops and resumes', async () => {
    const { s } = await boot();
    const c = new WsClient(wsUrl(s), s.token);
    await c.open();
    const a = (await c.call('runs.start', { template: 'descent', config: { steps: 40, delayMs: 10 } })).result.id;
    const b = (await c.call('runs.start', { template: 'descent', config: { steps: 10, delayMs: 1 } })).result.id;
    const q = await c.waitFor((m) => m.event === 'queue' && m.data.running === a && m.data.queue.length === 1);
    expect(q.data.queue).toEqual([{ runId: b, position: 1 }]);
    await c.waitFor((m) => m.event === 'metrics' && m.data.runId === a && m.data.step === 3);
    await c.call('runs.pause', { id: a });
    expect((await c.call('runs.get', { id: a })).result.status).toBe('paused');
    await c.call('runs.resume', { id: a });
    await c.waitFor((m) => m.event === 'checkpoint' && m.data.runId === a);
    await c.call('runs.stop', { id: a });
    expect((await c.call('runs.get', { id: a })).result.status).toBe('stopped');
    await c.waitFor((m) => m.event === 'run' && m.data.run.id === b && m.data.run.status === 'completed');
    const series = (await c.call('metrics.series', { runId: b })).result;
    expect(series.loss.step).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(series.loss.value[9]).toBeLessThan(series.loss.value[0]);
    expect((await c.call('trajectories.steps', { runId: b })).result).toEqual([5, 10]);
    expect((await c.call('runs.log', { runId: b })).result.length).toBe(10);
    // A client that reconnects gets the current state.
    const c2 = new WsClient(wsUrl(s), s.token);
    await c2.open();
    await c2.waitFor((m) => m.event === 'engine');
    await c2.waitFor((m) => m.event === 'queue');
    const fork = (await c.call('runs.fork', { id: b, config: { steps: 3 } })).result.id;
    await c.waitFor((m) => m.event === 'run' && m.data.run.id === fork && m.data.run.status === 'completed');
    expect((await c.call('runs.diff', { ids: [b, fork] })).result).toEqual({ steps: { [b]: '10', [fork]: '3' } });
  });
  it('serves the same protocol over a MessagePort', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-srv-'));
    const e = new EngineServer({ home, templates: [descentTemplate] });
    const { port1, port2 } = new MessageChannel();
    attachPort(e, port1);
    const got = new Promise<any>((r) =>
      port2.on('message', (m) => {
        if (m.id === 7) r(m);
      }),
    );
    port2.postMessage({ id: 7, method: 'templates.list' });
    expect((await got).result[0].id).toBe('descent');
    port1.close();
    e.close();
  });
  it('a job that finished all its steps is completed even if the stop landed during the last one; one that says it was cut short is stopped', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-srv-'));
    const e = new EngineServer({ home });
    const job = (stoppedEarly: boolean): RunTemplate => ({
      id: `late-stop-${stoppedEarly}`,
      name: 'late stop',
      schema: {},
      async run(ctx) {
        ctx.metric(1, { x: 1 });
        await new Promise<void>((r) => ctx.signal.addEventListener('abort', () => r()));
        return { stopped: stoppedEarly };
      },
    });
    for (const early of [false, true]) {
      e.runs!.register(job(early));
      const id = e.runs!.start({ template: `late-stop-${early}`, config: {} });
      await expect.poll(() => e.store!.getRun(id).status).toBe('running');
      await e.runs!.stop(id);
      expect(e.store!.getRun(id).status).toBe(early ? 'stopped' : 'completed');
    }
    e.close();
  });
});
