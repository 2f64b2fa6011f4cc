// The judge's audit in the group view (environment.judge): what it was asked, what it answered, and
// how it scored and ranked each sample. Read from the stored outcome (outcome.judge, written by
// engine/run/store-sink.ts from engine/train/judge-rollout.ts).
import { judgeOf } from './judge';

/** The group's judge requests: the prompt (folded), the raw answer, and which sample each numbered trajectory was. */
export function JudgePanel({ group }: { group: { sample: number; outcomeData: unknown }[] }) {
  const judged = group.map((g) => ({ sample: g.sample, judge: judgeOf(g) })).filter((g) => g.judge);
  if (!judged.length) return null;
  const first = judged[0]!.judge!;
  const calls = judged.flatMap((g) => (g.judge!.calls ?? []).map((c) => ({ ...c, owner: g.sample })));
  const failed = judged.filter((g) => g.judge!.failed !== undefined);
  return (
    <div className="panel" data-testid="judge-panel" style={{ fontSize: 12, maxHeight: '40vh', overflowY: 'auto' }}>
      <div>
        judge <b className="mono">{first.model}</b> · {first.mode} mode
        {first.agreement !== undefined ? (
          <>
            {' '}
            · reversed-order agreement <b className="mono">{first.agreement.toFixed(2)}</b>
          </>
        ) : null}
        {failed.length ? (
          <span className="flag" title={failed[0]!.judge!.failed}>
            {failed.length} sample{failed.length > 1 ? 's' : ''} unscored: left out of the update
          </span>
        ) : null}
      </div>
      {calls.map((c, i) => (
        <div key={i} data-testid="judge-call" style={{ marginTop: 6 }}>
          <div className="muted">
            {c.kind === 'rank-reversed' ? 'reversed order' : c.kind === 'rank' ? 'ranking request' : `request for sample ${c.owner}`}
            {c.kind !== 'score' ? ` · ${c.order.map((s, k) => `trajectory ${k + 1} = sample ${s}`).join(', ')}` : ''}
            {c.cached ? ' · from the cache (same trajectories asked before)' : ` · ${c.attempts} attempt${c.attempts === 1 ? '' : 's'}`}
            {c.tokensIn + c.tokensOut ? ` · ${c.tokensIn} + ${c.tokensOut} tokens` : ''}
          </div>
          {c.error ? (
            <div className="flag" data-testid="judge-error">
              {c.error}
            </div>
          ) : null}
          <details>
            <summary>prompt</summary>
            <pre className="mono" style={{ whiteSpace: 'pre-wrap' }}>{`${c.system}\n\n${c.prompt}`}</pre>
          </details>
          <pre className="mono" data-testid="judge-answer" style={{ whiteSpace: 'pre-wrap', margin: '2px 0' }}>
            {c.answer ?? '(no answer)'}
          </pre>
        </div>
      ))}
    </div>
  );
}
