/**
 * Calculator tool: arithmetic through expr-eval-fork's parser (the maintained fork of expr-eval,
 * whose 2.0.2 has GHSA-8gw3-rxh4-v6jx, prototype pollution, and CVE-2025-12735 /
 * GHSA-jc85-fpwf-qm7x, code execution through evaluate(); 3.0.1+ fixes both) with every
 * non-arithmetic feature switched off, no member access, no function definitions and no
 * variables, behind a character whitelist: model text is parsed, never evaluated as code.
 */
import { Parser } from 'expr-eval-fork';
import type { Tool } from './tool';

/** The configured parser (exported for the advisory tests). */
export const arithmeticParser = new Parser({
  allowMemberAccess: false,
  operators: {
    logical: false,
    comparison: false,
    in: false,
    assignment: false,
    fndef: false,
    conditional: false,
    factorial: false,
    concatenate: false,
    length: false,
    random: false,
  },
});

export function calculate(expression: string): number {
  if (expression.length > 200) throw new Error('expression too long (limit 200 characters)');
  if (!/^[0-9+\-*/%^().\s]+$/.test(expression)) throw new Error('only numbers, + - * / % ^ and parentheses are allowed');
  const expr = arithmeticParser.parse(expression);
  if (expr.variables().length > 0) throw new Error(`unknown names: ${expr.variables().join(', ')}`);
  const v = expr.evaluate({});
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new Error('the result is not a finite number');
  return v;
}

export const calculatorTool: Tool = {
  name: 'calculator',
  description: 'evaluate an arithmetic expression',
  parameters: {
    type: 'object',
    properties: { expression: { type: 'string', minLength: 1, maxLength: 200 } },
    required: ['expression'],
    additionalProperties: false,
  },
  execute(args) {
    try {
      return { content: String(calculate(String(args.expression))), success: true };
    } catch (e) {
      return { content: `Error: ${(e as Error).message}`, success: false };
    }
  },
};
