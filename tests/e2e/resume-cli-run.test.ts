// A run `arbor train` started (a child process in the engine's workspace) and killed with -9 after
// its first checkpoint: the engine sees its owner gone and shows it interrupted; Resume in the
// workbench continues it in its own run folder from that checkpoint to completion.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { engineRequest, openBrowser, ROOT, screenshotIfFailed, shot, startEngine, type Browser, type Engine } from './harness';

let engine: Engine | undefined;
let browser: Browser | undefined;

afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  browser = engine = undefined;
});

async function req<T>(method: string, params?: unknown): Promise<T> {
  const r = await engineRequest(engine!, method, params);
  if (r.error) throw new Error(`${method}: ${r.error.message}`);
  return r.result as T;
}

const CONFIG = `name: kill-e2e
model: { init: tiny }
task: { kind: multihop }
steps: 6
rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 8 }
eval: { every: 0, n_questions: 2 }
checkpoint: { every: 2, keep: 3 }
`;

describe('resume a CLI run from the workbench', () => {
  it('a CLI-started run killed with -9 after a checkpoint is shown interrupted and Resume trains it to completion', async () => {
    engine = await startEngine();
    const cfgFile = join(engine.home, 'kill-e2e.yaml');
    writeFileSync(cfgFile, CONFIG);
    const child = spawn(process.execPath, [join(ROOT, 'bin/arbor.mjs'), 'train', cfgFile], {
      cwd: ROOT,
      env: { ...process.env, ARBOR_HOME: engine.home, ARBOR_YES: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    // Its first checkpoint (step 2) on disk and in the store, then kill -9.
    const runs = join(engine.home, 'runs');
    await expect
      .poll(
        () => {
          if (child.exitCode !== null) throw new Error(`arbor train ended before its first checkpoint:\n${out}`);
          const id = existsSync(runs) ? readdirSync(runs).find((d) => d.startsWith('kill-e2e')) : undefined;
          return id && existsSync(join(runs, id, 'checkpoints', 'step-000002')) ? id : undefined;
        },
        { timeout: 90_000, interval: 100 },
      )
      .toBeDefined();
    const runId = readdirSync(runs).find((d) => d.startsWith('kill-e2e'))!;
    child.kill('SIGKILL');
    await exited;
    const before = await req<{ status: string; step: number; checkpoints: { step: number }[] }>('runs.get', { id: runId });
    expect(before.step).toBeLessThan(6);

    browser = await openBrowser();
    const page = browser.page;
    await page.goto(engine.url);
    await page.getByTestId('nav-runs').click();
    const row = page.locator(`[data-testid="run-row"][data-run-id="${runId}"]`);
    // The engine's heartbeat finds the dead owner: interrupted, resumable.
    await row.getByTestId('run-status').getByText('interrupted').waitFor({ timeout: 30_000 });
    await shot(page, 'resume-cli-interrupted');
    await row.getByRole('button', { name: 'Resume' }).click();
    await row.getByTestId('run-status').getByText('completed').waitFor({ timeout: 120_000 });
    await shot(page, 'resume-cli-completed');

    const after = await req<{ status: string; step: number; checkpoints: { step: number }[]; trajectorySteps: number[] }>('runs.get', { id: runId });
    expect(after).toMatchObject({ status: 'completed', step: 6 });
    // Steps after the checkpoint it resumed from: checkpoints at 4 and 6 in the run's own folder and
    // in the store, and trajectories of steps past the kill.
    expect(existsSync(join(runs, runId, 'checkpoints', 'step-000006'))).toBe(true);
    expect(after.checkpoints.map((c) => c.step)).toEqual(expect.arrayContaining([4, 6]));
    expect(Math.max(...after.trajectorySteps)).toBe(6);
    // It continued from the checkpoint (not from step 0), through the CLI resume job in the run's folder.
    const log = (await req<{ text: string }[]>('runs.log', { runId })).map((l) => l.text).join('\n');
    expect(log).toContain(`resumed from the workbench (${join(runs, runId)})`);
    expect(log).toMatch(/resumed: \{"fromStep":[24]/);
    expect(browser.errors).toEqual([]);
  }, 240_000);
});
