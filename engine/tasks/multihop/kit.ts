/**
 * The multi-hop search task as a TaskKit, assembled from engine/env's pieces: the seeded world
 * and questions, the BM25 search tool, the Search-R1 tool-call format, the reward functions.
 * Adds what the loop needs around them: a word-level tokenizer covering every world, an
 * episode environment per question, the scripted expert (with recoverable mistakes) for SFT,
 * and the naive-RAG baseline (one retrieval with the question, extractive reader).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { searchR1Format, type ToolCallFormat } from '../../env/formats';
import { TASK_PROMPT_TEMPLATE } from './task';
import { mulberry32 } from '../../base/rng';
import { generateQuestions, generateWorld, multihopVocabulary, type Question, type World } from './world';
import type { SandboxHost } from '../../env/sandbox-host';
import { Bm25Index, searchTool } from '../../env/search';
import { DEFAULT_LIMITS, type Tool } from '../../env/tool';
import { tinyConfig } from '../../model/config';
import { buildExactWordTokenizer, HfTokenizer } from '../../model/tokenizer';
import { arborHome } from '../../store/db';
import type { RolloutTask, TextPolicy, TokenizerPort } from '../../rollout/ports';
import type { ExperimentConfig } from '../../config/experiment';
import { envSetup, formatExpert, taskTools, toolEnvTask, type EnvSetup } from '../env-setup';
import type { EvalSummary } from '../kit';
import type { TaskKit } from '../kit';
import { registerTaskKit } from '../kit-registry';

const SPECIAL = ['<pad>', '<unk>', '<eos>', '<search>', '</search>', '<answer>', '</answer>', '<information>', '</information>', 'question', 'Error'];

/**
 * The task's word-level tokenizer, through the same HF code path as real models: a tokenizer.json
 * (@huggingface/tokenizers) over the fixed vocabulary of every world — tags, words and
 * punctuation are single tokens, decode joins with spaces — plus a chat template rendering the
 * task's prompt. Its files are written once to a cache folder and copied into every checkpoint,
 * so a trained model folder carries its tokenizer (playground, `arbor eval`, HF tools).
 */
export const MULTIHOP_CHAT_TEMPLATE = TASK_PROMPT_TEMPLATE;

/** Tags, words and punctuation as single tokens over a fixed vocabulary (token i has id i). */
export function taskTokenizerFiles(words: string[]): { vocab: string[]; tokenizer: Record<string, unknown>; config: Record<string, unknown> } {
  const vocab = [...new Set([...SPECIAL, ...words, ':', '?', '.', ',', ';', '…'])];
  const { tokenizer, config } = buildExactWordTokenizer(vocab, {
    verbatim: (w) => /^<\/?[a-z_]+>$/.test(w) || w !== w.toLowerCase(),
    special: ['<pad>', '<unk>', '<eos>'],
    eos: '<eos>',
    pad: '<pad>',
    unk: '<unk>',
    chatTemplate: MULTIHOP_CHAT_TEMPLATE,
  });
  return { vocab, tokenizer, config };
}

export type TaskTokenizer = TokenizerPort & { vocab: string[]; hf: HfTokenizer; folder(): string };

/** A task tokenizer; `folder()` writes its files once to a content-addressed cache under ARBOR_HOME (copied into checkpoints). */
export function taskTokenizer(name: string, words: string[]): TaskTokenizer {
  const { vocab, tokenizer, config } = taskTokenizerFiles(words);
  const hf = new HfTokenizer(tokenizer, config);
  return {
    vocab,
    hf,
    encode: (text) => hf.encode(text),
    decode: (ids) => hf.decode(ids),
    folder: () => tokenizerCacheFolder(name, tokenizer, config),
  };
}

/**
 * A built tokenizer's files in ARBOR_HOME/cache/<name>-tokenizer-<hash of their content>, written
 * once (every task kit's tokenizer; checkpoints copy them from there).
 */
export function tokenizerCacheFolder(name: string, tokenizer: Record<string, unknown>, config: Record<string, unknown>): string {
  const tj = JSON.stringify(tokenizer);
  const tc = JSON.stringify(config, null, 2);
  const dir = join(arborHome(), 'cache', `${name}-tokenizer-${createHash('sha256').update(tj).update(tc).digest('hex').slice(0, 12)}`);
  if (!existsSync(join(dir, 'tokenizer_config.json'))) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'tokenizer.json'), tj);
    writeFileSync(join(dir, 'tokenizer_config.json'), tc);
  }
  return dir;
}

