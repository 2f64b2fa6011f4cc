/**
 * `arbor demo [--json]`: tiny model → baselines → SFT warm start → GRPO (→ PPO) on the synthetic
 * multi-hop search task, evaluated on a held-out world; prints an Agent-R1-shaped table.
 */
import type { Command } from 'commander';
import { intFlag, numberFlag } from '../flags';
import { DEMO_BUDGET_SECONDS, runDemo } from '../../recipes/demo';
import { parseAlgorithms, runAblation, type AblationResult } from '../../recipes/ablation';
import { progressBar, renderTable, type Progress } from '../progress';
import type { ExperimentConfig } from '../../config/experiment';
import { openTaskSession } from '../../run/open';
import { interruptSignal } from '../lifecycle';
import { openCliStoreRun } from '../../run/store-run';
import { basename, dirname } from 'node:path';

export function register(program: Command): void {
  program
    .command('demo')
    .description('train a tiny search agent end to end (SFT warm start, then GRPO) and compare it with baselines')
    .option('--json', 'print the results as one JSON object on stdout')
    .option(
      '--budget <seconds>',
      'wall-clock budget in seconds for the whole demo (its training phases stop in time for the final evaluations; PPO runs only if it fits)',
      numberFlag('budget', 0),
      DEMO_BUDGET_SECONDS,
    )
    .option('--config <file>', 'use another experiment config instead of resources/configs/demo.yaml')
    .option('--no-store', 'do not record the runs (the SFT warm start, the RL runs) in the workspace database')
    .option('--seed <n>', "override the demo config's seed (SFT and RL draws)", (v) => Number(v))
    .option(
      '--algorithms <list>',
      'instead: the RL algorithms side by side (grpo,gspo,gigpo,arpo,aepo) from one SFT checkpoint, same seed and rollout token budget',
    )
    .option('--token-budget <tokens>', 'with --algorithms: rollout model tokens each algorithm trains on', intFlag('token-budget', 1), 100_000)
    .action(
      async (o: { json?: boolean; budget: number; config?: string; store: boolean; seed?: number; algorithms?: string; tokenBudget: number }, cmd: Command) => {
        if (o.seed !== undefined && (!Number.isInteger(o.seed) || o.seed < 0)) throw new Error(`--seed: "${o.seed}" is not a non-negative integer`);
        if (o.seed !== undefined && o.algorithms !== undefined) throw new Error('--seed: applies to the demo itself; give the ablation its seed in --config');
        if (o.algorithms !== undefined) {
          if (cmd.getOptionValueSource('budget') === 'cli')
            throw new Error('--budget: applies to the demo’s own GRPO/PPO runs; with --algorithms each algorithm stops at --token-budget');
          return ablation({ ...o, algorithms: o.algorithms });
        }
        if (cmd.getOptionValueSource('tokenBudget') === 'cli') throw new Error('--token-budget: applies only with --algorithms');
        await withProgress(
          o,
          'demo',
          (phase) => phase,
          (common) => runDemo({ ...common, budgetSeconds: o.budget, seed: o.seed }),
          (res) => {
            const pct = (x: number) => (Number.isNaN(x) ? '-' : (100 * x).toFixed(1));
            console.log(
              '\n' +
                renderTable(
                  ['method', 'EM all', 'EM 1-hop', 'EM 2-hop', 'tool calls/ep', 'time (s)'],
                  res.rows.map((r) => [
                    r.method,
                    pct(r.exactMatch),
                    pct(r.exactMatch1Hop),
                    pct(r.exactMatch2Hop),
                    r.toolCallsPerEpisode.toFixed(2),
                    r.seconds.toFixed(0),
                  ]),
                ),
            );
            console.log(
              `\n2-hop: SFT+GRPO − SFT = ${res.bar.grpoMinusSft2Hop.toFixed(1)} EM points; beats naive RAG: ${res.bar.grpoBeatsNaiveRag2Hop ? 'yes' : 'no'} → bar ${res.bar.passed ? 'met' : 'NOT met'}`,
            );
            const sec = res.seconds;
            console.log(
              '\n' +
                renderTable(
                  ['phase', 'SFT', 'rollout', 'scoring', 'update', 'evaluation', 'other', 'total'],
                  [['seconds', ...[sec.sft, sec.rollout, sec.scoring, sec.update, sec.evaluation, sec.other, sec.total].map((x) => x.toFixed(1))]],
                ),
            );
            for (const s of res.skipped) console.log(`skipped: ${s}`);
            console.log(`total ${res.totalSeconds.toFixed(0)} s; run folder ${res.runDir}`);
          },
        );
      },
    );
}

