/**
 * The loop's output into the workspace store (engine/store): metrics every step, trajectories
 * as turns with per-token arrays (full for every `logging.full_trajectories_every`-th step,
 * summaries for all), checkpoints and events. Used by the run manager's training template and by
 * `arbor train` / `arbor sft`, so runs started from the CLI appear in `arbor runs` and the workbench.
 */
import type { SignalRecord, Store, TrajectoryRecord, TurnRecord } from '../store/store';
import { getPolicyLoss, lossOptions } from '../rl/policy-losses';
import type { TokenSignal } from '../rl/token-signals';
import { BatchWriter } from '../store/store';
import type { Episode } from '../train/episode';
import { outcomeTaskFields } from '../rollout/types';
import type { SinkPort, TrajectoryExtras } from '../train/loop';
import type { SftRunPort } from './runner';
import type { ExperimentConfig } from '../config/experiment';
import { memoryLimitHits } from './sinks';

/** Split a flat episode into turns by loss mask (prompt, then model / observation runs). */
export function episodeToRecord(
  step: number,
  e: Episode,
  advantages: Float32Array | undefined,
  decode: (ids: number[]) => string,
  extra: {
    refLogprobs?: Float32Array;
    values?: Float32Array;
    signal?: TokenSignal;
    advOutcome?: Float32Array;
    advProcess?: Float32Array;
    teacherLogprobs?: Float32Array;
    meta?: SignalRecord;
  } = {},
): TrajectoryRecord {
  const slice = (a: Float32Array | undefined, i: number, j: number) => (a ? Array.from(a.subarray(i, j)) : undefined);
  const turns: TurnRecord[] = [];
  const ends: number[] = [];
  let i = 0;
  while (i < e.tokens.length) {
    const m = e.lossMask[i];
    let j = i;
    while (j < e.tokens.length && e.lossMask[j] === m) j++;
    const ids = Array.from(e.tokens.subarray(i, j));
    const role = m ? 'model' : turns.length === 0 ? 'env' : 'tool';
    const stepReward = e.stepRewards.filter((r) => r.at >= i && r.at < j).reduce((a, r) => a + r.value, 0);
    const calls = m ? (e.toolCallsAt ?? []).filter((r) => r.at >= i && r.at < j).flatMap((r) => r.calls) : [];
    turns.push({
      role,
      text: decode(ids),
      tokenIds: ids,
      tokens: ids.map((t) => decode([t])),
      logprob: Array.from(e.rolloutLogprobs.subarray(i, j)),
      entropy: Array.from(e.entropy.subarray(i, j)),
      advantage: slice(advantages, i, j),
      refLogprob: slice(extra.refLogprobs, i, j),
      value: slice(extra.values, i, j),
      ratio: slice(extra.signal?.ratio, i, j),
      clipped: slice(extra.signal?.clipped, i, j),
      lossWeight: slice(extra.signal?.weight, i, j),
      advOutcome: slice(extra.advOutcome, i, j),
      advProcess: slice(extra.advProcess, i, j),
      teacherLogprob: slice(extra.teacherLogprobs, i, j),
      lossMask: Array.from(e.lossMask.subarray(i, j)),
      stepReward: m && stepReward ? stepReward : null,
      ...(calls.length ? { toolCalls: calls } : {}),
    });
    ends.push(j);
    i = j;
  }
  let adv: number | undefined;
  if (advantages) {
    let s = 0;
    let n = 0;
    for (let k = 0; k < advantages.length; k++)
      if (e.lossMask[k]) {
        s += advantages[k]!;
        n++;
      }
    adv = n ? s / n : 0;
  }
  // A branch's `turn` counts the stored turns it shares with its parent (the stored turns split at
  // loss-mask changes, the prompt being turn 0; the branch point is such a change: a tool response
  // before the branch's first model token).
  const branch = e.branch ? { ...e.branch, turn: ends.filter((x) => x <= e.branch!.tokens).length } : undefined;
  return {
    ...(branch ? { branch } : {}),
    ...(extra.meta ? { signal: extra.meta } : {}),
    step,
    group: e.group,
    sample: e.sample,
    task: e.taskId,
    prompt: turns[0]?.text,
    reward: e.reward,
    advantage: adv,
    outcome: {
      answer: e.answer,
      components: e.rewardComponents,
      exactMatch: e.exactMatch,
      formatOk: e.formatOk,
      toolCalls: e.toolCalls,
      toolErrors: e.toolErrors,
      truncated: e.truncated,
      // What a reward tried in the editor needs to score this trajectory again.
      ...outcomeTaskFields(e.meta),
      // environment.judge: its score, rank and requests (prompt, raw answer), and why an episode was left out of the update.
      ...(e.judge ? { judge: e.judge } : {}),
      ...(e.unscored !== undefined ? { unscored: e.unscored } : {}),
    },
    turns,
    ...(e.timings ? { timings: e.timings } : {}),
  };
}

