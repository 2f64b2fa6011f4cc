/**
 * Task files: JSONL, one task per line, `{ id, prompt | messages, answers?, meta? }`:
 *   id        string or number (default: line-<n>)
 *   prompt    the user message (string), or
 *   messages  a conversation [{ role: system | user | assistant, content }] ending with a user message
 *   answers   gold answers (strings; `answer` for one) for answer rewards and exact match
 *   meta      anything (an object): the reward function sees it as episode.task.meta
 * QA rows (`question` + `answers`/`answer`, HotpotQA `context`, `supporting_facts`) are read by
 * engine/env/dataset.ts; a file of QA rows is accepted here too, its context paragraphs becoming
 * `passages`. Errors name the file, the line and the field.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { DatasetError, loadQaDataset, parseJsonlRow, qaEnvTask } from './dataset';
import type { Passage } from './search';
import type { EnvTask } from './task';

const message = z.strictObject({ role: z.enum(['system', 'user', 'assistant']), content: z.string() });
const rowSchema = z
  .strictObject({
    id: z.union([z.string().min(1), z.number()]).optional(),
    prompt: z.string().trim().min(1, 'must be a non-empty string').optional(),
    messages: z.array(message).min(1).optional(),
    answers: z.array(z.string()).optional(),
    answer: z.string().optional(),
    meta: z.record(z.string(), z.unknown()).optional(),
  })
  .refine((r) => (r.prompt === undefined) !== (r.messages === undefined), {
    message: 'give exactly one of "prompt" (a string) or "messages" (a list)',
    path: ['prompt'],
  })
  .refine((r) => !r.messages || r.messages[r.messages.length - 1]!.role === 'user', { message: "the last message must be the user's", path: ['messages'] });

export interface TaskFile {
  file: string;
  tasks: EnvTask[];
  /** QA rows' context paragraphs (a search corpus); [] for prompt/messages rows. */
  passages: Passage[];
}

export function loadTaskFile(file: string): TaskFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`task file ${file}: cannot read (${(e as Error).message})`);
  }
  const lines = text.split('\n');
  const first = lines.findIndex((l) => l.trim());
  if (first < 0) throw new Error(`task file ${file}: no tasks (one JSON object per line)`);
  let head: unknown;
  try {
    head = JSON.parse(lines[first]!);
  } catch (e) {
    throw new DatasetError(file, first + 1, '', `not valid JSON (${(e as Error).message})`);
  }
  if (head && typeof head === 'object' && 'question' in head) {
    const ds = loadQaDataset(file);
    return { file, tasks: ds.questions.map((q) => qaEnvTask(q, ds)), passages: ds.passages };
  }
  const tasks: EnvTask[] = [];
  const ids = new Set<string>();
  lines.forEach((raw, i) => {
    const line = i + 1;
    if (!raw.trim()) return;
    const row = parseJsonlRow(file, line, raw, rowSchema, (issue) =>
      issue.code === 'unrecognized_keys' ? `unknown field(s) ${issue.keys.join(', ')} (a task has id, prompt | messages, answers, meta)` : issue.message,
    );
    const id = String(row.id ?? `line-${line}`);
    if (ids.has(id)) throw new DatasetError(file, line, 'id', `"${id}" is used by an earlier line`);
    ids.add(id);
    const answers = row.answers ?? (row.answer !== undefined ? [row.answer] : undefined);
    tasks.push({
      id,
      ...(row.prompt !== undefined ? { prompt: row.prompt } : { messages: row.messages }),
      ...(answers ? { answers } : {}),
      meta: { ...(row.meta ?? {}), line },
    });
  });
  return { file, tasks, passages: [] };
}
