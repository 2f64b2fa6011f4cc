/**
 * Rewards from a model: an LLM judge reached through any OpenAI-compatible `/chat/completions`
 * endpoint (a hosted API, a local server, or `arbor serve-model` of another checkpoint), with a
 * rubric, in two modes (environment.judge.mode):
 *
 * - `score`: one request per trajectory; the answer is `{"score": s}` with s in [0, 1].
 * - `rank`: the whole GRPO group in one request (RULER's shape): the group's distinct
 *   trajectories, numbered in a seeded shuffled order; the answer is
 *   `{"scores": [{"trajectory": 1, "score": s, "explanation": "…"}, …]}`, one entry per
 *   trajectory shown. With `agreement`, a second request shows them in the reversed order; the
 *   pairwise order agreement of the two answers is measured and each trajectory gets the mean of
 *   its two scores.
 *
 * An answer that is not that JSON (or an HTTP error, a 429, a timeout) is retried up to
 * `retries` times, then reported as a named failure (`failed`: the last problem) — never a thrown
 * error and never a score of 0. Identical transcripts get identical scores: a group shows each
 * distinct transcript once, and answers are cached by content (the request's text, order
 * aside), so the same trajectories asked again are not sent again.
 *
 * The API key is read from the environment variable the config names (`api_key_env`) when the
 * judge is built; it is never part of the config, a record or a log.
 */
import { createHash } from 'node:crypto';
import { mulberry32, shuffled } from '../base/rng';

export interface JudgeOptions {
  baseUrl: string;
  model: string;
  /** The key itself (read from the environment by the caller), or none. */
  apiKey?: string;
  rubric: string;
  mode: 'score' | 'rank';
  retries: number;
  timeoutMs: number;
  agreement: boolean;
  maxTokens: number;
  temperature: number;
  /** Requests in flight at once. */
  concurrency: number;
  /** USD per million prompt / completion tokens (for judge/cost). */
  price?: { inputPerMtok: number; outputPerMtok: number };
  /** Waits between retries (ms; default 250 × 2^attempt, a 429's Retry-After when it gives one, at most 10 s). */
  backoffMs?: (attempt: number, retryAfterS?: number) => number;
  /** Test hook: the fetch to use. */
  fetch?: typeof fetch;
}

/** One trajectory shown to the judge. */
export interface JudgeSample {
  /** The caller's id (the sample index in its group). */
  id: number;
  /** The trajectory as text (turns after the prompt). */
  transcript: string;
}

export interface JudgeGroup {
  /** The task as the model saw it (the question). */
  task: string;
  /** Gold answers shown to the judge (environment.judge.references). */
  references?: string[];
  samples: JudgeSample[];
  /** Seed of this request's shuffled order. */
  seed: number;
}

/** One request to the judge (what the workbench's group view shows): the prompt, the raw answer, what was read from it. */
export interface JudgeCall {
  kind: 'score' | 'rank' | 'rank-reversed';
  /** The sample ids in the order the prompt numbers them (1, 2, …). */
  order: number[];
  /** System and user messages as sent. */
  system: string;
  prompt: string;
  /** The last raw answer (null when no answer came back). */
  answer: string | null;
  /** Scores read from the answer, aligned with `order` (absent on a failure). */
  scores?: number[];
  explanations?: string[];
  /** Why the request failed after its retries. */
  error?: string;
  attempts: number;
  /** Served from the content cache (no request sent). */
  cached: boolean;
  tokensIn: number;
  tokensOut: number;
  seconds: number;
}

/** What the judge said about one trajectory, stored with it (outcome.judge; engine/train/judge-rollout.ts). */
export interface JudgeRecord {
  mode: 'score' | 'rank';
  model: string;
  score?: number;
  rank?: number;
  /** How many distinct trajectories the group's rank request compared. */
  of?: number;
  failed?: string;
  agreement?: number;
  /** The requests behind this judgement: on every episode in score mode, on the group's first sample in rank mode. */
  calls?: JudgeCall[];
}

export interface JudgedSample {
  score?: number;
  /** 1 = best; tied scores share a rank. */
  rank?: number;
  /** A named failure: what went wrong after the retries. */
  failed?: string;
}

export interface JudgeGroupResult {
  samples: Map<number, JudgedSample>;
  calls: JudgeCall[];
  /** Pairwise order agreement of the forward and reversed requests (rank mode with agreement), when both answered. */
  agreement?: number;
}

