/**
 * The chat template of the two-tool task's tiny model (ChatML, Hermes tool calling as Qwen2.5
 * renders it, but on one line and short, so the tiny model sees few tokens): each tool's schema as
 * a signature, its name and argument names (`<tools>lookup(entity),calculator(expression)</tools>`),
 * in the system message, written without spaces so those words are other tokens than the
 * `Ġlookup` / `Ġentity` of the calls (a head that copies "what followed this token last time"
 * is not sent back into the system prompt); assistant tool calls as
 * `<tool_call>{"name": …, "arguments": {…}}</tool_call>`, and consecutive tool results grouped
 * into one user message of `<tool_response> …</tool_response>` blocks.
 */
export const TOOLS_CHAT_TEMPLATE = [
  '{%- if tools -%}',
  "{{- '<|im_start|>system<tools>' -}}",
  "{%- for t in tools -%}{%- if not loop.first -%}{{- ',' -}}{%- endif -%}{{- t.function.name + '(' -}}",
  "{%- for p in (t.function.parameters.properties or {}) -%}{%- if not loop.first -%}{{- ',' -}}{%- endif -%}{{- p -}}{%- endfor -%}{{- ')' -}}{%- endfor -%}",
  "{{- '</tools><|im_end|>' -}}",
  '{%- endif -%}',
  '{%- for m in messages -%}',
  "{%- if m.role == 'tool' -%}",
  "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}",
  "{{- '<tool_response> ' + m.content + '</tool_response>' -}}",
  "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>' -}}{%- endif -%}",
  "{%- elif m.role == 'assistant' -%}",
  "{{- '<|im_start|>assistant' -}}{%- if m.content -%}{{- m.content -}}{%- endif -%}",
  '{%- if m.tool_calls -%}{%- for c in m.tool_calls -%}{%- set f = c.function if c.function else c -%}',
  '{{- \'<tool_call>{"name": "\' + f.name + \'", "arguments": \' -}}{{- f.arguments | tojson -}}{{- \'}</tool_call>\' -}}',
  '{%- endfor -%}{%- endif -%}',
  "{{- '<|im_end|>' -}}",
  '{%- else -%}',
  "{{- '<|im_start|>' + m.role + ' ' + m.content + '<|im_end|>' -}}",
  '{%- endif -%}',
  '{%- endfor -%}',
  "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant' -}}{%- endif -%}",
].join('');