let cachedTokenizer: TaskTokenizer | undefined;

/** The multi-hop task's tokenizer: the fixed vocabulary of every world. */
export function multihopTokenizer(): TaskTokenizer {
  cachedTokenizer ??= taskTokenizer('multihop', multihopVocabulary());
  return cachedTokenizer;
}

export function multihopTokenizerFolder(): string {
  return multihopTokenizer().folder();
}

// Outcome reward = exact match. (A +0.1 format bonus was measured to make GRPO collapse onto answering at once without searching.)
const TRAIN_WORLDS = 64;
const QUESTIONS_PER_WORLD = 40;

const REWARD_WEIGHTS = { exact_match: 1 };

/** A question the search task can pose: the multi-hop world's, or a user dataset's (no hop count). */
export type SearchQuestion = Pick<Question, 'id' | 'question' | 'answers' | 'supporting'> & { hops?: number; relation?: string; supportingFacts?: string[] };

/** A tokenizer a search task can prompt with: the task tokenizer (its HF twin renders the chat template) or an HF tokenizer. */
export type SearchTokenizer = TaskTokenizer | HfTokenizer;

const envTokenizer = (tok: SearchTokenizer) => ('hf' in tok ? tok.hf : tok);

/** Default environment settings for the built-in search task (search-r1, 2 queries per search). */
export function defaultSearchSetup(maxTurns = 4): EnvSetup {
  return { format: 'search-r1', maxCalls: 2, limits: { ...DEFAULT_LIMITS }, maxObservationTokens: 256, maxTurns, userTools: [], toolFiles: new Map() };
}

/** A question's task meta: its hop count and relation, where it has them (`arbor eval --by hops|relation`). */
const questionMeta = (q: SearchQuestion) => ({
  ...(q.hops !== undefined ? { hops: q.hops } : {}),
  ...(q.relation !== undefined ? { relation: q.relation } : {}),
});

/**
 * One search episode per question through engine/env's ToolEnv (the config's format, EM reward
 * unless a reward file is given), over the given tools and tokenizer. Models whose chat template
 * is the task's (`question : …`) get the bare question, as they were trained.
 */
export function multihopTask(
  q: SearchQuestion,
  tools: Map<string, Tool>,
  tok: SearchTokenizer = multihopTokenizer(),
  setup: EnvSetup = defaultSearchSetup(),
): RolloutTask {
  const hf = envTokenizer(tok);
  const { tools: all, format } = taskTools([...tools.values()], setup);
  return toolEnvTask(
    { id: q.id, question: q.question, answers: q.answers, supportingFacts: q.supportingFacts, meta: questionMeta(q) },
    {
      tools: all,
      format,
      tokenizer: hf,
      setup,
      rewardWeights: REWARD_WEIGHTS,
      instruction: hf.chatTemplate === TASK_PROMPT_TEMPLATE ? '' : undefined,
      endTokenIds: hf.eosTokenId !== undefined ? [hf.eosTokenId] : [],
    },
  );
}

/** Query that finds a supporting passage: its title (entity name). */
const queryFor = (passageId: string) => passageId.slice(passageId.indexOf(':') + 1);

/**
 * The scripted expert: searches each supporting passage in order, then answers. With
 * probability `mistakeRate` it first makes a mistake it recovers from: searching the whole
 * question (a vague query) or a wrong entity, then continuing correctly. Written in the run's
 * tool-call format.
 */
export function multihopExpert(
  questions: Map<string, Question>,
  worldOf: (questionId: string) => World,
  mistakeRate: number,
  format: ToolCallFormat = searchR1Format(),
  endText = '',
): TextPolicy {
  return formatExpert(format, endText, (id, done, seed) => {
    const q = questions.get(id)!;
    const r = mulberry32(seed);
    const mistake = r() < mistakeRate;
    const plan: { calls?: { name: string; args: Record<string, unknown> }[]; answer?: string; mistake?: boolean }[] = [];
    const search = (query: string) => ({ calls: [{ name: 'search', args: { query } }] });
    if (mistake) {
      if (r() < 0.5) plan.push({ ...search(q.question.replace(/ \?$/, '')), mistake: true });
      else {
        const world = worldOf(id);
        plan.push({ ...search(world.people[Math.floor(r() * world.people.length)]!.name), mistake: true });
      }
    }
    for (const s of q.supporting) plan.push(search(queryFor(s)));
    plan.push({ answer: q.answers[0] });
    return plan[Math.min(done, plan.length - 1)]!;
  });
}

