/**
 * The two-tool task (`task.kind: tools`) as a TaskKit: questions over the seeded organisations
 * world (engine/env/tools-world.ts) that need a `lookup` tool and a `calculator` tool, called in
 * Hermes JSON (`<tool_call>{"name": …, "arguments": {…}}</tool_call>`), answered with
 * `<answer> … </answer>`.
 *
 * The tools and the reward are the user files of resources/examples/tools-task (loaded into the
 * sandbox by the caller and passed in), and the questions are its task files (JSONL of
 * `{id, prompt, answers, meta}`): the built-in task runs through the same files a user opens in
 * the editor. What the kit adds is what a user's environment cannot give a tiny model: the
 * byte-level word tokenizer whose chat template renders the tool schemas and tool responses
 * (engine/model/tiny-tokenizer.ts, engine/env/tools-template.ts), the scripted expert with
 * mistakes for the SFT warm start, and the tiny model's config.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hermesFormat } from '../env/formats';
import { runCall, type CallOutcome, type Tool } from '../env/tool';
import { TOOLS_CHAT_TEMPLATE } from '../env/tools-template';
import { toolsExpertTurn, toolsVocabulary } from '../env/tools-world';
import { HfTokenizer, type ToolSpec } from '../model/tokenizer';
import { buildByteWordTokenizer, JSON_PUNCTUATION } from '../model/tiny-tokenizer';
import { arborHome } from '../store/db';
import type { EpisodeEnv, RolloutTask, TextPolicy, TokenizerPort } from '../rollout/ports';
import type { ToolCallRecord } from '../rollout/types';
import type { ExperimentConfig } from './config';
import { tinyTaskModel } from './multihop-kit';
import type { TaskKit } from './session';

/** The example environment the built-in task runs on. */
export const TOOLS_EXAMPLE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'resources', 'examples', 'tools-task');

const ADDED = ['<pad>', '<|endoftext|>', '<|im_start|>', '<|im_end|>', '<tool_call>', '</tool_call>', '<tool_response>', '</tool_response>', '<tools>', '</tools>', '<answer>', '</answer>'];
const SPECIAL = ['<pad>', '<|endoftext|>', '<|im_start|>', '<|im_end|>'];
const EXTRA_WORDS = ['system', 'user', 'assistant', 'lookup', 'calculator', 'about', 'required', 'property', 'additional', 'properties'];

export type ToolsTokenizer = TokenizerPort & { hf: HfTokenizer; vocab: string[]; folder(): string };

let cached: ToolsTokenizer | undefined;

/** The tiny model's tokenizer: whole words and numbers of the world, byte fallback, the Hermes chat template. */
export function toolsTokenizer(): ToolsTokenizer {
  if (cached) return cached;
  const { tokenizer, config, vocab } = buildByteWordTokenizer([...toolsVocabulary(), ...EXTRA_WORDS], {
    added: ADDED, special: SPECIAL, eos: '<|im_end|>', pad: '<pad>', pieces: JSON_PUNCTUATION, chatTemplate: TOOLS_CHAT_TEMPLATE,
  });
  const hf = new HfTokenizer(tokenizer, config);
  cached = {
    hf,
    vocab,
    encode: (t) => hf.encode(t),
    decode: (ids) => hf.decode(ids),
    folder() {
      const tj = JSON.stringify(tokenizer);
      const tc = JSON.stringify(config, null, 2);
      const dir = join(arborHome(), 'cache', `tools-tokenizer-${createHash('sha256').update(tj).update(tc).digest('hex').slice(0, 12)}`);
      if (!existsSync(join(dir, 'tokenizer_config.json'))) {
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, 'tokenizer.json'), tj);
        writeFileSync(join(dir, 'tokenizer_config.json'), tc);
      }
      return dir;
    },
  };
  return cached;
}

/** One task line: `{id, prompt, answers, meta}`. */
export interface ToolsTaskLine { id: string; prompt: string; answers: string[]; meta?: Record<string, unknown> }

export function readToolsTasks(file: string): ToolsTaskLine[] {
  return readFileSync(file, 'utf8').split('\n').flatMap((line, i) => {
    if (!line.trim()) return [];
    let v: ToolsTaskLine;
    try {
      v = JSON.parse(line) as ToolsTaskLine;
    } catch (e) {
      throw new Error(`${file}:${i + 1}: invalid JSON (${(e as Error).message})`);
    }
    if (typeof v.id !== 'string' || typeof v.prompt !== 'string' || !Array.isArray(v.answers)) throw new Error(`${file}:${i + 1}: needs id, prompt and answers`);
    return [v];
  });
}

export interface ToolsEnvironment {
  tools: Map<string, Tool>;
  /** The reward file's function over the episode (default: exact match). */
  reward?: (episode: ToolsEpisode) => Promise<{ reward: number; components?: Record<string, number> }>;
}

/** What the reward sees: the task, every turn (text, calls with arguments, results and errors), the answer. */
export interface ToolsEpisode {
  task: ToolsTaskLine;
  turns: { text: string; calls: { name: string; arguments: unknown; result: string; error?: string }[] }[];
  answer?: string;
}

