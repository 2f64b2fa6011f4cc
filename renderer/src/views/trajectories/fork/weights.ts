// Which weights a replay used, said honestly: top-k, What-if and Step-through run a stored checkpoint,
// and unless it is the one saved right before the step (the weights that sampled it), the UI says
// which one it is and why (checkpoint.keep pruned the exact one; the user chose another; another run's).

/** A checkpoint as the replay answers name it. */
export interface UsedWeights {
  id: string;
  step?: number;
  runId?: string;
  /** replay.topk: the checkpoint saved right before the step. */
  exact?: boolean;
}

/** One line on the weights used for a token of a trajectory of `traj.step`. `chosen`: picked by the user rather than found by the engine. */
export function weightsNote(ck: UsedWeights, traj: { step: number; runId: string }, chosen = false): string {
  const sampler = traj.step - 1;
  const name = ck.step === undefined ? `model folder ${ck.id}` : ck.step === 0 ? 'the SFT checkpoint (step 0)' : `the step-${ck.step} checkpoint`;
  if (traj.step < 0) return `${name}; a playground rollout is sampled by the checkpoint it was started with`;
  if (ck.exact || (ck.step === sampler && (ck.runId === undefined || ck.runId === traj.runId))) return `${name}: the weights that sampled step ${traj.step}`;
  if (ck.runId !== undefined && ck.runId !== traj.runId) return `${name} of another run, not the weights that sampled this step`;
  if (chosen) return `${name}, as chosen: not the weights that sampled step ${traj.step} (those of step ${sampler})`;
  if (ck.step === undefined) return `${name}: not a checkpoint of this run`;
  const why =
    sampler === 0
      ? `the initial weights, which sampled step ${traj.step}, were not saved as a checkpoint (no SFT warm start)`
      : `the checkpoint after step ${sampler}, which sampled step ${traj.step}, was not kept (checkpoint.keep / checkpoint.every)`;
  return ck.step < sampler
    ? `${name}, ${sampler - ck.step} step${sampler - ck.step > 1 ? 's' : ''} older than the sampler: ${why}`
    : `${name}, trained ${ck.step - sampler} step${ck.step - sampler > 1 ? 's' : ''} past the sampler: ${why}, and none before it was`;
}
