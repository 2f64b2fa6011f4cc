/**
 * tags (ARPO style): one tag per tool, `<python> … </python>`, `<search> … </search>`, results in
 * `<result> … </result>`; `<answer> … </answer>` ends the episode. The text between a tool's tags
 * becomes its arguments: the value of the tool's only parameter, or, when the tool has several
 * parameters, a JSON object.
 *
 * Errors: an unclosed tag, a tag nested in another, a body that is not a JSON object for a tool
 * with several parameters, more calls than `maxCalls`, a call and an answer in one turn
 * (format-common.ts), a turn with neither.
 */
import {
  DEFAULT_MAX_CALLS,
  inlineObservation,
  parseTurn,
  resultMessages,
  safeJson,
  schemaProperties,
  type FormatOptions,
  type ToolCallFormat,
} from './format-common';
import { registerFormat } from './format-registry';

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function tagsFormat(opts: FormatOptions): ToolCallFormat {
  const max = opts.maxCalls ?? DEFAULT_MAX_CALLS;
  const tools = opts.tools.filter((t) => t.name !== 'answer' && t.name !== 'result');
  const names = tools.map((t) => t.name);
  const single = new Map(tools.map((t) => [t.name, schemaProperties(t).length === 1 ? schemaProperties(t)[0]! : undefined]));
  const opener = names.length ? new RegExp(`<(${names.map(esc).join('|')})>`, 'g') : null;
  return {
    name: 'tags',
    stopStrings: [...names.map((n) => `</${n}>`), '</answer>'],
    observationMode: 'inline',
    parse(text) {
      return parseTurn(text, {
        next: (pos) => {
          if (!opener) return null;
          opener.lastIndex = pos;
          return opener.exec(text);
        },
        call: (m, calls, errors) => {
          const name = m[1]!;
          const from = m.index + m[0].length;
          const close = `</${name}>`;
          const j = text.indexOf(close, from);
          if (j < 0) {
            errors.push(`missing closing tag ${close}`);
            return -1;
          }
          const body = text.slice(from, j);
          opener!.lastIndex = 0;
          const inner = opener!.exec(body);
          if (inner) {
            errors.push(`nested tags: <${inner[1]}> inside <${name}>; close one call before opening the next`);
            return j + close.length;
          }
          const prop = single.get(name);
          if (prop !== undefined) calls.push({ name, args: { [prop]: body.trim() } });
          else if (!body.trim() && schemaProperties(tools.find((t) => t.name === name)!).length === 0) calls.push({ name, args: {} });
          else {
            const args = safeJson(body.trim());
            if (args && typeof args === 'object' && !Array.isArray(args)) calls.push({ name, args: args as Record<string, unknown> });
            else
              calls.push({
                name,
                args: body.trim(),
                parseError: `<${name}> takes a JSON object of its arguments (${schemaPropertiesText(tools.find((t) => t.name === name)!)})`,
              });
          }
          return j + close.length;
        },
        max,
        hint: `use ${names.map((n) => `<${n}> … </${n}>`).join(', ') || 'a tool tag'} or <answer> … </answer>`,
      });
    },
    observation: (outcomes, errors) => inlineObservation('result', outcomes, errors),
    toolMessages: resultMessages,
    writeCalls(calls) {
      return calls
        .map((c) => {
          const prop = single.get(c.name);
          return `<${c.name}> ${prop !== undefined ? String(c.args[prop] ?? '') : JSON.stringify(c.args)} </${c.name}>`;
        })
        .join(' ');
    },
    writeAnswer: (a) => `<answer> ${a} </answer>`,
    instruction() {
      return `answer the question . call a tool with ${names.map((n) => `<${n}> … </${n}>`).join(' , ')} , then give <answer> answer </answer> .`;
    },
  };
}

function schemaPropertiesText(t: { parameters: Record<string, unknown> }): string {
  const p = schemaProperties(t as never);
  return p.length ? p.join(', ') : 'no parameters';
}

registerFormat('tags', { describe: '<toolname> … </toolname> per tool → <result> … </result>', create: (o) => tagsFormat(o) });
