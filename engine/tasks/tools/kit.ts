/**
 * The two-tool task (`task.kind: tools`) as a TaskKit: questions over the seeded organisations
 * world (engine/tasks/tools/world.ts) that need a `lookup` tool and a `calculator` tool, called in
 * Hermes JSON (`<tool_call>{"name": …, "arguments": {…}}</tool_call>`), answered with
 * `<answer> … </answer>`.
 *
 * The tools and the reward are the user files of resources/examples/tools-task (loaded into the
 * sandbox by the caller and passed in), and the questions are its task files (JSONL of
 * `{id, prompt, answers, meta}`): the built-in task runs through the same files a user opens in
 * the editor. What the kit adds is what a user's environment cannot give a tiny model: the
 * byte-level word tokenizer whose chat template renders the tool schemas and tool responses
 * (engine/model/tiny-tokenizer.ts, engine/tasks/tools/template.ts), the scripted expert with
 * mistakes for the SFT warm start, and the tiny model's config.
 */
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadTaskFile } from '../../env/taskfile';
import type { EnvTask } from '../../env/task';
import { TOOLS_CHAT_TEMPLATE } from './template';
import { toolsExpertStep, toolsVocabulary } from './world';
import { HfTokenizer } from '../../model/tokenizer';
import { buildByteWordTokenizer, JSON_PUNCTUATION } from '../../model/tiny-tokenizer';
import type { TextPolicy, TokenizerPort } from '../../rollout/ports';
import type { ExperimentConfig } from '../../config/experiment';
import { envSetup, taskTools, toolEnvTask } from '../env-setup';
import { tinyTaskModel, tokenizerCacheFolder } from '../multihop/kit';
import type { KitExtras, TaskKit } from '../kit';
import { registerTaskKit } from '../kit-registry';
import { taskFileSearch } from '../custom/kit';

/** The example environment the built-in task runs on. */
export const TOOLS_EXAMPLE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'resources', 'examples', 'tools-task');

const ADDED = [
  '<pad>',
  '<|endoftext|>',
  '<|im_start|>',
  '<|im_end|>',
  '<tool_call>',
  '</tool_call>',
  '<tool_response>',
  '</tool_response>',
  '<tools>',
  '</tools>',
  '<answer>',
  '</answer>',
];
const SPECIAL = ['<pad>', '<|endoftext|>', '<|im_start|>', '<|im_end|>'];
const EXTRA_WORDS = ['system', 'user', 'assistant', 'lookup', 'calculator', 'about', 'required', 'property', 'additional', 'properties'];

export type ToolsTokenizer = TokenizerPort & { hf: HfTokenizer; vocab: string[]; folder(): string; json: unknown };

let cached: ToolsTokenizer | undefined;

/** The tiny model's tokenizer: whole words and numbers of the world, byte fallback, the Hermes chat template. */
export function toolsTokenizer(): ToolsTokenizer {
  if (cached) return cached;
  const { tokenizer, config, vocab } = buildByteWordTokenizer([...toolsVocabulary(), ...EXTRA_WORDS], {
    added: ADDED,
    special: SPECIAL,
    eos: '<|im_end|>',
    pad: '<pad>',
    pieces: JSON_PUNCTUATION,
    chatTemplate: TOOLS_CHAT_TEMPLATE,
  });
  const hf = new HfTokenizer(tokenizer, config);
  cached = {
    hf,
    vocab,
    json: tokenizer,
    encode: (t) => hf.encode(t),
    decode: (ids) => hf.decode(ids),
    folder: () => tokenizerCacheFolder('tools', tokenizer, config),
  };
  return cached;
}

/**
 * The scripted expert over the task file's questions (reads facts from the observations; makes
 * mistakes at `mistakeRate`). A turn of calls ends with the model's end-of-turn text, as the Hermes
 * format expects (the observation is rendered by the chat template after it).
 */
