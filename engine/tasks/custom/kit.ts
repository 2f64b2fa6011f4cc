/**
 * task.kind "custom": any task, any tools. The tasks come from `environment.tasks` (JSONL of
 * {id, prompt | messages, answers?, meta?}, engine/env/taskfile.ts; QA rows with contexts also
 * work and their paragraphs become a BM25 `search` tool), the tools from `environment.tools`
 * (sandboxed, any names), the reward from `environment.reward` (else exact match against
 * `answers`), the format from `environment.format`. Every fifth task is held out for evaluation.
 *
 * Tokenizer: `model.path`'s own (with its chat template); for the tiny model whole words with a
 * byte fallback (engine/model/tiny-tokenizer.ts buildTextWordTokenizer): the tags and the words of
 * the rendered tool signatures and turns, and every word two training tasks share, are tokens; a
 * word of one task only, and every number, is spelled in bytes (so no token is one training never
 * targets). JSON tool calls and any text encode exactly, and nothing is out of vocabulary. The
 * tiny model's chat template is the two-tool task's (engine/tasks/tools/template.ts: tool
 * signatures without spaces, so a copying head is not sent back into the system prompt) and its
 * prompt has no format instruction (it learns the format from the demonstrations; a constant
 * preamble only lengthens every sequence): prompts of ~30 tokens instead of ~110, and on the
 * invented-names task (scripts/gen-capitals-task.mjs) SFT learned to copy unseen names
 * (docs/areas/train.md).
 *
 * Demonstrations: a task whose `meta.demo` is a list of turns, each `{ "calls": [{ "name", "args" }] }`
 * or `{ "answer": "…" }`, is demonstrated by writing those turns in the run's format (the SFT warm
 * start's scripted expert); without demos on every training task, give sft.demos_path.
 */
import { Bm25Index, searchTool } from '../../env/search';
import type { SandboxHost } from '../../env/sandbox-host';
import { loadTaskFile } from '../../env/taskfile';
import type { Tool } from '../../env/tool';
import type { EnvTask } from '../../env/task';
import { taskPrompt } from '../../env/toolenv';
import { HfTokenizer, type ToolSpec } from '../../model/tokenizer';
import { TOOLS_CHAT_TEMPLATE } from '../tools/template';
import type { ToolCallFormat } from '../../env/formats';
import { buildTextWordTokenizer } from '../../model/tiny-tokenizer';
import { renderChatTemplate } from '../../model/chat-template';
import { Template } from '@huggingface/jinja';
import type { ExperimentConfig } from '../../config/experiment';
import { envSetup, formatExpert, taskTools, toolEnvTask } from '../env-setup';
import { tinyTaskModel, tokenizerCacheFolder } from '../multihop/kit';
import type { TaskKit } from '../kit';
import { registerTaskKit, type BuiltinTools } from '../kit-registry';

type DemoTurn = { calls?: { name: string; args: Record<string, unknown> }[]; answer?: string };

function demoOf(t: EnvTask): DemoTurn[] | undefined {
  const d = t.meta?.demo;
  if (!Array.isArray(d) || d.length === 0) return undefined;
  for (const [i, turn] of d.entries()) {
    const ok =
      turn &&
      typeof turn === 'object' &&
      (typeof (turn as DemoTurn).answer === 'string' ||
        (Array.isArray((turn as DemoTurn).calls) &&
          (turn as DemoTurn).calls!.every((c) => c && typeof c.name === 'string' && c.args && typeof c.args === 'object')));
    if (!ok) throw new Error(`environment.tasks: task ${t.id}: meta.demo[${i}] must be { "calls": [{ "name", "args" }] } or { "answer": "…" }`);
  }
  return d as DemoTurn[];
}

/** The tiny model's tokenizer (buildTextWordTokenizer over `texts`), its files cached by content under ARBOR_HOME (copied into checkpoints). */
function textWordTokenizer(texts: { shared: string[]; tasks: string[][] }): { hf: HfTokenizer; folder: string } {
  const { tokenizer, config } = buildTextWordTokenizer(texts, { chatTemplate: TOOLS_CHAT_TEMPLATE });
  return { hf: new HfTokenizer(tokenizer, config), folder: tokenizerCacheFolder('custom', tokenizer, config) };
}

/** Every fifth task is held out for evaluation; the rest train. */
function splitTasks(tasks: EnvTask[]): { train: EnvTask[]; held: EnvTask[] } {
  return { train: tasks.filter((_, i) => i % 5 !== 4), held: tasks.filter((_, i) => i % 5 === 4) };
}

/**
 * What the tiny model reads and writes, for its tokenizer's words (buildTextWordTokenizer): shared,
 * the chat template's rendering of the tool signatures and of a turn of each role (what the
 * template adds around the texts); per training task, its prompt, messages, answers and
 * demonstrated calls and answer. Held-out tasks are not read.
 */