/** The relation the final hop of a question asks for, as a pattern over passages. */
function answerPattern(question: string): RegExp {
  if (/born \?$/.test(question) && question.startsWith('where')) return /was born in (\w+)/;
  if (question.startsWith('who wrote')) return /was written by (\w+ \w+)/;
  if (/located \?$/.test(question) && question.includes('which city')) return /is located in (\w+)/;
  return /is a city in (\w+)/;
}

/** Naive RAG: one BM25 retrieval with the question; the first passage stating the asked relation gives the answer. */
export function naiveRag(index: Bm25Index, questions: Map<string, Question>, topK: number) {
  return async (tasks: RolloutTask[]): Promise<EvalSummary> => {
    const byHops = new Map<number, { right: number; n: number }>();
    let right = 0;
    for (const t of tasks) {
      const q = questions.get(t.id)!;
      const text = index
        .search(q.question, topK)
        .map((h) => h.passage.text)
        .join(' ');
      const m = answerPattern(q.question).exec(text);
      const ok = !!m && q.answers.includes(m[1]!);
      right += ok ? 1 : 0;
      const h = byHops.get(q.hops) ?? { right: 0, n: 0 };
      h.n++;
      h.right += ok ? 1 : 0;
      byHops.set(q.hops, h);
    }
    const n = Math.max(1, tasks.length);
    return {
      n: tasks.length,
      exactMatch: right / n,
      exactMatchByHops: Object.fromEntries([...byHops].map(([k, v]) => [k, v.right / v.n])),
      formatRate: 1,
      toolCallsPerEpisode: 1,
      toolErrorsPerEpisode: 0,
    };
  };
}

/** The tiny built-in model for a word-level task vocabulary (model.hidden_size / model.layers / model.heads override). */
export function tinyTaskModel(c: ExperimentConfig, vocabSize: number, eosTokenId: number) {
  return tinyConfig({
    vocabSize,
    hiddenSize: c.model.hidden_size ?? 64,
    layers: c.model.layers ?? 2,
    heads: c.model.heads ?? 4,
    maxPositionEmbeddings: c.rollout.max_total_length,
    padTokenId: 0,
    eosTokenId,
  });
}