/** `arbor demo --algorithms …`: the ablation table (engine/recipes/ablation.ts). */
async function ablation(o: { json?: boolean; config?: string; store: boolean; algorithms: string; tokenBudget: number }): Promise<void> {
  const algorithms = parseAlgorithms(o.algorithms);
  await withProgress(
    o,
    'ablation',
    (phase) => (phase === 'sft' ? 'sft' : `${phase} tokens`),
    (common) => runAblation({ ...common, algorithms, tokenBudget: o.tokenBudget }),
    (res: AblationResult) => {
      const hops = [...new Set([res.sft, ...res.rows].flatMap((r) => Object.keys(r.exactMatchByHops).map(Number)))].sort((a, b) => a - b);
      const pct = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? '-' : (100 * x).toFixed(1));
      console.log(
        '\n' +
          renderTable(
            ['algorithm', 'EM all', ...hops.map((h) => `EM ${h}-hop`), 'tool calls/ep', 'tokens', 'steps', 'time (s)'],
            [
              ['SFT (start)', pct(res.sft.exactMatch), ...hops.map((h) => pct(res.sft.exactMatchByHops[h])), '', '', '', res.sft.seconds.toFixed(0)],
              ...res.rows.map((r) => [
                r.algorithm,
                pct(r.exactMatch),
                ...hops.map((h) => pct(r.exactMatchByHops[h])),
                r.toolCallsPerEpisode.toFixed(2),
                String(r.tokens),
                String(r.steps),
                r.seconds.toFixed(0),
              ]),
            ],
          ),
      );
      console.log(
        `\nseed ${res.seed}; rollout token budget ${res.tokenBudget} per algorithm; ${res.miniBatches} mini-batches per step; total ${res.totalSeconds.toFixed(0)} s; run folder ${res.runDir}`,
      );
    },
  );
}

/**
 * What the demo and the ablation share: Ctrl-C stops after the current step; each phase's runs
 * are recorded in the workspace (unless --no-store), with a stage line per stage and a progress
 * bar per phase (loss for SFT; reward, exact match and tool calls for RL); the result is printed
 * as one JSON object under --json, else by `print`.
 */
async function withProgress<R>(
  o: { json?: boolean; store: boolean; config?: string },
  runName: string,
  barLabel: (phase: string) => string,
  run: (common: { openTaskSession: typeof openTaskSession; configFile?: string; signal: AbortSignal } & ProgressCallbacks) => Promise<R>,
  print: (res: R) => void,
): Promise<void> {
  const stop = interruptSignal(() => process.stderr.write('\nstopping after this step; Ctrl-C again to quit now\n'));
  const cb = progressCallbacks(o, runName, barLabel);
  try {
    const res = await run({ openTaskSession, configFile: o.config, signal: stop.signal, ...cb.callbacks });
    cb.stop();
    if (o.json) console.log(JSON.stringify(res));
    else print(res);
  } finally {
    cb.stop();
    stop.dispose();
  }
}

type ProgressCallbacks = ReturnType<typeof progressCallbacks>['callbacks'];

/** The record, stage and step callbacks behind withProgress. */
function progressCallbacks(o: { json?: boolean; store: boolean }, runName: string, barLabel: (phase: string) => string) {
  let bar: Progress | undefined;
  let barPhase = '';
  const callbacks = {
    record: o.store
      ? (phase: string, cfg: ExperimentConfig, runDir: string, link?: { parentId?: string }) => {
          // The SFT warm start is its own run (template sft, tag sft-warm-start), the parent of the RL runs.
          const sft = phase === 'sft';
          const r = openCliStoreRun(
            `${basename(dirname(runDir))}-${phase}`,
            { ...cfg, name: `${runName} ${sft ? 'SFT' : phase}` },
            { resume: false, template: sft ? 'sft' : cfg.task.kind, dir: runDir, parentId: link?.parentId, tags: sft ? ['sft-warm-start'] : undefined },
          );
          return { id: r.runId, sink: r.sink, finish: (status: Parameters<typeof r.finish>[0], error?: string) => r.finish(status, error) };
        }
      : undefined,
    onStage: (s: string) => {
      bar?.stop();
      bar = undefined;
      if (!o.json) process.stderr.write(`• ${s}\n`);
    },
    onStep: (phase: string, done: number, total: number, m: Record<string, number>) => {
      if (barPhase !== phase || !bar) {
        bar?.stop();
        bar = progressBar(barLabel(phase), total, { quiet: o.json, fields: phase === 'sft' ? ['loss'] : ['reward', 'em', 'tools'] });
        barPhase = phase;
      }
      bar.update(done, phase === 'sft' ? { loss: m['sft/loss']! } : { reward: m['reward/mean']!, em: m['exact_match']!, tools: m['tool_calls_per_episode']! });
    },
  };
  return { callbacks, stop: () => bar?.stop() };
}
