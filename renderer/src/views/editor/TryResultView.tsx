import type { TryResult } from '../../api/types';
import { useArbor } from '../../store/react';

/** An mcp.tryTool value: the call's result text, or (a listing) the tools found. */
function mcpResultText(value: unknown): string {
  const v = (value ?? {}) as { tools?: { name: string }[]; result?: string };
  if (typeof v.result === 'string') return v.result;
  const names = (v.tools ?? []).map((t) => t.name);
  return `${names.length} tool${names.length === 1 ? '' : 's'}: ${names.join(', ')}`;
}

/** A try-it answer as text: ✓ and the value (an MCP call's text), or ✗ with the message and its line. */
function resultText(r: TryResult, mcp: boolean): string {
  const ms = r.ms != null ? `\n(${r.ms.toFixed(0)} ms)` : '';
  if (r.ok) return `✓ ${mcp ? mcpResultText(r.value) : typeof r.value === 'string' ? r.value : JSON.stringify(r.value, null, 2)}${ms}`;
  const e = r.error;
  return `✗ ${e?.message ?? 'failed'}${e?.line ? `\n  at line ${e.line}${e.column ? `:${e.column}` : ''}` : ''}`;
}

/** The last try-it answer with what the code logged. */
export function TryResultView({ mcp }: { mcp: boolean }) {
  const result = useArbor((s) => s.editor.tryResult);
  if (!result) return null;
  return (
    <div className={`result ${result.ok ? 'ok' : 'err'}`} data-testid="try-result">
      {resultText(result, mcp)}
      {result.logs?.length ? `\n\nconsole:\n${result.logs.join('\n')}` : ''}
    </div>
  );
}
