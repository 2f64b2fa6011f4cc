/**
 * `arbor serve-model` as a process: prints its base URL on 127.0.0.1, requires the key, logs each
 * request without ever writing the key, and stops on SIGTERM.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { toolsModelFolder } from './helpers';

const root = join(__dirname, '..', '..', '..');
const home = mkdtempSync(join(tmpdir(), 'arbor-serve-model-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('arbor serve-model', () => {
  it('serves on 127.0.0.1 with a key it never logs', async () => {
    const folder = join(home, 'm');
    toolsModelFolder(folder);
    const key = 'sk-secret-value-42';
    const child = spawn(process.execPath, [join(root, 'bin', 'arbor.mjs'), 'serve-model', folder, '--api-key', key, '--device', 'cpu', '--threads', '1'], {
      env: { ...process.env, ARBOR_HOME: home },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', (c) => reject(new Error(`exited ${c}: ${stderr}`)));
      });
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
      expect((await fetch(`${url}/models`)).status).toBe(401);
      const ok = await fetch(`${url}/models`, { headers: { authorization: `Bearer ${key}` } });
      expect(((await ok.json()) as { data: { id: string }[] }).data[0]!.id).toBe('m');
      const r = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, temperature: 0 }),
      });
      expect(r.status).toBe(200);
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(stderr).toMatch(/POST \/v1\/chat\/completions 200/);
      expect(stderr).not.toContain(key);
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);
});
