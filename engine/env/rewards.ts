/**
 * Rewards: answer matching after SQuAD normalisation (exact match, substring match, token F1),
 * a format reward, process (step) rewards, and weighted sums that keep every component.
 */
export function normalizeAnswer(s: string): string {
  return s
    .toLowerCase()
    .replace(/[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g, ' ')
    .replace(/\b(a|an|the)\b/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

export function exactMatch(pred: string, golds: string[]): number {
  const p = normalizeAnswer(pred);
  return golds.some((g) => normalizeAnswer(g) === p) ? 1 : 0;
}

export function substringMatch(pred: string, golds: string[]): number {
  const p = normalizeAnswer(pred);
  return golds.some((g) => {
    const n = normalizeAnswer(g);
    return n.length > 0 && p.includes(n);
  }) ? 1 : 0;
}

export function f1Score(pred: string, golds: string[]): number {
  const p = normalizeAnswer(pred).split(' ').filter(Boolean);
  let best = 0;
  for (const g of golds) {
    const t = normalizeAnswer(g).split(' ').filter(Boolean);
    const counts = new Map<string, number>();
    for (const w of t) counts.set(w, (counts.get(w) ?? 0) + 1);
    let common = 0;
    for (const w of p) {
      const c = counts.get(w) ?? 0;
      if (c > 0) {
        common++;
        counts.set(w, c - 1);
      }
    }
    if (common === 0) continue;
    const prec = common / p.length, rec = common / t.length;
    best = Math.max(best, (2 * prec * rec) / (prec + rec));
  }
  return best;
}

/** What a reward function sees at the end of an episode. */
export interface EpisodeSummary {
  answer?: string;
  golds: string[];
  /** Model turns' texts in order. */
  turns: string[];
  /** Whether every model turn parsed (a call or an answer, tags closed). */
  formatOk: boolean;
  toolCalls: number;
  toolErrors: number;
  /** Passages the tools returned (for retrieval rewards). */
  retrieved: string[];
  supporting: string[];
}

export type RewardFn = (e: EpisodeSummary) => number;

export const rewardFunctions: Record<string, RewardFn> = {
  exact_match: (e) => (e.answer === undefined ? 0 : exactMatch(e.answer, e.golds)),
  substring_match: (e) => (e.answer === undefined ? 0 : substringMatch(e.answer, e.golds)),
  f1: (e) => (e.answer === undefined ? 0 : f1Score(e.answer, e.golds)),
  format: (e) => (e.formatOk && e.answer !== undefined ? 1 : 0),
  /** Fraction of gold supporting passages that some tool call retrieved. */
  retrieval: (e) => (e.supporting.length === 0 ? 0 : e.supporting.filter((s) => e.retrieved.some((r) => r.includes(s))).length / e.supporting.length),
};

export interface WeightedReward {
  reward: number;
  components: Record<string, number>;
}

/** Weighted sum of named reward functions; every component is returned unweighted. */
export function weightedReward(weights: Record<string, number>, e: EpisodeSummary, custom: Record<string, RewardFn> = {}): WeightedReward {
  const components: Record<string, number> = {};
  let reward = 0;
  for (const [name, w] of Object.entries(weights)) {
    const fn = custom[name] ?? rewardFunctions[name];
    if (!fn) throw new Error(`unknown reward "${name}" (available: ${[...Object.keys(rewardFunctions), ...Object.keys(custom)].join(', ')})`);
    const v = fn(e);
    components[name] = v;
    reward += w * v;
  }
  return { reward, components };
}

/** Step reward: 1 when this step's results contain a gold supporting passage not seen before. */
export function supportingFactStepReward(results: string[], supporting: string[], seen: Set<string>): number {
  let r = 0;
  for (const s of supporting) {
    if (!seen.has(s) && results.some((x) => x.includes(s))) {
      seen.add(s);
      r = 1;
    }
  }
  return r;
}
