/**
 * `npm run bench:distill -- [--seed N] [--steps S] [--every E]`: on-policy distillation against
 * GRPO on the demo's world (issue 42), in rollout tokens.
 *
 * 1. GRPO: `arbor train resources/configs/demo.yaml` (SFT warm start, then GRPO with dynamic
 *    sampling), evaluated on the held-out set every E steps. Its last checkpoint is the teacher.
 * 2. Distillation: a fresh copy of that run's SFT checkpoint (the same student GRPO started from)
 *    trained with `algorithm.distill: { teacher }` and the demo's other keys (dynamic sampling is
 *    refused with distillation alone), evaluated at the same steps on the same questions.
 *
 * Prints both curves (step, rollout model tokens so far, held-out 2-hop exact match) and the tokens
 * each needed to first reach 90% of the teacher's 2-hop exact match. Everything runs in a temporary
 * ARBOR_HOME; the runs' folders are printed for `arbor show`.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
  options: { seed: { type: 'string', default: '0' }, steps: { type: 'string', default: '400' }, every: { type: 'string', default: '25' } },
});
const seed = Number(opts.seed);
const steps = Number(opts.steps);
const every = Number(opts.every);
for (const [k, v] of Object.entries({ seed, steps, every }))
  if (!Number.isInteger(v) || v < (k === 'seed' ? 0 : 1))
    throw new Error(`--${k}: expected an integer${k === 'seed' ? '' : ' ≥ 1'}, got ${String(opts[k as keyof typeof opts])}`);

const root = join(import.meta.dirname, '../..');
const home = mkdtempSync(join(tmpdir(), 'arbor-bench-distill-'));
const work = join(home, 'work');

function train(args: string[], label: string): { dir: string; lastCheckpoint: string; sft?: { checkpoint: string } } {
  console.error(`\n${label}: arbor train ${args.join(' ')}`);
  const r = spawnSync(process.execPath, [join(root, 'bin/arbor.mjs'), 'train', ...args, '--json'], {
    env: { ...process.env, ARBOR_HOME: home },
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    maxBuffer: 64 * 2 ** 20,
  });
  if (r.status !== 0) throw new Error(`${label}: arbor train exited with ${r.status}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as { dir: string; lastCheckpoint: string; sft?: { checkpoint: string } };
}

/** (step, cumulative rollout model tokens, held-out 2-hop EM) at every evaluation of a run. */
function curve(runDir: string): { step: number; tokens: number; em2: number }[] {
  const out: { step: number; tokens: number; em2: number }[] = [];
  let tokens = 0;
  for (const line of readFileSync(join(runDir, 'metrics.jsonl'), 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const row = JSON.parse(line) as { step: number; values: Record<string, number> };
    tokens += row.values['rollout/model_tokens'] ?? 0;
    const em2 = row.values['eval/exact_match/hops_2'];
    if (em2 !== undefined) out.push({ step: row.step, tokens, em2 });
  }
  return out;
}

const grpo = train(
  [
    join(root, 'resources/configs/demo.yaml'),
    '--seed',
    String(seed),
    '--steps',
    String(steps),
    '--set',
    `eval.every=${every}`,
    '--set',
    'name=bench-distill-grpo',
  ],
  'GRPO (and the teacher)',
);
if (!grpo.sft) throw new Error('the GRPO run reported no SFT checkpoint');
const grpoCurve = curve(grpo.dir);
const teacherEm = grpoCurve.at(-1)!.em2;
// Copies, so the distillation run reads neither of the GRPO run's folders while it prunes them.
cpSync(grpo.lastCheckpoint, join(work, 'teacher'), { recursive: true });
cpSync(grpo.sft.checkpoint, join(work, 'student'), { recursive: true });
const demo = readFileSync(join(root, 'resources/configs/demo.yaml'), 'utf8');
const keep = (key: string) => demo.match(new RegExp(`^${key}:.*$`, 'm'))![0];
writeFileSync(
  join(work, 'distill.yaml'),
  [
    'name: bench-distill',
    `seed: ${seed}`,
    'model: { path: ./student }',
    keep('task'),
    `steps: ${steps}`,
    keep('rollout'),
    'algorithm:',
    '  adv_estimator: grpo',
    '  loss_agg_mode: token-mean',
    '  clip_ratio_low: 0.2',
    '  clip_ratio_high: 0.28',
    // demo.yaml's: its sampler's old logprobs where it samples at temperature 1, a scoring pass otherwise.
    `  old_logprobs: ${demo.match(/^\s*old_logprobs:\s*(\w+)/m)?.[1] ?? 'recompute'}`,
    '  distill: { teacher: ./teacher }',
    keep('optim'),
    `eval: { every: ${every}, n_questions: 200 }`,
    'checkpoint: { every: 100, keep: 1 }',
  ].join('\n'),
);
const distill = train([join(work, 'distill.yaml')], 'distillation');
const distillCurve = curve(distill.dir);

const threshold = 0.9 * teacherEm;
const reach = (c: { tokens: number; em2: number; step: number }[]) => c.find((p) => p.em2 >= threshold);
const pct = (x: number) => (100 * x).toFixed(1).padStart(5);
console.log(`\nseed ${seed}: teacher (GRPO step ${grpoCurve.at(-1)!.step}) held-out 2-hop EM ${pct(teacherEm)}; threshold 90% = ${pct(threshold)}`);
console.log('step   GRPO tokens  GRPO 2-hop   distill tokens  distill 2-hop');
for (let i = 0; i < Math.max(grpoCurve.length, distillCurve.length); i++) {
  const g = grpoCurve[i];
  const d = distillCurve[i];
  console.log(
    `${String(g?.step ?? d?.step).padStart(4)}  ${String(g?.tokens ?? '').padStart(12)}  ${g ? pct(g.em2) : ''.padStart(5)}       ${String(d?.tokens ?? '').padStart(14)}  ${d ? pct(d.em2) : ''}`,
  );
}
const rg = reach(grpoCurve);
const rd = reach(distillCurve);
const show = (r: { step: number; tokens: number } | undefined) => (r ? `${r.tokens} tokens (step ${r.step})` : 'not reached');
console.log(
  `\ntokens to 90% of the teacher: GRPO ${show(rg)}, distillation ${show(rd)}${rg && rd ? `; ratio GRPO / distillation ${(rg.tokens / rd.tokens).toFixed(2)}` : ''}`,
);
console.log(`runs: ${grpo.dir}\n      ${distill.dir}\n(ARBOR_HOME=${home} arbor show <run>; ${readdirSync(join(home, 'runs')).length} runs there)`);
