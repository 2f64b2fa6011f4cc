/**
 * Rollout limits that fit the task. A config written from the README (Hermes format, a few tools)
 * renders prompts of 300+ tokens, so the schema defaults (max_total_length 384, max_new_tokens 32)
 * cut every SFT demonstration mid-call. Before the model is built, the task's prompts and a
 * sample of its demonstrations are measured (rendered with no practical limit):
 *  - limits the config left out are raised to fit them, with headroom, and said so;
 *  - limits the config sets that are too small are flagged, naming the key and the needed number
 *    (a prompt longer than max_total_length is refused: nothing could be generated).
 * Every demonstration is checked again when SFT uses it (cutDemosWarning): cut ones are flagged.
 */
import type { ExperimentConfig, LoadedConfig, RolloutLimitKey } from '../config/experiment';
import { rolloutTextPolicy } from '../rollout/engine';
import type { RolloutTask } from '../rollout/ports';
import type { Trajectory } from '../rollout/types';
import { stepSeed } from '../train/episode';
import { pickTasks } from '../train/rollout-port';
import type { TaskKit } from '../tasks/kit';

export interface LimitNeeds {
  /** Longest rendered prompt (tokens). */
  prompt: number;
  /** Longest model turn of a demonstration (tokens, its end token included). */
  turn: number;
  /** Longest demonstration: prompt + every turn (tokens). */
  total: number;
  /** Most model turns in a demonstration. */
  turns: number;
  demos: number;
}

/** Generous limits for measuring demonstrations (the text policy writes whole turns; nothing should cut them). */
export const MEASURE_LIMITS = { maxNewTokens: 4096, maxTotalLength: 32768, maxTurns: 32 } as const;

const roundUp = (x: number, to: number) => Math.ceil(x / to) * to;

export function demoNeeds(demos: Trajectory[], promptLengths: number[]): LimitNeeds {
  let turn = 0;
  let total = 0;
  let turns = 0;
  for (const t of demos) {
    const model = t.turns.filter((u) => u.role === 'model');
    turns = Math.max(turns, model.length);
    for (const u of model) turn = Math.max(turn, u.tokenIds.length);
    total = Math.max(total, t.promptIds.length + t.turns.reduce((a, u) => a + u.tokenIds.length, 0));
  }
  return { prompt: Math.max(0, ...promptLengths, ...demos.map((t) => t.promptIds.length)), turn, total, turns, demos: demos.length };
}

/** The rollout limits a run sizes (the config's rollout section). */
export type RolloutLimitSettings = Pick<ExperimentConfig['rollout'], RolloutLimitKey>;

/**
 * Raise the limits the config left out (`auto`: LoadedConfig.defaults) so that `needs` fit
 * (headroom: turns +25% rounded to 8, the total + one turn rounded to 32). Returns what was
 * changed and, for limits the config sets too small, what they would need (one line each).
 * Mutates `r` (the config's rollout section).
 */
export function fitLimits(r: RolloutLimitSettings, auto: ReadonlySet<RolloutLimitKey>, needs: LimitNeeds): { changes: string[]; problems: string[] } {
  const wantTotal = Math.max(needs.total, needs.prompt + 1);
  const problems: string[] = [];
  const changes: string[] = [];
  const set = (key: RolloutLimitKey, need: number, sized: number, what: string) => {
    if (r[key] >= need) return;
    if (auto.has(key)) {
      changes.push(`rollout.${key} ${r[key]} → ${sized} (${what})`);
      r[key] = sized;
    } else problems.push(`rollout.${key} is ${r[key]}, ${what}: set rollout.${key} ≥ ${need} (or leave it out to have it sized from the task)`);
  };
  set('max_new_tokens', needs.turn, roundUp(Math.ceil(needs.turn * 1.25), 8), `the longest demonstration turn is ${needs.turn} tokens`);
  set('max_turns', needs.turns, needs.turns, `a demonstration takes ${needs.turns} model turns`);
  set(
    'max_total_length',
    wantTotal,
    roundUp(wantTotal + r.max_new_tokens, 32),
    needs.demos ? `the longest demonstration is ${needs.total} tokens (its prompt ${needs.prompt})` : `the longest prompt is ${needs.prompt} tokens`,
  );
  if (r.max_new_tokens >= r.max_total_length && auto.has('max_total_length')) {
    const sized = roundUp(r.max_new_tokens + wantTotal, 32);
    changes.push(`rollout.max_total_length ${r.max_total_length} → ${sized} (more than max_new_tokens ${r.max_new_tokens})`);
    r.max_total_length = sized;
  }
  return { changes, problems };
}

