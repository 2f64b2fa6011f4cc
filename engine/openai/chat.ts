/**
 * Chat on the endpoint: OpenAI messages and tools rendered by the model's own chat template
 * (engine/model/tokenizer.ts renderChat), and the model's text parsed back into an assistant
 * message with its tool-call format (Hermes `<tool_call>{…}</tool_call>` for Qwen and the tiny
 * task models: engine/env/format-hermes.ts).
 *
 * tool_choice: `none` renders no tools and parses no calls; `auto` renders them and parses calls;
 * `required` and a named function also render them and start the model's turn with the format's
 * call opening (`<tool_call>` as the template writes it, plus `{"name": "<fn>", "arguments": ` for a
 * named one), as prompt tokens the model continues from (forced, not sampled).
 */
import { randomBytes } from 'node:crypto';
import { hermesFormat } from '../env/format-hermes';
import type { ToolCallFormat } from '../env/formats';
import type { ChatMessageIn, ToolChoice, ToolIn } from './schemas';
import { ApiError } from './schemas';

/** What the endpoint needs from a tokenizer (HfTokenizer has all of it). */
export interface ChatTokenizer {
  encode(text: string): number[];
  decode(ids: number[]): string;
  renderChat(messages: { role: string; content: string }[], opts?: { tools?: unknown[]; addGenerationPrompt?: boolean }): string;
  tokenId(token: string): number | undefined;
}

/** A message as chat templates expect it (HF transformers' convention: tool-call arguments as objects). */
export interface TemplateMessage {
  role: string;
  content: string;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: unknown } }[];
  tool_call_id?: string;
  name?: string;
  reasoning_content?: string;
}

export interface AssistantOut {
  role: 'assistant';
  content: string | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
}

const contentText = (c: ChatMessageIn['content'] | null | undefined): string =>
  c === null || c === undefined ? '' : typeof c === 'string' ? c : c.map((p) => p.text).join('');

