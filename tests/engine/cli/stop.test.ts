// Ctrl-C during the SFT warm start of `arbor train`: the run is recorded as stopped (not
// completed), its SFT checkpoint says it is incomplete, and `--resume` finishes SFT from that step
// before RL.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { latestCheckpoint } from '../../../engine/train/checkpoints';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');

describe('arbor train: stop during the SFT warm start', () => {
  it('records the run as stopped and resume continues SFT where it stopped', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-home-'));
    const env = { ...process.env, ARBOR_HOME: home };
    const dir = mkdtempSync(join(tmpdir(), 'arbor-cli-'));
    const cfg = join(dir, 'c.yaml');
    const runDir = join(dir, 'run');
    // 20 demos in batches of 1 for 10 epochs: 200 SFT steps, far more than run before the signal lands.
    writeFileSync(
      cfg,
      [
        'name: cli-stop',
        'model: { init: tiny }',
        'steps: 1',
        'threads: 1',
        'rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 12 }',
        'sft: { warm_start: true, demos: 20, batch_size: 1, epochs: 10 }',
        'eval: { every: 0, n_questions: 2 }',
      ].join('\n'),
    );
    // Not a TTY: the progress bar prints one "sft k/total" line per step on stderr. The first one
    // means the Ctrl-C handler is installed and SFT is under way.
    const child = spawn(process.execPath, [bin, 'train', cfg, '--run-dir', runDir], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    child.stdout.on('data', (d) => (stdout += d));
    const code = await new Promise<number | null>((resolve) => {
      let sent = false;
      child.stderr.on('data', (d) => {
        stderr += d;
        if (!sent && /^sft \d+\/200/m.test(stderr)) {
          sent = true;
          child.kill('SIGINT');
        }
      });
      child.on('exit', (c) => resolve(c));
    });
    expect(code, stderr).toBe(0);
    const ck = latestCheckpoint(join(runDir, 'sft'))!;
    expect(ck.state).toMatchObject({ phase: 'sft', complete: false, total: 200 });
    expect(ck.step).toBeLessThan(200);
    expect(stdout).toContain('(stopped; `arbor train --resume run` continues it)');
    // One `arbor runs` listing per stage (each is a CLI start).
    type Row = { id: string; status: string; template: string; parentId?: string; step: number };
    const list = () => JSON.parse(spawnSync(process.execPath, [bin, 'runs', '--json'], { encoding: 'utf8', env }).stdout) as Row[];
    const stopped = list();
    expect(stopped.find((r) => r.id === 'run')?.status).toBe('stopped');
    // The SFT warm start is its own run, the parent, stopped with it.
    const sftId = stopped.find((r) => r.id === 'run')!.parentId!;
    expect(stopped.find((r) => r.id === sftId)).toMatchObject({ template: 'sft', status: 'stopped', step: ck.step });

    const again = spawnSync(process.execPath, [bin, 'train', '--resume', runDir, '--json'], { encoding: 'utf8', env, timeout: 240_000 });
    expect(again.status, again.stderr).toBe(0);
    const out = JSON.parse(again.stdout.trim().split('\n').pop()!) as {
      stopped: boolean;
      sft: { resumedFrom: number; steps: number; complete: boolean };
      lastStep: number;
    };
    expect(out.sft).toMatchObject({ resumedFrom: ck.step, steps: 200, complete: true });
    expect(out.lastStep).toBe(1);
    expect(out.stopped).toBe(false);
    const done = list();
    expect(done.find((r) => r.id === 'run')?.status).toBe('completed');
    // The resume continued that SFT run (no second one), to its end.
    expect(done.filter((r) => r.template === 'sft')).toEqual([expect.objectContaining({ id: sftId, status: 'completed', step: 200 })]);
    expect(done.find((r) => r.id === 'run')!.parentId).toBe(sftId);
  }, 300_000);
});
