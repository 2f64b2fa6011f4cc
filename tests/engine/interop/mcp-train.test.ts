/**
 * environment.mcp_servers in an experiment config: `arbor train` starts the server once for the
 * run (its tools join the environment: the SFT warm start's demonstrations call them through
 * ToolEnv), and the process is gone when the run ends. Bad server entries are refused naming the field.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, validateConfig } from '../../../engine/config/experiment';

const here = dirname(fileURLToPath(import.meta.url));
const BIN = join(here, '../../../bin/arbor.mjs');
const SERVER = join(here, 'fixtures/test-mcp-server.mjs');

describe('environment.mcp_servers', () => {
  it('arbor train: the server starts once, its tool serves the episodes, and it is closed at the end of the run', () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-mcp-train-'));
    const log = join(dir, 'calls.log');
    const tasks = [
      [2, 3],
      [4, 4],
      [1, 6],
      [3, 3],
      [2, 7],
      [5, 1],
    ].map(([a, b], i) =>
      JSON.stringify({
        id: `t${i}`,
        prompt: `what is ${a} plus ${b} ?`,
        answers: [String(a! + b!)],
        meta: { demo: [{ calls: [{ name: 'add', args: { a, b } }] }, { answer: String(a! + b!) }] },
      }),
    );
    writeFileSync(join(dir, 'tasks.jsonl'), tasks.join('\n') + '\n');
    writeFileSync(
      join(dir, 'mcp.json'),
      JSON.stringify({ mcpServers: { calc: { command: process.execPath, args: [SERVER], tools: ['add'], env: { ARBOR_TEST_CALL_LOG: log } } } }),
    );
    writeFileSync(
      join(dir, 'c.yaml'),
      [
        'model: { init: tiny }',
        'task: { kind: custom }',
        'environment: { format: hermes, tasks: tasks.jsonl, mcp_servers: mcp.json }',
        'steps: 1',
        'rollout: { prompts_per_step: 1, n: 2, max_turns: 3, max_new_tokens: 48, max_total_length: 512 }',
        'sft: { warm_start: true, demos: 4, epochs: 1, batch_size: 4 }',
        'eval: { every: 0, n_questions: 1 }',
        'checkpoint: { every: 1, keep: 1 }',
      ].join('\n'),
    );
    const r = spawnSync(process.execPath, [BIN, 'train', join(dir, 'c.yaml'), '--json', '--no-store'], {
      encoding: 'utf8',
      env: { ...process.env, ARBOR_HOME: join(dir, 'home') },
      timeout: 240_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/mcp: server "calc" started/);
    const lines = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(' '));
    const pids = new Set(lines.map(([pid]) => pid));
    expect(pids.size).toBe(1);
    expect(lines.filter(([, what]) => what === 'start')).toHaveLength(1);
    expect(lines.filter(([, what]) => what === 'add').length).toBeGreaterThanOrEqual(4);
    // closed with the run: no process left behind
    expect(() => process.kill(Number([...pids][0]), 0)).toThrow();

    // arbor rollout --config starts the same servers for the rollout (they were ignored there)
    // and closes them at its end; the expert's calls reach the server's tool.
    const out = join(dir, 'rollout.jsonl');
    const ro = spawnSync(
      process.execPath,
      [BIN, 'rollout', '--config', join(dir, 'c.yaml'), '--policy', 'expert', '--n', '1', '--questions', '2', '--out', out, '--json'],
      {
        encoding: 'utf8',
        env: { ...process.env, ARBOR_HOME: join(dir, 'home') },
        timeout: 240_000,
      },
    );
    expect(ro.status, ro.stderr).toBe(0);
    expect(ro.stderr).toMatch(/mcp: server "calc" started/);
    const calls = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .flatMap((l) =>
        (JSON.parse(l) as { turns: { toolCalls?: { name: string; success?: boolean; error?: string }[] }[] }).turns.flatMap((t) => t.toolCalls ?? []),
      );
    expect(calls.filter((c) => c.name === 'add' && !c.error).length).toBeGreaterThanOrEqual(2);
    const after = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(' '));
    const rolloutPids = new Set(after.slice(lines.length).map(([pid]) => pid));
    expect(rolloutPids.size).toBe(1);
    expect(() => process.kill(Number([...rolloutPids][0]), 0)).toThrow();
  }, 300_000);

  it('accepts the mcpServers layout inline or as a file, and names the field of a bad entry', () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-mcp-cfg-'));
    const base = { model: { init: 'tiny' }, task: { kind: 'multihop' } };
    const inline = validateConfig(
      { ...base, environment: { format: 'hermes', mcp_servers: { s: { command: 'node', args: ['x.js'], cwd: 'srv' } } } },
      { baseDir: dir, checkFiles: false },
    );
    expect(inline.environment.mcp_servers).toEqual({ s: { command: 'node', args: ['x.js'], cwd: join(dir, 'srv'), timeout_ms: 30_000 } });
    writeFileSync(join(dir, 'm.json'), JSON.stringify({ mcpServers: { s: { command: 'node', arg: [] } } }));
    const bad = () => validateConfig({ ...base, environment: { mcp_servers: 'm.json' } }, { baseDir: dir, checkFiles: false });
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/m\.json: mcpServers\.s\.arg: unknown field "arg"/);
    expect(() => validateConfig({ ...base, environment: { mcp_servers: { s: { args: [] } } } }, { checkFiles: false })).toThrow(
      /environment\.mcp_servers\.s\.command: required/,
    );
    expect(() => validateConfig({ ...base, environment: { mcp_servers: 'nope.json' } }, { baseDir: dir, checkFiles: false })).toThrow(
      /environment\.mcp_servers: cannot read .*nope\.json/,
    );
  });
});