/** Running totals since the last take(): judge/* metrics. */
export interface JudgeCounters {
  requests: number;
  calls: number;
  cacheHits: number;
  retries: number;
  failures: number;
  tokensIn: number;
  tokensOut: number;
  seconds: number;
  agreementSum: number;
  agreementN: number;
  scoreSum: number;
  scoreN: number;
}

const zeroCounters = (): JudgeCounters => ({
  requests: 0,
  calls: 0,
  cacheHits: 0,
  retries: 0,
  failures: 0,
  tokensIn: 0,
  tokensOut: 0,
  seconds: 0,
  agreementSum: 0,
  agreementN: 0,
  scoreSum: 0,
  scoreN: 0,
});

export const RANK_INSTRUCTIONS = (n: number) =>
  `You will see ${n} trajectories of an agent attempting the same task, numbered 1 to ${n}. Judge each against the rubric ` +
  `and compare them with each other: a better trajectory gets a higher score. Answer with JSON only, no other text: ` +
  `{"scores": [{"trajectory": 1, "explanation": "<one sentence>", "score": <number from 0 to 1>}, ...]} with one entry for each trajectory 1 to ${n}.`;

export const SCORE_INSTRUCTIONS =
  'You will see one trajectory of an agent attempting a task. Judge it against the rubric. Answer with JSON only, no other text: ' +
  '{"explanation": "<one sentence>", "score": <number from 0 to 1>}.';

class BadAnswer extends Error {}

/** The JSON object in an answer: the whole text, a ```json fence, or the outermost {...}. */
export function extractJson(text: string): unknown {
  const t = text.trim();
  const fence = /```(?:json)?\s*([\s\S]*?)```/i.exec(t);
  const candidates = [t, ...(fence ? [fence[1]!.trim()] : [])];
  const a = t.indexOf('{');
  const b = t.lastIndexOf('}');
  if (a >= 0 && b > a) candidates.push(t.slice(a, b + 1));
  for (const c of candidates) {
    try {
      return JSON.parse(c) as unknown;
    } catch {
      // the next candidate
    }
  }
  throw new BadAnswer(`the answer is not JSON: ${JSON.stringify(t.slice(0, 120))}`);
}

const asScore = (v: unknown, where: string): number => {
  const x = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof x !== 'number' || !Number.isFinite(x)) throw new BadAnswer(`${where}: "score" is not a number (${JSON.stringify(v)})`);
  if (x < 0 || x > 1) throw new BadAnswer(`${where}: score ${x} is outside [0, 1]`);
  return x;
};

/** Rank-mode answer → scores for trajectories 1..n (each exactly once). */
export function parseRankAnswer(text: string, n: number): { scores: number[]; explanations: string[] } {
  const j = extractJson(text) as { scores?: unknown };
  const list = Array.isArray(j) ? j : j && typeof j === 'object' ? j.scores : undefined;
  if (!Array.isArray(list)) throw new BadAnswer('the answer has no "scores" list');
  const scores = new Array<number | undefined>(n).fill(undefined);
  const explanations = new Array<string>(n).fill('');
  for (const [i, item] of list.entries()) {
    if (!item || typeof item !== 'object') throw new BadAnswer(`scores[${i}] is not an object`);
    const o = item as Record<string, unknown>;
    const rawId = o.trajectory ?? o.trajectory_id ?? o.id;
    const id = typeof rawId === 'string' ? Number(rawId.replace(/^\D+/, '')) : rawId;
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 1 || id > n)
      throw new BadAnswer(`scores[${i}]: "trajectory" ${JSON.stringify(rawId)} is not one of 1..${n}`);
    if (scores[id - 1] !== undefined) throw new BadAnswer(`trajectory ${id} is scored twice`);
    scores[id - 1] = asScore(o.score, `trajectory ${id}`);
    explanations[id - 1] = typeof o.explanation === 'string' ? o.explanation : '';
  }
  const missing = scores.flatMap((s, i) => (s === undefined ? [i + 1] : []));
  if (missing.length) throw new BadAnswer(`the answer scores no trajectory ${missing.join(', ')}`);
  return { scores: scores as number[], explanations };
}

