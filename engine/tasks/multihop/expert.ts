/**
 * The scripted expert: solves multi-hop questions with real search calls, reading each
 * observation for the fact that leads to the next hop. It produces demonstration trajectories
 * for the supervised warm start. With `mistakeRate` > 0 some episodes contain a mistake: a
 * wrong first query (then a recovery) or a wrong final answer.
 */
import { mulberry32 } from '../../base/rng';
import { WORDS } from './world';

interface Hop {
  query: (e: string) => string;
  fact: (e: string) => RegExp;
}

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const hop = {
  bornIn: { query: (p: string) => p, fact: (p: string) => new RegExp(`${esc(p)} was born in (\\w+)`) },
  wroteBy: { query: (w: string) => w, fact: (w: string) => new RegExp(`the ${esc(w)} was written by (\\w+ \\w+)`) },
  cityIn: { query: (c: string) => c, fact: (c: string) => new RegExp(`${esc(c)} is a city in (\\w+)`) },
  worksFor: { query: (p: string) => p, fact: (p: string) => new RegExp(`${esc(p)} works for the (\\w+ \\w+)`) },
  locatedIn: { query: (o: string) => o, fact: (o: string) => new RegExp(`the ${esc(o)} is located in (\\w+)`) },
} satisfies Record<string, Hop>;

const PLANS: { re: RegExp; hops: Hop[] }[] = [
  { re: /^in which country was the author of the (\w+ \w+) born \?$/, hops: [hop.wroteBy, hop.bornIn, hop.cityIn] },
  { re: /^in which country is the employer of (\w+ \w+) located \?$/, hops: [hop.worksFor, hop.locatedIn, hop.cityIn] },
  { re: /^where was the author of the (\w+ \w+) born \?$/, hops: [hop.wroteBy, hop.bornIn] },
  { re: /^in which city is the employer of (\w+ \w+) located \?$/, hops: [hop.worksFor, hop.locatedIn] },
  { re: /^in which country was (\w+ \w+) born \?$/, hops: [hop.bornIn, hop.cityIn] },
  { re: /^where was (\w+ \w+) born \?$/, hops: [hop.bornIn] },
  { re: /^who wrote the (\w+ \w+) \?$/, hops: [hop.wroteBy] },
  { re: /^in which country is (\w+) \?$/, hops: [hop.cityIn] },
];

export interface ExpertOptions {
  /** Probability that an episode contains one mistake. */
  mistakeRate?: number;
}

/**
 * The expert's next turn, given the question and the observations so far (text only).
 * Returns e.g. "<search> alvin rusk </search>" or "<answer> arden </answer>".
 */
export function expertTurn(question: string, observations: string[], modelTurns: string[], seed: number, opts: ExpertOptions = {}): string {
  const plan = PLANS.find((p) => p.re.test(question.trim()));
  if (!plan) return '<answer> unknown </answer>';
  const r = mulberry32(seed ^ 0x51f15e);
  const mistake = r() < (opts.mistakeRate ?? 0) ? (r() < 0.5 ? 'wrong-query' : 'wrong-answer') : null;
  if (mistake === 'wrong-query' && modelTurns.length === 0) {
    const decoy = `${WORDS.first[Math.floor(r() * WORDS.first.length)]} ${WORDS.last[Math.floor(r() * WORDS.last.length)]}`;
    return `<search> ${decoy} </search>`;
  }
  let entity = question.trim().match(plan.re)![1];
  const seen = observations.join(' ');
  for (const h of plan.hops) {
    const m = seen.match(h.fact(entity));
    if (!m) return `<search> ${h.query(entity)} </search>`;
    entity = m[1];
  }
  if (mistake === 'wrong-answer') return `<answer> ${WORDS.city[Math.floor(r() * WORDS.city.length)]} </answer>`;
  return `<answer> ${entity} </answer>`;
}
