import { weightsNote } from './weights';
import type { ForkResult, TrajectoryView } from '../../../api/types';
import { ScoreGraph } from './ScoreGraph';

/** The last fork: its prefix (and the edit as tokens) and the score graph of the prefix. */
export function ForkResultView({ result, traj }: { result: ForkResult; traj: TrajectoryView }) {
  const f = result.fork;
  return (
    <div data-testid="fork-result">
      <div className="muted">
        kept {f.prefixTokens} stored tokens (up to turn {f.turn + 1}
        {f.token !== null ? `, token ${f.token}` : ''})
        {f.edit ? (
          <>
            , then the {f.edit.kind} edit as {f.edit.ids.length} tokens:{' '}
            <span className="mono" data-testid="fork-edit-ids">
              [{f.edit.ids.join(' ')}]
            </span>
            {f.edit.replaced === 'result' ? " (the tool's result replaced inside the observation)" : ''}
          </>
        ) : null}{' '}
        · checkpoint {f.checkpoint.id} <span data-testid="fork-weights">({weightsNote(f.checkpoint, traj)})</span> · T {f.sampling.temperature} · seed{' '}
        {f.sampling.seed}
      </div>
      <ScoreGraph original={result.prefix.original} checkpoint={result.prefix.checkpoint} shared={f.prefixTokens} />
    </div>
  );
}
