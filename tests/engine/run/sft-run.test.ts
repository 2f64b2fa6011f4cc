// The SFT warm start recorded as its own run (issue 40): an SFT-warm-start job yields two runs in the
// workspace store, the RL run's parent being the SFT run, which holds the SFT curve, checkpoints and end
// status; the RL run keeps the checkpoint RL starts from (step 0) and the "before RL" evaluation
// (sft/eval/*). A resume never records a second SFT run, and a resume that skips a finished SFT keeps
// the link. Runner + store level, through the same openSftRun the CLI and the run manager use.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../engine/config/experiment';
import { runExperiment } from '../../../engine/run/runner';
import { isSftWarmStart, openSftRun, SFT_WARM_START_TAG, storeSink } from '../../../engine/run/store-sink';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';
import { RunManager } from '../../../engine/server/runs';
import { TabularPolicy, tabularSession } from '../train/tabular';

const cfg = validateConfig({
  model: { init: 'tiny' },
  steps: 3,
  rollout: { prompts_per_step: 4, n: 4 },
  sft: { warm_start: true, epochs: 2, lr: 0.05, batch_size: 16 },
  optim: { lr: 0.05 },
  checkpoint: { every: 3, keep: 2 },
  eval: { every: 0, n_questions: 16 },
});
const total = 2 * Math.ceil(120 / 16); // 16 SFT steps

const session = (policy: TabularPolicy) => tabularSession(policy, cfg);

function workspace() {
  const store = new Store(openDatabase(join(mkdtempSync(join(tmpdir(), 'arbor-sftrun-')), 'arbor.db')));
  const runDir = mkdtempSync(join(tmpdir(), 'arbor-sftrun-dir-'));
  return { store, runDir };
}

/** The job as `arbor train` runs it on a store run: stopped after SFT step `stopSft` or RL step `stopRl`. */
async function job(store: Store, runId: string, runDir: string, o: { resume?: boolean; stopSft?: number; stopRl?: number; legacy?: boolean } = {}) {
  const ac = new AbortController();
  const sink = storeSink(store, runId, { decode: () => '' });
  const res = await runExperiment(cfg, {
    runDir,
    session: session(new TabularPolicy({ prompts: 4, length: 3, vocab: 5, seed: 1 }, cfg)),
    sink,
    resume: o.resume,
    signal: ac.signal,
    sftRun: o.legacy ? undefined : (so) => openSftRun(store, runId, so),
    onStep: (p, s) => {
      if ((p === 'sft' && s === o.stopSft) || (p === 'rl' && s === o.stopRl)) ac.abort();
    },
  });
  sink.flush();
  return res;
}

const sftRuns = (store: Store) => store.listRuns({ tag: SFT_WARM_START_TAG });

