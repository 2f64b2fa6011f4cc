// `model.path: org/name` from the Hugging Face cache: pulled from the mock Hub, listed by
// `arbor models` (loadable, or the field it refuses), and trained with the network off.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initModelFolder } from '../../../engine/cli/commands/init-model';
import { loadConfig } from '../../../engine/config/experiment';
import { listModels } from '../../../engine/hub/models';
import { pull } from '../../../engine/hub/pull';
import { commitOf, MockHub } from './mock-hub';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
let hub: MockHub;
let model: string;

beforeAll(async () => {
  model = mkdtempSync(join(tmpdir(), 'arbor-tiny-'));
  await initModelFolder(model, { task: 'multihop', seed: 0 });
  hub = await new MockHub().start();
  hub.add({
    id: 'acme/tiny-multihop',
    commit: commitOf('acme/tiny-multihop'),
    files: readdirSync(model).map((f) => ({ path: f, content: readFileSync(join(model, f)), lfs: f.endsWith('.safetensors') })),
  });
});
afterAll(() => hub.stop());

describe('models from the cache', () => {
  it('lists a pulled model as loadable, and a model Arbor refuses with the field it refuses', async () => {
    const cache = mkdtempSync(join(tmpdir(), 'arbor-hf-'));
    const env = { HF_HUB_CACHE: cache, HF_ENDPOINT: hub.endpoint };
    await pull({ repoId: 'acme/tiny-multihop', env });
    // A model of another architecture, placed as huggingface_hub would (a snapshot link to a blob).
    const other = join(cache, 'models--acme--bert');
    mkdirSync(join(other, 'blobs'), { recursive: true });
    mkdirSync(join(other, 'snapshots', commitOf('bert')), { recursive: true });
    mkdirSync(join(other, 'refs'));
    writeFileSync(join(other, 'blobs', 'abc'), JSON.stringify({ architectures: ['BertModel'], model_type: 'bert' }));
    symlinkSync('../../blobs/abc', join(other, 'snapshots', commitOf('bert'), 'config.json'));
    writeFileSync(join(other, 'refs', 'main'), commitOf('bert'));
    const models = listModels({ env });
    expect(models.map((m) => [m.name, m.source, m.loadable])).toEqual([
      ['acme/bert', 'hub', false],
      ['acme/tiny-multihop', 'hub', true],
    ]);
    const tiny = models[1]!;
    expect(tiny).toMatchObject({ revision: 'main', commit: commitOf('acme/tiny-multihop'), architecture: 'Qwen2ForCausalLM' });
    expect(tiny.parameters).toBeGreaterThan(10_000);
    expect(tiny.sizeBytes).toBeGreaterThan(tiny.parameters! * 4);
    expect(models[0]!.refusal).toMatch(/config\.json: unsupported architecture "BertModel"/);
  });

  it('model.path: org/name resolves from the cache; absent, the error says arbor pull', async () => {
    const cache = mkdtempSync(join(tmpdir(), 'arbor-hf-'));
    const dir = mkdtempSync(join(tmpdir(), 'arbor-cfg-'));
    const cfg = join(dir, 'c.yaml');
    writeFileSync(cfg, 'model: { path: acme/tiny-multihop }\nsteps: 1\n');
    const prev = { ...process.env };
    process.env.HF_HUB_CACHE = cache;
    try {
      await expect(loadConfig(cfg)).rejects.toThrow(
        /model\.path: acme\/tiny-multihop is not in the Hugging Face cache .*run `arbor pull acme\/tiny-multihop` first/,
      );
      await pull({ repoId: 'acme/tiny-multihop', env: { HF_HUB_CACHE: cache, HF_ENDPOINT: hub.endpoint } });
      const { cfg: c } = await loadConfig(cfg);
      expect(c.model.path).toBe(join(cache, 'models--acme--tiny-multihop', 'snapshots', commitOf('acme/tiny-multihop')));
      // An existing folder named like a repo id wins.
      mkdirSync(join(dir, 'acme', 'tiny-multihop'), { recursive: true });
      writeFileSync(join(dir, 'acme', 'tiny-multihop', 'config.json'), '{}');
      expect((await loadConfig(cfg)).cfg.model.path).toBe(join(dir, 'acme', 'tiny-multihop'));
    } finally {
      process.env = prev;
    }
  });

  it('`arbor train` with model.path: org/name trains from the cache with the network off', () => {
    const cache = mkdtempSync(join(tmpdir(), 'arbor-hf-'));
    const home = mkdtempSync(join(tmpdir(), 'arbor-home-'));
    const dir = mkdtempSync(join(tmpdir(), 'arbor-cfg-'));
    // The cache is filled from the mock first (in this process), then the CLI runs offline.
    return pull({ repoId: 'acme/tiny-multihop', env: { HF_HUB_CACHE: cache, HF_ENDPOINT: hub.endpoint } }).then(() => {
      const cfg = join(dir, 'c.yaml');
      writeFileSync(
        cfg,
        [
          'model: { path: acme/tiny-multihop }',
          'steps: 2',
          'rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 8 }',
          'eval: { every: 0, n_questions: 2 }',
          'checkpoint: { every: 2, keep: 1 }',
        ].join('\n'),
      );
      hub.log.length = 0;
      const env = { ...process.env, ARBOR_HOME: home, HF_HUB_CACHE: cache, HF_HUB_OFFLINE: '1', HF_ENDPOINT: 'http://127.0.0.1:9' };
      // No network at all where a user namespace can be made (as the sandbox does); else the offline switch alone.
      const netns = spawnSync('unshare', ['-rn', 'true']).status === 0;
      const args = [bin, 'train', cfg, '--json'];
      const r = netns
        ? spawnSync('unshare', ['-rn', process.execPath, ...args], { encoding: 'utf8', env, timeout: 240_000 })
        : spawnSync(process.execPath, args, { encoding: 'utf8', env, timeout: 240_000 });
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string; steps?: number };
      expect(out.run).toBeTruthy();
      expect(hub.log).toEqual([]);
      // `arbor models` (through the engine protocol, as the picker) lists the cached model and the run's checkpoint.
      const m = spawnSync(process.execPath, [bin, 'models', '--json'], { encoding: 'utf8', env, timeout: 120_000 });
      expect(m.status, m.stderr).toBe(0);
      const listed = JSON.parse(m.stdout) as { name: string; source: string; loadable: boolean; runId?: string }[];
      expect(listed.map((x) => [x.source, x.source === 'hub' ? x.name : x.runId, x.loadable])).toEqual([
        ['hub', 'acme/tiny-multihop', true],
        ['run', out.run, true],
      ]);
    });
  }, 240_000);
});
