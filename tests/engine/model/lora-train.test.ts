/**
 * LoRA through the training loop and the CLI: a LoRA run's checkpoints are PEFT adapter folders
 * (no copy of the base model's weights), resuming from one continues exactly like an
 * uninterrupted run (dropout masks and KL reference included), and `arbor merge` writes a
 * folder whose logits equal base + adapter.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tinyConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { resolveLora } from '../../../engine/model/lora';
import { validateConfig } from '../../../engine/config/experiment';
import { runExperiment } from '../../../engine/run/runner';
import { buildTaskSession } from '../../../engine/run/compose';
import type { TaskKit } from '../../../engine/tasks/kit';
import { JsonlSink, readMetricsJsonl } from '../../../engine/run/sinks';
import { latestCheckpoint } from '../../../engine/train/checkpoints';
import { readSafetensors } from '../../../engine/model/safetensors';
import { sequenceTasks, tabularTargets, tabularTokenizer } from '../train/tabular';
import type { Episode } from '../../../engine/train/episode';
import type { SinkPort } from '../../../engine/train/loop';

const VOCAB = 6;
const PROMPTS = 5;
const targets = tabularTargets({ prompts: PROMPTS, length: 3, vocab: VOCAB, seed: 4 });
const tasks = sequenceTasks(targets, VOCAB).map((t) => ({ ...t, meta: { hops: 1 } }));
const kit: TaskKit = {
  tokenizer: tabularTokenizer,
  trainTasks: tasks,
  evalTasks: tasks,
  stop: { strings: [], tokenIds: [] },
  tinyModel: () => tinyConfig({ vocabSize: VOCAB + PROMPTS, hiddenSize: 32, layers: 1, heads: 2, maxPositionEmbeddings: 8 }),
};

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');

describe('LoRA runs', () => {
  it('checkpoint as PEFT adapters and resume exactly like an uninterrupted run', async () => {
    const base = {
      model: { init: 'tiny', lora: { rank: 4, alpha: 8, dropout: 0.1 } },
      seed: 3,
      threads: 1,
      rollout: { prompts_per_step: 4, n: 2, max_turns: 1, max_new_tokens: 3, max_total_length: 4 },
      algorithm: { kl_coef: 0.05 },
      optim: { lr: 0.02, schedule: 'constant' },
      eval: { every: 0, n_questions: PROMPTS },
      checkpoint: { every: 2, keep: 3 },
    };
    const run = async (dir: string, steps: number, resume: boolean) => {
      const cfg = validateConfig({ ...base, steps });
      const session = await buildTaskSession({ cfg, defaults: new Set() }, kit);
      try {
        return await runExperiment(cfg, { runDir: dir, session, sink: new JsonlSink(dir), resume });
      } finally {
        await session.close();
      }
    };
    const clean = mkdtempSync(join(tmpdir(), 'arbor-lora-clean-'));
    await run(clean, 4, false);
    const split = mkdtempSync(join(tmpdir(), 'arbor-lora-split-'));
    await run(split, 2, false);
    const ck = latestCheckpoint(split)!;
    expect(ck.step).toBe(2);
    // The checkpoint is a PEFT adapter folder: adapters + optimizer state; the built-in base under base/.
    for (const f of ['adapter_config.json', 'adapter_model.safetensors', 'optimizer.json', 'trainer_state.json'])
      expect(existsSync(join(ck.dir, f)), f).toBe(true);
    expect(existsSync(join(ck.dir, 'model.safetensors'))).toBe(false);
    const opt = JSON.parse(readFileSync(join(ck.dir, 'optimizer.json'), 'utf8')) as { tensors: [string, number][] };
    expect(opt.tensors.length).toBeGreaterThan(0);
    expect(opt.tensors.every(([n]) => /lora_[AB]\.weight$/.test(n))).toBe(true); // AdamW state for the adapters only
    await run(split, 4, true);
    const a = readMetricsJsonl(join(clean, 'metrics.jsonl')).filter((r) => r.step > 2);
    const b = readMetricsJsonl(join(split, 'metrics.jsonl')).filter((r) => r.step > 2);
    const det = (v: Record<string, number>) => Object.fromEntries(Object.entries(v).filter(([k]) => !k.startsWith('time/') && !k.startsWith('perf/')));
    expect(b.map((r) => r.step)).toEqual([3, 4, 4]); // step 4's training row, then the final evaluation
    for (let i = 0; i < a.length; i++) expect(det(b[i]!.values)).toEqual(det(a[i]!.values));
    expect(a[0]!.values['actor/kl']).toBeGreaterThan(0); // the KL term is live (reference = base without adapters)
    // Both runs end on the same adapters, bit for bit.
    const fa = readFileSync(join(latestCheckpoint(clean)!.dir, 'adapter_model.safetensors'));
    const fb = readFileSync(join(latestCheckpoint(split)!.dir, 'adapter_model.safetensors'));
    expect(fb.equals(fa)).toBe(true);
  }, 120_000);

  it('SFT warm start under LoRA: the KL reference is base + SFT adapters, also after an RL resume', async () => {
    const base = {
      model: { init: 'tiny', lora: { rank: 4, alpha: 16 } },
      seed: 2,
      threads: 1,
      rollout: { prompts_per_step: 4, n: 2, max_turns: 1, max_new_tokens: 3, max_total_length: 4 },
      sft: { warm_start: true, demos: 40, epochs: 2, batch_size: 10, lr: 0.05 },
      algorithm: { kl_coef: 0.1 },
      optim: { lr: 0.01 },
      eval: { every: 0, n_questions: PROMPTS },
      checkpoint: { every: 1, keep: 2 },
    };
    const withExpert: TaskKit = { ...kit, expert: { act: async ({ task }) => targets[Number(task.id.split('-')[1])]!.join(' ') } };
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-lora-sft-kl-'));
    const refs = new Map<number, { eps: Episode[]; ref: Float32Array[] }>();
    const sink = (): SinkPort => {
      const inner = new JsonlSink(runDir);
      return {
        metrics: (s, v) => inner.metrics(s, v),
        truncateAfter: (s) => inner.truncateAfter(s),
        trajectories: (step, eps, _a, extra) => void refs.set(step, { eps, ref: eps.map((e) => extra!.refLogprobs!.get(e)!) }),
      };
    };
    for (const steps of [1, 2]) {
      const cfg = validateConfig({ ...base, steps });
      const session = await buildTaskSession({ cfg, defaults: new Set() }, withExpert);
      try {
        await runExperiment(cfg, { runDir, session, sink: sink(), resume: steps === 2 });
      } finally {
        await session.close();
      }
    }
    const sftCk = latestCheckpoint(join(runDir, 'sft'))!.dir;
    expect(existsSync(join(sftCk, 'adapter_model.safetensors'))).toBe(true);
    // Step 2 ran after a resume: its reference scores equal the SFT adapters' on the base.
    const check = validateConfig({ ...base, steps: 2 });
    const s3 = await buildTaskSession({ cfg: check, defaults: new Set() }, withExpert);
    try {
      const step2 = refs.get(2)!;
      await s3.loadPolicy(sftCk);
      const sftScores = (await s3.ports.policy.score(step2.eps)).logprobs;
      let d = 0;
      step2.eps.forEach((e, i) => e.lossMask.forEach((m, j) => m && (d = Math.max(d, Math.abs(step2.ref[i]![j]! - sftScores[i]![j]!)))));
      expect(d).toBeLessThan(1e-4);
    } finally {
      await s3.close();
    }
  }, 120_000);

  it('PPO (GAE critic) runs and checkpoints with LoRA on the policy', async () => {
    const cfg = validateConfig({
      model: { init: 'tiny', lora: { rank: 2 } },
      seed: 1,
      threads: 1,
      steps: 2,
      rollout: { prompts_per_step: 2, n: 2, max_turns: 1, max_new_tokens: 3, max_total_length: 4 },
      algorithm: { adv_estimator: 'gae' },
      eval: { every: 0, n_questions: 2 },
      checkpoint: { every: 2, keep: 1 },
    });
    const dir = mkdtempSync(join(tmpdir(), 'arbor-lora-ppo-'));
    const session = await buildTaskSession({ cfg, defaults: new Set() }, kit);
    try {
      const res = await runExperiment(cfg, { runDir: dir, session, sink: new JsonlSink(dir) });
      const ck = res.rl!.lastCheckpoint!.dir;
      expect(existsSync(join(ck, 'adapter_model.safetensors'))).toBe(true);
      // The critic is the base transformer + value head, trained in full, without the policy's adapters.
      const critic = readSafetensors(join(ck, 'critic', 'critic.safetensors'));
      expect([...critic.keys()].some((k) => k.includes('lora_'))).toBe(false);
      expect(critic.has('score.weight')).toBe(true);
    } finally {
      await session.close();
    }
  }, 60_000);

  it('arbor merge writes an HF folder with the logits of base + adapter', async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-merge-'));
    const cfg = tinyConfig({ vocabSize: 31, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, architecture: 'LlamaForCausalLM' });
    const baseDir = join(root, 'base');
    PolicyModel.init(cfg, 9, { threads: 1 }).save(baseDir);
    const spec = resolveLora({ rank: 8, alpha: 32, dropout: 0, target_modules: ['q_proj', 'k_proj', 'o_proj', 'up_proj', 'down_proj'] });
    const adapted = PolicyModel.load(baseDir, { threads: 1, lora: spec, loraSeed: 2 });
    for (const [k, w] of adapted.weights) if (k.endsWith('lora_B.weight')) for (let i = 0; i < w.length; i++) w[i] = 0.03 * Math.cos(5 * i + k.length);
    adapted.markWeightsUpdated();
    const adapterDir = join(root, 'adapter');
    adapted.save(adapterDir);
    expect(JSON.parse(readFileSync(join(adapterDir, 'adapter_config.json'), 'utf8')).base_model_name_or_path).toBe(baseDir);
    const out = join(root, 'merged');
    const r = spawnSync(process.execPath, [bin, 'merge', baseDir, adapterDir, out, '--json'], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: root } });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ modules: 10, rank: 8, alpha: 32 });
    const merged = PolicyModel.load(out, { threads: 1 });
    const fromAdapter = PolicyModel.load(adapterDir, { threads: 1 });
    const plain = PolicyModel.load(baseDir, { threads: 1 });
    try {
      const seqs = [
        [1, 2, 3, 4, 5, 6, 7],
        [8, 9, 10, 30, 11],
      ];
      const lm = await merged.lastLogits(seqs);
      const la = await fromAdapter.lastLogits(seqs);
      const lb = await plain.lastLogits(seqs);
      let diff = 0,
        base = 0;
      for (let s = 0; s < seqs.length; s++)
        for (let i = 0; i < lm[s]!.length; i++) {
          diff = Math.max(diff, Math.abs(lm[s]![i]! - la[s]![i]!));
          base = Math.max(base, Math.abs(lb[s]![i]! - la[s]![i]!));
        }
      expect(diff).toBeLessThan(1e-5);
      expect(base).toBeGreaterThan(1e-3); // the adapter changes the model
    } finally {
      await Promise.all([merged.dispose(), fromAdapter.dispose(), plain.dispose(), adapted.dispose()]);
    }
    // A second merge into the same folder is refused without --force.
    const again = spawnSync(process.execPath, [bin, 'merge', baseDir, adapterDir, out], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: root } });
    expect(again.status).toBe(1);
    expect(again.stderr).toContain('is not empty');
  }, 60_000);
});
