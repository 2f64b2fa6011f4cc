/**
 * The workbench's file API (`env.read` / `env.write` over the engine protocol) refuses symlinks
 * that leave the workspace, for reading and for writing, and still reads and writes ordinary
 * files (and symlinks that stay inside).
 */
import { describe, expect, it } from 'vitest';
import { linkSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EngineServer } from '../../../engine/server/server';
import { createClient, inProcessTransport } from '../../../engine/server/client';

function setup() {
  const home = mkdtempSync(join(tmpdir(), 'arbor-wsf-'));
  const outside = mkdtempSync(join(tmpdir(), 'arbor-outside-'));
  writeFileSync(join(outside, 'secret.txt'), 'TOP SECRET');
  const ws = join(home, 'workspace');
  mkdirSync(join(ws, 'tools'), { recursive: true });
  mkdirSync(join(ws, 'rewards'), { recursive: true });
  writeFileSync(join(ws, 'tools', 'ok.ts'), 'export const ok = 1;');
  writeFileSync(join(ws, 'notes.txt'), 'inside the workspace');
  symlinkSync(join(outside, 'secret.txt'), join(ws, 'tools', 'leak.ts'));
  symlinkSync(outside, join(ws, 'tools', 'out'));
  symlinkSync(outside, join(ws, 'envs'));
  symlinkSync(join(ws, 'tools', 'ok.ts'), join(ws, 'rewards', 'same.ts'));
  symlinkSync(join(ws, 'notes.txt'), join(ws, 'tools', 'notes.ts'));
  linkSync(join(outside, 'secret.txt'), join(ws, 'tools', 'hard.ts'));
  const engine = new EngineServer({ home });
  const client = createClient(inProcessTransport(engine));
  return { engine, client, ws, outside };
}

describe('env.read / env.write and symlinks', () => {
  it('writes into a workspace folder that does not exist yet', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-wsf-fresh-'));
    const engine = new EngineServer({ home });
    try {
      const client = createClient(inProcessTransport(engine));
      await client.request('env.write', { path: 'tools/first.ts', text: 'export {};' });
      expect(readFileSync(join(home, 'workspace', 'tools', 'first.ts'), 'utf8')).toBe('export {};');
      expect((await client.request('env.files')).map((f) => f.path)).toEqual(['tools/first.ts']);
    } finally {
      engine.close();
    }
  });
  it('refuses to read through a symlink that leaves the workspace (file or folder)', async () => {
    const { engine, client } = setup();
    try {
      await expect(client.request('env.read', { path: 'tools/leak.ts' })).rejects.toThrow(/tools\/leak\.ts" leads outside the workspace/);
      await expect(client.request('env.read', { path: 'tools/out/secret.txt' })).rejects.toThrow(/leads outside the workspace/);
      await expect(client.request('env.read', { path: 'envs/secret.txt' })).rejects.toThrow(/leads outside the workspace/);
      await expect(client.request('env.read', { path: 'tools/../../../etc/passwd' })).rejects.toThrow(/must be inside tools\/, rewards\/ or envs\//);
      // ordinary files, and links that stay inside, still read
      expect(await client.request('env.read', { path: 'tools/ok.ts' })).toBe('export const ok = 1;');
      expect(await client.request('env.read', { path: 'rewards/same.ts' })).toBe('export const ok = 1;');
      expect(await client.request('env.read', { path: 'tools/notes.ts' })).toBe('inside the workspace');
      const listed = (await client.request('env.files')).map((f) => f.path);
      expect(listed).toContain('tools/ok.ts');
      expect(listed).not.toContain('tools/leak.ts');
    } finally {
      engine.close();
    }
  });
  it('refuses to write through a symlink or hard link, or into a linked folder outside, and leaves the outside file as it was', async () => {
    const { engine, client, ws, outside } = setup();
    try {
      await expect(client.request('env.write', { path: 'tools/leak.ts', text: 'OVERWRITTEN' })).rejects.toThrow(/symlink/);
      await expect(client.request('env.write', { path: 'tools/out/secret.txt', text: 'OVERWRITTEN' })).rejects.toThrow(/leads outside the workspace/);
      await expect(client.request('env.write', { path: 'tools/out/new/deep.ts', text: 'x' })).rejects.toThrow(/leads outside the workspace/);
      await expect(client.request('env.write', { path: 'envs/planted.ts', text: 'x' })).rejects.toThrow(/leads outside the workspace/);
      await expect(client.request('env.write', { path: 'tools/hard.ts', text: 'OVERWRITTEN' })).rejects.toThrow(/hard link/);
      expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET');
      expect(() => readFileSync(join(outside, 'planted.ts'))).toThrow();
      expect(() => readFileSync(join(outside, 'new', 'deep.ts'))).toThrow();
      // ordinary writes work, new folders included
      await client.request('env.write', { path: 'tools/new.ts', text: 'export const n = 2;' });
      await client.request('env.write', { path: 'rewards/sub/r.ts', text: 'export const r = 3;' });
      expect(readFileSync(join(ws, 'tools', 'new.ts'), 'utf8')).toBe('export const n = 2;');
      expect(readFileSync(join(ws, 'rewards', 'sub', 'r.ts'), 'utf8')).toBe('export const r = 3;');
      await client.request('env.write', { path: 'tools/ok.ts', text: 'short' });
      expect(readFileSync(join(ws, 'tools', 'ok.ts'), 'utf8')).toBe('short');
    } finally {
      engine.close();
    }
  });
});
