/**
 * `arbor eval <checkpoint | run | group>`: held-out evaluation.
 *
 * Without --k: greedy exact match, format and tool use of a checkpoint (the training run's
 * held-out evaluation). With --k N (the harness, engine/recipes/eval-harness.ts): N sampled
 * episodes per question give pass@1 … pass@N (unbiased estimator), mean@N, format and tool-error
 * rates, plus exact match and F1 (SQuAD normalisation) of one greedy episode per question, overall
 * and by hop count or any meta field (--by); on the held-out split, or with --all on every task
 * (the whole task file or dataset). A task without gold answers is scored by its reward file.
 * A run's checkpoint (its best, else its last) or every run of a group can be evaluated; results
 * are stored with the run (`harness/*` metrics at the checkpoint's step, and a JSON file in
 * <run>/eval/), where the Run view shows them.
 */
import { modelArg } from '../../hub/cache';
import type { Command } from 'commander';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { bestCheckpoint, latestCheckpoint, listCheckpoints } from '../../train/checkpoints';
import { loadConfig, taskKindNames, validateLoaded, type ExperimentConfig, type LoadedConfig } from '../../config/experiment';
import { given, intFlag } from '../flags';
import { progressBar, renderTable } from '../progress';
import { evalMetrics } from '../../tasks/kit';
import { openTaskSession } from '../../run/open';
import { DEVICES, deviceOption } from '../device-option';
import { openRun } from '../../run/run-dir';
import { harnessMetricKeys, scoreHarness, type HarnessResult } from '../../recipes/eval-harness';
import { summarize } from '../../stats/stats';
import { openDatabase, workspaceExists } from '../../store/db';
import { Store } from '../../store/store';
import { getRunGroup, runGroupMembers } from '../../store/groups';

interface EvalOptions {
  task?: string;
  config?: string;
  n?: number;
  seed: number;
  hops: string;
  dataset?: string;
  tasks?: string;
  tools?: string;
  reward?: string;
  format?: string;
  naiveRag?: boolean;
  json?: boolean;
  k?: number;
  by?: string;
  all?: boolean;
  temperature: number;
  passReward: number;
  store: boolean;
  device?: string;
  /** Which of --seed / --hops the user typed (a flag overrides the config's key only when given). */
  givenFlags?: { seed: boolean; hops: boolean };
}

/** One checkpoint to evaluate: its folder, the run it belongs to (if any) and the config its task comes from. */
interface Target {
  checkpoint: string;
  runId?: string;
  runDir?: string;
  step?: number;
  runCfg?: ExperimentConfig;
}

/** The run folder a checkpoint folder lives in (<run>/checkpoints/step-N or <run>/sft/checkpoints/step-N), if it is one. */
function runOfCheckpoint(ck: string): { runDir: string; step: number } | undefined {
  const full = resolve(ck);
  const m = /^step-(\d+)$/.exec(basename(full));
  if (!m || basename(dirname(full)) !== 'checkpoints') return undefined;
  let runDir = dirname(dirname(full));
  if (basename(runDir) === 'sft') runDir = dirname(runDir);
  return existsSync(join(runDir, 'config.json')) ? { runDir, step: Number(m[1]) } : undefined;
}

function targetOfRun(idOrDir: string): Target {
  const run = openRun(idOrDir);
  const ck = bestCheckpoint(run.dir) ?? latestCheckpoint(run.dir);
  if (!ck) throw new Error(`run ${run.id} has no checkpoint to evaluate (${join(run.dir, 'checkpoints')} is empty)`);
  return { checkpoint: ck.dir, runId: run.id, runDir: run.dir, step: ck.step, runCfg: run.cfg };
}