/** The loss settings a run's trajectories keep (the replay's per-token channels read them); the clip range is the loss entry's own (none for a loss without heat-map signals). */
export function signalSettings(cfg: ExperimentConfig): SignalRecord {
  const a = cfg.algorithm;
  const clip = getPolicyLoss(a.policy_loss).signals?.clip(cfg, lossOptions(cfg));
  return {
    estimator: a.adv_estimator,
    normByStd: a.norm_adv_by_std,
    policyLoss: a.policy_loss,
    lossAggMode: a.loss_agg_mode,
    ...(clip ? { clipLow: clip.low, clipHigh: clip.high } : {}),
    dualClip: clip ? clip.dual : null,
    processRewards: a.process_rewards,
  };
}

/** One episode's per-token extras of a step (episodeToRecord's `extra`), with the run's loss settings and the episode's group statistics. */
export function recordExtras(e: Episode, extra: TrajectoryExtras | undefined, settings?: SignalRecord): Parameters<typeof episodeToRecord>[4] {
  const group = extra?.advantageParts?.group.get(e);
  return {
    refLogprobs: extra?.refLogprobs?.get(e),
    values: extra?.values?.get(e),
    signal: extra?.signals?.get(e),
    advOutcome: extra?.advantageParts?.outcome.get(e),
    advProcess: extra?.advantageParts?.process.get(e),
    teacherLogprobs: extra?.teacherLogprobs?.get(e),
    ...(settings || group || extra?.dropped?.has(e)
      ? { meta: { ...settings, ...(group ? { group } : {}), ...(extra?.dropped?.has(e) ? { dropped: true } : {}) } }
      : {}),
  };
}

export interface StoreSink extends SinkPort {
  /** Commit everything queued. */
  flush(): void;
}

/** A SinkPort writing one run's metrics, trajectories, checkpoints and events through a BatchWriter. */
/** `signal`: the run's loss settings, kept with every trajectory (the per-token channels read them). */
export function storeSink(
  store: Store,
  runId: string,
  opts: { decode: (ids: number[]) => string; fullTrajectoriesEvery?: number; signal?: SignalRecord },
): StoreSink {
  const writer = new BatchWriter(store, { intervalMs: 250, keepEvery: opts.fullTrajectoriesEvery ?? 1 });
  return {
    metrics(step, values) {
      // A step's metrics close it: they and its queued trajectories commit in one transaction
      // now, before the loop writes the step's checkpoint, so a checkpoint folder on disk always
      // has its step's rows (a kill between the two can no longer leave a resumable step with no
      // metrics; found by scripts/fault-inject.mjs).
      writer.metrics(runId, step, values);
      writer.flush();
    },
    trajectories(step, episodes, advantages, extra) {
      for (const e of episodes) writer.trajectory(runId, episodeToRecord(step, e, advantages.get(e), opts.decode, recordExtras(e, extra, opts.signal)));
      // Tool calls the sandbox cut off at its memory limit: the run's log says so.
      const hits = memoryLimitHits(episodes);
      if (hits.length)
        writer.log(
          runId,
          'warn',
          `step ${step}: ${hits.length} tool call(s) exceeded the sandbox memory limit (${[...new Set(hits.map((h) => h.name))].join(', ')}): ${hits[0]!.error}`,
        );
    },
    truncateAfter(step) {
      writer.flush();
      store.truncateAfter(runId, step);
    },
    event(kind, payload) {
      writer.flush();
      if (kind === 'checkpoint' && typeof payload.step === 'number' && typeof payload.dir === 'string') store.addCheckpoint(runId, payload.step, payload.dir);
      else if (kind === 'resumed' && typeof payload.fromStep === 'number' && typeof payload.checkpoint === 'string') {
        // A kill between a checkpoint's rename and its row leaves the folder without a row: the
        // resume records the checkpoint it continues from.
        store.addCheckpoint(runId, payload.fromStep, payload.checkpoint);
        store.log(runId, 'info', `resumed: ${JSON.stringify(payload)}`);
      } else if (kind === 'warning' && typeof payload.message === 'string')
        store.log(runId, 'warn', `step ${String(payload.step)}: ${payload.message}`); // "why didn't it learn" (engine/train/diagnostics.ts)
      else store.log(runId, kind === 'error' ? 'error' : 'info', `${kind}: ${JSON.stringify(payload)}`);
    },
    flush: () => writer.flush(),
  };
}

