// `arbor generate --config`: the prompt rendered as the config's episodes render it (its tools in
// its tool-call format, the chat template), on a model folder made for that config.
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(__dirname, '..', '..', '..');
const bin = join(root, 'bin', 'arbor.mjs');
const home = mkdtempSync(join(tmpdir(), 'arbor-generate-config-'));
const arbor = (...args: string[]) =>
  spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home, ARBOR_YES: '1' }, timeout: 240_000 });

describe('arbor generate --config', () => {
  it("renders the two-tool task's tools and Hermes format around the prompt", () => {
    const cfg = join(root, 'resources', 'configs', 'tools.yaml');
    const dir = join(home, 'tiny-tools');
    const init = arbor('init-model', '--tiny', '--config', cfg, dir, '--json');
    expect(init.status, init.stderr).toBe(0);
    const r = arbor('generate', dir, '--config', cfg, '--prompt', 'how old was ada when acme was founded ?', '--greedy', '--max-new', '4', '--json');
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { promptText: string; environment: { format: string; tools: string[] } };
    expect(out.environment).toEqual({ format: 'hermes', tools: expect.arrayContaining(['lookup', 'calculator']) });
    expect(out.promptText).toContain('<tools>');
    expect(out.promptText).toMatch(/<tools>[\s\S]*lookup[\s\S]*calculator/);
    expect(out.promptText).toContain('how old was ada when acme was founded ?');
    const both = arbor('generate', dir, '--config', cfg, '--prompt', 'x', '--chat');
    expect(both.stderr).toMatch(/--chat: with --config/);
  }, 240_000);
});