/** checkpoint folder | run id or folder | group id or name → the checkpoints to evaluate. */
function resolveTargets(arg: string): { targets: Target[]; group?: string } {
  const target = modelArg(arg, '<target>');
  if (existsSync(target) && statSync(target).isDirectory()) {
    // A model folder: an HF checkpoint (config.json) or a PEFT adapter (adapter_config.json), not a run folder.
    if ((existsSync(join(target, 'config.json')) || existsSync(join(target, 'adapter_config.json'))) && !existsSync(join(target, 'checkpoints'))) {
      const r = runOfCheckpoint(target);
      if (!r) return { targets: [{ checkpoint: target }] };
      return { targets: [{ checkpoint: target, runId: basename(r.runDir), runDir: r.runDir, step: r.step, runCfg: openRun(r.runDir).cfg }] };
    }
    return { targets: [targetOfRun(target)] };
  }
  try {
    return { targets: [targetOfRun(target)] };
  } catch (runErr) {
    if (!workspaceExists()) throw runErr;
    const store = new Store(openDatabase());
    try {
      const g = getRunGroup(store, target);
      const runs = runGroupMembers(store, g.id).filter((r) => r.status === 'completed');
      if (!runs.length) throw new Error(`group ${g.id} has no completed run to evaluate`);
      return { targets: runs.map((r) => targetOfRun(r.id)), group: g.id };
    } catch (groupErr) {
      // Most often a checkpoint that `checkpoint.keep` pruned after newer ones were saved.
      const looksLikePath = target.includes('/');
      const runDir = dirname(dirname(resolve(target)));
      const left = looksLikePath && basename(dirname(resolve(target))) === 'checkpoints' ? listCheckpoints(runDir).map((c) => c.dir) : [];
      throw new Error(
        looksLikePath
          ? `checkpoint folder not found: ${target}${left.length ? ` (checkpoint.keep may have pruned it; this run keeps ${left.join(', ')})` : ' (`arbor show <run>` lists the checkpoints that exist)'}`
          : `"${target}" is not a checkpoint folder, a run or a group (${(runErr as Error).message}; ${(groupErr as Error).message})`,
      );
    } finally {
      store.db.close();
    }
  }
}

async function configFor(t: Target, o: EvalOptions): Promise<LoadedConfig> {
  const fromFile = o.config ? await loadConfig(o.config, undefined, { job: 'eval' }) : undefined;
  const base = fromFile
    ? (JSON.parse(JSON.stringify(fromFile.cfg)) as Record<string, Record<string, unknown>>)
    : t.runCfg && !o.task
      ? (JSON.parse(JSON.stringify(t.runCfg)) as Record<string, Record<string, unknown>>)
      : undefined;
  if (!base && !o.task) throw new Error('give --task <kind> or --config <experiment config> (a run or group brings its own)');
  const hops = o.hops.split(',').map(Number);
  if (hops.some((h) => !Number.isInteger(h) || h < 1)) throw new Error(`--hops must be hop counts, comma-separated (got "${o.hops}")`);
  const task: Record<string, unknown> = base
    ? {
        ...base.task,
        ...(o.task ? { kind: o.task } : {}),
        ...(o.givenFlags?.seed ? { eval_seed: o.seed } : {}),
        ...(o.givenFlags?.hops ? { hops } : {}),
      }
    : { kind: o.task, eval_seed: o.seed, hops };
  if (o.dataset) task.dataset = o.dataset;
  const environment: Record<string, unknown> = { ...(base?.environment ?? {}) };
  if (o.tasks) environment.tasks = o.tasks;
  if (o.tools) environment.tools = o.tools.split(',').map((x) => x.trim());
  if (o.reward) environment.reward = o.reward;
  if (o.format) environment.format = o.format;
  const evalSection = { ...(base?.eval ?? {}), ...(o.n !== undefined ? { n_questions: o.n } : base ? {} : { n_questions: 64 }) };
  const loaded = validateLoaded(
    { ...(base ?? {}), ...(o.device ? { device: o.device } : {}), model: { path: t.checkpoint }, task, environment, eval: evalSection },
    { file: o.config ?? (t.runCfg && !o.task ? join(t.runDir!, 'config.json') : '(command line)') },
  );
  // The rollout limits --config left out are sized from the task, as training sized them (the
  // validated copy above sets every key; a run's config.json holds the limits it trained with).
  return fromFile ? { ...loaded, defaults: fromFile.defaults } : loaded;
}

const harnessKeys = (r: HarnessResult) => Object.keys(r.overall).filter((k) => k !== 'questions' && k !== 'samples');

function printHarness(r: HarnessResult, title: string): void {
  const keys = harnessKeys(r);
  const cols = [['all', r.overall] as const, ...Object.entries(r.by?.groups ?? {}).map(([g, m]) => [`${r.by!.field}=${g}`, m] as const)];
  console.log(`${title}: ${r.overall.questions} questions × k=${r.k} samples; correct = ${r.scoredBy}`);
  console.log(
    renderTable(
      ['metric', ...cols.map(([c, m]) => `${c} (${m.questions})`)],
      keys.map((k) => [k, ...cols.map(([, m]) => (m[k] === undefined ? '-' : m[k]!))]),
    ),
  );
}