/** The tag of a run that records another run's SFT warm start (its child, the RL run, names it as parent). */
export const SFT_WARM_START_TAG = 'sft-warm-start';

/** Whether a run records an SFT warm start (template "sft", tagged sft-warm-start). */
export function isSftWarmStart(r: { template?: string | null; tags: string[] }): boolean {
  return r.template === 'sft' && r.tags.includes(SFT_WARM_START_TAG);
}

/**
 * Record `runId`'s SFT warm start as its own run, linked as the parent of `runId` (W&B/verl style:
 * an SFT run, then the RL run that starts from its checkpoint). The SFT run is named "<run> · SFT",
 * has template "sft", the RL run's config, and `dir` (the RL run folder's sft/) as its run folder;
 * a fork's origin (the RL run's parent before) becomes the SFT run's parent, so the lineage stays.
 * A resume reuses the SFT run already linked (never a second one); a resume of a run recorded
 * before SFT runs existed (its SFT curve is sft/* on the run itself) returns undefined: the caller
 * keeps writing there. The SFT run is claimed by this process and running until `finish`.
 */
export function openSftRun(
  store: Store,
  runId: string,
  o: { dir: string; resume: boolean; onMetrics?: (id: string, step: number, values: Record<string, number>) => void; onChange?: (id: string) => void },
): SftRunPort | undefined {
  const rl = store.getRun(runId);
  const parent = rl.parentId ? store.getRun(rl.parentId) : undefined;
  const linked = parent && isSftWarmStart(parent) ? parent : undefined;
  if (!linked && o.resume) return undefined;
  const id =
    linked?.id ??
    store.createRun({
      // "sft-<run id>" (its short form in the runs table differs from the run's), unless taken.
      id: store.db.prepare('SELECT 1 FROM runs WHERE id = ?').get(`sft-${runId}`) ? undefined : `sft-${runId}`,
      name: `${rl.name} · SFT`,
      template: 'sft',
      config: rl.config,
      seed: rl.seed ?? undefined,
      tags: [SFT_WARM_START_TAG],
      parentId: rl.parentId ?? undefined,
      project: rl.project ?? undefined,
    });
  if (!linked) {
    store.addArtifact(id, 'run-folder', o.dir);
    store.setParent(runId, id);
    store.log(runId, 'info', `SFT warm start recorded as run ${id} (its parent)`);
    o.onChange?.(runId);
  }
  store.claimRun(id);
  store.setStatus(id, 'running');
  o.onChange?.(id);
  // SFT has no trajectories to decode.
  const inner = storeSink(store, id, { decode: () => '' });
  let done = false;
  return {
    id,
    sink: {
      ...inner,
      metrics(step, values) {
        inner.metrics(step, values);
        // The SFT run's step is its SFT step (the store keeps sft/* keys off an RL run's step).
        store.advanceStep(id, step);
        o.onMetrics?.(id, step, values);
      },
      event(kind, payload) {
        inner.event?.(kind, payload);
        if (kind === 'checkpoint') o.onChange?.(id);
      },
    },
    finish(status, error) {
      if (done) return;
      done = true;
      inner.flush();
      if (error) store.log(id, 'error', error);
      store.setStatus(id, status, error);
      store.releaseRun(id);
      o.onChange?.(id);
    },
  };
}
