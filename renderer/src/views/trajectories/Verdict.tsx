// The verdict strip of a trajectory: what the episode ended with, read from what the store keeps
// (outcome, reward components, timings): the gold answers against the model's answer, exact
// match, format, truncation, the reward and each component, and where the time went.
import type { TrajectoryView } from '../../api/types';

const str = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

export function VerdictStrip({ traj }: { traj: TrajectoryView }) {
  const o = traj.outcomeData as Record<string, unknown>;
  const golds = Array.isArray(o.golds) ? (o.golds as unknown[]).map(str) : null;
  const exact = typeof o.exactMatch === 'boolean' ? o.exactMatch : null;
  const format = typeof o.formatOk === 'boolean' ? o.formatOk : null;
  const truncated = typeof o.truncated === 'boolean' ? o.truncated : null;
  const t = traj.timings;
  const ms = (k: string) => (typeof t[k] === 'number' && Number.isFinite(t[k]) ? `${Math.round(t[k])} ms` : null);
  return (
    <div className="panel verdict" data-testid="verdict">
      <span data-testid="verdict-answer">
        answer <b className="mono">{traj.outcome === undefined ? '—' : JSON.stringify(traj.outcome)}</b>
      </span>
      {golds ? (
        <span data-testid="verdict-golds">
          gold <span className="mono">{golds.map((g) => JSON.stringify(g)).join(' | ')}</span>
        </span>
      ) : null}
      {exact !== null ? (
        <span className={exact ? 'ok' : 'bad'} data-testid="verdict-exact">
          {exact ? '✓ exact match' : '✗ no exact match'}
        </span>
      ) : null}
      {format !== null ? (
        <span className={format ? 'ok' : 'bad'} data-testid="verdict-format">
          format {format ? 'ok' : 'broken'}
        </span>
      ) : null}
      {truncated !== null ? (
        <span className={truncated ? 'bad' : undefined} data-testid="verdict-truncated">
          {truncated ? 'truncated (a limit ended it)' : 'ended by the episode'}
        </span>
      ) : null}
      <span data-testid="verdict-reward">
        reward <b className="mono">{traj.reward.toFixed(4)}</b>
        {Object.keys(traj.rewardBreakdown).length ? (
          <span className="muted">
            {' '}
            ={' '}
            {Object.entries(traj.rewardBreakdown)
              .map(([k, v]) => `${k} ${Number(v).toFixed(3)}`)
              .join(' · ')}
          </span>
        ) : null}
      </span>
      {typeof o.toolCalls === 'number' ? (
        <span className="muted" data-testid="verdict-calls">
          {o.toolCalls} tool call(s){typeof o.toolErrors === 'number' && o.toolErrors ? `, ${o.toolErrors} failed` : ''}
        </span>
      ) : null}
      {ms('totalMs') ? (
        <span className="muted" data-testid="verdict-timings">
          {ms('totalMs')} in all · model {ms('modelMs') ?? '—'} · tools {ms('envMs') ?? '—'}
          {typeof t.prefillTokens === 'number' ? ` · ${t.prefillTokens} prefilled, ${t.generatedTokens ?? 0} generated tokens` : ''}
        </span>
      ) : null}
    </div>
  );
}

/** The user's message of a trajectory's task: the stored question, else the prompt without chat-template markup. */
export function taskMessage(t: { prompt?: string; task?: string; id: string; outcomeData: Record<string, unknown> }): string {
  if (typeof t.outcomeData.question === 'string' && t.outcomeData.question) return t.outcomeData.question;
  const p = t.prompt ?? '';
  // ChatML-style templates: the last user block; otherwise the text without special tokens.
  const users = [...p.matchAll(/<\|im_start\|>\s*user\s*([\s\S]*?)(?:<\|im_end\|>|$)/g)];
  const text = users.length ? users[users.length - 1]![1]! : p.replace(/<\|[^|>]*\|>/g, ' ');
  return text.replace(/\s+/g, ' ').trim() || t.task || t.id;
}
