/**
 * User QA datasets in JSONL, one question per line:
 *   { "question": "...", "answers": ["..."] | "answer": "...", "id"?: "...",
 *     "context"?: [[title, [sentence, ...]], ...]                      (HotpotQA)
 *             | { "title": [...], "sentences": [[...], ...] }          (HotpotQA on the HF hub),
 *     "supporting_facts"?: [[title, sentence index], ...] | { "title": [...], "sent_id": [...] } }
 * Context paragraphs become the search corpus (one passage per title, deduplicated). Errors
 * name the file, the line and the field.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { Passage } from './search';
import type { EnvTask } from './task';

const hotpotList = z.array(z.tuple([z.string(), z.array(z.string())]));
const hotpotColumns = z.object({ title: z.array(z.string()), sentences: z.array(z.array(z.string())) });
const supportList = z.array(z.tuple([z.string(), z.number().int()]));
const supportColumns = z.object({ title: z.array(z.string()), sent_id: z.array(z.number().int()) });

const rowSchema = z
  .object({
    id: z.union([z.string(), z.number()]).optional(),
    _id: z.string().optional(),
    question: z.string().trim().min(1, 'must be a non-empty string'),
    answers: z.array(z.string().trim().min(1)).min(1).optional(),
    answer: z.string().trim().min(1).optional(),
    context: z.union([hotpotList, hotpotColumns]).optional(),
    supporting_facts: z.union([supportList, supportColumns]).optional(),
  })
  .refine((r) => r.answers !== undefined || r.answer !== undefined, { message: 'give "answers" (a list) or "answer" (a string)', path: ['answers'] });

export interface QaQuestion {
  id: string;
  question: string;
  answers: string[];
  /** Titles of the supporting paragraphs (HotpotQA supporting_facts), for process rewards. */
  supporting: string[];
  /** 1-based line in the file. */
  line: number;
}

export interface QaDataset {
  file: string;
  questions: QaQuestion[];
  /** The corpus: every context paragraph, one passage per distinct title. */
  passages: Passage[];
}

export class DatasetError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly field: string,
    message: string,
  ) {
    super(`${file}:${line}: ${field ? `${field}: ` : ''}${message}`);
    this.name = 'DatasetError';
  }
}

/**
 * One JSONL line parsed and checked against a row schema; errors name the file, line and field
 * (`describe` may word a zod issue its own way, e.g. unknown keys).
 */
export function parseJsonlRow<S extends z.ZodType>(
  file: string,
  line: number,
  raw: string,
  schema: S,
  describe?: (issue: z.core.$ZodIssue) => string,
): z.infer<S> {
  let obj: unknown;
  try {
    obj = JSON.parse(raw);
  } catch (e) {
    throw new DatasetError(file, line, '', `not valid JSON (${(e as Error).message})`);
  }
  const r = schema.safeParse(obj);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new DatasetError(file, line, issue.path.join('.') || '(line)', describe ? describe(issue) : issue.message);
  }
  return r.data;
}

export function loadQaDataset(file: string): QaDataset {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`dataset ${file}: cannot read (${(e as Error).message})`);
  }
  const questions: QaQuestion[] = [];
  const passages = new Map<string, Passage>();
  text.split('\n').forEach((raw, i) => {
    const line = i + 1;
    if (!raw.trim()) return;
    const row = parseJsonlRow(file, line, raw, rowSchema);
    const paragraphs: [string, string[]][] = Array.isArray(row.context)
      ? row.context
      : row.context
        ? row.context.title.map((t, k) => [t, row.context && !Array.isArray(row.context) ? (row.context.sentences[k] ?? []) : []])
        : [];
    for (const [title, sentences] of paragraphs) {
      if (!passages.has(title)) passages.set(title, { id: `p${passages.size}:${title}`, title, text: sentences.join(' ').trim() });
    }
    const sf = row.supporting_facts;
    const supporting = [...new Set(Array.isArray(sf) ? sf.map(([t]) => t) : sf ? sf.title : [])];
    questions.push({ id: String(row.id ?? row._id ?? `line-${line}`), question: row.question, answers: row.answers ?? [row.answer!], supporting, line });
  });
  if (questions.length === 0) throw new Error(`dataset ${file}: no questions (one JSON object per line)`);
  return { file, questions, passages: [...passages.values()] };
}

/**
 * A dataset question as a ToolEnv task: the supporting paragraphs' texts are the facts whose
 * retrieval earns the process reward (search results carry the passage text).
 */
export function qaEnvTask(q: QaQuestion, ds: QaDataset): EnvTask {
  const byTitle = new Map(ds.passages.map((p) => [p.title, p.text]));
  return {
    id: q.id,
    question: q.question,
    answers: q.answers,
    supportingFacts: q.supporting.map((t) => byTitle.get(t)).filter((t): t is string => !!t),
    meta: { line: q.line },
  };
}