function tinyTexts(train: EnvTask[], format: ToolCallFormat, specs: ToolSpec[]): { shared: string[]; tasks: string[][] } {
  const messages = ['user', 'assistant', 'tool'].map((role) => ({ role, content: '' }));
  const frame = renderChatTemplate(new Template(TOOLS_CHAT_TEMPLATE), { messages, tools: specs.length ? specs : undefined, add_generation_prompt: true });
  return {
    shared: [frame],
    tasks: train.map((t) => [
      taskPrompt(t),
      ...(t.messages ?? []).map((m) => m.content),
      ...(t.answers ?? []),
      ...(demoOf(t) ?? []).map((d) => (d.calls ? format.writeCalls(d.calls) : format.writeAnswer(d.answer ?? ''))),
    ]),
  };
}

/** Words the tool signatures (names, argument names) may add to a tiny model's vocabulary beyond the task file's (the memory plan's allowance). */
const SCHEMA_WORDS = 256;

/**
 * The tiny model's vocabulary size before the sandbox is open (the memory plan): the task file's
 * words and the format's, with room for SCHEMA_WORDS words of the tools' signatures (sandboxed files).
 */
function tinyVocabBound(cfg: ExperimentConfig): number {
  const tf = loadTaskFile(cfg.environment.tasks!);
  const { format } = taskTools([], envSetup(cfg));
  return buildTextWordTokenizer(tinyTexts(splitTasks(tf.tasks).train, format, [])).vocab.length + 2 * SCHEMA_WORDS;
}

export function customKit(cfg: ExperimentConfig, extras: { host?: SandboxHost; mcpTools?: import('../../env/tool').Tool[] } = {}): TaskKit {
  const file = cfg.environment.tasks;
  if (!file) throw new Error('environment.tasks: required for task.kind "custom"');
  const tf = loadTaskFile(file);
  const setup = envSetup(cfg, extras.host, extras.mcpTools);
  const builtin: Tool[] = tf.passages.length >= 3 ? [searchTool(new Bm25Index(tf.passages), { topK: 2 })] : [];
  const { tools, format } = taskTools(builtin, setup);
  // An external agent program brings its own tools (its requests name them); Arbor's are optional then.
  if (tools.length === 0 && !cfg.environment.agent)
    throw new Error(`environment.tools: task.kind "custom" needs tools (none given, and ${file} has no QA contexts to search)`);
  const { train, held } = splitTasks(tf.tasks);
  if (train.length === 0 || held.length === 0) throw new Error(`environment.tasks: ${file} needs at least 5 tasks (every fifth is held out for evaluation)`);

  let tok: HfTokenizer;
  let folder: string;
  if (cfg.model.path) {
    tok = HfTokenizer.load(cfg.model.path);
    folder = cfg.model.path;
  } else {
    const specs = tools.map((t) => ({ type: 'function' as const, function: { name: t.name, description: t.description, parameters: t.parameters } }));
    const texts = tinyTexts(train, format, specs);
    ({ hf: tok, folder } = textWordTokenizer(texts));
  }
  const eos = tok.eosTokenId;
  if (eos === undefined) throw new Error(`model.path: ${cfg.model.path}: tokenizer_config.json names no eos_token (a turn could never end)`);
  const endText = tok.decode([eos]);
  // The tiny model (built here, or a checkpoint of it: its chat template is TOOLS_CHAT_TEMPLATE) learns the format
  // from its demonstrations and reads no instruction; a pretrained model is told the format.
  const instruction = tok.chatTemplate === TOOLS_CHAT_TEMPLATE ? '' : undefined;
  const task = (t: EnvTask) => toolEnvTask(t, { tools, format, tokenizer: tok, setup, endTokenIds: [eos], instruction });
  const demos = new Map(train.map((t) => [t.id, demoOf(t)]));
  const undemonstrated = [...demos].filter(([, d]) => !d).map(([id]) => id);
  return {
    noExpert: undemonstrated.length
      ? `${undemonstrated.length} of ${train.length} training tasks in ${file} have no meta.demo (${undemonstrated.slice(0, 5).join(', ')}${undemonstrated.length > 5 ? ', …' : ''}; README, "Demonstrations in the task file")`
      : undefined,
    tokenizer: tok,
    tokenizerFolder: folder,
    trainTasks: train.map(task),
    evalTasks: held.slice(0, cfg.eval.n_questions).map(task),
    stop: { strings: format.stopStrings, tokenIds: [eos] },
    expert: [...demos.values()].every(Boolean)
      ? formatExpert(format, endText, (id, done) => {
          const d = demos.get(id)!;
          return d[Math.min(done, d.length - 1)]!;
        })
      : undefined,
    tinyModel: (c) => tinyTaskModel(c, tok.vocabSize, eos),
  };
}

/** Served outside a run: BM25 search over the task file's QA contexts, when it has at least 3. */
export function taskFileSearch(cfg: ExperimentConfig, where: 'served' | 'chat'): BuiltinTools | undefined {
  if (where !== 'served' || !cfg.environment.tasks) return undefined;
  const tf = loadTaskFile(cfg.environment.tasks);
  return tf.passages.length >= 3
    ? { tools: [searchTool(new Bm25Index(tf.passages), { topK: 2 })], describe: `BM25 search over ${cfg.environment.tasks}` }
    : undefined;
}

registerTaskKit('custom', customKit, {
  description: 'a task file of {id, prompt | messages, answers?, meta?} and your own tools',
  taskFile: 'required',
  tinyColdStart: true,
  tools: taskFileSearch,
  tinyVocabBound,
});
