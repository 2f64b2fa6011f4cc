/**
 * The CLI on WebGPU (SwiftShader; see ./harness.ts), against the same commands on the CPU:
 * `arbor generate --device webgpu --greedy --json` gives the same ids for the tiny model and the
 * parity fixtures (rope scaling, sharded safetensors, Qwen3 BF16), its KV cache kept on the device; `arbor train` with
 * `device: webgpu` runs two GRPO steps, full and LoRA, sampling the same tokens as `device: cpu`
 * with the same seed and metrics within 1e-3; `arbor doctor --json` names the adapter.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gpuEnv, SKIP_REASON } from './harness';
import { buildWordTokenizer } from '../../../engine/model/tokenizer';
import { generate } from '../../../engine/cli/commands/generate';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';

const ROOT = join(__dirname, '..', '..', '..');
const bin = join(ROOT, 'bin', 'arbor.mjs');
const home = mkdtempSync(join(tmpdir(), 'arbor-gpu-home-'));
const arbor = (...args: string[]) =>
  spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env: { ...gpuEnv!, ARBOR_HOME: home }, timeout: 600_000, maxBuffer: 64 * 2 ** 20 });
const lastJson = (s: string) => JSON.parse(s.trim().split('\n').pop()!) as Record<string, unknown>;

describe.skipIf(!gpuEnv)(`the CLI on WebGPU${gpuEnv ? '' : ` (${SKIP_REASON})`}`, () => {
  it('arbor doctor --json names the WebGPU adapter (SwiftShader: software)', () => {
    const r = arbor('doctor', '--json');
    expect(r.status, r.stderr).toBe(0);
    const w = (JSON.parse(r.stdout) as { webgpu: { available: boolean; adapter?: { name: string; vendor: string; software: boolean; backend: string } } })
      .webgpu;
    expect(w.available).toBe(true);
    expect(w.adapter?.name).toMatch(/SwiftShader/);
    expect(w.adapter?.software).toBe(true);
    expect(w.adapter?.backend).toBe('vulkan');
  });

  // The fixtures have no tokenizer: a word-level one whose ids fit every fixture's vocabulary.
  const dir = mkdtempSync(join(tmpdir(), 'arbor-gpu-gen-'));
  const { tokenizer, config } = buildWordTokenizer(['alpha', 'beta', 'gamma', 'delta']);
  const folders: Record<string, string> = { tiny: join(ROOT, 'tests', 'engine', 'model', 'fixtures', 'multihop-tiny-sft') };
  for (const f of ['qwen2-yarn-f32', 'llama-sharded-f32', 'qwen3-bf16']) {
    const to = join(dir, f);
    cpSync(join(ROOT, 'tests', 'fixtures', 'models', f), to, { recursive: true });
    writeFileSync(join(to, 'tokenizer.json'), JSON.stringify(tokenizer));
    writeFileSync(join(to, 'tokenizer_config.json'), JSON.stringify(config));
    folders[f] = to;
  }
  for (const [name, folder] of Object.entries(folders))
    it(`arbor generate --device webgpu --greedy --json: ${name} gives the CPU's ids`, { timeout: 300_000 }, async () => {
      const prompt = name === 'tiny' ? 'who directed the film' : 'alpha beta gamma delta alpha';
      // The CPU side in this process (the same generate() the command runs), the WebGPU side through the CLI.
      const cpu = await generate(folder, { prompt, greedy: true, maxNew: 6, threads: 1 });
      const r = arbor('generate', folder, '--prompt', prompt, '--greedy', '--json', '--max-new', '6', '--threads', '1', '--device', 'webgpu');
      expect(r.status, r.stderr).toBe(0);
      const gpu = lastJson(r.stdout) as { promptIds: number[]; generatedIds: number[]; deviceBytes?: { toDevice: number; toHost: number; kvCache: number } };
      expect(cpu.generatedIds.length).toBeGreaterThan(0);
      expect(gpu.promptIds).toEqual(cpu.promptIds);
      expect(gpu.generatedIds).toEqual(cpu.generatedIds);
      // The device-resident decode path: the logits rows came back, the KV cache never crossed.
      expect(cpu.deviceBytes).toBeUndefined();
      expect(gpu.deviceBytes!.toHost).toBeGreaterThan(0);
      expect(gpu.deviceBytes!.kvCache).toBe(0);
    });

  for (const lora of [false, true])
    it(`arbor train, device webgpu, two GRPO steps${lora ? ' (LoRA)' : ''}: the CPU's tokens and metrics within 1e-3`, { timeout: 600_000 }, () => {
      const train = (device: string) => {
        const cfg = join(dir, `train-${device}-${lora}.yaml`);
        writeFileSync(
          cfg,
          [
            `name: gpu-${device}-${lora ? 'lora' : 'full'}`,
            `device: ${device}`,
            'threads: 1',
            'seed: 3',
            `model: { init: tiny${lora ? ', lora: { rank: 4, alpha: 8 }' : ''} }`,
            'steps: 2',
            'rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 8 }',
            'eval: { every: 0, n_questions: 2 }',
            'checkpoint: { every: 100, keep: 1 }',
            'logging: { full_trajectories_every: 1 }',
          ].join('\n'),
        );
        const r = arbor('train', cfg, '--json');
        expect(r.status, r.stderr).toBe(0);
        const run = lastJson(r.stdout).run as string;
        const store = new Store(openDatabase(join(home, 'arbor.db')));
        try {
          const trajs = store.searchTrajectories({ runId: run });
          const tokens = trajs
            .sort((a, b) => a.step - b.step || Number(a.id) - Number(b.id))
            .map((t) => store.getTrajectory(t.id).turnsData.flatMap((u) => Array.from(u.tokenIds ?? [])));
          const metrics: Record<string, (number | null)[]> = {};
          for (const name of store.metricKeys(run)) metrics[name] = store.metricSeries(run, name).value;
          return { tokens, metrics };
        } finally {
          store.db.close();
        }
      };
      const cpu = train('cpu');
      const gpu = train('webgpu');
      expect(cpu.tokens.length).toBe(8);
      expect(cpu.tokens.flat().length).toBeGreaterThan(0);
      expect(gpu.tokens).toEqual(cpu.tokens);
      const timing = /time|seconds|_s$|ms|per_s|tok\/s|tokens_per_second|memory|rss/i;
      for (const [k, v] of Object.entries(cpu.metrics)) {
        if (timing.test(k)) continue;
        const g = gpu.metrics[k];
        expect(g, k).toBeDefined();
        for (let i = 0; i < v.length; i++) {
          const a = v[i] ?? null,
            b = g![i] ?? null;
          if (a === null || b === null) expect(b, `${k} step ${i + 1}`).toBe(a);
          else expect(Math.abs(b - a), `${k} step ${i + 1}`).toBeLessThanOrEqual(1e-3 * Math.max(1, Math.abs(a)));
        }
      }
    });
});