/** Store the harness result with its run: `harness/*` metrics at the checkpoint's step, and <run>/eval/harness-step-N.json. */
function storeWithRun(t: Target, r: HarnessResult, meta: Record<string, unknown>): string | undefined {
  if (!t.runDir || t.step === undefined) return undefined;
  const dir = join(t.runDir, 'eval');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `harness-step-${String(t.step).padStart(6, '0')}-k${r.k}.json`);
  writeFileSync(file, JSON.stringify({ ...meta, ...r }, null, 2));
  if (workspaceExists() && t.runId) {
    const store = new Store(openDatabase());
    try {
      store.getRun(t.runId);
      store.writeMetrics(t.runId, t.step, harnessMetricKeys(r));
      store.log(
        t.runId,
        'info',
        `arbor eval --k ${r.k}: pass@1 ${r.overall['pass@1']?.toFixed(3)}, pass@${r.k} ${r.overall[`pass@${r.k}`]?.toFixed(3)} (${file})`,
      );
    } catch {
      // the run folder is not in this workspace's database: the JSON file is the record
    } finally {
      store.db.close();
    }
  }
  return file;
}

async function evalHarness(t: Target, o: EvalOptions & { k: number }): Promise<{ result: HarnessResult; file?: string; cfg: ExperimentConfig }> {
  const loaded = await configFor(t, o);
  const { cfg } = loaded;
  const session = await openTaskSession(loaded);
  for (const w of session.warnings ?? []) process.stderr.write(`warning: ${w}\n`);
  try {
    if (!session.sampleEval) throw new Error(`task "${cfg.task.kind}": this session cannot sample evaluation episodes`);
    const n = o.all ? o.n : cfg.eval.n_questions;
    let bar = progressBar(`eval k=${o.k}`, 1, { quiet: o.json });
    const sampled = await session.sampleEval({
      k: o.k,
      temperature: o.temperature,
      n,
      all: o.all,
      onProgress: (done, total) => {
        if (done <= 1) {
          bar.stop();
          bar = progressBar(`eval k=${o.k}`, total, { quiet: o.json });
        }
        bar.update(done);
      },
    });
    bar.stop();
    // EM and F1 from one greedy episode per question (eval.temperature, as in training's held-out evaluation).
    bar = progressBar('eval greedy', 1, { quiet: o.json });
    const greedy = await session.sampleEval({
      k: 1,
      temperature: cfg.eval.temperature,
      n,
      all: o.all,
      onProgress: (done, total) => {
        if (done <= 1) {
          bar.stop();
          bar = progressBar('eval greedy', total, { quiet: o.json });
        }
        bar.update(done);
      },
    });
    bar.stop();
    const result = scoreHarness(sampled, greedy, { k: o.k, by: o.by, passReward: o.passReward });
    const file = o.store ? storeWithRun(t, result, { checkpoint: t.checkpoint, task: cfg.task.kind, all: !!o.all, temperature: o.temperature }) : undefined;
    return { result, file, cfg };
  } finally {
    await session.close();
  }
}