export function toolsExpert(mistakeRate: number, decoys: string[], endText: string): TextPolicy {
  return {
    async act({ task, history, seed }) {
      const question = String(task.meta?.question ?? '');
      const observations = history.filter((h) => h.role !== 'model').map((h) => h.text);
      const modelTurns = history.filter((h) => h.role === 'model').map((h) => h.text);
      const turn = toolsExpertStep(question, observations, modelTurns, seed, { mistakeRate, decoys });
      const text = turn.text.startsWith('<tool_call>') ? turn.text + endText : turn.text;
      return turn.mistake ? { text, mistake: true } : text;
    },
  };
}

/**
 * `model.path` with this task: only a checkpoint of its own tiny model (an SFT warm start or a
 * run's checkpoint: `arbor eval`, `arbor demo --algorithms`), recognised by its tokenizer.json
 * being this task's tokenizer; any other folder is refused, naming the field and the file.
 */
function checkToolsCheckpoint(path: string, tok: ToolsTokenizer, where: string): void {
  const file = join(path, 'tokenizer.json');
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    json = undefined;
  }
  if (!isDeepStrictEqual(json, tok.json))
    throw new Error(
      `model.path: ${where} trains its built-in tiny model (its tokenizer and chat template); ${file} is not that model's tokenizer, so ${path} is not a checkpoint of this task. Use model.init: tiny, or a checkpoint of a tools run`,
    );
}

/**
 * The kit. Tools, reward, task file and workspace come from the config's `environment` (the
 * shipped config resources/configs/tools.yaml names the example's files); the task file's rows
 * with `meta.world: "heldout"` are the held-out world, the others the training world.
 */
export function toolsKit(cfg: ExperimentConfig, extras: KitExtras = {}): TaskKit {
  const where = 'task.kind "tools"';
  if (cfg.environment.format !== 'hermes')
    throw new Error(`environment.format: ${where} is written in Hermes JSON calls; set environment.format: hermes (got "${cfg.environment.format}")`);
  const tok = toolsTokenizer();
  if (cfg.model.path) checkToolsCheckpoint(cfg.model.path, tok, where);
  const setup = envSetup(cfg, extras.host);
  const { tools, format } = taskTools([], setup);
  for (const name of ['lookup', 'calculator'])
    if (!tools.some((t) => t.name === name))
      throw new Error(`environment.tools: ${where} needs a "${name}" tool (e.g. ${join('resources', 'examples', 'tools-task', 'tools', `${name}.ts`)})`);
  const file = cfg.environment.tasks ?? join(TOOLS_EXAMPLE_DIR, 'tasks.jsonl');
  const all = loadTaskFile(file).tasks;
  const train = all.filter((t) => t.meta?.world !== 'heldout');
  const held = all.filter((t) => t.meta?.world === 'heldout');
  if (train.length === 0 || held.length === 0) throw new Error(`environment.tasks: ${file} needs training rows and held-out rows (meta.world "heldout")`);
  const eos = tok.hf.tokenId('<|im_end|>')!;
  const task = (t: EnvTask) => toolEnvTask(t, { tools, format, tokenizer: tok.hf, setup, endTokenIds: [eos], instruction: '' });
  const decoys = [...new Set(train.flatMap((t) => (Array.isArray(t.meta?.entities) ? (t.meta.entities as string[]) : [])))];
  return {
    tokenizer: tok,
    tokenizerFolder: tok.folder(),
    trainTasks: train.map(task),
    evalTasks: held.slice(0, cfg.eval.n_questions).map(task),
    stop: { strings: format.stopStrings, tokenIds: [eos, tok.hf.tokenId('<|endoftext|>')!] },
    expert: toolsExpert(cfg.sft.mistake_rate, decoys, '<|im_end|>'),
    tinyModel: (c) => tinyTaskModel(c, tok.vocab.length, eos),
  };
}

registerTaskKit('tools', toolsKit, {
  description: 'the built-in two-tool task (lookup + calculator in Hermes JSON)',
  taskFile: 'optional',
  reads: { 'sft.mistake_rate': "its scripted expert's deliberate mistakes", 'sft.imitate_mistakes': "its scripted expert's deliberate mistakes" },
  tools: taskFileSearch,
  tokenizer: toolsTokenizer,
});
