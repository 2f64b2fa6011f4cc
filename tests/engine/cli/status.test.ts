/**
 * Run status is true from any process: `arbor train` owns its run (pid, host, heartbeat); kill -9
 * leaves it `interrupted` once anything opens the workspace again; `arbor serve` opened during a
 * CLI run leaves it alone; SIGHUP and a closed output pipe stop training with a checkpoint like
 * Ctrl-C; a second `--resume` while the first runs is refused naming the owner; `arbor show`
 * lists only checkpoints that exist; `--resume` of a finished run needs a larger `--steps`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { latestCheckpoint, listCheckpoints } from '../../../engine/train/checkpoints';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');

function workspace(steps: number, extra: string[] = []) {
  const home = mkdtempSync(join(tmpdir(), 'arbor-home-'));
  const dir = mkdtempSync(join(tmpdir(), 'arbor-status-'));
  const env = { ...process.env, ARBOR_HOME: home };
  const cfg = join(dir, 'c.yaml');
  writeFileSync(
    cfg,
    [
      'name: status',
      'model: { init: tiny }',
      `steps: ${steps}`,
      'threads: 1',
      'rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 12 }',
      'eval: { every: 0, n_questions: 2 }',
      ...extra,
    ].join('\n'),
  );
  const arbor = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env, timeout: 240_000 });
  const runs = () => {
    const r = arbor('runs', '--json');
    if (r.status !== 0) throw new Error(`arbor runs --json failed (${r.status ?? r.signal}): ${r.stderr}`);
    return JSON.parse(r.stdout) as { id: string; status: string; step: number; error?: string }[];
  };
  const runDir = join(dir, 'run');
  /** `arbor train` in the background, resolved once its first RL progress line is out. */
  const train = async (...args: string[]) => {
    const child = spawn(process.execPath, [bin, 'train', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = { stderr: '', stdout: '' };
    child.stdout!.on('data', (d) => (out.stdout += d));
    const exit = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    await new Promise<void>((resolve, reject) => {
      child.stderr!.on('data', (d) => {
        out.stderr += d;
        if (/^rl \d+\/\d+/m.test(out.stderr)) resolve();
      });
      void exit.then(() => reject(new Error(`train exited before its first step:\n${out.stderr}`)));
    });
    return { child, out, exit };
  };
  return { home, env, cfg, runDir, arbor, runs, train };
}

const exited = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.on('exit', () => r())));

