/**
 * The two-tool world: organisations with a founding year and a founder, founders with a birth
 * year. Questions need both tools of the Hermes task (resources/examples/tools-task): `lookup`
 * (an entity's fact sentence) and `calculator` (arithmetic), e.g.
 *
 *   how old was the founder of the golden river institute when it was founded ?
 *     lookup {"entity": "golden river institute"} → the golden river institute was founded in 1923 by alvin rusk .
 *     lookup {"entity": "alvin rusk"}             → alvin rusk was born in 1871 .
 *     calculator {"expression": "1923 - 1871"}    → 52
 *     <answer> 52 </answer>
 *
 *   how old was alvin rusk when the golden river institute was founded ?   (any person born before it)
 *
 * Names come from fixed word lists (one small vocabulary covers every world); the training world
 * and the held-out world use disjoint organisations and founders, so held-out facts can only be
 * read from the lookup tool. Everything derives from a seed.
 */
import { mulberry32, shuffled } from '../../base/rng';
import { WORDS } from '../multihop/world';

/**
 * Name parts of the two-tool world: the multi-hop world's word lists, extended so that there are
 * far more organisations (adjective noun kind, 36 × 36 × 4) and people (first last, 48 × 48) than
 * a world uses. A training world of 2000 organisations mentions each in one or two of its 3000
 * questions, so neither a name nor a fact can be memorised: the policy has to copy names
 * from the question and the tool results (with 300 organisations, SFT fitted the training names
 * and guessed held-out ones below chance instead of copying them; docs/areas/train.md).
 */
export const TOOLS_WORDS = {
  first: [
    ...WORDS.first,
    ...['abel', 'basil', 'cora', 'dean', 'elsa', 'felix', 'greta', 'hugo', 'ida', 'jonas', 'kira', 'leo'],
    ...['mona', 'nils', 'olga', 'paul', 'rita', 'sven', 'tess', 'ulla', 'vince', 'wanda', 'xena', 'zora'],
  ],
  last: [
    ...WORDS.last,
    ...['ash', 'birch', 'cole', 'drake', 'ellis', 'finch', 'gale', 'hart', 'irwin', 'judd', 'kemp', 'lowe'],
    ...['mills', 'noble', 'oakes', 'price', 'quill', 'rhodes', 'sykes', 'toft', 'upton', 'vale', 'webb', 'yates'],
  ],
  adj: [
    ...WORDS.adj,
    ...['ancient', 'blue', 'clever', 'dark', 'early', 'fair', 'green', 'high', 'little', 'modern', 'new', 'open'],
    ...['proud', 'rapid', 'royal', 'secret', 'silver', 'steady', 'swift', 'true', 'wild', 'wise', 'young', 'great'],
  ],
  noun: [
    ...WORDS.noun,
    ...['anchor', 'bridge', 'castle', 'comet', 'eagle', 'field', 'harbour', 'hill', 'lake', 'meadow', 'moon', 'oak'],
    ...['ocean', 'pearl', 'cliff', 'rose', 'sail', 'star', 'stream', 'sun', 'valley', 'wheel', 'wind', 'wolf'],
  ],
  orgKind: [...WORDS.orgKind, 'society'],
};

export interface Org {
  name: string;
  founded: number;
  founder: string;
}
export interface Person {
  name: string;
  born: number;
}
export interface ToolsWorld {
  name: string;
  orgs: Org[];
  people: Person[];
}

export interface ToolsQuestion {
  id: string;
  question: string;
  answers: string[];
  kind: 'founder-age' | 'person-age';
  /** The entities a correct episode looks up, in order. */
  entities: string[];
  /** The expression a correct episode computes. */
  expression: string;
}

