/**
 * `node scripts/bench/run.mjs lora-shapes [--shapes tiny,25m,qwen2.5-0.5b,qwen2.5-1.5b,qwen3-4b,qwen3-8b,llama3.1-8b]
 *   [--bases int4,float32] [--batch 1] [--seq 256] [--rank 16] [--recompute-layers] [--steps 2] [--memory 20GiB] [--json]`
 *
 * One LoRA training step (rank `--rank` on all linear layers, masked NLL, AdamW on the adapters)
 * at each released model's shape (engine/model/shapes.ts, random weights made in-process) with the
 * 4-bit base and with the float32 base, on the CPU: the step's time, tokens/s and the process's
 * peak RSS beside the memory plan's figure for that step (engine/model/memory-plan.ts). Each
 * measurement is `arbor plan --shape … --measure` in a child process of its own, one after the
 * other (never two at once); a row whose plan does not fit `--memory` (default: the machine's
 * free memory now, less 1 GiB) is not run and says so. The first step builds the sessions; the
 * last is timed (`--steps`).
 */
import { Command } from 'commander';
import { spawnSync } from 'node:child_process';
import { freemem } from 'node:os';
import { join } from 'node:path';
import { fmtBytes, parseBytes } from '../../engine/model/memory-plan';
import { ALL_SHAPES } from './shapes';

const o = new Command()
  .option('--shapes <list>', 'shapes, comma-separated', 'tiny,25m,qwen2.5-0.5b,qwen2.5-1.5b,qwen3-4b,qwen3-8b,llama3.1-8b')
  .option('--bases <list>', 'int4, int8, float32 (comma-separated)', 'int4,float32')
  .option('--batch <n>', 'sequences per step', Number, 1)
  .option('--seq <n>', 'tokens per sequence', Number, 256)
  .option('--rank <n>', 'LoRA rank', Number, 16)
  .option('--recompute-layers', 'recompute every block in the backward pass')
  .option('--steps <n>', 'steps per measurement (the last is timed)', Number, 2)
  .option('--memory <bytes>', 'run a row only when its plan fits this (default: free memory now, less 1 GiB)')
  .option('--json', 'print JSON')
  .parse()
  .opts<{
    shapes: string;
    bases: string;
    batch: number;
    seq: number;
    rank: number;
    recomputeLayers?: boolean;
    steps: number;
    memory?: string;
    json?: boolean;
  }>();

const bin = join(import.meta.dirname, '..', '..', 'bin', 'arbor.mjs');
const budget = o.memory ? parseBytes(o.memory) : freemem() - 2 ** 30;
const log = (s: string) => !o.json && process.stderr.write(s + '\n');

interface Plan {
  step: number;
  parameters: number;
  items: { id: string; bytes: number }[];
  measured?: { peakRss: number; stepSeconds: number; tokensPerSecond: number; loss: number };
}
function plan(shape: string, base: string, measure: boolean): Plan | { error: string } {
  const args = [bin, 'plan', '--shape', shape, '--lora', String(o.rank), '--batch', String(o.batch), '--seq', String(o.seq), '--json'];
  if (base !== 'float32') args.push('--quantize-base', base);
  if (o.recomputeLayers) args.push('--recompute-layers');
  if (measure) args.push('--measure', '--steps', String(o.steps));
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) return { error: (r.stderr.trim().split('\n').at(-1) ?? '') || `exit ${r.status ?? r.signal}` };
  return JSON.parse(r.stdout) as Plan;
}

const rows: Record<string, unknown>[] = [];
for (const shape of o.shapes.split(',')) {
  if (!ALL_SHAPES[shape]) throw new Error(`--shapes: unknown shape '${shape}' (known: ${Object.keys(ALL_SHAPES).join(', ')})`);
  for (const base of o.bases.split(',')) {
    const p = plan(shape, base, false);
    if ('error' in p) {
      rows.push({ shape, base, error: p.error });
      continue;
    }
    const row: Record<string, unknown> = { shape, base, parameters: p.parameters, planStep: p.step };
    if (p.step > budget) {
      row.skipped = `plan ${fmtBytes(p.step)} > ${fmtBytes(budget)}`;
      log(`${shape} ${base}: skipped, ${row.skipped}`);
      rows.push(row);
      continue;
    }
    log(`${shape} ${base}: measuring (plan ${fmtBytes(p.step)})…`);
    const t0 = performance.now();
    const m = plan(shape, base, true);
    if ('error' in m) row.error = m.error;
    else Object.assign(row, m.measured, { planStep: m.step, wallSeconds: (performance.now() - t0) / 1000 });
    rows.push(row);
  }
}

if (o.json) console.log(JSON.stringify({ batch: o.batch, seq: o.seq, rank: o.rank, recomputeLayers: !!o.recomputeLayers, steps: o.steps, rows }));
else {
  console.log(`LoRA r${o.rank} all-linear, one step of ${o.batch} × ${o.seq} tokens${o.recomputeLayers ? ', every block recomputed' : ''}, CPU`);
  console.log('| shape | parameters | base | step (s) | tokens/s | peak RSS | plan (step) | plan / peak |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const p = r.parameters ? `${((r.parameters as number) / 1e9).toFixed(2)}B` : '—';
    if (r.peakRss === undefined) {
      console.log(`| ${r.shape} | ${p} | ${r.base} | ${String(r.skipped ?? r.error)} | | | ${r.planStep ? fmtBytes(r.planStep as number) : ''} | |`);
      continue;
    }
    const peak = r.peakRss as number;
    console.log(
      `| ${r.shape} | ${p} | ${r.base} | ${(r.stepSeconds as number).toFixed(2)} | ${(r.tokensPerSecond as number).toFixed(1)} | ${fmtBytes(peak)} | ${fmtBytes(r.planStep as number)} | ${((r.planStep as number) / peak).toFixed(2)} |`,
    );
  }
}
