/**
 * On-policy distillation (algorithm.distill; Thinking Machines' on-policy distillation, TRL's GKD
 * with λ = 1): the student samples, a teacher scores every sampled token, and the per-token
 * advantage is the negative reverse KL estimate
 *
 *     A_t = −coef · (log π_student(y_t | y_<t) − log π_teacher(y_t | y_<t))
 *
 * on the model's tokens (0 elsewhere), with log π_student the old policy's logprob (the weights
 * that sampled, as the PPO ratio uses; both at rollout.temperature). Alone, or added to the estimator's advantage of the task
 * reward (`mix_with_reward`). The teacher is a model folder loaded once on the run's device with
 * its own score session (engine/model/runtime.ts PolicyModel, frozen), which the loop calls in
 * pieces of the update's micro-batch as it does the policy's (loop.ts scorePieceSize); it must use the student's
 * tokenizer — its logprobs are of the student's token ids — which is checked by vocabulary.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PolicyModel, type PolicyModelOptions } from '../model/runtime';
import type { Episode } from './episode';
import type { ScorePort } from './loop';

/** A tokenizer.json's vocabulary as id → token (the model's vocabulary and the added tokens). */
export function tokenizerVocabulary(folder: string): Map<number, string> {
  const file = join(folder, 'tokenizer.json');
  if (!existsSync(file)) throw new Error(`${folder}: no tokenizer.json`);
  const j = JSON.parse(readFileSync(file, 'utf8')) as { model?: { vocab?: unknown }; added_tokens?: { id: number; content: string }[] };
  const out = new Map<number, string>();
  const v = j.model?.vocab;
  if (Array.isArray(v)) v.forEach((entry, id) => out.set(id, String(Array.isArray(entry) ? entry[0] : entry)));
  else if (v && typeof v === 'object') for (const [tok, id] of Object.entries(v as Record<string, number>)) out.set(id, tok);
  for (const a of j.added_tokens ?? []) out.set(a.id, a.content);
  return out;
}

/**
 * The teacher must have the student's tokenizer: the same token for every id. Throws naming both
 * vocabularies (folder, size) and the first id where they differ.
 */
export function checkSameTokenizer(student: string | undefined, teacher: string): void {
  if (!student)
    throw new Error(
      `algorithm.distill.teacher: the student has no tokenizer folder to check the teacher's against (give model.path, a model folder with tokenizer.json)`,
    );
  const a = tokenizerVocabulary(student);
  let b: Map<number, string>;
  try {
    b = tokenizerVocabulary(teacher);
  } catch (e) {
    throw new Error(`algorithm.distill.teacher: ${(e as Error).message} (the teacher must have the student's tokenizer)`);
  }
  const ids = [...new Set([...a.keys(), ...b.keys()])].sort((x, y) => x - y);
  const diff = ids.find((id) => a.get(id) !== b.get(id));
  if (diff === undefined) return;
  const show = (t: string | undefined) => (t === undefined ? 'absent' : JSON.stringify(t));
  throw new Error(
    `algorithm.distill.teacher: the teacher's vocabulary (${teacher}/tokenizer.json, ${b.size} tokens) is not the student's ` +
      `(${student}/tokenizer.json, ${a.size} tokens): id ${diff} is ${show(a.get(diff))} in the student's and ${show(b.get(diff))} in the teacher's. ` +
      `The teacher scores the student's token ids, so both need the same tokenizer.`,
  );
}

/** Per-token distillation advantages: −coef · (old − teacher) on model tokens. */
export function distillAdvantages(
  episodes: Episode[],
  oldLogprobs: Map<Episode, Float32Array>,
  teacherLogprobs: Map<Episode, Float32Array>,
  coef: number,
): Map<Episode, Float32Array> {
  return new Map(
    episodes.map((e) => {
      const old = oldLogprobs.get(e)!;
      const t = teacherLogprobs.get(e)!;
      const a = new Float32Array(e.tokens.length);
      for (let i = 0; i < a.length; i++) if (e.lossMask[i]) a[i] = -coef * (old[i]! - t[i]!);
      return [e, a] as const;
    }),
  );
}

/** distill/* metrics: the mean per-token reverse KL estimate and the teacher's mean logprob over model tokens. */
export function distillMetrics(
  episodes: Episode[],
  oldLogprobs: Map<Episode, Float32Array>,
  teacherLogprobs: Map<Episode, Float32Array>,
): Record<string, number> {
  let kl = 0;
  let lp = 0;
  let n = 0;
  for (const e of episodes) {
    const old = oldLogprobs.get(e)!;
    const t = teacherLogprobs.get(e)!;
    for (let i = 0; i < e.lossMask.length; i++)
      if (e.lossMask[i]) {
        kl += old[i]! - t[i]!;
        lp += t[i]!;
        n++;
      }
  }
  return { 'distill/reverse_kl': n ? kl / n : 0, 'distill/teacher_logprob': n ? lp / n : 0 };
}

/** A packed [B, T] score result as one array per episode aligned with its tokens (position t: the logprob of token t; 0 at t = 0). */
function perEpisode(packed: Float32Array, T: number, episodes: Episode[]): Float32Array[] {
  return episodes.map((e, b) => {
    const out = new Float32Array(e.tokens.length);
    for (let t = 1; t < e.tokens.length; t++) out[t] = packed[b * T + t - 1]!;
    return out;
  });
}

export interface Teacher extends ScorePort {
  model: PolicyModel;
  close(): Promise<void>;
}

/**
 * The config's teacher, loaded (its own weights and score session, frozen) after its tokenizer is
 * checked against the student's folder. It scores at rollout.temperature, as the student is
 * scored (the reverse KL between the two tempered distributions, as TRL's GKD divides both
 * logits by its temperature).
 */
export function openTeacher(
  cfg: { algorithm: { distill?: { teacher: string } | null }; rollout: { temperature: number } },
  studentTokenizerFolder: string | undefined,
  opts: PolicyModelOptions,
): Teacher {
  const d = cfg.algorithm.distill;
  if (!d) throw new Error('algorithm.distill is not set');
  checkSameTokenizer(studentTokenizerFolder, d.teacher);
  const model = PolicyModel.load(d.teacher, { backend: opts.backend, threads: opts.threads, providers: opts.providers });
  return {
    model,
    async score(episodes) {
      const r = await model.score(
        episodes.map((e) => Array.from(e.tokens)),
        { entropy: false, temperature: cfg.rollout.temperature },
      );
      return { logprobs: perEpisode(r.logprobs, r.batch.length, episodes) };
    },
    close: () => model.dispose(),
  };
}