/** Words of the questions, facts, instructions and errors (besides names and numbers). */
export const TOOLS_TEMPLATE_WORDS = [
  'how',
  'old',
  'was',
  'the',
  'founder',
  'of',
  'when',
  'it',
  'founded',
  'many',
  'years',
  'after',
  'founding',
  'in',
  'by',
  'born',
  'no',
  'entry',
  'for',
  'you',
  'may',
  'call',
  'tools',
  'a',
  'tool',
  'with',
  'answer',
  'then',
  'give',
  'question',
  'error',
  'name',
  'arguments',
  'entity',
  'expression',
  'type',
  'function',
  'description',
  'parameters',
  'object',
  'properties',
  'string',
  'required',
  'additionalProperties',
  'false',
  'true',
  'minLength',
  'maxLength',
  'an',
  'or',
  'person',
  'organisation',
  'its',
  'fact',
  'evaluate',
  'arithmetic',
  'numbers',
  'and',
  'only',
  'unknown',
  'invalid',
  'must',
  'have',
  'property',
  'is',
  'not',
  'allowed',
  'timed',
  'out',
];

export const FOUNDED_MIN = 1800;
export const FOUNDED_MAX = 1999;
export const AGE_MIN = 18;
export const AGE_MAX = 70;

/** Every number the world, its questions and answers can contain (years and differences). */
export function toolsNumbers(): number[] {
  const out: number[] = [];
  for (let n = 0; n <= FOUNDED_MAX - FOUNDED_MIN; n++) out.push(n);
  for (let y = FOUNDED_MIN - AGE_MAX; y <= FOUNDED_MAX; y++) out.push(y);
  return out;
}

/** All words (names, template words, numbers) the tiny tokenizer holds as whole tokens. */
export function toolsVocabulary(): string[] {
  const w = TOOLS_WORDS;
  return [...new Set([...w.first, ...w.last, ...w.adj, ...w.noun, ...w.orgKind, ...TOOLS_TEMPLATE_WORDS, ...toolsNumbers().map(String)])];
}

/**
 * The training and held-out worlds of one seed: organisation names (adjective noun kind) and
 * founder names (first last) are shuffled once and split, so the two worlds share no entity.
 */
export function generateToolsWorlds(
  seed: number,
  sizes: { train: number; heldout: number } = { train: 2000, heldout: 200 },
): { train: ToolsWorld; heldout: ToolsWorld } {
  const r = mulberry32(seed ^ 0x7001);
  const orgNames = shuffled(
    TOOLS_WORDS.adj.flatMap((a) => TOOLS_WORDS.noun.flatMap((n) => TOOLS_WORDS.orgKind.map((k) => `${a} ${n} ${k}`))),
    r,
  );
  const personNames = shuffled(
    TOOLS_WORDS.first.flatMap((f) => TOOLS_WORDS.last.map((l) => `${f} ${l}`)),
    r,
  );
  const total = sizes.train + sizes.heldout;
  if (total > orgNames.length || total > personNames.length)
    throw new Error(`at most ${Math.min(orgNames.length, personNames.length)} organisations across both worlds`);
  const make = (name: string, from: number, n: number): ToolsWorld => {
    const orgs: Org[] = [];
    const people: Person[] = [];
    for (let i = from; i < from + n; i++) {
      const founded = FOUNDED_MIN + Math.floor(r() * (FOUNDED_MAX - FOUNDED_MIN + 1));
      const born = founded - (AGE_MIN + Math.floor(r() * (AGE_MAX - AGE_MIN + 1)));
      orgs.push({ name: orgNames[i]!, founded, founder: personNames[i]! });
      people.push({ name: personNames[i]!, born });
    }
    return { name, orgs, people };
  };
  return { train: make('train', 0, sizes.train), heldout: make('heldout', sizes.train, sizes.heldout) };
}

/** The lookup tool's sentence for an entity (organisation or person). */
export function factOf(world: ToolsWorld, entity: string): string | undefined {
  const o = world.orgs.find((x) => x.name === entity);
  if (o) return `the ${o.name} was founded in ${o.founded} by ${o.founder} .`;
  const p = world.people.find((x) => x.name === entity);
  if (p) return `${p.name} was born in ${p.born} .`;
  return undefined;
}

/**
 * Questions over one world, half of each kind, drawn with their own seed; ids `<world>-q<i>`.
 * Both kinds look up the organisation first and compute `<founded> - <born>`, so the two years
 * come from sentences of different shape ("founded in", "born in"); the second lookup is where
 * they differ: the founder named in the first result (founder-age) or the person named in the
 * question (person-age, someone born at least AGE_MIN years before the founding).
 */
