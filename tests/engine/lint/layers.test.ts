// The engine's tiers (docs/ARCHITECTURE.md §2) is checked by ESLint (scripts/eslint-layers.mjs,
// wired in eslint.config.js, run by `npm test`): these lint scratch files inside engine/ with the
// project's own config and expect the layering rules to fire.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { TIERS } from '../../../scripts/eslint-layers.mjs';

const root = resolve(import.meta.dirname, '../../..');
const eslint = new ESLint({ cwd: root });

async function lint(file: string, text: string) {
  const [r] = await eslint.lintText(text, { filePath: join(root, file) });
  return r!.messages.filter((m) => m.ruleId?.startsWith('arbor/'));
}

describe('engine layering lint', () => {
  it('fails on an import from a higher tier, naming both folders and tiers', async () => {
    const msgs = await lint('engine/rl/scratch-upward.ts', "import { openTaskKit } from '../tasks/registry';\nexport const x = openTaskKit;\n");
    expect(msgs).toHaveLength(1);
    expect(msgs[0]!.ruleId).toBe('arbor/layers');
    expect(msgs[0]!.message).toContain('engine/rl/ must not import engine/tasks/');
    expect(msgs[0]!.message).toContain("tasks/ is in the tasks tier, above rl/'s learn tier");
  });

  it('fails on an import between two features (siblings), in either direction', async () => {
    const a = await lint('engine/interop/scratch-sibling.ts', "import { runAblation } from '../recipes/ablation';\nexport const x = runAblation;\n");
    const b = await lint('engine/replay/scratch-sibling.ts', "export type P = import('../playground/playground').Playground;\n");
    expect([...a, ...b].map((m) => m.ruleId)).toEqual(['arbor/layers', 'arbor/layers']);
    expect(a[0]!.message).toContain('interop/ and recipes/ are sibling features');
    expect(b[0]!.message).toContain('replay/ and playground/ are sibling features');
  });

  it('allows a feature to import the tiers below it, and a host to import features', async () => {
    const f = await lint(
      'engine/recipes/scratch-down.ts',
      "import { runExperiment } from '../run/runner';\nimport { openTaskKit } from '../tasks/registry';\nexport const x = [runExperiment, openTaskKit];\n",
    );
    const h = await lint('engine/cli/scratch-down.ts', "import { runAblation } from '../recipes/ablation';\nexport const x = runAblation;\n");
    expect([...f, ...h]).toEqual([]);
  });

  it('catches type-only, re-exported and dynamic imports too', async () => {
    const msgs = await lint(
      'engine/store/scratch-upward.ts',
      "import type { ExperimentConfig } from '../config/experiment';\nexport { LAYERS } from '../cli/main';\nexport const f = () => import('../server/runs');\nexport type C = ExperimentConfig;\n",
    );
    expect(msgs.map((m) => m.ruleId)).toEqual(['arbor/layers', 'arbor/layers', 'arbor/layers']);
  });

  it('allows imports of the same or a lower tier', async () => {
    const msgs = await lint(
      'engine/tasks/scratch-down.ts',
      "import { mulberry32 } from '../base/rng';\nimport { openTaskKit } from './registry';\nexport const x = [mulberry32, openTaskKit];\n",
    );
    expect(msgs).toEqual([]);
  });

  it('lists no exception: the ORT worker loads its handler modules by URL', async () => {
    const msgs = await lint('engine/tensor/scratch.ts', "import '../rollout/worker-kv';\n");
    expect(msgs.map((m) => m.ruleId)).toEqual(['arbor/layers']);
  });

  it('fails on an import circle, type-only included', async () => {
    const dir = mkdtempSync(join(root, 'engine/base/.scratch-cycle-'));
    try {
      writeFileSync(join(dir, 'a.ts'), "import type { B } from './b';\nexport interface A { b?: B }\n");
      writeFileSync(join(dir, 'b.ts'), "import type { A } from './a';\nexport interface B { a?: A }\n");
      const msgs = await lint(join(dir, 'a.ts').slice(root.length + 1), "import type { B } from './b';\nexport interface A { b?: B }\n");
      expect(msgs.map((m) => m.ruleId)).toEqual(['arbor/no-cycle']);
      expect(msgs[0]!.message).toMatch(/a\.ts → .*b\.ts → .*a\.ts/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the tiers match docs/ARCHITECTURE.md §2 (top to bottom there)', async () => {
    const { readFileSync } = await import('node:fs');
    const doc = readFileSync(join(root, 'docs/ARCHITECTURE.md'), 'utf8');
    const sec = doc.slice(doc.indexOf('## 2. Engine tiers'), doc.indexOf('## 3.'));
    const drawn = [...sec.matchAll(/^([a-z]+) {2,}((?:[a-z]+\/ *)+)/gm)].map((m) => ({ name: m[1], folders: m[2]!.trim().split(/\/ */).filter(Boolean) }));
    expect(drawn.reverse()).toEqual(TIERS.map((t) => ({ name: t.name, folders: t.folders })));
  });
});
