// Acceptance: `arbor train <config> --steps 2 --json` with a researcher's own environment: two
// tools with any names (calculator, lookup; the lookup reads its facts from the workspace through
// ctx.readFile), a reward file (whole episode in, components and per-call steps out) and a task
// file, in format hermes and in format tags. The run trains its SFT warm start and 2 RL steps and
// stores its trajectories with the reward file's components and the calls parsed into the
// config's tools; what the tiny model calls after a short SFT is not asserted (it depends on the
// CPU's rounding and on the tokenizer: docs/areas/tooling.md, "Tests pass on every CPU"). That
// both tools are called through the sandbox, in the format, is checked with the task file's
// scripted expert (`arbor rollout --policy expert`). (~20 s of CPU per format; longer on a loaded machine.)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';

const home = mkdtempSync(join(tmpdir(), 'arbor-open-env-'));
const fixtures = join(__dirname, 'fixtures', 'open-env');
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe("arbor train with the researcher's own tools, reward and tasks", () => {
  for (const format of ['hermes', 'tags'])
    it(`format ${format}: trains 2 steps and stores its trajectories with the reward's components; the expert calls both tools`, () => {
      const r = spawnSync(
        process.execPath,
        [join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs'), 'train', join(fixtures, `${format}.yaml`), '--steps', '2', '--json'],
        {
          encoding: 'utf8',
          env: { ...process.env, ARBOR_HOME: home },
          timeout: 400_000,
        },
      );
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string; lastStep: number; eval: Record<string, number> };
      expect(out.lastStep).toBe(2);
      const store = new Store(openDatabase(join(home, 'arbor.db')));
      try {
        const stored = store.searchTrajectories({ runId: out.run });
        expect(stored.length).toBeGreaterThanOrEqual(2 * 2 * 2); // 2 steps × 2 prompts × 2 samples
        // Every call that ran is one of the config's tools (any other name is an error observation).
        const calls = stored.flatMap((t) => store.getTrajectory(t.id).turnsData.flatMap((u) => u.toolCalls as { name: string; error?: string }[]));
        for (const c of calls.filter((x) => !x.error)) expect(['calculator', 'lookup']).toContain(c.name);
        // The reward file's components are stored with every trajectory.
        for (const t of stored)
          expect(Object.keys((t.outcomeData as { components: Record<string, number> }).components)).toEqual(
            expect.arrayContaining(['user_reward', 'used_both', 'level']),
          );
      } finally {
        store.db.close();
      }
      // The scripted expert through the same environment: both tools called in the format, no tool error.
      const file = join(home, `expert-${format}.jsonl`);
      const e = spawnSync(
        process.execPath,
        [
          join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs'),
          'rollout',
          '--config',
          join(fixtures, `${format}.yaml`),
          '--policy',
          'expert',
          '--questions',
          '6',
          '--n',
          '1',
          '--out',
          file,
          '--json',
        ],
        { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 120_000 },
      );
      expect(e.status, e.stderr).toBe(0);
      const episodes = readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { turns: { role: string; text: string }[] });
      const modelText = episodes.flatMap((ep) => ep.turns.filter((u) => u.role === 'model').map((u) => u.text)).join('\n');
      const called = format === 'hermes' ? /\{"name":\s*"(\w+)",\s*"arguments"/g : /<(calculator|lookup)>/g;
      expect(new Set([...modelText.matchAll(called)].map((m) => m[1]))).toEqual(new Set(['calculator', 'lookup']));
      const observations = episodes.flatMap((ep) => ep.turns.filter((u) => u.role !== 'model').map((u) => u.text)).join('\n');
      expect(observations).not.toMatch(/error|no facts/i);
    }, 400_000);
});
