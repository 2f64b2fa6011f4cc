// A calculator tool: + - * / and parentheses over decimal numbers. The model's text is parsed
// by a small recursive-descent parser, never evaluated as code.
import type { Tool } from 'arbor/env';

function evaluate(src: string): number {
  const tokens = src.match(/\d+(?:\.\d+)?|[-+*/()]|\S/g) ?? [];
  let i = 0;
  const peek = () => tokens[i];
  const take = () => tokens[i++];
  const primary = (): number => {
    const t = take();
    if (t === undefined) throw new Error('unexpected end of expression');
    if (t === '-') return -primary();
    if (t === '(') {
      const v = sum();
      if (take() !== ')') throw new Error('missing )');
      return v;
    }
    if (/^\d/.test(t)) return Number(t);
    throw new Error(`unexpected "${t}"`);
  };
  const product = (): number => {
    let v = primary();
    while (peek() === '*' || peek() === '/') v = take() === '*' ? v * primary() : v / primary();
    return v;
  };
  const sum = (): number => {
    let v = product();
    while (peek() === '+' || peek() === '-') v = take() === '+' ? v + product() : v - product();
    return v;
  };
  const v = sum();
  if (i < tokens.length) throw new Error(`unexpected "${tokens[i]}"`);
  if (!Number.isFinite(v)) throw new Error('the result is not a finite number');
  return v;
}

export const calculator: Tool = {
  name: 'calculator',
  description: 'evaluate arithmetic',
  parameters: { type: 'object', properties: { expression: { type: 'string', maxLength: 100 } }, required: ['expression'] },
  execute({ expression }) {
    try {
      const v = evaluate(String(expression));
      return { content: String(Math.round(v * 1e6) / 1e6), success: true };
    } catch (e) {
      return { content: `error: ${(e as Error).message}`, success: false };
    }
  },
};