describe('run status from any process', () => {
  it('kill -9: `arbor runs` shows the run interrupted (last step, checkpoint), and it resumes', async () => {
    const w = workspace(200, ['checkpoint: { every: 1, keep: 2 }']);
    const t = await w.train(w.cfg, '--run-dir', w.runDir);
    expect(w.runs().find((r) => r.id === 'run')?.status).toBe('running');
    t.child.kill('SIGKILL');
    await t.exit;
    const r = w.runs().find((x) => x.id === 'run')!;
    expect(r.status).toBe('interrupted');
    expect(r.error).toMatch(/ended without finishing; last step \d+, (last checkpoint at step \d+|no checkpoint yet)/);
    const ck = latestCheckpoint(w.runDir);
    const again = w.arbor('train', '--resume', w.runDir, '--steps', String((ck?.step ?? 0) + 1), '--json');
    expect(again.status, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout.trim().split('\n').pop()!)).toMatchObject({ firstStep: (ck?.step ?? 0) + 1, stopped: false });
    expect(w.runs().find((x) => x.id === 'run')).toMatchObject({ status: 'completed' });
  }, 300_000);

  it('`arbor serve` opened during a CLI run leaves it running; it ends completed with no error', async () => {
    const w = workspace(4);
    const t = await w.train(w.cfg, '--run-dir', w.runDir);
    // Hold the trainer still so it cannot finish before the engine has opened the workspace.
    t.child.kill('SIGSTOP');
    try {
      // --static: the engine alone (no workbench build on first use in this test).
      const serve = spawn(process.execPath, [bin, 'serve', '--port', '0', '--static', w.home], { env: w.env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      await new Promise<void>((resolve, reject) => {
        serve.stdout!.on('data', (d) => {
          out += d;
          if (/http:\/\/127\.0\.0\.1:\d+/.test(out)) resolve();
        });
        serve.on('exit', () => reject(new Error(`serve exited: ${out}`)));
      });
      const during = w.runs().find((r) => r.id === 'run')!;
      expect(during.status).toBe('running');
      expect(during.error).toBeUndefined();
      serve.kill('SIGTERM');
      await exited(serve);
    } finally {
      t.child.kill('SIGCONT');
    }
    expect(await t.exit, t.out.stderr).toBe(0);
    const after = w.runs().find((r) => r.id === 'run')!;
    expect(after).toMatchObject({ status: 'completed', step: 4 });
    expect(after.error).toBeUndefined();
  }, 300_000);

  it('a second --resume while the run trains is refused naming the owner; SIGHUP stops it with a checkpoint', async () => {
    const w = workspace(200);
    const t = await w.train(w.cfg, '--run-dir', w.runDir);
    const second = w.arbor('train', '--resume', w.runDir);
    expect(second.status).not.toBe(0);
    expect(second.stderr).toMatch(new RegExp(`run "run" is running in another process \\(pid ${t.child.pid} on `));
    t.child.kill('SIGHUP');
    expect(await t.exit, t.out.stderr).toBe(0);
    const ck = latestCheckpoint(w.runDir);
    const r = w.runs().find((x) => x.id === 'run')!;
    expect(r.status).toBe('stopped');
    expect(ck?.step).toBe(r.step);
    expect(ck!.step).toBeGreaterThan(0);
  }, 300_000);

  it('a closed output pipe stops training quietly with a checkpoint', async () => {
    const w = workspace(200);
    const t = await w.train(w.cfg, '--run-dir', w.runDir);
    // Like `arbor train … 2>&1 | head -1`: the reader goes away; the next progress line hits EPIPE.
    t.child.stdout!.destroy();
    t.child.stderr!.destroy();
    expect(await t.exit).toBe(0);
    const r = w.runs().find((x) => x.id === 'run')!;
    expect(r.status).toBe('stopped');
    expect(r.step).toBeLessThan(200);
    expect(latestCheckpoint(w.runDir)?.step).toBe(r.step);
  }, 300_000);

  it('`arbor show` lists only checkpoints that exist; --resume of a finished run needs a larger --steps; `arbor runs | head` ends quietly', () => {
    const w = workspace(3, ['checkpoint: { every: 1, keep: 1, keep_every: 0 }']);
    const r = w.arbor('train', w.cfg, '--run-dir', w.runDir, '--json');
    expect(r.status, r.stderr).toBe(0);
    expect(listCheckpoints(w.runDir).map((c) => c.step)).toEqual([3]);
    const show = JSON.parse(w.arbor('show', 'run', '--json').stdout) as { checkpoints: { step: number; path: string }[] };
    expect(show.checkpoints.map((c) => c.step)).toEqual([3]);
    expect(show.checkpoints.every((c) => existsSync(c.path))).toBe(true);

    const same = w.arbor('train', '--resume', w.runDir);
    expect(same.status).not.toBe(0);
    expect(same.stderr).toMatch(/run run already reached step 3 \(its config has steps: 3\); to train on, resume with --steps larger than 3/);
    const lower = w.arbor('train', '--resume', w.runDir, '--steps', '2');
    expect(lower.stderr).toMatch(/--steps 2 is not larger/);
    expect(w.runs().find((x) => x.id === 'run')?.status).toBe('completed');

    // A reader that closes early: no EPIPE stack trace, exit 0.
    const piped = spawnSync('sh', ['-c', `"${process.execPath}" "${bin}" runs --json | head -c 1`], { encoding: 'utf8', env: w.env });
    expect(piped.stderr).not.toMatch(/EPIPE|Error/);
  }, 300_000);

  it('a run whose input fails to load leaves no run row and no folder (store or --no-store)', () => {
    // The dataset exists (the config is valid) but its first line is not JSON: the task cannot be set up.
    const data = join(mkdtempSync(join(tmpdir(), 'arbor-data-')), 'bad.jsonl');
    writeFileSync(data, '{"question": "a"\n');
    const w = workspace(2, [`task: { kind: qa, dataset: ${data} }`]);
    const r = w.arbor('train', w.cfg, '--run-dir', w.runDir);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/bad\.jsonl:1: not valid JSON/);
    expect(w.runs().find((x) => x.id === 'run')).toBeUndefined();
    expect(existsSync(w.runDir)).toBe(false);
    const other = join(w.home, 'never');
    const n = w.arbor('train', w.cfg, '--run-dir', other, '--no-store');
    expect(n.status).not.toBe(0);
    expect(existsSync(other)).toBe(false);
  }, 300_000);
});
