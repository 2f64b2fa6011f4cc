// Consent for programs from elsewhere: the CLI refuses to load an environment's tool/reward files
// or start its MCP servers that the workspace has not approved (no terminal: a message naming
// --yes), proceeds with --yes and remembers the approval per content hash; a changed file asks
// again. The unit part checks what is listed and hashed.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentItem, approve, configItems, ensureConsent, serverItem, setConsentAsker, unapproved, type ConsentRequest } from '../../../engine/env/consent';

const BIN = resolve(import.meta.dirname, '../../../bin/arbor.mjs');
let dir: string;
let home: string;
const saved = { home: process.env.ARBOR_HOME, yes: process.env.ARBOR_YES };

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'arbor-consent-'));
  home = join(dir, 'home');
  mkdirSync(join(dir, 'env', 'tools'), { recursive: true });
  mkdirSync(join(dir, 'env', 'rewards'), { recursive: true });
  writeFileSync(
    join(dir, 'env', 'tools', 'echo.ts'),
    `export const echo = { name: 'echo', description: 'echoes', parameters: { type: 'object', properties: { text: { type: 'string' } } }, execute: (a: { text: string }) => ({ content: a.text, success: true }) };\n`,
  );
  writeFileSync(join(dir, 'env', 'rewards', 'r.ts'), 'export const reward = () => 1;\n');
  process.env.ARBOR_HOME = join(dir, 'unit-home');
  delete process.env.ARBOR_YES;
});
afterAll(() => {
  setConsentAsker(null);
  process.env.ARBOR_HOME = saved.home;
  if (saved.yes !== undefined) process.env.ARBOR_YES = saved.yes;
  rmSync(dir, { recursive: true, force: true });
});

/** `arbor mcp serve --env <dir>` with stdin closed: loads the folder, then ends when its stdio input does. */
function serve(extra: string[] = []) {
  const env: Record<string, string | undefined> = { ...process.env, ARBOR_HOME: home };
  delete env.ARBOR_YES;
  return spawnSync(process.execPath, [BIN, 'mcp', 'serve', '--env', join(dir, 'env'), ...extra], { encoding: 'utf8', env, input: '', timeout: 120_000 });
}

describe('consent: the CLI', () => {
  it('refuses without a terminal naming --yes; --yes approves and is remembered; a changed file asks again', () => {
    const refused = serve();
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/has not approved/);
    expect(refused.stderr).toContain('tools/echo.ts');
    expect(refused.stderr).toContain('rewards/r.ts');
    expect(refused.stderr).toContain('--yes');
    const yes = serve(['--yes']);
    expect(yes.stderr).toMatch(/approved with --yes/);
    expect(yes.stderr).not.toMatch(/has not approved/);
    expect(Object.keys(JSON.parse(readFileSync(join(home, 'approvals.json'), 'utf8')).approved)).toHaveLength(2);
    // Remembered: no question the second time.
    const again = serve();
    expect(again.stderr).not.toMatch(/has not approved|approved with/);
    // A changed file is a new program.
    writeFileSync(join(dir, 'env', 'rewards', 'r.ts'), 'export const reward = () => 0.5;\n');
    const changed = serve();
    expect(changed.status).not.toBe(0);
    expect(changed.stderr).toContain('rewards/r.ts');
    expect(changed.stderr).not.toContain('tools/echo.ts');
  }, 240_000);
});

describe('consent: a config with an MCP server', () => {
  it('arbor train refuses to start the server without --yes; the command never runs', () => {
    const marker = join(dir, 'server-ran');
    writeFileSync(join(dir, 'tasks.jsonl'), JSON.stringify({ id: 't0', prompt: 'what is 1 plus 1 ?', answers: ['2'] }) + '\n');
    writeFileSync(
      join(dir, 'c.yaml'),
      [
        'model: { init: tiny }',
        'task: { kind: custom }',
        `environment: { format: hermes, tasks: tasks.jsonl, mcp_servers: { evil: { command: ${JSON.stringify(process.execPath)}, args: ["-e", ${JSON.stringify(`require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`)}] } } }`,
        'steps: 1',
      ].join('\n'),
    );
    const env: Record<string, string | undefined> = { ...process.env, ARBOR_HOME: join(dir, 'train-home') };
    delete env.ARBOR_YES;
    const r = spawnSync(process.execPath, [BIN, 'train', join(dir, 'c.yaml'), '--no-store'], { encoding: 'utf8', env, input: '', timeout: 120_000 });
    expect(r.status).not.toBe(0);
    // The config has no name: the prompt names its folder.
    expect(r.stderr).toContain(`the experiment in ${dir} would run programs this workspace has not approved`);
    expect(r.stderr).toMatch(/MCP server: evil: \S+ -e /);
    expect(r.stderr).toContain('--yes');
    expect(existsSync(marker)).toBe(false);
  }, 180_000);
});

