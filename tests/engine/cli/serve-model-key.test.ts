/**
 * `arbor serve-model` without a key generates one and prints it (issue 37, item 8): requests
 * without it are refused; `--no-key` opts out; `--no-key` with `--api-key` is refused.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { toolsModelFolder } from '../openai/helpers';

const root = join(__dirname, '..', '..', '..');
const home = mkdtempSync(join(tmpdir(), 'arbor-serve-key-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

async function serve(folder: string, extra: string[]): Promise<{ url: string; stderr: () => string; stop: () => void }> {
  const env: Record<string, string | undefined> = { ...process.env, ARBOR_HOME: home };
  delete env.ARBOR_API_KEY;
  const child = spawn(process.execPath, [join(root, 'bin', 'arbor.mjs'), 'serve-model', folder, '--device', 'cpu', '--threads', '1', ...extra], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (c) => reject(new Error(`exited ${c}: ${stderr}`)));
  });
  return { url, stderr: () => stderr, stop: () => child.kill('SIGKILL') };
}

describe('arbor serve-model keys', () => {
  it('generates and prints a key when none is given; --no-key serves without one', async () => {
    const folder = join(home, 'm');
    toolsModelFolder(folder);
    const a = await serve(folder, []);
    try {
      const key = /API key \(generated[^)]*\): (\S+)/.exec(a.stderr())?.[1];
      expect(key).toMatch(/^arbor-[\w-]{32}$/);
      expect((await fetch(`${a.url}/models`)).status).toBe(401);
      expect((await fetch(`${a.url}/models`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    } finally {
      a.stop();
    }
    const b = await serve(folder, ['--no-key']);
    try {
      expect(b.stderr()).toMatch(/with no API key \(--no-key\)/);
      expect((await fetch(`${b.url}/models`)).status).toBe(200);
    } finally {
      b.stop();
    }
    const both = spawnSync(process.execPath, [join(root, 'bin', 'arbor.mjs'), 'serve-model', folder, '--no-key', '--api-key', 'x'], {
      encoding: 'utf8',
      env: { ...process.env, ARBOR_HOME: home },
    });
    expect(both.status).not.toBe(0);
    expect(both.stderr).toMatch(/--no-key and --api-key contradict/);
  }, 120_000);
});
