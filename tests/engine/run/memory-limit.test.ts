// A tool call the sandbox cut off at its memory limit is contained (an error observation), and
// the run says so: a warn line in the run's log (store sink) and a count for the CLI's summary.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Trajectory } from '../../../engine/rollout/types';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';
import { memoryLimitWatcher } from '../../../engine/run/sinks';
import { storeSink } from '../../../engine/run/store-sink';
import { trajectoryToEpisode } from '../../../engine/train/trajectories';

const episode = (error?: string) => {
  const call = { name: 'hog', args: {}, result: `Error: ${error ?? 'none'}`, latencyMs: 3, ...(error ? { error, success: false } : {}) };
  const t: Trajectory = {
    taskId: 'q1',
    group: 0,
    sample: 0,
    promptIds: [1],
    promptText: 'q',
    turns: [{ role: 'model', tokenIds: [3, 4], text: '<tool>', logprobs: [-0.1, -0.2], entropy: [1, 1], lossMask: [1, 1], toolCalls: [call] }],
    outcome: { reward: 0, components: {}, exactMatch: false, formatOk: false, answer: '' },
    truncated: false,
    seed: 1,
    timings: { totalMs: 1, modelMs: 1, envMs: 0, prefillTokens: 1, generatedTokens: 2 },
  };
  return trajectoryToEpisode(t);
};

describe('tool calls over the sandbox memory limit', () => {
  it('are logged on the run and counted', async () => {
    const store = new Store(openDatabase(join(mkdtempSync(join(tmpdir(), 'arbor-mem-')), 'arbor.db')));
    const id = store.createRun({ name: 'r', status: 'running' });
    const sink = storeSink(store, id, { decode: String });
    const oom = episode('tools/hog.ts: exceeded the sandbox memory limit (64 MB)');
    await sink.trajectories!(3, [oom, episode()], new Map());
    sink.flush();
    expect(
      store
        .logs(id)
        .filter((l) => l.level === 'warn')
        .map((l) => l.text),
    ).toEqual(['step 3: 1 tool call(s) exceeded the sandbox memory limit (hog): tools/hog.ts: exceeded the sandbox memory limit (64 MB)']);
    const seen: number[] = [];
    const w = memoryLimitWatcher((step, hits) => seen.push(step, hits.length));
    await w.trajectories!(1, [episode()], new Map());
    await w.trajectories!(2, [oom, oom], new Map());
    expect(seen).toEqual([2, 2]);
    expect(w.count()).toBe(2);
  });
});