/** Score-mode answer → the score. */
export function parseScoreAnswer(text: string): { score: number; explanation: string } {
  const j = extractJson(text);
  if (typeof j === 'number') return { score: asScore(j, 'the answer'), explanation: '' };
  if (!j || typeof j !== 'object') throw new BadAnswer('the answer is not a JSON object with "score"');
  const o = j as Record<string, unknown>;
  return { score: asScore(o.score, 'the answer'), explanation: typeof o.explanation === 'string' ? o.explanation : '' };
}

/** Ranks from scores: 1 = highest; tied scores share the better rank (1, 2, 2, 4). */
export function ranksOf(scores: number[]): number[] {
  return scores.map((s) => 1 + scores.filter((t) => t > s).length);
}

/** Share of pairs (i < j) the two score lists order the same way (a tie counts as an order of its own). */
export function pairwiseAgreement(a: number[], b: number[]): number {
  let same = 0;
  let n = 0;
  for (let i = 0; i < a.length; i++)
    for (let j = i + 1; j < a.length; j++) {
      n++;
      if (Math.sign(a[i]! - a[j]!) === Math.sign(b[i]! - b[j]!)) same++;
    }
  return n ? same / n : 1;
}

const hash = (s: string) => createHash('sha256').update(s).digest('hex');

/** A counting semaphore for `concurrency`. */
function limiter(n: number) {
  let active = 0;
  const queue: (() => void)[] = [];
  return async <T>(f: () => Promise<T>): Promise<T> => {
    if (active >= n) await new Promise<void>((r) => queue.push(r));
    active++;
    try {
      return await f();
    } finally {
      active--;
      queue.shift()?.();
    }
  };
}

interface Answered {
  prompt: string;
  /** Content hashes in the order the prompt shows them. */
  content: string[];
  answer: string | null;
  parsed?: { scores: number[]; explanations: string[] };
  error?: string;
  attempts: number;
  tokensIn: number;
  tokensOut: number;
  seconds: number;
}

export class Judge {
  private counters = zeroCounters();
  /** Content key → the answer (or the request in flight), for the run. */
  private cache = new Map<string, Promise<Answered>>();
  private readonly run: <T>(f: () => Promise<T>) => Promise<T>;
  private readonly fetch: typeof fetch;

  constructor(readonly o: JudgeOptions) {
    this.run = limiter(Math.max(1, o.concurrency));
    this.fetch = o.fetch ?? fetch;
  }

  /** judge/* metrics since the last call (calls, tokens, seconds, cost, failures, agreement…); empty when nothing was judged. */
  takeMetrics(): Record<string, number> {
    const c = this.counters;
    this.counters = zeroCounters();
    if (c.requests === 0 && c.failures === 0) return {};
    const m: Record<string, number> = {
      'judge/requests': c.requests,
      'judge/calls': c.calls,
      'judge/cache_hits': c.cacheHits,
      'judge/retries': c.retries,
      'judge/failures': c.failures,
      'judge/tokens_in': c.tokensIn,
      'judge/tokens_out': c.tokensOut,
      'judge/tokens': c.tokensIn + c.tokensOut,
      'judge/seconds': c.seconds,
    };
    if (this.o.price) m['judge/cost'] = (c.tokensIn * this.o.price.inputPerMtok + c.tokensOut * this.o.price.outputPerMtok) / 1e6;
    if (c.agreementN) m['judge/agreement'] = c.agreementSum / c.agreementN;
    if (c.scoreN) m['judge/score_mean'] = c.scoreSum / c.scoreN;
    return m;
  }

  /** Judge one group: every sample gets a score and rank, or the named failure. */
  async judgeGroup(g: JudgeGroup): Promise<JudgeGroupResult> {
    return this.o.mode === 'rank' ? this.rankGroup(g) : this.scoreGroup(g);
  }

  private header(g: JudgeGroup): string {
    const refs = g.references?.length ? `\n\nReference answer${g.references.length > 1 ? 's' : ''}: ${g.references.join(' | ')}` : '';
    return `Task:\n${g.task}${refs}`;
  }

  private system(instructions: string): string {
    return `${this.o.rubric.trim()}\n\n${instructions}`;
  }

