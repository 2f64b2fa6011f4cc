/**
 * A rollout's episodes as a source of the decode scheduler (./scheduler.ts): every row is a task ×
 * sample episode (./sequence.ts Seq): its environment's prompt, then model turns under the turn
 * rules (stop token, stop string, limits). When a model turn ends the sequence leaves the decode
 * batch and its environment step (tool calls) runs in the background while the others keep
 * decoding; when it returns, the observation is prefilled at the next tick and the sequence
 * rejoins. A finished episode frees its slot, the environment scores it, its trajectory is
 * recorded. Which sequences start when, and what happens around their tokens, is up to the
 * rollout's SamplePlan: independent samples (here) or branching groups (./branch-groups.ts).
 */
import type { EnvStepResult, RolloutTask } from './ports';
import type { SamplingParams } from './sampling';
import type { GenToken, RowSampling, SchedulerHost, SequenceSource } from './scheduler';
import { newSeq, trajectoryOf, type Seq, type TurnEnd, type TurnRules } from './sequence';
import type { BranchPoint, OutcomeReward, Trajectory } from './types';

/** What a SamplePlan may ask of the rollout. */
export interface EpisodeHost {
  /** Prompt a sequence that holds a slot; it decodes from the next tick. */
  start(s: Seq): Promise<void>;
  /** Environment work in the background (its failure ends the rollout). */
  track(p: Promise<void>): void;
  /** The sequence has unfed tokens for the next tick. */
  ready(s: Seq): void;
}

/** Who of a rollout's samples gets the free slots, and the hooks called around a sequence's tokens. */
export interface SamplePlan {
  /** Between ticks: start sequences in free slots (taking them from `free`); their admissions go to `starting`. */
  admit(free: number[], starting: Promise<void>[]): void;
  /** A finished sequence's slot (its cache already released). */
  release(s: Seq, free: number[]): void;
  /** Sequences (or groups) still waiting for slots. */
  hasQueued(): boolean;
  /** Bookkeeping due at the next admission. */
  hasBookkeeping(): boolean;
  /** Most tokens the sequence may generate before the plan must see them (Infinity: no limit). */
  stepLimit(s: Seq): number;
  /** A token was accepted (`ended`: its turn ended): true when the sequence is parked, to go on with `resume` later. */
  parkAfterToken(s: Seq, ended: boolean, resume: () => void): boolean;
  /** The environment's observation of `tokens` tokens (0: none) was appended and the next turn opened. */
  observed(s: Seq, tokens: number): void;
  /** Where a finished sequence branched from (trajectory fields). */
  lineage(s: Seq): { forked?: number; point?: BranchPoint } | undefined;
}

/** Every task's n samples, queued at the start (their environments created in (group, sample) order), each admitted on its own. */
export class IndependentSamples implements SamplePlan {
  private readonly queue: Seq[] = [];
  constructor(
    groups: { task: RolloutTask; group: number }[],
    n: number,
    seed: number,
    private readonly host: EpisodeHost,
  ) {
    for (const { task, group } of groups) for (let s = 0; s < n; s++) this.queue.push(newSeq(task, group, s, seed));
  }
  admit(free: number[], starting: Promise<void>[]): void {
    while (free.length && this.queue.length) {
      const s = this.queue.shift()!;
      s.slot = free.pop()!;
      starting.push(this.host.start(s));
    }
  }
  release(s: Seq, free: number[]): void {
    free.push(s.slot);
  }
  hasQueued(): boolean {
    return this.queue.length > 0;
  }
  hasBookkeeping(): boolean {
    return false;
  }
  stepLimit(): number {
    return Infinity;
  }
  parkAfterToken(): boolean {
    return false;
  }
  observed(): void {}
  lineage(): undefined {
    return undefined;
  }
}

export interface EpisodeOptions {
  sampling: SamplingParams;
  /** Trajectories the rollout ends with. */
  total: number;
  /** The rollout's start (performance.now()), for progress. */
  start: number;
  signal?: AbortSignal;
  onTrajectory?(t: Trajectory): void;
  onProgress?(p: { done: number; total: number; generatedTokens: number; elapsedMs: number }): void;
}

