/**
 * `arbor demo --algorithms grpo,gspo,gigpo`: the RL algorithms side by side on the demo task.
 * One SFT warm start (the demo config's), then each algorithm trains from that same checkpoint
 * with the same seed and config until it has generated the same number of rollout model tokens
 * (`tokenBudget`, counting dynamic-sampling refills), and is evaluated on the same held-out
 * questions: EM by hop count, tool calls per episode, tokens generated, wall time.
 *
 * The algorithms differ only in what ABLATION_ALGORITHMS sets; everything else is the config's.
 * All of them run `ablationMiniBatches` mini-batches per step so that GSPO (whose sequence
 * ratio differs from PPO's only off-policy) is not trivially GRPO.
 */
import { join } from 'node:path';
import { loadConfig, validateConfig, type ExperimentConfig, type LoadedConfig } from '../config/experiment';
import { DEMO_CONFIG, recordedSft, runRlPhase, sftModel, type PhaseRecorder, type SftOrigin } from './demo';
import { evalMetrics } from '../tasks/kit';
import { createRunDir, type TaskSession } from '../run/run-dir';

/**
 * What each algorithm name sets in `algorithm` and `rollout` (on top of the config's). ARPO and
 * AEPO are GRPO over branching rollouts (rollout.branching, defaults: the ARPO release's
 * constants); AEPO also uses its entropy-balanced clipping loss.
 */
export const ABLATION_ALGORITHMS: Record<string, { algorithm: Record<string, unknown>; rollout?: Record<string, unknown> }> = {
  grpo: { algorithm: { adv_estimator: 'grpo', policy_loss: 'ppo' } },
  gspo: { algorithm: { adv_estimator: 'grpo', policy_loss: 'gspo', loss_agg_mode: 'seq-mean-token-mean' } },
  gigpo: { algorithm: { adv_estimator: 'gigpo', policy_loss: 'ppo' } },
  arpo: { algorithm: { adv_estimator: 'grpo', policy_loss: 'ppo' }, rollout: { branching: { mode: 'arpo' } } },
  aepo: { algorithm: { adv_estimator: 'grpo', policy_loss: 'aepo' }, rollout: { branching: { mode: 'aepo' } } },
};

export interface AblationRow {
  algorithm: string;
  /** Held-out exact match, overall and by hop count. */
  exactMatch: number;
  exactMatchByHops: Record<number, number>;
  toolCallsPerEpisode: number;
  /** Rollout model tokens generated in training (incl. refills), and the steps they took. */
  tokens: number;
  steps: number;
  /** Wall time of the RL training (without the final evaluation). */
  seconds: number;
  /** The run folder of this algorithm. */
  runDir: string;
}

export interface AblationResult {
  config: string;
  runDir: string;
  seed: number;
  tokenBudget: number;
  miniBatches: number;
  sft: { exactMatch: number; exactMatchByHops: Record<number, number>; seconds: number };
  rows: AblationRow[];
  totalSeconds: number;
}

export interface AblationOptions {
  openTaskSession: (loaded: LoadedConfig) => Promise<TaskSession>;
  algorithms: string[];
  /** Rollout model tokens per algorithm; default 100 000. */
  tokenBudget?: number;
  /** Mini-batches per step for every algorithm (default 2). */
  miniBatches?: number;
  configFile?: string;
  signal?: AbortSignal;
  onStage?: (stage: string) => void;
  onStep?: (phase: string, tokens: number, budget: number, m: Record<string, number>) => void;
  record?: PhaseRecorder;
}

/** Check `--algorithms` names before any work starts. */
export function parseAlgorithms(list: string): string[] {
  const names = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!names.length) throw new Error('--algorithms: give at least one of ' + Object.keys(ABLATION_ALGORITHMS).join(', '));
  for (const n of names)
    if (!ABLATION_ALGORITHMS[n]) throw new Error(`--algorithms: unknown algorithm "${n}"; available: ${Object.keys(ABLATION_ALGORITHMS).join(', ')}`);
  if (new Set(names).size !== names.length) throw new Error(`--algorithms: "${list}" names an algorithm twice`);
  return names;
}

