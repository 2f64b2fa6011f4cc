/**
 * The built-in multi-hop search task: a world, its BM25-searchable corpus, questions, and a
 * ToolEnv per episode (Search-R1 tags). Baseline modes: 'tools' (the agent searches) and
 * 'naive-rag' (retrieve once with the question, answer directly).
 */
import type { TextTokenizer } from '../../model/tokenizer';
import { searchR1Format } from '../../env/formats';
import { generateQuestions, generateWorld, type Question, type World } from './world';
import { Bm25Index, searchTool } from '../../env/search';
import { ToolEnv } from '../../env/toolenv';
import { expertTurn, type ExpertOptions } from './expert';

export interface MultihopOptions {
  worldSeed: number;
  questionSeed: number;
  questions: number;
  hops: (1 | 2 | 3)[];
  mode?: 'tools' | 'naive-rag';
  topK?: number;
  maxTurns?: number;
  rewardWeights?: Record<string, number>;
  /** Instruction before the question (default: ToolEnv's); '' for models trained on TASK_PROMPT_TEMPLATE. */
  instruction?: string;
}

/**
 * The chat template of the multi-hop task's tokenizer (the one trained checkpoints carry): the
 * user message as `question : …`, other messages verbatim, no system prompt or tool list.
 */
export const TASK_PROMPT_TEMPLATE =
  "{% for m in messages %}{% if m.role == 'user' %}question : {{ m.content }}{% elif m.role != 'system' %} {{ m.content }}{% endif %}{% endfor %}";

export interface MultihopTask {
  world: World;
  index: Bm25Index;
  questions: Question[];
  createEnv(q: Question): ToolEnv;
}

const worlds = new Map<number, { world: World; index: Bm25Index }>();

export function multihopWorld(seed: number): { world: World; index: Bm25Index } {
  let w = worlds.get(seed);
  if (!w) {
    const world = generateWorld(seed);
    w = { world, index: new Bm25Index(world.passages) };
    worlds.set(seed, w);
  }
  return w;
}

export function openMultihop(o: MultihopOptions, tokenizer: Pick<TextTokenizer, 'encode' | 'renderChat'>): MultihopTask {
  const { world, index } = multihopWorld(o.worldSeed);
  const questions = generateQuestions(world, o.questions, o.hops, o.questionSeed);
  const tool = searchTool(index, { topK: o.topK ?? 2 });
  const format = searchR1Format(); // the same per-turn call limit as training and the playground (DEFAULT_MAX_CALLS)
  const createEnv = (q: Question) =>
    new ToolEnv({
      task: { id: q.id, question: q.question, answers: q.answers, supportingFacts: q.supportingFacts, meta: { hops: q.hops, relation: q.relation } },
      tools: [tool],
      format,
      tokenizer,
      rewardWeights: o.rewardWeights ?? { exact_match: 1 },
      maxTurns: o.mode === 'naive-rag' ? 1 : (o.maxTurns ?? 4),
      instruction: o.instruction,
      context:
        o.mode === 'naive-rag'
          ? index
              .search(q.question, o.topK ?? 2)
              .map((h) => h.passage.text)
              .join(' ')
          : undefined,
    });
  return { world, index, questions, createEnv };
}

/** Run the scripted expert on one question through the real tools; returns its turns and observations. */
export async function runExpertEpisode(env: ToolEnv, question: string, seed: number, opts: ExpertOptions = {}, maxTurns = 6) {
  const turns: { model: string; observation?: string }[] = [];
  const observations: string[] = [];
  for (let i = 0; i < maxTurns; i++) {
    const text = expertTurn(
      question,
      observations,
      turns.map((t) => t.model),
      seed,
      opts,
    );
    const r = await env.step({ text });
    turns.push({ model: text, observation: r.observation?.text });
    if (r.observation) observations.push(r.observation.text);
    if (r.done) break;
  }
  return { turns, outcome: await env.outcome() };
}