/** The rollout's source: episodes admitted by its SamplePlan, their turns, environment steps and trajectories. */
export class Episodes implements SequenceSource<Seq>, EpisodeHost {
  /** Finished trajectories, in the order they finished. */
  readonly results: Trajectory[] = [];
  readonly plan: SamplePlan;
  /** Every sequence samples alike. */
  private readonly rowSampling: RowSampling;

  constructor(
    private readonly host: SchedulerHost<Seq>,
    private readonly rules: TurnRules,
    private readonly o: EpisodeOptions,
    plan: (host: EpisodeHost) => SamplePlan,
  ) {
    this.rowSampling = { params: o.sampling, topLogprobs: 0 };
    this.plan = plan(this);
  }

  interrupted(): Error | null {
    return this.o.signal?.aborted ? new Error('rollout aborted') : null;
  }
  admit(free: number[], starting: Promise<void>[]): void {
    this.plan.admit(free, starting);
  }
  release(s: Seq, free: number[]): void {
    this.plan.release(s, free);
  }
  done(): boolean {
    return this.results.length >= this.o.total;
  }
  hasWork(): boolean {
    return this.plan.hasBookkeeping() || this.plan.hasQueued();
  }
  sampling(): RowSampling {
    return this.rowSampling;
  }
  turnLength(s: Seq): number {
    return s.cur!.tokenIds.length;
  }
  /** The tokens the current turn may still generate, and its plan's step limit (a branching sample's entropy window). */
  room(s: Seq): number {
    return Math.min(this.rules.room(s), this.plan.stepLimit(s));
  }

  /** The token joins the current turn; the sequence leaves the batch when its turn ended (the environment steps next) or its plan parked it. */
  take(s: Seq, tok: GenToken): (() => void) | null {
    const ended = this.rules.accept(s, tok);
    const go = ended ? () => this.host.track(this.endTurn(s, ended)) : () => this.host.ready(s);
    if (this.plan.parkAfterToken(s, !!ended, go)) return parked;
    return ended ? go : null;
  }

  async start(s: Seq): Promise<void> {
    s.t0 = performance.now();
    const p = await s.env.prompt();
    s.envMs += performance.now() - s.t0;
    this.rules.start(s, p);
    this.host.ready(s);
  }
  track(p: Promise<void>): void {
    this.host.track(p);
  }
  ready(s: Seq): void {
    this.host.ready(s);
  }

  /** The model's turn ended: run the environment, then either finish or queue the observation. */
  private async endTurn(s: Seq, reason: TurnEnd): Promise<void> {
    const turn = this.rules.close(s, reason);
    const t = performance.now();
    let r: EnvStepResult;
    try {
      r = await s.env.step({ text: turn.text, tokenIds: turn.tokenIds.slice(), stopReason: reason.reason });
    } catch (e) {
      throw new Error(`environment step() failed for task ${s.task.id}, turn ${s.modelTurns}: ${e instanceof Error ? e.message : String(e)}`);
    }
    s.envMs += performance.now() - t;
    const observed = this.rules.afterStep(s, turn, reason, r);
    if (observed === null) return this.finish(s);
    this.plan.observed(s, observed);
    this.host.ready(s);
  }

  /** The episode ended: the slot is freed, the environment scores it, the trajectory is recorded. */
  private async finish(s: Seq): Promise<void> {
    this.host.release(s);
    const t = performance.now();
    let outcome: OutcomeReward;
    try {
      outcome = await s.env.outcome();
    } catch (e) {
      throw new Error(`environment outcome() failed for task ${s.task.id}: ${e instanceof Error ? e.message : String(e)}`);
    }
    s.envMs += performance.now() - t;
    const traj = trajectoryOf(s, outcome, this.plan.lineage(s));
    this.results.push(traj);
    this.o.onTrajectory?.(traj);
    this.o.onProgress?.({
      done: this.results.length,
      total: this.o.total,
      generatedTokens: this.host.counters.generated,
      elapsedMs: performance.now() - this.o.start,
    });
  }
}

/** A parked sequence leaves the batch with nothing to do until its plan resumes it. */
function parked(): void {}
