import type { TurnView } from '../../../api/types';
import type { TurnOrigin } from '../../../lib/branchTree';

/** The head's line: role, turn number, token and masked counts, the step reward (or the supporting-fact signal), tool-call count, and for a branch's shared turn the sample it came from. */
export function TurnHeadLine({
  turn,
  index,
  masked,
  origin,
  processRewards,
}: {
  turn: TurnView;
  index: number;
  masked: number;
  origin?: TurnOrigin;
  processRewards?: boolean;
}) {
  return (
    <div className="turn-head">
      <span className={`turn-role ${turn.role}`}>{turn.role}</span>
      <span>turn {index + 1}</span>
      <span>{turn.tokenIds.length} tokens</span>
      {masked ? <span>{masked} masked</span> : null}
      {turn.stepReward != null && processRewards ? (
        <span title="step (process) reward: trained on (algorithm.process_rewards)" data-testid="step-reward">
          step reward <b style={{ color: turn.stepReward >= 0 ? 'var(--ok)' : 'var(--err)' }}>{turn.stepReward.toFixed(3)}</b>
        </span>
      ) : turn.stepReward ? (
        <span
          className="muted"
          data-testid="step-signal"
          title={
            processRewards === false
              ? 'the environment’s supporting-fact signal for this turn; not trained on (algorithm.process_rewards is off): only the outcome reward counts'
              : 'the environment’s supporting-fact signal for this turn; this run did not record whether algorithm.process_rewards used it'
          }
        >
          supporting-fact signal {turn.stepReward.toFixed(3)}
          {processRewards === false ? ' (not trained on)' : ''}
        </span>
      ) : null}
      {turn.toolCalls.length ? (
        <span>
          {turn.toolCalls.length} tool call{turn.toolCalls.length > 1 ? 's' : ''}
        </span>
      ) : null}
      {origin?.shared ? (
        <span
          className="tag"
          title={`shared prefix: these tokens were generated once, by sample ${origin.from}, and reused by the branch`}
          data-testid="turn-shared"
        >
          shared · from sample {origin.from}
        </span>
      ) : null}
    </div>
  );
}
