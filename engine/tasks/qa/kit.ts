/**
 * A user QA dataset (engine/env/dataset.ts, JSONL with HotpotQA-style contexts) as a search task:
 * the context paragraphs are the BM25 corpus behind the `search` tool, the Search-R1 format and
 * exact-match reward are the multi-hop task's, every fifth question is held out for evaluation.
 * The tiny model's word-level tokenizer is built from the dataset's words; with `model.path` the
 * model folder's own tokenizer is used. The scripted expert searches the supporting paragraphs'
 * titles, then answers (SFT demonstrations need supporting_facts, or give sft.demos_path).
 */
import { loadQaDataset, type QaQuestion } from '../../env/dataset';
import type { ToolCallFormat } from '../../env/formats';
import type { SandboxHost } from '../../env/sandbox-host';
import { Bm25Index, searchTool } from '../../env/search';
import type { Tool } from '../../env/tool';
import { HfTokenizer } from '../../model/tokenizer';
import type { TextPolicy, TokenizerPort } from '../../rollout/ports';
import type { ExperimentConfig } from '../../config/experiment';
import { envSetup, formatExpert, taskTools } from '../env-setup';
import { multihopTask, taskTokenizer, tinyTaskModel } from '../multihop/kit';
import type { TaskKit } from '../kit';
import { registerTaskKit } from '../kit-registry';

const WORD = /[a-z0-9]+|[?.,:;…]/g;

export function qaWords(questions: QaQuestion[], passages: { title: string; text: string }[]): string[] {
  const words = new Set<string>();
  const add = (t: string) => {
    for (const w of t.toLowerCase().match(WORD) ?? []) words.add(w);
  };
  for (const q of questions) [q.question, ...q.answers].forEach(add);
  for (const p of passages) [p.title, p.text].forEach(add);
  ['information', 'doc', 'error', 'no', 'results', 'for', 'missing', 'closing', 'tag'].forEach(add);
  return [...words].sort();
}

function qaExpert(questions: Map<string, QaQuestion>, format: ToolCallFormat, endText: string): TextPolicy {
  return formatExpert(format, endText, (id, done) => {
    const q = questions.get(id)!;
    const plan = [...q.supporting.map((t) => ({ calls: [{ name: 'search', args: { query: t } }] })), { answer: q.answers[0] }];
    return plan[Math.min(done, plan.length - 1)]!;
  });
}

export function qaKit(cfg: ExperimentConfig, extras: { host?: SandboxHost; mcpTools?: import('../../env/tool').Tool[] } = {}): TaskKit {
  if (!cfg.task.dataset) throw new Error('task.dataset: required for task.kind "qa" (a JSONL file of questions)');
  const ds = loadQaDataset(cfg.task.dataset);
  if (ds.passages.length < 3)
    throw new Error(`task.dataset: ${ds.file} has ${ds.passages.length} context paragraphs; the search tool needs at least 3 (give HotpotQA-style "context")`);
  const tools = new Map<string, Tool>([['search', searchTool(new Bm25Index(ds.passages), { topK: 2 })]]);
  const own = cfg.model.path ? HfTokenizer.load(cfg.model.path) : undefined;
  const word = own ? undefined : taskTokenizer('qa', qaWords(ds.questions, ds.passages));
  const tok: TokenizerPort = own ?? word!;
  const eos = own ? (own.eosTokenId ?? 0) : word!.encode('<eos>')[0]!;
  const train = ds.questions.filter((_, i) => i % 5 !== 4);
  const held = ds.questions.filter((_, i) => i % 5 === 4);
  if (train.length === 0 || held.length === 0) throw new Error(`task.dataset: ${ds.file} needs at least 5 questions (every fifth is held out for evaluation)`);
  const setup = envSetup(cfg, extras.host, extras.mcpTools);
  const { format } = taskTools([...tools.values()], setup);
  const byTitle = new Map(ds.passages.map((p) => [p.title, p.text]));
  const task = (q: QaQuestion) =>
    multihopTask({ ...q, supportingFacts: q.supporting.map((t) => byTitle.get(t)).filter((t): t is string => !!t) }, tools, own ?? word!, setup);
  const endText = tok.decode([eos]);
  return {
    tokenizer: tok,
    tokenizerFolder: own ? cfg.model.path : word!.folder(),
    trainTasks: train.map(task),
    evalTasks: held.slice(0, cfg.eval.n_questions).map(task),
    stop: { strings: format.stopStrings, tokenIds: [eos] },
    expert: train.every((q) => q.supporting.length > 0) ? qaExpert(new Map(train.map((q) => [q.id, q])), format, endText) : undefined,
    tinyModel: (c) => tinyTaskModel(c, word ? word.vocab.length : (own?.vocabSize ?? 0), eos),
  };
}

registerTaskKit('qa', qaKit, {
  description: 'a QA dataset (HotpotQA style) whose contexts are the search corpus',
  reads: { 'task.dataset': 'the QA dataset of this kind' },
  check: (c) => (c.task.dataset ? [] : [{ field: 'task.dataset', message: 'required for task.kind "qa" (a JSONL file of questions)' }]),
  tools: (cfg) =>
    cfg.task.dataset
      ? {
          tools: [searchTool(new Bm25Index(loadQaDataset(cfg.task.dataset).passages), { topK: 2 })],
          describe: `BM25 search over ${cfg.task.dataset}`,
          corpus: { dataset: cfg.task.dataset },
        }
      : undefined,
});
