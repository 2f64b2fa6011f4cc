/**
 * Calculator tool: arithmetic through expr-eval's parser with every non-arithmetic feature
 * switched off and no variables allowed, so model text is parsed, never evaluated as code.
 */
import exprEval from 'expr-eval';
import type { Tool } from './tool';

const parser = new exprEval.Parser({
  operators: { logical: false, comparison: false, in: false, assignment: false, conditional: false, factorial: false, concatenate: false },
} as ConstructorParameters<typeof exprEval.Parser>[0]);

export function calculate(expression: string): number {
  if (expression.length > 200) throw new Error('expression too long (limit 200 characters)');
  if (!/^[0-9+\-*/%^().\s]+$/.test(expression)) throw new Error('only numbers, + - * / % ^ and parentheses are allowed');
  const expr = parser.parse(expression);
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
