/**
 * environment.judge in training: a RolloutPort that hands every group its inner port sampled to the
 * judge (engine/env/judge.ts) before the loop sees it. Each `sample` call returns whole groups
 * (with dynamic sampling, each refill round too), so rank mode always sees a GRPO group whole.
 *
 * The reward becomes (1 − mix) · task reward + mix · judge score; the score is the component
 * `judge`, and `judge_failed` is 1 on a trajectory the judge could not score. A group with a failed
 * judgement is left out of the update (`Episode.unscored`, counted as judge/dropped_groups): its
 * rewards are incomplete and a group baseline over them would be wrong. Its trajectories are still
 * stored, with the failure, so the workbench shows what the judge answered.
 */
import { mixSeed } from '../base/rng';
import type { ExperimentConfig } from '../config/experiment';
import { Judge, type JudgeOptions } from '../env/judge';
import { promptTokenCount, type Episode } from './episode';
import type { RolloutPort } from './loop';

type JudgeSection = NonNullable<ExperimentConfig['environment']['judge']>;

/** The judge's options from its config section; the key from the environment variable it names (never from the config). */
export function judgeOptions(j: JudgeSection, env: NodeJS.ProcessEnv = process.env): JudgeOptions {
  let apiKey: string | undefined;
  if (j.api_key_env) {
    apiKey = env[j.api_key_env];
    if (!apiKey) throw new Error(`environment.judge.api_key_env: the environment variable ${j.api_key_env} is not set (the judge's API key is read from it)`);
  }
  return {
    baseUrl: j.base_url,
    model: j.model,
    apiKey,
    rubric: j.rubric,
    mode: j.mode,
    retries: j.retries,
    timeoutMs: j.timeout_ms,
    agreement: j.agreement,
    maxTokens: j.max_tokens,
    temperature: j.temperature,
    concurrency: j.concurrency,
    ...(j.price ? { price: { inputPerMtok: j.price.input_per_mtok, outputPerMtok: j.price.output_per_mtok } } : {}),
  };
}

/** The episode after its prompt as text: each run of model tokens as an assistant turn, each observation as a tool turn. */
export function episodeTranscript(e: Episode, decode: (ids: number[]) => string): string {
  const out: string[] = [];
  let i = promptTokenCount(e);
  while (i < e.tokens.length) {
    const m = e.lossMask[i];
    let j = i;
    while (j < e.tokens.length && e.lossMask[j] === m) j++;
    const text = decode(Array.from(e.tokens.subarray(i, j))).trim();
    out.push(`[${m ? 'assistant' : 'tool'}]\n${text}`);
    i = j;
  }
  return out.join('\n');
}

/** The task as the judge sees it: the question the task kit kept (meta.question), else the decoded prompt. */
export function episodeTask(e: Episode, decode: (ids: number[]) => string): string {
  const q = e.meta?.question;
  return typeof q === 'string' && q.trim() ? q : decode(Array.from(e.tokens.subarray(0, promptTokenCount(e)))).trim();
}

export interface JudgedRolloutOptions {
  decode: (ids: number[]) => string;
  /** environment.judge.mix */
  mix: number;
  /** environment.judge.references: show the task's gold answers (meta.answers). */
  references: boolean;
}

export function judgedRolloutPort(inner: RolloutPort, judge: Judge, o: JudgedRolloutOptions): RolloutPort {
  let dropped = 0;
  return {
    async sample(args) {
      const episodes = await inner.sample(args);
      const groups = new Map<number, Episode[]>();
      for (const e of episodes) groups.set(e.group, [...(groups.get(e.group) ?? []), e]);
      await Promise.all(
        [...groups].map(async ([g, eps]) => {
          eps.sort((a, b) => a.sample - b.sample);
          const golds = eps[0]!.meta?.answers;
          const res = await judge.judgeGroup({
            task: episodeTask(eps[0]!, o.decode),
            ...(o.references && Array.isArray(golds) ? { references: golds.map(String) } : {}),
            samples: eps.map((e) => ({ id: e.sample, transcript: episodeTranscript(e, o.decode) })),
            // The shuffled order: from the step's (round's) seed, which derives from the run's seed, and the group.
            seed: mixSeed(args.seed, g, 0x6a756467),
          });
          const failedIn = eps.filter((e) => res.samples.get(e.sample)?.failed !== undefined);
          if (failedIn.length) dropped++;
          // Rank mode: how many distinct trajectories the request compared (identical ones are shown once).
          const distinct = res.calls[0]?.order.length ?? eps.length;
          for (const e of eps) {
            const r = res.samples.get(e.sample) ?? { failed: 'no judgement' };
            const calls = judge.o.mode === 'score' ? res.calls.filter((c) => c.order[0] === e.sample) : e === eps[0] ? res.calls : undefined;
            e.judge = {
              mode: judge.o.mode,
              model: judge.o.model,
              ...(r.score !== undefined ? { score: r.score } : {}),
              ...(r.rank !== undefined ? { rank: r.rank } : {}),
              ...(judge.o.mode === 'rank' ? { of: distinct } : {}),
              ...(r.failed !== undefined ? { failed: r.failed } : {}),
              ...(res.agreement !== undefined ? { agreement: res.agreement } : {}),
              ...(calls?.length ? { calls } : {}),
            };
            e.rewardComponents = { ...e.rewardComponents, judge_failed: r.failed !== undefined ? 1 : 0 };
            if (r.score !== undefined) {
              e.rewardComponents.judge = r.score;
              e.reward = (1 - o.mix) * e.reward + o.mix * r.score;
            }
            if (failedIn.length)
              e.unscored = r.failed !== undefined ? `judge: ${r.failed}` : `judge: left out with its group (sample ${failedIn[0]!.sample}'s judgement failed)`;
          }
        }),
      );
      return episodes;
    },
    takeMetrics() {
      const m = { ...inner.takeMetrics?.(), ...judge.takeMetrics() };
      if (Object.keys(m).some((k) => k.startsWith('judge/'))) m['judge/dropped_groups'] = dropped;
      dropped = 0;
      return m;
    },
  };
}

/** The config's judge around a rollout port (environment.judge), or the port as it is. */
export function withJudge(cfg: { environment: { judge?: JudgeSection | null } }, inner: RolloutPort, decode: (ids: number[]) => string): RolloutPort {
  const j = cfg.environment.judge;
  if (!j) return inner;
  return judgedRolloutPort(inner, new Judge(judgeOptions(j)), { decode, mix: j.mix, references: j.references });
}