export function multihopKit(cfg: ExperimentConfig, extras: { host?: SandboxHost; mcpTools?: import('../../env/tool').Tool[] } = {}): TaskKit {
  const tok = multihopTokenizer();
  const setup = envSetup(cfg, extras.host, extras.mcpTools);
  const hops = cfg.task.hops.map((h) => Math.min(3, h)) as (1 | 2 | 3)[];
  // Training questions come from many worlds (seeds train_seed, train_seed+1, …) so facts
  // cannot be memorised: the policy has to read them from search results. Measured: with one
  // training world, SFT reached loss 0.07 but 6% held-out EM (it memorised that world).
  const trainTasks: RolloutTask[] = [];
  const trainQs: Question[] = [];
  const worldOfQ = new Map<string, World>();
  for (let k = 0; k < TRAIN_WORLDS; k++) {
    const world = generateWorld(cfg.task.train_seed + k);
    const tools = new Map<string, Tool>([['search', searchTool(new Bm25Index(world.passages), { topK: cfg.task.top_k })]]);
    for (const q of generateQuestions(world, QUESTIONS_PER_WORLD, hops, cfg.task.train_seed + k + 17)) {
      trainQs.push(q);
      worldOfQ.set(q.id, world);
      trainTasks.push(multihopTask(q, tools, tok, setup));
    }
  }
  if (cfg.task.eval_seed >= cfg.task.train_seed && cfg.task.eval_seed < cfg.task.train_seed + TRAIN_WORLDS)
    throw new Error(`task.eval_seed ${cfg.task.eval_seed} is one of the training worlds (task.train_seed … task.train_seed+${TRAIN_WORLDS - 1}); pick another`);
  const evalWorld = generateWorld(cfg.task.eval_seed);
  const evalIndex = new Bm25Index(evalWorld.passages);
  const evalTools = new Map<string, Tool>([['search', searchTool(evalIndex, { topK: cfg.task.top_k })]]);
  const evalQs = generateQuestions(evalWorld, cfg.eval.n_questions, hops, cfg.task.eval_seed + 17);
  const all = new Map([...trainQs, ...evalQs].map((q) => [q.id, q]));
  const eos = tok.encode('<eos>')[0]!;
  const { format } = taskTools([...evalTools.values()], setup);
  return {
    tokenizer: tok,
    tokenizerFolder: multihopTokenizerFolder(),
    trainTasks,
    rlTasks: cfg.task.rl_hops ? trainTasks.filter((t) => cfg.task.rl_hops!.includes(Number(t.meta?.hops))) : undefined,
    evalTasks: evalQs.map((q) => multihopTask(q, evalTools, tok, setup)),
    stop: { strings: format.stopStrings, tokenIds: [eos] },
    expert: multihopExpert(new Map(trainQs.map((q) => [q.id, q])), (id) => worldOfQ.get(id)!, cfg.sft.mistake_rate, format, '<eos>'),
    naiveRag: naiveRag(evalIndex, all, cfg.task.top_k),
    tinyModel: (c) => tinyTaskModel(c, tok.vocab.length, eos),
  };
}

/** The multi-hop search served outside a run (`arbor mcp serve`, verl): each call searches the world of its episode's question (ids are w<seed>-q<n>), topK passages (task.top_k). */
export function routedMultihopSearch(topK: number): Tool {
  const cache = new Map<number, Tool>();
  const forWorld = (seed: number) => {
    let t = cache.get(seed);
    if (!t) {
      if (cache.size >= 16) cache.delete(cache.keys().next().value!);
      t = searchTool(new Bm25Index(generateWorld(seed).passages), { topK });
      cache.set(seed, t);
    }
    return t;
  };
  const proto = searchTool(new Bm25Index(generateWorld(0).passages), { topK });
  return {
    name: proto.name,
    description: proto.description,
    parameters: proto.parameters,
    execute(args, ctx) {
      const task = ctx.episode.task;
      const m = typeof task === 'string' ? /^w(\d+)-q\d+$/.exec(task) : null;
      if (!m) throw new Error('the multi-hop search needs the question it serves: pass { task: "<question id>" } as the episode (MCP: _meta["arbor/episode"])');
      return forWorld(Number(m[1])).execute(args, ctx);
    },
  };
}

const WORLD = "the built-in world's questions";
const MISTAKES = "its scripted expert's deliberate mistakes";

registerTaskKit('multihop', multihopKit, {
  default: true,
  description: 'the built-in synthetic multi-hop world with BM25 search',
  reads: {
    'task.hops': WORLD,
    'task.rl_hops': WORLD,
    'task.train_seed': WORLD,
    'task.eval_seed': WORLD,
    'task.top_k': 'its BM25 search tool',
    'sft.mistake_rate': MISTAKES,
    'sft.imitate_mistakes': MISTAKES,
  },
  check: (c) =>
    (c.task.rl_hops ?? [])
      .filter((h) => !c.task.hops.includes(h))
      .map((h) => ({
        field: 'task.rl_hops',
        message: `${h} is not one of task.hops (${c.task.hops.join(', ')}); RL questions are drawn from the training questions`,
      })),
  // Served: the world of each call's question; a chat: the held-out world (task.eval_seed).
  tools: (cfg, where) =>
    where === 'served'
      ? { tools: [routedMultihopSearch(cfg.task.top_k)], describe: 'multi-hop BM25 search (per question world)' }
      : {
          tools: [searchTool(new Bm25Index(generateWorld(cfg.task.eval_seed).passages), { topK: cfg.task.top_k })],
          describe: `BM25 search over world ${cfg.task.eval_seed}`,
          corpus: { world: cfg.task.eval_seed },
        },
  tokenizer: multihopTokenizer,
});