export async function runAblation(opts: AblationOptions): Promise<AblationResult> {
  const t0 = performance.now();
  const configFile = opts.configFile ?? DEMO_CONFIG;
  const loaded = await loadConfig(configFile, undefined, { job: 'demo' });
  const { cfg } = loaded;
  const algorithms = opts.algorithms.map((a) => parseAlgorithms(a)[0]!);
  const tokenBudget = opts.tokenBudget ?? 100_000;
  if (!(tokenBudget > 0)) throw new Error(`--token-budget: must be a positive number of tokens, got ${tokenBudget}`);
  const miniBatches = opts.miniBatches ?? 2;
  // Validate every algorithm's config up front (a bad combination fails before SFT runs).
  const cfgFor = (name: string, model: ExperimentConfig['model']) =>
    validateConfig(
      {
        ...structuredClone(cfg),
        sft: undefined, // the shared SFT phase ran already; the RL runs' configs do not carry it
        model,
        steps: 1_000_000,
        algorithm: { ...cfg.algorithm, mini_batches: miniBatches, ...ABLATION_ALGORITHMS[name]!.algorithm },
        // The arm sets the branching mode; the config file's other branching settings (α, β, beam, …) stay.
        rollout: {
          ...cfg.rollout,
          ...ABLATION_ALGORITHMS[name]!.rollout,
          branching: { ...cfg.rollout.branching, ...(ABLATION_ALGORITHMS[name]!.rollout?.branching as object | undefined) },
        },
      },
      { checkFiles: false },
    );
  for (const a of algorithms) cfgFor(a, cfg.model);
  const { dir } = createRunDir({ ...cfg, name: `${cfg.name ?? 'run'}-ablation` }, loaded.dir);
  const stage = (s: string) => opts.onStage?.(s);

  stage('SFT warm start on scripted-expert demonstrations (shared by every algorithm)');
  const t = performance.now();
  const base = await opts.openTaskSession(loaded);
  const sftDir = join(dir, 'sft');
  let sftEval;
  let sftCheckpoint: string;
  let origin: SftOrigin;
  try {
    // Recorded as its own run, the parent of every algorithm's run.
    const sft = await recordedSft(opts.record, cfg, sftDir, base, {
      signal: opts.signal,
      onStep: (s, total, m) => opts.onStep?.('sft', s, total, m),
    });
    sftCheckpoint = sft.start!;
    sftEval = await base.evaluate(cfg.eval.n_questions);
    origin = { runId: sft.runId, step: sft.steps, eval: evalMetrics(sftEval) };
  } finally {
    await base.close();
  }
  const result: AblationResult = {
    config: configFile,
    runDir: dir,
    seed: cfg.seed,
    tokenBudget,
    miniBatches,
    sft: { exactMatch: sftEval.exactMatch, exactMatchByHops: sftEval.exactMatchByHops, seconds: (performance.now() - t) / 1000 },
    rows: [],
    totalSeconds: 0,
  };

  for (const name of algorithms) {
    if (opts.signal?.aborted) break;
    stage(`${name} from the SFT weights, until ${tokenBudget} rollout tokens`);
    const rlCfg = cfgFor(name, sftModel(cfg, sftCheckpoint));
    const stop = new AbortController();
    const onUser = () => stop.abort();
    opts.signal?.addEventListener('abort', onUser);
    let tokens = 0;
    let steps = 0;
    const onStep = (s: number, m: Record<string, number>) => {
      steps = s;
      tokens += m['rollout/model_tokens'] ?? 0;
      opts.onStep?.(name, Math.min(tokens, tokenBudget), tokenBudget, m);
      if (tokens >= tokenBudget) stop.abort();
    };
    const runDir = join(dir, name);
    try {
      await runRlPhase(
        opts,
        name,
        { cfg: rlCfg, configDir: loaded.dir },
        runDir,
        { signal: stop.signal, onStep },
        async (session, started) => {
          const seconds = (performance.now() - started) / 1000;
          const e = await session.evaluate(cfg.eval.n_questions);
          result.rows.push({
            algorithm: name,
            exactMatch: e.exactMatch,
            exactMatchByHops: e.exactMatchByHops,
            toolCallsPerEpisode: e.toolCallsPerEpisode,
            tokens,
            steps,
            seconds,
            runDir,
          });
          return opts.signal?.aborted ? 'stopped' : 'completed';
        },
        origin,
      );
    } finally {
      opts.signal?.removeEventListener('abort', onUser);
    }
  }
  result.totalSeconds = (performance.now() - t0) / 1000;
  return result;
}