const normalize = (s: string) => s.trim().toLowerCase().replace(/\s+/g, ' ');

/** A Hermes episode over the given tools; observations are the chat template's tool messages. */
export function toolsTask(line: ToolsTaskLine, env: ToolsEnvironment, tok: ToolsTokenizer): RolloutTask {
  const format = hermesFormat();
  const specs: ToolSpec[] = [...env.tools.values()].map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } }));
  return {
    id: line.id,
    meta: { ...(line.meta ?? {}), question: line.prompt, answers: line.answers },
    createEnv(): EpisodeEnv {
      const episode: ToolsEpisode = { task: line, turns: [] };
      const state: Record<string, unknown> = {};
      let formatOk = true;
      return {
        async prompt() {
          const text = tok.hf.renderChat([{ role: 'user', content: line.prompt }], { tools: specs, addGenerationPrompt: true });
          return { ids: tok.encode(text), text };
        },
        async step(turn) {
          const parsed = format.parse(turn.text);
          if (parsed.errors.length) formatOk = false;
          if (parsed.answer !== undefined) {
            episode.answer = parsed.answer;
            episode.turns.push({ text: turn.text, calls: [] });
            return { done: true };
          }
          const outcomes: CallOutcome[] = await Promise.all(parsed.calls.map((c) => runCall(env.tools, c, undefined, state)));
          episode.turns.push({ text: turn.text, calls: outcomes.map((o) => ({ name: o.name, arguments: o.args, result: o.result, error: o.error })) });
          const results = [...parsed.errors.map((e) => `Error: ${e}`), ...outcomes.map((o) => o.result)];
          const text = `<|im_end|>${tok.hf.renderChat(results.map((r) => ({ role: 'tool', content: r })), { addGenerationPrompt: true })}`;
          const records: ToolCallRecord[] = outcomes.map((o) => ({ name: o.name, args: o.args, result: o.result, error: o.error, latencyMs: o.latencyMs }));
          return { done: false, observation: { text, ids: tok.encode(text), role: 'tool' }, toolCalls: records };
        },
        async outcome() {
          const em = episode.answer !== undefined && line.answers.some((a) => normalize(a) === normalize(episode.answer!)) ? 1 : 0;
          const calls = episode.turns.flatMap((t) => t.calls);
          const components: Record<string, number> = {
            exact_match: em,
            lookup_calls: calls.filter((c) => c.name === 'lookup').length,
            calculator_calls: calls.filter((c) => c.name === 'calculator').length,
            tool_errors: calls.filter((c) => c.error).length,
          };
          const r = env.reward ? await env.reward(episode) : { reward: em };
          return { reward: r.reward, components: { ...components, ...(r.components ?? {}) }, exactMatch: em === 1, formatOk: formatOk && episode.answer !== undefined, answer: episode.answer };
        },
      };
    },
  };
}

/** The scripted expert over the task lines (reads facts from the observations; makes mistakes at `mistakeRate`). */
export function toolsExpert(mistakeRate: number, decoys: string[]): TextPolicy {
  return {
    async act({ task, history, seed }) {
      const question = String(task.meta?.question ?? '');
      const observations = history.filter((h) => h.role !== 'model').map((h) => h.text);
      const modelTurns = history.filter((h) => h.role === 'model').map((h) => h.text);
      return toolsExpertTurn(question, observations, modelTurns, seed, { mistakeRate, decoys });
    },
  };
}

export interface ToolsKitFiles {
  train: string;
  heldout: string;
}

export function toolsKit(cfg: ExperimentConfig, env: ToolsEnvironment, files: ToolsKitFiles = { train: join(TOOLS_EXAMPLE_DIR, 'tasks', 'train.jsonl'), heldout: join(TOOLS_EXAMPLE_DIR, 'tasks', 'heldout.jsonl') }): TaskKit {
  const tok = toolsTokenizer();
  for (const name of ['lookup', 'calculator']) if (!env.tools.has(name)) throw new Error(`task.kind "tools": the environment needs a "${name}" tool (resources/examples/tools-task/tools/${name}.ts)`);
  const train = readToolsTasks(files.train);
  const held = readToolsTasks(files.heldout);
  const decoys = [...new Set(train.flatMap((l) => ((l.meta?.entities as string[] | undefined) ?? [])))];
  const eos = tok.hf.tokenId('<|im_end|>')!;
  return {
    tokenizer: tok,
    tokenizerFolder: tok.folder(),
    trainTasks: train.map((l) => toolsTask(l, env, tok)),
    evalTasks: held.slice(0, cfg.eval.n_questions).map((l) => toolsTask(l, env, tok)),
    stop: { strings: ['</tool_call>', '</answer>'], tokenIds: [eos, tok.hf.tokenId('<|endoftext|>')!] },
    expert: toolsExpert(cfg.sft.mistake_rate, decoys),
    tinyModel: (c) => tinyTaskModel(c, tok.vocab.length, eos),
  };
}
