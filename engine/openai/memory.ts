/**
 * Token-exact conversations. Every chat completion the endpoint returns is remembered: the
 * messages (and tools) it answered, the assistant message it returned, the prompt ids and the
 * sampled ids. A later request whose messages contain that assistant message verbatim after the
 * same earlier messages continues from the stored ids: its prompt is the stored prompt + the sampled
 * ids + only the new messages tokenised (rendered by the template after a marker standing for the
 * assistant turn, as ToolEnv renders tool observations), never the whole history re-tokenised.
 *
 * Drift: the same request is also rendered the naive way (the whole conversation through the
 * template, re-tokenised). Where the two differ, the request records the drift: which assistant
 * turn, the first differing position, the ids as sampled and as the template re-renders them
 * (Qwen3's template drops earlier <think> blocks; decoded text can re-tokenise to other ids).
 * The prompt still uses the sampled ids. An assistant message that is not verbatim (the agent
 * edited it) cannot use them: its text is tokenised, and the drift is recorded with kind 'altered'.
 */
import { createHash } from 'node:crypto';
import type { AssistantOut, ChatRenderer, TemplateMessage } from './chat';
import type { ToolIn } from './schemas';

export interface Drift {
  /** 'template': a verbatim turn the template re-renders to other ids (the sampled ids were used); 'altered': the agent changed the turn. */
  kind: 'template' | 'altered';
  /** Index of the assistant message in the request's messages. */
  turn: number;
  /** First differing position in the request's prompt ids. */
  position: number;
  /** The turn's ids as sampled. */
  sampled: number[];
  /** The turn's ids as the template re-renders and re-tokenises it. */
  rendered: number[];
}

/** Where an assistant turn's sampled ids sit in a prompt. */
export interface TurnSpan {
  turn: number;
  start: number;
  end: number;
}

export interface StoredTurn {
  callId: string;
  choice: number;
  /** Scope (an episode, or '' for the plain server). */
  scope: string;
  message: AssistantOut;
  promptIds: number[];
  completionIds: number[];
  /** Spans of the assistant turns inside promptIds (turn = message index in the request answered). */
  spans: TurnSpan[];
  /** Whether the completion ended with a stop token (its text then closes the turn). */
  endedWithToken: boolean;
}

export interface PromptPlan {
  ids: number[];
  text: string;
  /** The stored turn this prompt continues (undefined: rendered from scratch). */
  parent?: StoredTurn;
  spans: TurnSpan[];
  drift: Drift[];
}

const MARK = 'ARBORASSISTANTTURNMARK';

function stable(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}

/** The key of "these messages, with these tools" (what a stored completion answered). */
function keyOf(scope: string, messages: TemplateMessage[], tools: ToolIn[] | undefined): string {
  const canon = messages.map((m) => ({
    role: m.role,
    content: m.content,
    ...(m.tool_calls?.length ? { tool_calls: m.tool_calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments })) } : {}),
    ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
  }));
  return createHash('sha256')
    .update(scope)
    .update('\0')
    .update(stable(canon))
    .update('\0')
    .update(stable(tools ?? []))
    .digest('hex');
}

/** Whether a request's assistant message is the one returned (content, and each call's name and arguments). */
function sameAssistant(out: AssistantOut, m: TemplateMessage): boolean {
  if ((out.content ?? '') !== m.content) return false;
  const a = out.tool_calls ?? [];
  const b = m.tool_calls ?? [];
  if (a.length !== b.length) return false;
  return a.every((c, i) => {
    const d = b[i]!.function;
    if (c.function.name !== d.name) return false;
    let args: unknown;
    try {
      args = JSON.parse(c.function.arguments);
    } catch {
      args = c.function.arguments;
    }
    return stable(args) === stable(d.arguments);
  });
}

function firstDiff(a: number[], b: number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

export class ConversationMemory {
  private byKey = new Map<string, StoredTurn[]>();
  private order: string[] = [];

  constructor(private readonly maxKeys = 4096) {}

  remember(scope: string, messages: TemplateMessage[], tools: ToolIn[] | undefined, turn: StoredTurn): void {
    const k = keyOf(scope, messages, tools);
    const list = this.byKey.get(k);
    if (list) list.push(turn);
    else {
      this.byKey.set(k, [turn]);
      this.order.push(k);
      while (this.order.length > this.maxKeys) this.byKey.delete(this.order.shift()!);
    }
  }

  /** Forget a scope's turns (an episode that ended). */
  forget(scope: string): void {
    for (const [k, list] of this.byKey) {
      const kept = list.filter((t) => t.scope !== scope);
      if (kept.length) this.byKey.set(k, kept);
      else this.byKey.delete(k);
    }
    this.order = this.order.filter((k) => this.byKey.has(k));
  }

  /**
   * The prompt of a request: continued from the latest remembered assistant turn it contains
   * verbatim, else rendered whole; `forced` (tool_choice) is appended as text after the generation prompt.
   */
  plan(scope: string, r: ChatRenderer, stopIds: number[], messages: TemplateMessage[], tools: ToolIn[] | undefined, forced: string): PromptPlan {
    const tok = r.tok;
    const fullText = r.render(messages, tools) + forced;
    const naive = tok.encode(fullText);
    let base: StoredTurn | undefined;
    let at = -1;
    const altered: { turn: number; cand: StoredTurn }[] = [];
    for (let j = messages.length - 1; j >= 0 && !base; j--) {
      if (messages[j]!.role !== 'assistant') continue;
      const cands = this.byKey.get(keyOf(scope, messages.slice(0, j), tools));
      if (!cands) continue;
      const hit = cands.find((c) => sameAssistant(c.message, messages[j]!));
      if (hit) {
        base = hit;
        at = j;
      } else altered.push({ turn: j, cand: cands[0]! });
    }
    let ids: number[];
    let spans: TurnSpan[] = [];
    if (!base) ids = naive;
    else {
      const marked = r.render([...messages.slice(0, at), { role: 'assistant', content: MARK }, ...messages.slice(at + 1)], tools) + forced;
      const m = marked.lastIndexOf(MARK);
      let rest = marked.slice(m + MARK.length);
      if (base.endedWithToken) {
        // The sampled turn already ends with its end-of-turn token: its text is not repeated.
        const endText = tok.decode([base.completionIds[base.completionIds.length - 1]!]);
        if (endText && rest.startsWith(endText)) rest = rest.slice(endText.length);
      }
      const head = [...base.promptIds, ...base.completionIds];
      ids = [...head, ...tok.encode(rest)];
      spans = [...base.spans, { turn: at, start: base.promptIds.length, end: head.length }];
    }
    const drift: Drift[] = [];
    const turnEnd = (from: number) => {
      for (let i = from; i < naive.length; i++) if (stopIds.includes(naive[i]!)) return i + 1;
      return naive.length;
    };
    if (base) {
      const p = firstDiff(ids, naive);
      if (p >= 0) {
        const span = [...spans].reverse().find((s) => s.start <= p) ?? spans[0]!;
        drift.push({
          kind: 'template',
          turn: span.turn,
          position: p,
          sampled: ids.slice(span.start, span.end),
          rendered: naive.slice(span.start, turnEnd(span.start)),
        });
      }
    }
    for (const a of altered) {
      const start = a.cand.promptIds.length;
      const rendered = naive.slice(start, turnEnd(start));
      const d = firstDiff(a.cand.completionIds, rendered);
      drift.push({ kind: 'altered', turn: a.turn, position: start + Math.max(0, d), sampled: a.cand.completionIds.slice(), rendered });
    }
    return { ids, text: base ? tok.decode(ids) : fullText, parent: base, spans, drift };
  }
}
