import type { JudgeView } from './judge';

/** A sample's judgement in its column head: score and rank, or the named failure. */
export function JudgeBadge({ judge }: { judge: JudgeView }) {
  if (judge.failed !== undefined)
    return (
      <span className="flag" data-testid="judge-failed" title={judge.failed}>
        judge failed
      </span>
    );
  return (
    <span data-testid="judge-score" title={`${judge.model} (${judge.mode} mode)`}>
      judge <b className="mono">{judge.score?.toFixed(2)}</b>
      {judge.rank !== undefined ? (
        <>
          {' '}
          · rank <b className="mono">{judge.rank}</b>
          {judge.of !== undefined ? `/${judge.of}` : ''}
        </>
      ) : null}
    </span>
  );
}
