/**
 * Where an HF folder keeps its chat template (loading only; rendering is tokenizer.ts's):
 * `chat_template.jinja` (transformers ≥ 4.50 saves it there), else tokenizer_config.json's
 * `chat_template` (a string, or a list of {name, template} of which "default" is the template
 * and the others are named alternatives such as "tool_use"), else `chat_template.json`.
 */
import { Interpreter, type Template } from '@huggingface/jinja';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ChatTemplates {
  /** The template used to render chats, or undefined when the folder has none. */
  template?: string;
  /** Named alternatives (e.g. tool_use), when tokenizer_config.json lists several. */
  named: Record<string, string>;
  /** File the template came from. */
  source?: string;
}

export function readChatTemplates(folder: string, tokenizerConfig: Record<string, unknown>): ChatTemplates {
  const jinja = join(folder, 'chat_template.jinja');
  const named: Record<string, string> = {};
  const tcFile = join(folder, 'tokenizer_config.json');
  const fromConfig = tokenizerConfig.chat_template;
  let template: string | undefined;
  let source: string | undefined;
  if (typeof fromConfig === 'string') {
    template = fromConfig;
    source = tcFile;
  } else if (Array.isArray(fromConfig)) {
    for (const [i, t] of fromConfig.entries()) {
      if (!t || typeof t !== 'object' || typeof (t as { name?: unknown }).name !== 'string' || typeof (t as { template?: unknown }).template !== 'string') {
        throw new Error(`${tcFile}: chat_template[${i}] must be {name, template} strings`);
      }
      named[(t as { name: string }).name] = (t as { template: string }).template;
    }
    if (named.default === undefined) throw new Error(`${tcFile}: chat_template lists ${Object.keys(named).join(', ')} but no "default" template`);
    template = named.default;
    delete named.default;
    source = tcFile;
  } else if (fromConfig !== undefined && fromConfig !== null) {
    throw new Error(`${tcFile}: chat_template must be a string or a list of {name, template}, got ${typeof fromConfig}`);
  }
  if (existsSync(jinja)) {
    template = readFileSync(jinja, 'utf8');
    source = jinja;
  } else if (template === undefined && existsSync(join(folder, 'chat_template.json'))) {
    const f = join(folder, 'chat_template.json');
    let j: { chat_template?: unknown };
    try {
      j = JSON.parse(readFileSync(f, 'utf8'));
    } catch (e) {
      throw new Error(`${f}: invalid JSON (${(e as Error).message})`);
    }
    if (typeof j.chat_template !== 'string') throw new Error(`${f}: chat_template must be a string`);
    template = j.chat_template;
    source = f;
  }
  return { template, named, source };
}

/**
 * A time budget for rendering a chat template. A model folder's template is code from elsewhere
 * (Jinja, run by @huggingface/jinja in this process); one that loops (`range(100000000)`, a
 * recursive macro) would hold the engine. Rendering is bounded two ways: every 1024 evaluation
 * steps of the interpreter check the clock, and `range()` refuses more than RANGE_LIMIT items
 * (the builtin builds its whole list in one step). Past the budget the render stops with a
 * ChatTemplateTimeout naming the budget.
 */
export const CHAT_TEMPLATE_BUDGET_MS = 2000;
const RANGE_LIMIT = 100_000;

export class ChatTemplateTimeout extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChatTemplateTimeout';
  }
}

let deadline = Infinity;
let budgetMs = CHAT_TEMPLATE_BUDGET_MS;
let steps = 0;
let guarded = false;

function guardInterpreter(): void {
  if (guarded) return;
  guarded = true;
  type Fn = { value: (args: { value: unknown }[], scope: unknown) => unknown };
  const proto = Interpreter.prototype as unknown as {
    evaluate: (this: unknown, ...a: unknown[]) => unknown;
    run: (this: { global: { variables: Map<string, unknown> } }, ...a: unknown[]) => unknown;
  };
  const evaluate = proto.evaluate;
  proto.evaluate = function (this: unknown, ...a: unknown[]) {
    if (deadline !== Infinity && (++steps & 1023) === 0 && Date.now() > deadline)
      throw new ChatTemplateTimeout(
        `the chat template did not finish rendering within ${budgetMs} ms (a loop in the model folder's template?); rendering stopped`,
      );
    return evaluate.apply(this, a);
  };
  // range() builds its whole list in one step: bounded by its length, in a budgeted render.
  const run = proto.run;
  proto.run = function (this: { global: { variables: Map<string, unknown> } }, ...a: unknown[]) {
    const vars = this.global?.variables;
    const fv = vars?.get('range') as Fn | undefined;
    if (deadline !== Infinity && fv && typeof fv.value === 'function') {
      const inner = fv.value;
      const bounded = Object.assign(Object.create(Object.getPrototypeOf(fv) as object) as Fn, fv, {
        value: (args: { value: unknown }[], scope: unknown) => {
          checkRange(args.map((x) => Number(x?.value)));
          return inner(args, scope);
        },
      });
      vars!.set('range', bounded);
    }
    return run.apply(this, a);
  };
}

/** Jinja's range(): refused past RANGE_LIMIT items (the builtin allocates the whole list first). */
function checkRange([a, b, c]: number[]): void {
  const [start, stop, step] = b === undefined || Number.isNaN(b) ? [0, a!, 1] : [a!, b, c === undefined || Number.isNaN(c) ? 1 : c];
  if (!step) return;
  const n = Math.max(0, Math.ceil((stop - start) / step));
  if (n > RANGE_LIMIT)
    throw new ChatTemplateTimeout(`the chat template asked for range() of ${n} items, more than the ${RANGE_LIMIT} a template may build; rendering stopped`);
}

/** Render a chat template within a time budget; throws ChatTemplateTimeout when it is exceeded. */
export function renderChatTemplate(template: Template, items: Record<string, unknown>, budget = CHAT_TEMPLATE_BUDGET_MS): string {
  guardInterpreter();
  const outer = { deadline, budgetMs };
  deadline = Date.now() + budget;
  budgetMs = budget;
  steps = 0;
  try {
    return template.render(items);
  } finally {
    deadline = outer.deadline;
    budgetMs = outer.budgetMs;
  }
}