  private async scoreGroup(g: JudgeGroup): Promise<JudgeGroupResult> {
    const system = this.system(SCORE_INSTRUCTIONS);
    const calls: JudgeCall[] = [];
    const samples = new Map<number, JudgedSample>();
    // Identical transcripts: one request (the cache holds it), the same score.
    await Promise.all(
      g.samples.map(async (s) => {
        const prompt = `${this.header(g)}\n\nTrajectory:\n${s.transcript}`;
        const h = hash(s.transcript);
        const call = await this.ask('score', system, prompt, hash(`score\n${system}\n${prompt}`), [h], new Map([[h, s.id]]), (t) => {
          const p = parseScoreAnswer(t);
          return { scores: [p.score], explanations: [p.explanation] };
        });
        calls.push(call);
        samples.set(s.id, call.scores ? { score: call.scores[0]! } : { failed: call.error ?? 'no answer' });
      }),
    );
    calls.sort((x, y) => x.order[0]! - y.order[0]!);
    const ok = [...samples].filter(([, x]) => x.score !== undefined);
    const ranks = ranksOf(ok.map(([, x]) => x.score!));
    ok.forEach(([, x], i) => (x.rank = ranks[i]));
    this.tally(samples);
    return { samples, calls };
  }

  private async rankGroup(g: JudgeGroup): Promise<JudgeGroupResult> {
    // Distinct transcripts, each shown once; duplicates take its score.
    const distinct = new Map<string, number[]>();
    for (const s of g.samples) distinct.set(s.transcript, [...(distinct.get(s.transcript) ?? []), s.id]);
    const reps = [...distinct.entries()].map(([transcript, ids]) => ({ transcript, ids, rep: ids[0]!, h: hash(transcript) }));
    const idOf = new Map(reps.map((r) => [r.h, r.rep] as const));
    const order = shuffled(reps, mulberry32(g.seed));
    const system = this.system(RANK_INSTRUCTIONS(order.length));
    // The cache key: the content in a canonical (sorted) order, so the same group asked again in any order hits.
    const keyBase = hash(
      `rank\n${system}\n${this.header(g)}\n${reps
        .map((r) => r.h)
        .sort()
        .join(',')}`,
    );
    const render = (os: typeof order) =>
      `${this.header(g)}\n\n${os.map((r, i) => `<trajectory ${i + 1}>\n${r.transcript}\n</trajectory ${i + 1}>`).join('\n\n')}`;
    const parse = (t: string) => parseRankAnswer(t, order.length);
    const ask = (kind: JudgeCall['kind'], os: typeof order) =>
      this.ask(
        kind,
        system,
        render(os),
        `${keyBase}:${kind}`,
        os.map((r) => r.h),
        idOf,
        parse,
      );
    const calls = [await ask('rank', order)];
    if (this.o.agreement && order.length > 1) calls.push(await ask('rank-reversed', [...order].reverse()));
    // Each answer's scores by representative (a cached answer's order is the one it was asked in).
    const answers = calls.filter((c) => c.scores).map((c) => new Map(c.order.map((id, i) => [id, c.scores![i]!] as const)));
    let agreement: number | undefined;
    if (answers.length === 2) {
      agreement = pairwiseAgreement(
        reps.map((r) => answers[0]!.get(r.rep)!),
        reps.map((r) => answers[1]!.get(r.rep)!),
      );
      this.counters.agreementSum += agreement;
      this.counters.agreementN++;
    }
    const samples = new Map<number, JudgedSample>();
    if (!answers.length) {
      const failed = calls[0]!.error ?? 'no answer';
      for (const s of g.samples) samples.set(s.id, { failed });
    } else {
      // With agreement, the mean of the two answers (the position bias of each averages out).
      const score = reps.map((r) => answers.reduce((acc, a) => acc + a.get(r.rep)!, 0) / answers.length);
      const ranks = ranksOf(score);
      reps.forEach((r, i) => r.ids.forEach((id) => samples.set(id, { score: score[i]!, rank: ranks[i]! })));
    }
    this.tally(samples);
    return { samples, calls, ...(agreement !== undefined ? { agreement } : {}) };
  }

  private tally(samples: Map<number, JudgedSample>): void {
    for (const x of samples.values())
      if (x.failed !== undefined) this.counters.failures++;
      else {
        this.counters.scoreSum += x.score!;
        this.counters.scoreN++;
      }
  }

