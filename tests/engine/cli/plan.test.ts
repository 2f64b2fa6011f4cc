import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../engine/config/experiment';
import { planInputFromConfig } from '../../../engine/cli/commands/plan';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
const arbor = (home: string, ...args: string[]) =>
  spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 120_000 });
const home = () => mkdtempSync(join(tmpdir(), 'arbor-plan-'));

interface PlanJson {
  items: { id: string; bytes: number; key?: string; detail: string }[];
  total: number;
  step: number;
  fits: boolean | null;
  advice: { key: string; change: string; total: number }[];
  measured?: { peakRss: number; baselineRss: number; stepSeconds: number; scored: number; scoredPerCall: number };
  measuredPlan?: number;
}

describe('arbor plan (real CLI)', () => {
  // The plan of a training step (the process's own baseline measured when the plan is made, ONNX
  // Runtime, the weights, optimizer state and the traced activations) against the peak RSS of that
  // step taken in the same child process on random weights.
  for (const args of [
    ['--shape', 'tiny', '--lora', '16', '--batch', '4', '--seq', '128'],
    ['--shape', 'tiny', '--batch', '32', '--seq', '256', '--lora', '8', '--recompute-layers'],
  ]) {
    it(`agrees with the measured peak RSS of the step within 15%: ${args.join(' ')}`, () => {
      const r = arbor(home(), 'plan', ...args, '--measure', '--json');
      expect(r.status, r.stderr).toBe(0);
      const p = JSON.parse(r.stdout) as PlanJson;
      const m = p.measured!;
      expect(m.peakRss).toBeGreaterThan(m.baselineRss);
      const activations = p.items.find((i) => i.id === 'activations')!.bytes;
      expect(activations).toBeGreaterThan(0);
      expect(Math.abs(p.step / m.peakRss - 1), `plan ${p.step}, measured ${m.peakRss}`).toBeLessThanOrEqual(0.15);
    }, 120_000);
  }

  // The loop scores a step's episodes in pieces of the update's micro-batch (engine/train/loop.ts scorePieceSize):
  // --measure scores the --rollout-batch sequences so, and the plan counts one such call.
  it('scores the rollouts in calls of the micro-batch, as a run does, within 15% of the measured peak', () => {
    const r = arbor(
      home(),
      'plan',
      '--shape',
      'tiny',
      '--lora',
      '16',
      '--batch',
      '2',
      '--seq',
      '128',
      '--rollout-batch',
      '6',
      '--loss',
      'grpo',
      '--measure',
      '--json',
    );
    expect(r.status, r.stderr).toBe(0);
    const p = JSON.parse(r.stdout) as PlanJson;
    expect(p.measured!.scored).toBe(6);
    expect(p.measured!.scoredPerCall).toBe(2);
    expect(p.items.find((i) => i.id === 'score')!.detail).toMatch(/6 sequences × 128 tokens in calls of 2/);
    expect(Math.abs(p.measuredPlan! / p.measured!.peakRss - 1), `plan ${p.measuredPlan}, measured ${p.measured!.peakRss}`).toBeLessThanOrEqual(0.15);
  }, 120_000);

  it("plans a config's scoring in calls of the update's micro-batch", () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      task: { kind: 'multihop' },
      rollout: { prompts_per_step: 12, n: 8, max_total_length: 64 },
      algorithm: { mini_batches: 2, micro_batches: 3, kl_coef: 0.01 },
    });
    const { input } = planInputFromConfig(cfg, 1e8);
    expect(input.train.batch).toBe(16); // 96 episodes over 2 × 3
    expect(input.score).toEqual({ batch: 16, seq: 64, sequences: 96 });
  });

  it("plans README's own-environment config (task.kind custom, tiny model, sandboxed tools) with the task file's vocabulary and room for the schemas', without opening the sandbox", () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-plan-custom-'));
    writeFileSync(join(dir, 'tasks.jsonl'), JSON.stringify({ id: 't0', prompt: 'what is 1 plus 1 ?', answers: ['2'] }) + '\n');
    writeFileSync(join(dir, 'echo.ts'), "export const echo = { name: 'echo', description: 'echo', parameters: { type: 'object' }, execute: () => 'x' };\n");
    const cfg = validateConfig(
      { model: { init: 'tiny' }, task: { kind: 'custom' }, environment: { format: 'hermes', tasks: 'tasks.jsonl', tools: ['echo.ts'] } },
      { baseDir: dir },
    );
    const { input } = planInputFromConfig(cfg, 1e8);
    // 4 specials, the format's tags, 256 bytes, the task file's and format's words twice, room for 256 schema words twice.
    expect(input.config.vocabSize).toBeGreaterThan(260 + 512);
    expect(input.config.vocabSize).toBeLessThan(260 + 512 + 200);
    expect(input.config.hiddenSize).toBe(64);
  });

  it('plans a config: rollout KV cache at its rollout sizes, and a budget it does not fit names the key to change', () => {
    const r = arbor(home(), 'plan', 'resources/configs/grpo.yaml', '--memory', '400MiB', '--json');
    expect(r.status, r.stderr).toBe(0);
    const p = JSON.parse(r.stdout) as PlanJson;
    expect(p.items.map((i) => i.id)).toEqual(expect.arrayContaining(['base', 'optimizer', 'activations', 'score', 'kv_cache']));
    expect(p.fits).toBe(false);
    expect(p.advice.length).toBeGreaterThan(0);
    for (const a of p.advice) {
      expect(['algorithm.micro_batches', 'rollout.prompts_per_step', 'model.recompute_layers']).toContain(a.key);
      expect(a.total).toBeLessThanOrEqual(400 * 2 ** 20);
    }
    expect(arbor(home(), 'plan', '--shape', 'tiny', '--quantize-base', 'int4').stderr).toMatch(/--quantize-base.*--lora/);
  }, 120_000);

  it('arbor train prints the plan and refuses a run whose plan exceeds --memory, naming the key, before the run exists', () => {
    const h = home();
    const dir = mkdtempSync(join(tmpdir(), 'arbor-plan-cfg-'));
    const cfg = join(dir, 'big.yaml');
    writeFileSync(cfg, 'model: { init: tiny }\ntask: { kind: multihop }\nrollout: { prompts_per_step: 16, n: 8, max_total_length: 512 }\n');
    const r = arbor(h, 'train', cfg, '--steps', '1', '--no-store', '--memory', '500MiB');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/memory plan: [0-9.]+ GiB .* of 500 MiB --memory/);
    expect(r.stderr).toMatch(/exceeds the --memory \(500 MiB\): change (algorithm\.micro_batches|rollout\.prompts_per_step): /);
    expect(existsSync(join(h, 'runs')) ? readdirSync(join(h, 'runs')) : []).toEqual([]);
  }, 120_000);
});
