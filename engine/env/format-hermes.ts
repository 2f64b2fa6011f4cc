/**
 * hermes (Qwen/Hermes function calling): `<tool_call>{"name": …, "arguments": {…}}</tool_call>`,
 * several per turn; the tool schemas go into the system prompt and each result comes back as a
 * tool message, both rendered by the model's own chat template (ToolEnv, 'template' mode), which
 * for Qwen wraps results in `<tool_response> … </tool_response>`. `<answer> … </answer>` ends the
 * episode. A turn ends at the model's end-of-turn token (or `</answer>`), so one turn can hold
 * several calls.
 *
 * Errors: invalid JSON, a call without a string "name" or with non-object "arguments", a
 * <tool_call> nested in another, a missing </tool_call>, more calls than `maxCalls`, a call and
 * an answer in one turn (format-common.ts), a turn with neither.
 */
import { DEFAULT_MAX_CALLS, parseTurn, resultMessages, safeJson, type FormatOptions, type ToolCallFormat } from './format-common';
import { registerFormat } from './format-registry';

const OPEN = '<tool_call>',
  CLOSE = '</tool_call>';

export function hermesFormat(opts: Partial<FormatOptions> = {}): ToolCallFormat {
  const max = opts.maxCalls ?? DEFAULT_MAX_CALLS;
  return {
    name: 'hermes',
    stopStrings: ['</answer>'],
    observationMode: 'template',
    parse(text) {
      return parseTurn(text, {
        next: (pos) => {
          const i = text.indexOf(OPEN, pos);
          return i < 0 ? null : { index: i };
        },
        call: ({ index: i }, calls, errors) => {
          // The body ends at the first closing tag after which it is valid JSON, so a closing tag
          // inside an argument string does not cut the call short.
          const from = i + OPEN.length;
          let j = text.indexOf(CLOSE, from);
          if (j < 0) {
            errors.push(`missing closing tag ${CLOSE}`);
            return -1;
          }
          let end = j,
            obj: unknown,
            err: string | undefined;
          for (; j >= 0; j = text.indexOf(CLOSE, j + 1)) {
            try {
              obj = JSON.parse(text.slice(from, j));
              end = j;
              err = undefined;
              break;
            } catch (e) {
              err ??= (e as Error).message;
            }
          }
          const body = text.slice(from, end).trim();
          const pos = end + CLOSE.length;
          if (err !== undefined) {
            const nested = body.includes(OPEN);
            calls.push({
              name: '?',
              args: body,
              parseError: nested ? `nested ${OPEN} tags; close one call before opening the next` : `invalid JSON in tool call: ${err}`,
            });
            // Skip the rest of a nest: everything up to the last closing tag belongs to it.
            const k = text.lastIndexOf(CLOSE);
            return nested && k >= pos ? k + CLOSE.length : pos;
          }
          const o = obj as { name?: unknown; arguments?: unknown };
          if (!o || typeof o !== 'object' || Array.isArray(o) || typeof o.name !== 'string') {
            calls.push({ name: '?', args: body, parseError: 'tool call needs a string "name" and an "arguments" object' });
            return pos;
          }
          const args = typeof o.arguments === 'string' ? safeJson(o.arguments) : (o.arguments ?? {});
          if (!args || typeof args !== 'object' || Array.isArray(args)) {
            calls.push({ name: o.name, args: body, parseError: `"arguments" of "${o.name}" must be a JSON object` });
            return pos;
          }
          calls.push({ name: o.name, args: args as Record<string, unknown> });
          return pos;
        },
        max,
        hint: 'use <tool_call>{"name": …, "arguments": {…}}</tool_call> or <answer> … </answer>',
      });
    },
    observation(outcomes, errors) {
      return ` ${this.toolMessages(outcomes, errors)
        .map((m) => `<tool_response> ${m} </tool_response>`)
        .join(' ')} `;
    },
    toolMessages: resultMessages,
    writeCalls(calls) {
      return calls.map((c) => `${OPEN}${JSON.stringify({ name: c.name, arguments: c.args })}${CLOSE}`).join('\n');
    },
    writeAnswer: (a) => `<answer> ${a} </answer>`,
    instruction() {
      return 'answer the question . call tools with <tool_call>{"name": …, "arguments": {…}}</tool_call> , then give <answer> answer </answer> .';
    },
  };
}

registerFormat('hermes', {
  describe: '<tool_call>{"name": …, "arguments": {…}}</tool_call>, several per turn; tools and results through the chat template',
  create: (o) => hermesFormat(o),
  verl: { rows: [{ keys: 'environment.format', verl: { 'actor_rollout_ref.rollout.multi_turn.format': 'hermes' }, note: 'the same Hermes <tool_call> JSON' }] },
});