  /**
   * One request, cached by content, with retries; never throws. `content`: the hashes of the
   * transcripts in the order the prompt shows them; `idOf` maps them to this group's sample ids.
   * A cached answer keeps the prompt and order it was asked with (its numbering is that prompt's).
   */
  private async ask(
    kind: JudgeCall['kind'],
    system: string,
    prompt: string,
    key: string,
    content: string[],
    idOf: Map<string, number>,
    parse: (text: string) => { scores: number[]; explanations: string[] },
  ): Promise<JudgeCall> {
    this.counters.requests++;
    let hit = this.cache.get(key);
    const cached = hit !== undefined;
    if (hit) this.counters.cacheHits++;
    else {
      hit = this.run(() => this.send(system, prompt, content, parse));
      this.cache.set(key, hit);
    }
    const a = await hit;
    // A failed answer is not kept: the next identical request asks again.
    if (!a.parsed && this.cache.get(key) === hit) this.cache.delete(key);
    return {
      kind,
      order: a.content.map((h) => idOf.get(h)!),
      system,
      prompt: a.prompt,
      answer: a.answer,
      ...(a.parsed ? { scores: a.parsed.scores, explanations: a.parsed.explanations } : {}),
      ...(a.error !== undefined && !a.parsed ? { error: a.error } : {}),
      attempts: cached ? 0 : a.attempts,
      cached,
      tokensIn: cached ? 0 : a.tokensIn,
      tokensOut: cached ? 0 : a.tokensOut,
      seconds: cached ? 0 : a.seconds,
    };
  }

  private async send(
    system: string,
    prompt: string,
    content: string[],
    parse: (text: string) => { scores: number[]; explanations: string[] },
  ): Promise<Answered> {
    const url = `${this.o.baseUrl.replace(/\/+$/, '')}/chat/completions`;
    const out: Answered = { prompt, content, answer: null, attempts: 0, tokensIn: 0, tokensOut: 0, seconds: 0 };
    for (let attempt = 0; attempt <= this.o.retries; attempt++) {
      if (attempt > 0) this.counters.retries++;
      out.attempts++;
      this.counters.calls++;
      const t0 = performance.now();
      let retryAfter: number | undefined;
      try {
        const res = await this.fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(this.o.apiKey ? { authorization: `Bearer ${this.o.apiKey}` } : {}) },
          body: JSON.stringify({
            model: this.o.model,
            messages: [
              { role: 'system', content: system },
              { role: 'user', content: prompt },
            ],
            temperature: this.o.temperature,
            max_tokens: this.o.maxTokens,
          }),
          signal: AbortSignal.timeout(this.o.timeoutMs),
        });
        const text = await res.text();
        if (!res.ok) {
          const ra = Number(res.headers.get('retry-after'));
          retryAfter = Number.isFinite(ra) && ra >= 0 ? ra : undefined;
          throw new Error(`HTTP ${res.status}${res.status === 429 ? ' (rate limited)' : ''}: ${text.slice(0, 160)}`);
        }
        let body: { choices?: { message?: { content?: unknown } }[]; usage?: { prompt_tokens?: number; completion_tokens?: number } };
        try {
          body = JSON.parse(text) as typeof body;
        } catch {
          throw new Error(`the response is not a chat completion (not JSON): ${text.slice(0, 120)}`);
        }
        out.tokensIn += body.usage?.prompt_tokens ?? 0;
        out.tokensOut += body.usage?.completion_tokens ?? 0;
        this.counters.tokensIn += body.usage?.prompt_tokens ?? 0;
        this.counters.tokensOut += body.usage?.completion_tokens ?? 0;
        const content = body.choices?.[0]?.message?.content;
        if (typeof content !== 'string') throw new Error('the response has no choices[0].message.content');
        out.answer = content;
        out.parsed = parse(content);
        delete out.error;
        return out;
      } catch (e) {
        const err = e as Error;
        out.error =
          err.name === 'TimeoutError' || err.name === 'AbortError'
            ? `no answer within ${this.o.timeoutMs} ms (timeout_ms)`
            : err instanceof BadAnswer
              ? `malformed answer: ${err.message}`
              : err.message.startsWith('HTTP') || err.message.startsWith('the response')
                ? err.message
                : `request failed: ${err.message}`;
      } finally {
        const s = (performance.now() - t0) / 1000;
        out.seconds += s;
        this.counters.seconds += s;
      }
      if (attempt < this.o.retries) {
        const wait = this.o.backoffMs
          ? this.o.backoffMs(attempt, retryAfter)
          : Math.min(10_000, retryAfter !== undefined ? retryAfter * 1000 : 250 * 2 ** attempt);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    }
    out.error = `${out.error} (after ${out.attempts} attempt${out.attempts > 1 ? 's' : ''})`;
    return out;
  }
}