function parseArgs(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

export function toTemplateMessages(messages: ChatMessageIn[]): TemplateMessage[] {
  return messages.map((m) => {
    if (m.role === 'assistant') {
      const out: TemplateMessage = { role: 'assistant', content: contentText(m.content) };
      if (m.tool_calls?.length)
        out.tool_calls = m.tool_calls.map((c) => ({
          id: c.id,
          type: 'function',
          function: { name: c.function.name, arguments: parseArgs(c.function.arguments) },
        }));
      if (typeof m.reasoning_content === 'string') out.reasoning_content = m.reasoning_content;
      return out;
    }
    if (m.role === 'tool') return { role: 'tool', content: contentText(m.content), tool_call_id: m.tool_call_id };
    return { role: m.role === 'developer' ? 'system' : m.role, content: contentText(m.content) };
  });
}

export function templateTools(tools: ToolIn[]): { type: 'function'; function: { name: string; description: string; parameters: Record<string, unknown> } }[] {
  return tools.map((t) => ({
    type: 'function',
    function: { name: t.function.name, description: t.function.description ?? '', parameters: t.function.parameters ?? { type: 'object', properties: {} } },
  }));
}

/**
 * The model's chat side: its template, whether it renders tools, its call format and the call
 * openings `required` / named tool_choice force.
 */
export class ChatRenderer {
  /** The tool-call format the model's output is parsed with (undefined: the template renders no Hermes calls). */
  readonly format?: ToolCallFormat;
  readonly rendersTools: boolean;
  private callOpen = '';
  private namedOpen = '';

  constructor(readonly tok: ChatTokenizer) {
    const user = [{ role: 'user', content: 'x' }];
    const probeTool = templateTools([{ type: 'function', function: { name: 'arborprobe', parameters: { type: 'object', properties: {} } } }]);
    let plain: string;
    try {
      plain = tok.renderChat(user, { addGenerationPrompt: true });
    } catch (e) {
      throw new Error(`the model's tokenizer has no usable chat template (${(e as Error).message})`);
    }
    this.rendersTools = tok.renderChat(user, { tools: probeTool, addGenerationPrompt: true }) !== plain;
    const withCall = tok.renderChat(
      [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'c', type: 'function', function: { name: 'arborprobe', arguments: {} } }] } as TemplateMessage,
      ],
      { addGenerationPrompt: false },
    );
    const at = withCall.indexOf('<tool_call>');
    if (at >= 0) {
      this.format = hermesFormat({ maxCalls: 16 });
      const brace = withCall.indexOf('{', at);
      this.callOpen = withCall.slice(at, brace);
      const name = withCall.indexOf('"arborprobe"', at);
      const args = withCall.indexOf('{}', name);
      if (name > 0 && args > name) this.namedOpen = withCall.slice(at, args);
    }
  }

  render(messages: TemplateMessage[], tools: ToolIn[] | undefined, addGenerationPrompt = true): string {
    return this.tok.renderChat(messages as { role: string; content: string }[], {
      ...(tools?.length ? { tools: templateTools(tools) } : {}),
      addGenerationPrompt,
    });
  }

  /** Tools to render and the text forced at the start of the model's turn, for a request's tools and tool_choice. */
  plan(tools: ToolIn[] | undefined, choice: ToolChoice | undefined | null): { tools?: ToolIn[]; forced: string; parseCalls: boolean } {
    const has = !!tools?.length;
    if (choice && choice !== 'none' && !has)
      throw new ApiError(400, `tool_choice: "${typeof choice === 'string' ? choice : 'function'}" needs tools`, undefined, 'tool_choice');
    if (has && !this.rendersTools) throw new ApiError(400, "tools: this model's chat template renders no tools", undefined, 'tools');
    if (!has || choice === 'none') return { forced: '', parseCalls: false };
    if (!this.format) throw new ApiError(400, "tools: this model's chat template writes no <tool_call> calls Arbor can parse", undefined, 'tools');
    if (!choice || choice === 'auto') return { tools, forced: '', parseCalls: true };
    if (choice === 'required') return { tools, forced: this.callOpen, parseCalls: true };
    const name = choice.function.name;
    if (!tools!.some((t) => t.function.name === name))
      throw new ApiError(400, `tool_choice.function.name: "${name}" is not one of the tools`, undefined, 'tool_choice.function.name');
    if (!this.namedOpen) throw new ApiError(400, 'tool_choice: this chat template has no call form to force a named function', undefined, 'tool_choice');
    return { tools, forced: this.namedOpen.replace('"arborprobe"', JSON.stringify(name)), parseCalls: true };
  }

  /**
   * The assistant message for a model turn: `text` is the forced opening plus the sampled text
   * without its stop token / stop string. Valid calls become tool_calls (the content is the text
   * before the first call); a turn whose calls do not parse keeps its text as content.
   */
  assistant(text: string, parseCalls: boolean, parallel: boolean): { message: AssistantOut; calls: { name: string; args: unknown; parseError?: string }[] } {
    if (!parseCalls || !this.format || !text.includes('<tool_call>')) return { message: { role: 'assistant', content: text }, calls: [] };
    const parsed = this.format.parse(text);
    const calls = parsed.calls.map((c) => ({ name: c.name, args: c.args, ...(c.parseError ? { parseError: c.parseError } : {}) }));
    let valid = parsed.calls.filter((c) => !c.parseError);
    if (valid.length === 0) return { message: { role: 'assistant', content: text }, calls };
    if (!parallel) valid = valid.slice(0, 1);
    const before = text.slice(0, text.indexOf('<tool_call>')).trimEnd();
    return {
      message: {
        role: 'assistant',
        content: before || null,
        tool_calls: valid.map((c) => ({
          id: `call_${randomBytes(12).toString('hex')}`,
          type: 'function',
          function: { name: c.name, arguments: JSON.stringify(c.args) },
        })),
      },
      calls,
    };
  }
}
