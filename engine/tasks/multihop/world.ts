/**
 * The synthetic multi-hop world: seeded random people, cities, countries, organisations and
 * books with relations between them; one short encyclopedia passage per entity (the search
 * corpus); and questions that need 1, 2 or 3 hops, each with its gold answer and supporting
 * passages. Names come from fixed word lists (so one small vocabulary covers every world),
 * but who was born where, works for whom and wrote what is drawn from the seed: train and
 * evaluation worlds from different seeds share no facts, so answers cannot be memorised.
 */
import { mulberry32, shuffled } from '../../base/rng';
import type { Passage } from '../../env/search';

export const WORDS = {
  first: [
    'alvin',
    'bella',
    'carl',
    'dora',
    'edgar',
    'fiona',
    'gus',
    'hilda',
    'ivan',
    'june',
    'kurt',
    'lena',
    'milo',
    'nora',
    'otto',
    'petra',
    'quinn',
    'rosa',
    'silas',
    'tara',
    'ugo',
    'vera',
    'wade',
    'yara',
  ],
  last: [
    'rusk',
    'marsh',
    'holt',
    'penn',
    'crane',
    'dale',
    'frost',
    'grove',
    'hale',
    'knox',
    'lane',
    'moss',
    'nash',
    'orr',
    'pike',
    'reed',
    'shaw',
    'stone',
    'thorn',
    'vance',
    'ward',
    'wells',
    'york',
    'zane',
  ],
  city: [
    'arden',
    'bexley',
    'corby',
    'dorran',
    'elmet',
    'fenwick',
    'gorran',
    'hythe',
    'islay',
    'jura',
    'kirby',
    'lunan',
    'morven',
    'nairn',
    'oban',
    'perth',
    'rhyl',
    'selby',
    'tain',
    'ulva',
    'wick',
    'yarm',
  ],
  country: ['avalon', 'brovia', 'calder', 'dorne', 'estria', 'fallon', 'gallia', 'hesper'],
  org: [
    'orion',
    'atlas',
    'zenith',
    'delta',
    'nova',
    'apex',
    'summit',
    'harbor',
    'pioneer',
    'beacon',
    'vector',
    'meridian',
    'cobalt',
    'crest',
    'falcon',
    'quartz',
  ],
  orgKind: ['institute', 'company', 'guild'],
  adj: ['red', 'silent', 'broken', 'golden', 'hidden', 'last', 'frozen', 'distant', 'quiet', 'bright', 'lonely', 'iron'],
  noun: ['river', 'tower', 'garden', 'mirror', 'forest', 'letter', 'crown', 'island', 'storm', 'lantern', 'road', 'bell'],
};

/** Every word passages, questions and the expert's turns use (for the tiny tokenizer). */
export const TEMPLATE_WORDS = [
  'is',
  'a',
  'person',
  'was',
  'born',
  'in',
  'works',
  'for',
  'the',
  'city',
  'an',
  'organisation',
  'located',
  'book',
  'written',
  'by',
  'where',
  'who',
  'wrote',
  'which',
  'country',
  'of',
  'author',
  'employer',
  '?',
  '.',
  ',',
  'no',
  'results',
  'error',
  ':',
  // instructions and observations
  'answer',
  'question',
  'use',
  'query',
  'to',
  'search',
  'then',
  'give',
  'with',
  'unknown',
  '…',
  'only',
  'first',
  'queries',
  'one',
  'are',
  'run',
  'empty',
  'found',
  'or',
  'missing',
  'closing',
  'tag',
  '<',
  '/',
  '>',
  'call',
  'tool',
];

export interface World {
  seed: number;
  people: { name: string; city: string; org: string }[];
  cities: { name: string; country: string }[];
  orgs: { name: string; city: string }[];
  works: { title: string; author: string }[];
  passages: Passage[];
}

export interface Question {
  id: string;
  question: string;
  answers: string[];
  hops: 1 | 2 | 3;
  /**
   * Which chain of relations the question follows (e.g. `employer-city`: works for, then located in):
   * each asks the policy to copy a different span, so `arbor eval --by relation` shows which one a
   * checkpoint has not learned.
   */
  relation: string;
  /** Ids of the passages a correct search path reads. */
  supporting: string[];
  /** The text of those passages' key facts (for retrieval rewards). */
  supportingFacts: string[];
}

/** A key fact of the world and the passage that states it. */
interface Fact {
  passage: string;
  text: string;
}

/**
 * The world's key facts, written once: the passages state them and the questions' supporting
 * facts quote them, so the two always agree.
 */
const FACT = {
  bornIn: (p: World['people'][number]): Fact => ({ passage: `person:${p.name}`, text: `${p.name} was born in ${p.city}` }),
  worksFor: (p: World['people'][number]): Fact => ({ passage: `person:${p.name}`, text: `${p.name} works for the ${p.org}` }),
  cityIn: (c: World['cities'][number]): Fact => ({ passage: `city:${c.name}`, text: `${c.name} is a city in ${c.country}` }),
  locatedIn: (o: World['orgs'][number]): Fact => ({ passage: `org:${o.name}`, text: `the ${o.name} is located in ${o.city}` }),
  writtenBy: (w: World['works'][number]): Fact => ({ passage: `work:${w.title}`, text: `the ${w.title} was written by ${w.author}` }),
};