export function generateToolsQuestions(world: ToolsWorld, n: number, seed: number): ToolsQuestion[] {
  const r = mulberry32(seed ^ 0x9e3779b9);
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!;
  const born = new Map(world.people.map((p) => [p.name, p.born]));
  // Each organisation has one founder-age question: they are dealt from a shuffled deck, one
  // question in two, so both kinds stay equally frequent while the deck lasts.
  const deck = shuffled(world.orgs, r);
  const out: ToolsQuestion[] = [];
  const seen = new Set<string>();
  for (let guard = 0; out.length < n && guard < n * 50; guard++) {
    let q: Omit<ToolsQuestion, 'id'>;
    if (out.length % 2 === 0 && deck.length > 0) {
      const o = deck.pop()!;
      const b = born.get(o.founder)!;
      q = {
        question: `how old was the founder of the ${o.name} when it was founded ?`,
        answers: [String(o.founded - b)],
        kind: 'founder-age',
        entities: [o.name, o.founder],
        expression: `${o.founded} - ${b}`,
      };
    } else {
      const o = pick(world.orgs);
      const p = pick(world.people);
      const age = o.founded - p.born;
      if (p.name === o.founder || age < AGE_MIN || age > AGE_MAX) continue;
      q = {
        question: `how old was ${p.name} when the ${o.name} was founded ?`,
        answers: [String(age)],
        kind: 'person-age',
        entities: [o.name, p.name],
        expression: `${o.founded} - ${p.born}`,
      };
    }
    if (seen.has(q.question)) continue;
    seen.add(q.question);
    out.push({ id: `${world.name}-q${out.length}`, ...q });
  }
  return out;
}

/** A Hermes tool call as the model writes it. */
export function hermesCall(name: string, args: Record<string, unknown>): string {
  return `<tool_call>${JSON.stringify({ name, arguments: args }).replace(/","/g, '", "').replace(/":/g, '": ')}</tool_call>`;
}

export interface ToolsExpertOptions {
  /** Probability that an episode contains one mistake. */
  mistakeRate?: number;
  /** Entities to draw a wrong lookup from (default: the question's own names reshuffled). */
  decoys?: string[];
}

export type ToolsMistake = 'wrong-lookup' | 'bad-arguments' | 'no-calculator' | 'added';