describe('the SFT warm start as its own run', () => {
  it('two runs: the RL run\u2019s parent is the SFT run, which holds the SFT curve, its checkpoint and its end; the RL run keeps step 0 and sft/eval', async () => {
    const { store, runDir } = workspace();
    const rl = store.createRun({ name: 'story', template: 'multihop', config: cfg as unknown as Record<string, unknown>, seed: 7, project: 'p' });
    const res = await job(store, rl, runDir);
    expect(res.stopped).toBe(false);

    const runs = store.listRuns();
    expect(runs).toHaveLength(2);
    const r = store.getRun(rl);
    const sft = store.getRun(r.parentId!);
    expect(res.sft!.runId).toBe(sft.id);
    expect(sft.id).toBe(`sft-${rl}`);
    expect(isSftWarmStart(sft)).toBe(true);
    expect(sft).toMatchObject({ name: 'story · SFT', template: 'sft', status: 'completed', step: total, seed: 7, project: 'p', parentId: null });
    expect(sft.config).toEqual(r.config);
    expect(store.runFolder(sft.id)).toBe(join(runDir, 'sft'));
    // Its curve, at SFT steps 1…total (loss, learning rate, throughput), and its checkpoint.
    expect(store.metricSeries(sft.id, 'sft/loss').step).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(store.metricKeys(sft.id)).toEqual(expect.arrayContaining(['sft/loss', 'sft/lr', 'sft/tokens_per_s']));
    expect(store.checkpoints(sft.id).map((c) => c.step)).toEqual([total]);
    expect(
      store
        .logs(sft.id)
        .map((l) => l.text)
        .join('\n'),
    ).toContain('sft_done');
    // One source of truth: the curve is not on the RL run; the RL run keeps what RL needs of the SFT.
    expect(store.metricKeys(rl).filter((k) => k.startsWith('sft/') && !k.startsWith('sft/eval/'))).toEqual([]);
    expect(store.metricKeys(rl)).toContain('sft/eval/exact_match');
    expect(store.metricSeries(rl, 'sft/eval/exact_match').step).toEqual([total]);
    expect(store.checkpoints(rl)[0]).toMatchObject({ step: 0, path: store.checkpoints(sft.id)[0]!.path });
    expect(r.step).toBe(3);
    // Deleting the SFT run leaves the RL run, unlinked.
    store.deleteRun(sft.id);
    expect(store.getRun(rl).parentId).toBeNull();
  });

  it('a stop during SFT leaves the SFT run stopped; resume continues it (no second SFT run); a later resume that skips the finished SFT keeps the link', async () => {
    const { store, runDir } = workspace();
    const rl = store.createRun({ name: 'resumed', template: 'multihop', config: cfg as unknown as Record<string, unknown> });
    const r1 = await job(store, rl, runDir, { stopSft: 5 });
    expect(r1.stopped).toBe(true);
    const sftId = store.getRun(rl).parentId!;
    expect(store.getRun(sftId)).toMatchObject({ status: 'stopped', step: 5 });

    // Stopped again at SFT's last step: SFT finished, RL never started.
    const r2 = await job(store, rl, runDir, { resume: true, stopSft: total });
    expect(r2.sft).toMatchObject({ runId: sftId, resumedFrom: 5, complete: true });
    expect(sftRuns(store).map((r) => r.id)).toEqual([sftId]);
    expect(store.getRun(sftId)).toMatchObject({ status: 'completed', step: total });
    expect(store.metricSeries(sftId, 'sft/loss').step).toEqual(Array.from({ length: total }, (_, i) => i + 1));

    expect(r2.rl).toBeUndefined();
    // The resume finds the finished SFT and skips it; then an RL resume: the link stays, no other SFT run.
    const r3 = await job(store, rl, runDir, { resume: true, stopRl: 2 });
    expect(r3.sft).toMatchObject({ skipped: 'resumed' });
    expect(r3.sft!.runId).toBeUndefined();
    const r4 = await job(store, rl, runDir, { resume: true });
    expect(r4.sft).toBeUndefined();
    expect(r4.rl!.lastStep).toBe(3);
    expect(store.listRuns()).toHaveLength(2);
    expect(store.getRun(rl).parentId).toBe(sftId);
    expect(store.getRun(sftId).status).toBe('completed');
    expect(store.metricSeries(sftId, 'sft/loss').step).toHaveLength(total);
  });

  it("a fork's SFT run takes the fork's origin as its parent; a run recorded before SFT runs existed keeps its curve on itself", async () => {
    const { store, runDir } = workspace();
    const origin = store.createRun({ name: 'origin', template: 'multihop', config: {} });
    const fork = store.createRun({ name: 'origin-fork', template: 'multihop', config: cfg as unknown as Record<string, unknown>, parentId: origin });
    await job(store, fork, runDir, { stopSft: 3 });
    const sft = store.getRun(store.getRun(fork).parentId!);
    expect(sft.name).toBe('origin-fork · SFT');
    expect(sft.parentId).toBe(origin);

    // Legacy: SFT stopped with its curve on the run itself (no SFT run); the resume goes on there.
    const b = workspace();
    const old = b.store.createRun({ name: 'old', template: 'multihop', config: cfg as unknown as Record<string, unknown> });
    await job(b.store, old, b.runDir, { stopSft: 3, legacy: true });
    await job(b.store, old, b.runDir, { resume: true, stopRl: 1 });
    expect(b.store.listRuns()).toHaveLength(1);
    expect(b.store.metricSeries(old, 'sft/loss').step).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  });

  it('the run manager refuses to resume an SFT warm start on its own, naming the RL run to resume', () => {
    const { store, runDir } = workspace();
    const rl = store.createRun({ name: 'rl', template: 'multihop', config: {} });
    const rec = openSftRun(store, rl, { dir: join(runDir, 'sft'), resume: false })!;
    rec.finish('stopped');
    const m = new RunManager(store, runDir, { recover: false });
    try {
      expect(() => m.resume(rec.id)).toThrow(`run "${rec.id}" is the SFT warm start of run "${rl}": resume that run to continue it`);
    } finally {
      m.close();
    }
  });
});