/** Whether a limit cut this demonstration: the episode was truncated, or a model turn stopped at max_new_tokens / max_total_length. */
export function demoWasCut(t: Trajectory): boolean {
  return t.truncated || t.turns.some((u) => u.stop?.reason === 'max_new_tokens' || u.stop?.reason === 'max_total_length');
}

/**
 * What to say about demonstrations a limit cut (undefined when none was): the limits and, from
 * `whole` (the cut ones rendered without limits), the numbers they need.
 */
export function cutDemosWarning(demos: Trajectory[], r: RolloutLimitSettings, whole: LimitNeeds): string | undefined {
  const cut = demos.filter(demoWasCut);
  if (!cut.length) return undefined;
  const why = cut[0]!.turns.find((u) => u.stop?.reason === 'max_new_tokens' || u.stop?.reason === 'max_total_length')?.stop?.reason ?? 'max_turns';
  const need: string[] = [];
  if (whole.turn > r.max_new_tokens) need.push(`rollout.max_new_tokens ≥ ${whole.turn} (is ${r.max_new_tokens})`);
  if (whole.total > r.max_total_length) need.push(`rollout.max_total_length ≥ ${whole.total} (is ${r.max_total_length})`);
  if (whole.turns > r.max_turns) need.push(`rollout.max_turns ≥ ${whole.turns} (is ${r.max_turns})`);
  return (
    `sft: ${cut.length} of ${demos.length} demonstrations were cut by the rollout limits (task ${cut[0]!.taskId} stopped at ${why}); SFT on them learns cut calls. ` +
    `They need ${need.join(', ') || 'larger limits'}; set them (or leave them out of the config to have them sized from the task)`
  );
}

/** Rendered prompt lengths of up to `max` tasks (spread over the list). */
export async function promptLengths(tasks: RolloutTask[], max = 200): Promise<number[]> {
  const step = Math.max(1, Math.floor(tasks.length / max));
  const out: number[] = [];
  for (let i = 0; i < tasks.length && out.length < max; i += step) out.push((await tasks[i]!.createEnv().prompt()).ids.length);
  return out;
}

/**
 * Before the model is built: the task's prompts and a sample of its scripted expert's demonstrations
 * (rendered with no practical limit; measured with or without a warm start) against the rollout
 * limits. Limits the config left out are raised to fit
 * ("limits sized from the task: …"); limits it sets too small are flagged with what they need
 * ("demonstrations would be cut: …"); a prompt longer than max_total_length is refused.
 */
export async function sizeLimits(cfg: ExperimentConfig, defaults: LoadedConfig['defaults'], kit: TaskKit): Promise<string[]> {
  const prompts = await promptLengths([...kit.trainTasks, ...kit.evalTasks]);
  let demos: Awaited<ReturnType<typeof rolloutTextPolicy>>['trajectories'] = [];
  // The scripted expert's turns are what a right turn needs, with or without a warm start: `arbor eval`
  // or `rollout` of a checkpoint (no warm start) would otherwise cut its calls at the default limit.
  if (!cfg.sft.demos_path && kit.expert) {
    const sample = pickTasks(kit.trainTasks, Math.min(cfg.sft.demos, 32), stepSeed(cfg.seed, 0, 4000));
    demos = (await rolloutTextPolicy(kit.expert, { tasks: sample, n: 1, seed: cfg.seed, limits: MEASURE_LIMITS, tokenizer: kit.tokenizer })).trajectories;
  }
  const { changes, problems } = fitLimits(cfg.rollout, defaults, demoNeeds(demos, prompts));
  const longest = Math.max(0, ...prompts);
  if (longest + 1 > cfg.rollout.max_total_length)
    throw new Error(
      `rollout.max_total_length is ${cfg.rollout.max_total_length}, the longest prompt is ${longest} tokens: set rollout.max_total_length ≥ ${longest + cfg.rollout.max_new_tokens} (or leave it out to have it sized from the task)`,
    );
  return [...changes.map((c) => `limits sized from the task: ${c}`), ...problems.map((p) => `demonstrations would be cut: ${p}`)];
}