export function register(program: Command): void {
  program
    .command('eval')
    .description('evaluate a checkpoint, a run (its best checkpoint, else its last) or every run of a group on held-out questions; --k N for pass@k')
    .argument('<target>', 'HF model folder (e.g. <run>/checkpoints/step-000040), a run id or folder, or a group id')
    .option('--task <task>', `task kind (${taskKindNames().join(', ')}); or give --config (a run or group brings its own)`)
    .option('--config <file>', 'an experiment config: its task and environment (format, tools, reward, task file)')
    .option('--tasks <file>', 'task custom: the JSONL task file (its held-out fifth is evaluated; all of it with --all)')
    .option('--tools <files>', 'your tool files, comma-separated')
    .option('--reward <file>', 'your reward file')
    .option('--format <name>', 'tool-call format: search-r1, hermes or tags')
    .option('--n <questions>', "number of held-out questions (default: the config's eval.n_questions, else 64)", intFlag('n', 1))
    .option('--seed <seed>', "held-out world seed (default: the config's task.eval_seed, else 1001)", intFlag('seed'), 1001)
    .option('--hops <list>', "hop counts, comma-separated (default: the config's task.hops, else 1,2)", '1,2')
    .option('--dataset <file>', 'task qa: the JSONL dataset (its held-out fifth is evaluated; all of it with --all)')
    .option('--k <n>', 'sample n episodes per question: pass@1..pass@n, mean@n, EM and F1 (greedy), format and tool-error rates', (v) => Number(v))
    .option('--by <field>', 'with --k: split the results by this task meta field (default: hops, when the tasks have it)')
    .option('--all', 'with --k: every task (the whole task file or dataset, not only the held-out split)')
    .option('--temperature <t>', 'with --k: sampling temperature of the k episodes', (v) => Number(v), 1)
    .option('--pass-reward <r>', 'with --k, for a task without gold answers: a sample is correct when its reward is at least this', (v) => Number(v), 1)
    .option('--no-store', 'with --k: do not store the result with the run')
    .option('--naive-rag', 'also run the naive RAG baseline on the same questions (without --k)')
    .option('--json', 'print the result as one JSON object on stdout')
    .option('--device <device>', `ONNX Runtime device: ${DEVICES.join(', ')} (default: the config's device)`, deviceOption)
    .action(async (target: string, o: EvalOptions, cmd: Command) => {
      o.givenFlags = { seed: given(cmd, 'seed'), hops: given(cmd, 'hops') };
      const harness = o.k !== undefined || o.by !== undefined || o.all;
      if (harness) {
        if (o.k === undefined) throw new Error('--by / --all belong to the harness: give --k <n> too (e.g. --k 8)');
        if (!Number.isInteger(o.k) || o.k < 1 || o.k > 256) throw new Error(`--k: "${o.k}" is not an integer from 1 to 256`);
        if (!(o.temperature > 0)) throw new Error(`--temperature: ${o.temperature}: k samples need a temperature > 0`);
        if (o.naiveRag) throw new Error('--naive-rag is not part of the --k harness; run it without --k');
      }
      if (o.n !== undefined && (!Number.isInteger(o.n) || o.n < 1)) throw new Error(`--n: "${o.n}" is not a positive integer`);
      const { targets, group } = resolveTargets(target);
      if (!harness) {
        if (targets.length !== 1) throw new Error('a group is evaluated with the harness: give --k <n>');
        const t = targets[0]!;
        const loaded = await configFor(t, o);
        const { cfg } = loaded;
        const n = cfg.eval.n_questions;
        const session = await openTaskSession(loaded);
        for (const w of session.warnings ?? []) process.stderr.write(`warning: ${w}\n`);
        try {
          const bar = progressBar('eval', n, { quiet: o.json });
          const res = evalMetrics(await session.evaluate(n, (done) => bar.update(done)));
          bar.stop();
          const rag = o.naiveRag && session.evaluateNaiveRag ? evalMetrics(await session.evaluateNaiveRag(n)) : undefined;
          if (o.json) console.log(JSON.stringify({ checkpoint: t.checkpoint, task: cfg.task.kind, n, policy: res, naiveRag: rag }));
          else
            console.log(
              renderTable(
                rag ? ['metric', 'policy', 'naive RAG'] : ['metric', 'policy'],
                Object.keys(res).map((k) => (rag ? [k, res[k]!, rag[k] ?? NaN] : [k, res[k]!])),
              ),
            );
        } finally {
          await session.close();
        }
        return;
      }
      const k = o.k!;
      const results: { run?: string; checkpoint: string; step?: number; task: string; file?: string; result: HarnessResult }[] = [];
      for (const [i, t] of targets.entries()) {
        if (targets.length > 1 && !o.json) process.stderr.write(`[${i + 1}/${targets.length}] run ${t.runId}: ${t.checkpoint}\n`);
        const r = await evalHarness(t, { ...o, k });
        results.push({ run: t.runId, checkpoint: t.checkpoint, step: t.step, task: r.cfg.task.kind, file: r.file, result: r.result });
        if (!o.json) printHarness(r.result, `${t.runId ? `run ${t.runId} ` : ''}${t.checkpoint}`);
        if (!o.json && r.file) console.log(`stored with run ${t.runId} (harness/* metrics at step ${t.step}; ${r.file})`);
      }
      if (!group) {
        const r = results[0]!;
        if (o.json) console.log(JSON.stringify({ checkpoint: r.checkpoint, run: r.run, step: r.step, task: r.task, ...r.result, stored: r.file }));
        return;
      }
      // A group: each overall metric over its runs (mean, sd, min/max, bootstrap interval).
      const keys = harnessKeys(results[0]!.result);
      const summary = Object.fromEntries(keys.map((key) => [key, summarize(results.map((r) => r.result.overall[key]!))]));
      if (o.json) console.log(JSON.stringify({ group, k, runs: results, summary }));
      else
        console.log(
          `\ngroup ${group}, ${results.length} runs\n` +
            renderTable(
              ['metric', 'mean', 'sd', 'min', 'max', '95% CI (bootstrap)'],
              keys.map((key) => {
                const s = summary[key]!;
                return [key, s.mean, s.sd, s.min, s.max, `[${s.lo.toFixed(3)}, ${s.hi.toFixed(3)}]`];
              }),
            ),
        );
    });
}