describe('consent: a config with an agent program, and a group of runs', () => {
  const custom = (name: string, env: string) => {
    const rows = [1, 2, 3, 4, 5].map((n) => JSON.stringify({ id: `t${n}`, prompt: `what is ${n} plus 1 ?`, answers: [String(n + 1)] }));
    writeFileSync(join(dir, 'tasks5.jsonl'), rows.join('\n') + '\n');
    writeFileSync(join(dir, name), ['model: { init: tiny }', 'task: { kind: custom }', `environment: ${env}`, 'steps: 1'].join('\n'));
    return join(dir, name);
  };
  const run = (home: string, ...args: string[]) => {
    const env: Record<string, string | undefined> = { ...process.env, ARBOR_HOME: join(dir, home) };
    delete env.ARBOR_YES;
    return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env, input: '', timeout: 240_000 });
  };

  it('arbor train refuses to start environment.agent without --yes; the program never runs', () => {
    const marker = join(dir, 'agent-ran');
    writeFileSync(join(dir, 'agent.js'), `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran');\n`);
    const cfg = custom('agent.yaml', `{ format: hermes, tasks: tasks5.jsonl, agent: { command: [${JSON.stringify(process.execPath)}, agent.js] } }`);
    const r = run('agent-home', 'train', cfg, '--no-store');
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/would run programs this workspace has not approved/);
    expect(r.stderr).toMatch(/agent program \(runs as you, not sandboxed\): \S+ agent\.js in /);
    expect(existsSync(marker)).toBe(false);
  }, 120_000);

  it('arbor train --seeds asks once, before any run starts; with --yes its runs find the approval', () => {
    const cfg = custom('group.yaml', '{ format: hermes, tasks: tasks5.jsonl, tools: [env/tools/echo.ts] }');
    const refused = run('group-home', 'train', cfg, '--seeds', '0,1');
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/has not approved[\s\S]*tools\/echo\.ts/);
    expect(refused.stderr).not.toMatch(/seed 0: started/);
    const yes = run('group-home', 'train', cfg, '--seeds', '0', '--yes', '--json');
    expect(yes.status, yes.stderr).toBe(0);
    expect(yes.stderr.match(/approved with --yes/g)).toHaveLength(1);
    expect(yes.stderr).toMatch(/seed 0: finished/);
  }, 240_000);
});

describe('consent: what is asked', () => {
  it('lists an agent program: its argv, variables (names and values) and folder; its script by content', () => {
    const cwd = join(dir, 'agent-dir');
    mkdirSync(cwd, { recursive: true });
    writeFileSync(join(cwd, 'agent.py'), 'print(1)\n');
    const a = { command: ['python3', 'agent.py'], env: { TOKEN: 'secret' }, cwd };
    const [item] = configItems({ agent: a });
    expect(item!.kind).toBe('agent');
    expect(item!.label).toBe(`python3 agent.py with TOKEN=secret in ${cwd} (files: ${join(cwd, 'agent.py')})`);
    expect(item!.trusted).toBe(false);
    // Another value is another program (NODE_OPTIONS=--require=… would be).
    expect(agentItem({ ...a, env: { TOKEN: 'other' } }).hash).not.toBe(item!.hash);
    writeFileSync(join(cwd, 'agent.py'), 'print(2)\n');
    expect(agentItem(a).hash).not.toBe(item!.hash);
  });

  it('lists MCP servers (command, arguments, variables with values, folder), files and an outside workspace; hashes by content', async () => {
    const ws = join(dir, 'env');
    const items = configItems(
      { mcp_servers: { calc: { command: 'node', args: ['calc.js', '--x'], env: { API_KEY: 'secret' } } }, tools: ['tools/echo.ts'], workspace: ws },
      join(dir, 'elsewhere'),
    );
    expect(items.map((i) => i.kind)).toEqual(['mcp-server', 'tool', 'workspace']);
    expect(items[0]!.label).toBe(`calc: node calc.js --x with API_KEY=secret in ${ws}`);
    expect(serverItem('calc', { command: 'node', args: ['calc.js', '--x'], env: { API_KEY: 'secret' } }, ws).hash).toBe(items[0]!.hash);
    expect(serverItem('calc', { command: 'node', args: ['calc.js', '--x'], env: { API_KEY: 'other' } }, ws).hash).not.toBe(items[0]!.hash);
    expect(serverItem('calc', { command: 'node', args: ['calc.js', '--y'], env: { API_KEY: 'secret' } }, ws).hash).not.toBe(items[0]!.hash);
    // A workspace inside the config's folder needs no approval of its own (it is approved with the rest).
    const inside = configItems({ tools: ['tools/echo.ts'], workspace: ws }, dir);
    expect(inside.map((i) => [i.kind, !!i.implied])).toEqual([
      ['tool', false],
      ['workspace', true],
    ]);
    expect(unapproved(inside).map((i) => i.kind)).toEqual(['tool']);

    const asked: ConsentRequest[] = [];
    setConsentAsker(async (req) => (asked.push(req), req.origin !== 'no'));
    await expect(ensureConsent('no', items)).rejects.toThrow(/no: not approved, nothing was started/);
    await ensureConsent('yes', items);
    expect(unapproved(items)).toEqual([]);
    await ensureConsent('again', items);
    expect(asked.map((r) => r.origin)).toEqual(['no', 'yes']);
    approve([]);
  });

  it("McpToolSet.open (the playground's path for a stored run's servers) asks before the command runs", async () => {
    const { McpToolSet } = await import('../../../engine/env/mcp/client');
    const marker = join(dir, 'playground-server-ran');
    const servers = { stored: { command: process.execPath, args: ['-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`] } };
    const asked: string[] = [];
    setConsentAsker(async (req) => (asked.push(`${req.origin}: ${req.items.map((i) => i.label).join(', ')}`), false));
    await expect(McpToolSet.open(servers, { origin: 'the playground (checkpoint c1)' })).rejects.toThrow(/the playground \(checkpoint c1\): not approved/);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatch(/^the playground \(checkpoint c1\): stored: \S+ -e /);
    expect(existsSync(marker)).toBe(false);
  });
});
