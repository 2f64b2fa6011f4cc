import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { latestCheckpoint } from '../../../engine/train/checkpoints';
import { readMetricsJsonl } from '../../../engine/run/sinks';

const fixture = join(__dirname, 'fixtures', 'tabular-run.ts');
// node itself with the tsx loader (not the tsx CLI, whose wrapper process would take the SIGKILL
// while the training process lived on).
const node = (args: string[]) => [process.execPath, ['--import', 'tsx', ...args]] as const;

function runToEnd(dir: string, resume = false) {
  const r = spawnSync(...node([fixture, dir, resume ? 'resume' : 'fresh']), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`child failed: ${r.stderr}`);
}

/** Metrics that must be identical between an interrupted-and-resumed run and a clean one. */
function deterministic(values: Record<string, number>) {
  return Object.fromEntries(Object.entries(values).filter(([k]) => !k.startsWith('time/') && !k.startsWith('perf/')));
}

describe('resume after kill -9', () => {
  it('continues from the last checkpoint with no duplicated or missing metric steps, matching an uninterrupted run', async () => {
    const clean = mkdtempSync(join(tmpdir(), 'arbor-train-clean-'));
    runToEnd(clean);
    const cleanRows = readMetricsJsonl(join(clean, 'metrics.jsonl'));
    expect(cleanRows.map((r) => r.step)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);

    const dir = mkdtempSync(join(tmpdir(), 'arbor-train-kill-'));
    const child = spawn(...node([fixture, dir, 'fresh']), { env: { ...process.env, HANG_AT_STEP: '8' }, stdio: 'ignore' });
    const metricsFile = join(dir, 'metrics.jsonl');
    // Wait until step 7's metrics are written; the child then blocks inside step 8's rollout.
    await new Promise<void>((resolve, reject) => {
      const poll = setInterval(() => {
        const rows = readMetricsJsonl(metricsFile);
        if (rows.some((r) => r.step === 7)) {
          clearInterval(poll);
          resolve();
        }
      }, 25);
      child.on('exit', (code) => {
        clearInterval(poll);
        reject(new Error(`child exited early with ${code}`));
      });
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(latestCheckpoint(dir)?.step).toBe(5);
    expect(readMetricsJsonl(metricsFile).map((r) => r.step)).toEqual([1, 2, 3, 4, 5, 6, 7]);

    runToEnd(dir, true);
    const rows = readMetricsJsonl(metricsFile);
    expect(rows.map((r) => r.step)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    for (let i = 0; i < rows.length; i++) expect(deterministic(rows[i]!.values)).toEqual(deterministic(cleanRows[i]!.values));
    // keep: 2 → only the two newest checkpoints remain, no partial folders.
    expect(readdirSync(join(dir, 'checkpoints')).sort()).toEqual(['step-000010', 'step-000012']);
    expect(existsSync(join(dir, 'checkpoints', 'step-000012', 'trainer_state.json'))).toBe(true);
  });
});
