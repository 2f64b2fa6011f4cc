/**
 * The engine's what-if replay methods (engine/replay): replay.fork samples continuations of a
 * stored trajectory (progress as `replay` events to the asking client), replay.forks lists them,
 * replay.drift checks stored ids against their re-rendered text.
 * Forks run one at a time (each loads its checkpoint).
 */
import type { Client, EngineHost } from './host';

export function registerReplay(engine: EngineHost): void {
  // The top-k look-ups keep one model loaded; released with the engine.
  // Live rollouts (engine/playground/live.ts) keep their model and environment until they end or close.
  let live: import('../playground/live').LiveRollouts | undefined;
  const lives = async () => (live ??= new (await import('../playground/live')).LiveRollouts(() => engine.store!, engine.opts.home));
  // The replay module loads on first use; closing releases its top-k model only when it was
  // loaded (importing it at close would load code after the host is gone).
  let replay: typeof import('../replay/replay') | undefined;
  const replayModule = async () => (replay ??= await import('../replay/replay'));
  engine.onClose(() => {
    void replay?.closeTopkModel();
    void live?.close();
  });
  engine.on('live.start', async (p) => (await lives()).start(p));
  engine.on('live.step', async (p) => (await lives()).step(p));
  engine.on('live.close', async (p) => {
    await (await lives()).close(p.sessionId);
    return null;
  });
  let chain: Promise<unknown> = Promise.resolve();
  engine.on('replay.fork', (p, client: Client) => {
    const run = chain.then(async () => {
      const { replayFork } = await replayModule();
      return replayFork(engine.store!, engine.opts.home, p, (e) => client.send({ event: 'replay', data: e }));
    });
    chain = run.catch(() => undefined);
    return run;
  });
  engine.on('replay.forks', (p) => engine.store!.forks(p));
  engine.on('replay.topk', async (p) => {
    const { topkAt } = await replayModule();
    return topkAt(engine.store!, engine.opts.home, p);
  });
  engine.on('replay.drift', async (p) => {
    if (!p.trajectoryId === !p.runId) throw new Error('replay.drift: give trajectoryId or runId (one of them)');
    const { trajectoryDrift, runDrift } = await replayModule();
    return p.trajectoryId
      ? { trajectory: await trajectoryDrift(engine.store!, engine.opts.home, p.trajectoryId) }
      : { run: await runDrift(engine.store!, engine.opts.home, p.runId!) };
  });
}
