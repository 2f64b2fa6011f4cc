/**
 * Where an HF folder keeps its chat template (loading only; rendering is tokenizer.ts's):
 * `chat_template.jinja` (transformers ≥ 4.50 saves it there), else tokenizer_config.json's
 * `chat_template` (a string, or a list of {name, template} of which "default" is the template
 * and the others are named alternatives such as "tool_use"), else `chat_template.json`.
 */
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