/** Which mistake (if any) the expert makes in the episode with this seed. */
export function expertMistake(seed: number, mistakeRate: number): ToolsMistake | null {
  const r = mulberry32(seed ^ 0x51f15e);
  if (r() >= mistakeRate) return null;
  return (['wrong-lookup', 'bad-arguments', 'no-calculator', 'added'] as const)[Math.floor(r() * 4)]!;
}

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The scripted expert's next turn, reading the facts it needs from the observations so far
 * (text only). It looks up the question's organisation, then the founder named in that result
 * (or the person the question names), computes founded − born with the calculator and answers
 * with the calculator's result. With `mistakeRate` > 0 an episode has one mistake: recovered ones (a
 * wrong entity looked up first; a call with a wrong argument name, answered by a schema error)
 * or unrecovered ones (answering without the calculator, off by a few years; adding the years
 * instead of subtracting them and answering the sum). (Subtracting in the wrong order would not
 * do: exact match's SQuAD normalisation drops the minus sign.)
 */
export function toolsExpertTurn(question: string, observations: string[], modelTurns: string[], seed: number, opts: ToolsExpertOptions = {}): string {
  return toolsExpertStep(question, observations, modelTurns, seed, opts).text;
}

/** toolsExpertTurn's turn, with `mistake` set on the turn that is the episode's deliberate error (the wrong call or the uncalculated answer). */
export function toolsExpertStep(
  question: string,
  observations: string[],
  modelTurns: string[],
  seed: number,
  opts: ToolsExpertOptions = {},
): { text: string; mistake: boolean } {
  const ok = (text: string) => ({ text, mistake: false });
  const wrong = (text: string) => ({ text, mistake: true });
  const r = mulberry32(seed ^ 0xbadc0de);
  const mistake = expertMistake(seed, opts.mistakeRate ?? 0);
  const seen = observations.join(' ');
  const done = modelTurns.length;
  if (done === 0 && mistake === 'wrong-lookup') {
    const decoys = opts.decoys?.length
      ? opts.decoys
      : [`${TOOLS_WORDS.first[Math.floor(r() * TOOLS_WORDS.first.length)]} ${TOOLS_WORDS.last[Math.floor(r() * TOOLS_WORDS.last.length)]}`];
    return wrong(hermesCall('lookup', { entity: decoys[Math.floor(r() * decoys.length)]! }));
  }
  const founderAge = /^how old was the founder of the (.+) when it was founded \?$/.exec(question.trim());
  const personAge = /^how old was (\w+ \w+) when the (.+) was founded \?$/.exec(question.trim());
  if (!founderAge && !personAge) return ok('<answer> unknown </answer>');
  const org = founderAge ? founderAge[1]! : personAge![2]!;
  const orgFact = new RegExp(`the ${esc(org)} was founded in (\\d+) by (\\w+ \\w+)`).exec(seen);
  if (!orgFact) {
    if (mistake === 'bad-arguments' && !modelTurns.some((t) => t.includes('"name": "lookup", "arguments": {"name"')))
      return wrong(hermesCall('lookup', { name: org }));
    return ok(hermesCall('lookup', { entity: org }));
  }
  const person = founderAge ? orgFact[2]! : personAge![1]!;
  const personFact = new RegExp(`${esc(person)} was born in (\\d+)`).exec(seen);
  if (!personFact) return ok(hermesCall('lookup', { entity: person }));
  const [big, small] = [orgFact[1]!, personFact[1]!];
  const calculated = modelTurns.some((t) => t.includes('"name": "calculator"'));
  if (!calculated) {
    if (mistake === 'no-calculator') {
      const off = (1 + Math.floor(r() * 5)) * (r() < 0.5 ? -1 : 1);
      return wrong(`<answer> ${Number(big) - Number(small) + off} </answer>`);
    }
    return mistake === 'added'
      ? wrong(hermesCall('calculator', { expression: `${big} + ${small}` }))
      : ok(hermesCall('calculator', { expression: `${big} - ${small}` }));
  }
  const result = /(-?\d+(?:\.\d+)?)\s*(?:<\/tool_response>)?\s*[^\d]*$/.exec(observations[observations.length - 1] ?? '');
  return ok(`<answer> ${result ? result[1] : Number(big) - Number(small)} </answer>`);
}

/** Seed, sizes and question counts of the shipped example (resources/examples/tools-task). */
export const TOOLS_EXAMPLE = { seed: 7, trainQuestions: 3000, heldoutQuestions: 200 };

/**
 * The example's data files, as text: world.json (every entity's fact sentence, both worlds;
 * the lookup tool reads it) and the task file tasks.jsonl (`{id, prompt, answers, meta}` lines;
 * meta has the world, "train" or "heldout", the question kind, the entities a correct episode
 * looks up and the expression it computes). `scripts/gen-tools-task.mjs` writes them;
 * a test checks the committed files equal this output.
 */
export function toolsExampleFiles(o = TOOLS_EXAMPLE): Record<string, string> {
  const { train, heldout } = generateToolsWorlds(o.seed);
  const facts: Record<string, string> = {};
  for (const w of [train, heldout]) {
    for (const org of w.orgs) facts[org.name] = factOf(w, org.name)!;
    for (const p of w.people) facts[p.name] = factOf(w, p.name)!;
  }
  const world = { description: 'entity -> fact sentence; the training and held-out worlds share no entity', facts };
  const lines = (qs: ToolsQuestion[], w: string) =>
    qs
      .map((q) =>
        JSON.stringify({ id: q.id, prompt: q.question, answers: q.answers, meta: { world: w, kind: q.kind, entities: q.entities, expression: q.expression } }),
      )
      .join('\n') + '\n';
  return {
    'world.json': `${JSON.stringify(world, null, 0).replace(/","/g, '",\n"')}\n`,
    'tasks.jsonl':
      lines(generateToolsQuestions(train, o.trainQuestions, o.seed + 1), 'train') +
      lines(generateToolsQuestions(heldout, o.heldoutQuestions, o.seed + 2), 'heldout'),
  };
}