/** A question of `relation` answered by following `facts`, one hop each. */
function ask(relation: string, question: string, answer: string, ...facts: Fact[]): Omit<Question, 'id'> {
  return {
    question,
    answers: [answer],
    hops: facts.length as Question['hops'],
    relation,
    supporting: facts.map((f) => f.passage),
    supportingFacts: facts.map((f) => f.text),
  };
}

export interface WorldSize {
  people: number;
  cities: number;
  orgs: number;
  works: number;
}
export const DEFAULT_WORLD: WorldSize = { people: 40, cities: 16, orgs: 12, works: 30 };

export function generateWorld(seed: number, size: WorldSize = DEFAULT_WORLD): World {
  const r = mulberry32(seed);
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  const cityNames = shuffled(WORDS.city, r).slice(0, size.cities);
  const cities = cityNames.map((name) => ({ name, country: pick(WORDS.country) }));
  const orgNames = shuffled(WORDS.org, r)
    .slice(0, size.orgs)
    .map((o) => `${o} ${pick(WORDS.orgKind)}`);
  const orgs = orgNames.map((name) => ({ name, city: pick(cityNames) }));
  const allNames = shuffled(
    WORDS.first.flatMap((f) => WORDS.last.map((l) => `${f} ${l}`)),
    r,
  );
  const people = allNames.slice(0, size.people).map((name) => ({ name, city: pick(cityNames), org: pick(orgNames) }));
  const titles = shuffled(
    WORDS.adj.flatMap((a) => WORDS.noun.map((n) => `${a} ${n}`)),
    r,
  ).slice(0, size.works);
  const works = titles.map((title) => ({ title, author: pick(people).name }));
  const passages: Passage[] = [
    ...people.map((p) => ({ id: FACT.bornIn(p).passage, title: p.name, text: `${p.name} is a person . ${FACT.bornIn(p).text} . ${FACT.worksFor(p).text} .` })),
    ...cities.map((c) => ({ id: FACT.cityIn(c).passage, title: c.name, text: `${FACT.cityIn(c).text} .` })),
    ...orgs.map((o) => ({ id: FACT.locatedIn(o).passage, title: o.name, text: `the ${o.name} is an organisation . ${FACT.locatedIn(o).text} .` })),
    ...works.map((w) => ({ id: FACT.writtenBy(w).passage, title: w.title, text: `the ${w.title} is a book . ${FACT.writtenBy(w).text} .` })),
  ];
  return { seed, people, cities, orgs, works, passages };
}

/** Questions of the given hop counts, drawn with their own seed from a world. */
export function generateQuestions(world: World, n: number, hops: (1 | 2 | 3)[], seed: number): Question[] {
  const r = mulberry32(seed ^ 0x9e3779b9);
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  const person = (name: string) => world.people.find((p) => p.name === name)!;
  const city = (name: string) => world.cities.find((c) => c.name === name)!;
  const org = (name: string) => world.orgs.find((o) => o.name === name)!;
  const out: Question[] = [];
  const seen = new Set<string>();
  let guard = 0;
  while (out.length < n && guard++ < n * 50) {
    const h = pick(hops);
    const kind = Math.floor(r() * 3);
    let q: Omit<Question, 'id'>;
    if (h === 1) {
      if (kind === 0) {
        const p = pick(world.people);
        q = ask('born-in', `where was ${p.name} born ?`, p.city, FACT.bornIn(p));
      } else if (kind === 1) {
        const w = pick(world.works);
        q = ask('written-by', `who wrote the ${w.title} ?`, w.author, FACT.writtenBy(w));
      } else {
        const c = pick(world.cities);
        q = ask('city-country', `in which country is ${c.name} ?`, c.country, FACT.cityIn(c));
      }
    } else if (h === 2) {
      if (kind === 0) {
        const w = pick(world.works);
        const p = person(w.author);
        q = ask('author-born-in', `where was the author of the ${w.title} born ?`, p.city, FACT.writtenBy(w), FACT.bornIn(p));
      } else if (kind === 1) {
        const p = pick(world.people);
        const o = org(p.org);
        q = ask('employer-city', `in which city is the employer of ${p.name} located ?`, o.city, FACT.worksFor(p), FACT.locatedIn(o));
      } else {
        const p = pick(world.people);
        const c = city(p.city);
        q = ask('born-in-country', `in which country was ${p.name} born ?`, c.country, FACT.bornIn(p), FACT.cityIn(c));
      }
    } else {
      if (kind === 1) {
        const p = pick(world.people);
        const o = org(p.org);
        const c = city(o.city);
        q = ask('employer-country', `in which country is the employer of ${p.name} located ?`, c.country, FACT.worksFor(p), FACT.locatedIn(o), FACT.cityIn(c));
      } else {
        const w = pick(world.works);
        const p = person(w.author);
        const c = city(p.city);
        q = ask(
          'author-born-in-country',
          `in which country was the author of the ${w.title} born ?`,
          c.country,
          FACT.writtenBy(w),
          FACT.bornIn(p),
          FACT.cityIn(c),
        );
      }
    }
    if (seen.has(q.question)) continue;
    seen.add(q.question);
    out.push({ id: `w${world.seed}-q${out.length}`, ...q });
  }
  return out;
}

/** All words any world, question or expert turn can contain. */
export function multihopVocabulary(): string[] {
  return [
    ...new Set([
      ...WORDS.first,
      ...WORDS.last,
      ...WORDS.city,
      ...WORDS.country,
      ...WORDS.org,
      ...WORDS.orgKind,
      ...WORDS.adj,
      ...WORDS.noun,
      ...TEMPLATE_WORDS,
    ]),
  ];
}
