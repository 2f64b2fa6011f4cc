// Acceptance: `arbor train <config> --steps 2 --json` with a researcher's own environment: two
// tools with any names (calculator, lookup; the lookup reads its facts from the workspace through
// ctx.readFile), a reward file (whole episode in, components and per-call steps out) and a task
// file, in format hermes and in format tags. The tiny model (byte-level tokenizer) learns the
// format from the task file's demonstrations in the SFT warm start; the stored trajectories of the
// RL steps hold calls to both tools. (~20 s of CPU per format; longer on a loaded machine.)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
    it(`format ${format}: trains 2 steps; stored trajectories call both tools`, () => {
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
        const calls = store
          .searchTrajectories({ runId: out.run })
          .flatMap((t) => store.getTrajectory(t.id).turnsData.flatMap((u) => u.toolCalls as { name: string; error?: string }[]));
        const names = new Set(calls.filter((c) => !c.error).map((c) => c.name));
        expect(names).toContain('calculator');
        expect(names).toContain('lookup');
        // The reward file's components are stored with every trajectory.
        const t = store.searchTrajectories({ runId: out.run })[0]!;
        expect(Object.keys((t.outcomeData as { components: Record<string, number> }).components)).toEqual(
          expect.arrayContaining(['user_reward', 'used_both', 'level']),
        );
      } finally {
        store.db.close();
      }
    }, 400_000);
});
