/**
 * Writes and queries over the workspace database. Writes from a training job go through
 * `BatchWriter`, which queues them and commits in one transaction per flush, so the training
 * loop never waits on SQLite; a crash loses at most what was still queued (the in-flight step).
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import type { DB } from './db';

/** The process writing a run: its id and host. One owner per run at a time. */
export interface RunOwner {
  pid: number;
  host: string;
}

export function thisProcess(): RunOwner {
  return { pid: process.pid, host: hostname() };
}

/** Statuses that mean some process holds the run (it writes to it, or will). */
export const LIVE_STATUSES = ['running', 'queued', 'paused'];
/** Statuses that end a run (ended_at is set). */
export const ENDED_STATUSES = ['completed', 'failed', 'stopped', 'interrupted'];
/** How often an owner refreshes its heartbeat. */
export const HEARTBEAT_MS = 5000;
/**
 * An owner on another host whose heartbeat is older than this is gone. On this host the process
 * id decides (a dead pid is gone at once); a heartbeat older than `STALE_LOCAL_S` there means
 * the pid was reused by another program.
 */
export const STALE_REMOTE_S = 120;
export const STALE_LOCAL_S = 900;

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: the process exists but belongs to another user.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

interface OwnerRow {
  id: string;
  status: string;
  step: number;
  owner_pid: number | null;
  owner_host: string | null;
  heartbeat_at: number | null;
}

/** Whether the process recorded as a run's owner still runs. */
export function ownerAlive(r: { owner_pid: number | null; owner_host: string | null; heartbeat_at: number | null }, now = Date.now() / 1000): boolean {
  if (r.owner_pid === null || r.owner_host === null) return false;
  const me = thisProcess();
  if (r.owner_pid === me.pid && r.owner_host === me.host) return true;
  const age = now - (r.heartbeat_at ?? 0);
  if (r.owner_host === me.host) return pidAlive(r.owner_pid) && age < STALE_LOCAL_S;
  return age < STALE_REMOTE_S;
}

/** Another live process already writes this run. */
export class RunOwnedError extends Error {
  constructor(
    readonly runId: string,
    readonly owner: RunOwner,
    readonly status: string,
    ageS: number,
  ) {
    super(
      `run "${runId}" is ${status} in another process (pid ${owner.pid} on ${owner.host}, heartbeat ${Math.round(ageS)} s ago); stop that process first (Ctrl-C, or Stop in the workbench), then resume`,
    );
    this.name = 'RunOwnedError';
  }
}

export interface RunRow {
  id: string;
  name: string;
  template: string | null;
  status: string;
  config: Record<string, unknown>;
  seed: number | null;
  tags: string[];
  parentId: string | null;
  createdAt: number;
  startedAt: number | null;
  endedAt: number | null;
  error: string | null;
  step: number;
  notes: string;
  metrics: Record<string, number>;
  /** The project the run belongs to (W&B-style grouping), or null. */
  project: string | null;
}

/**
 * The per-token channels a turn may carry, each aligned with its tokenIds (float32 in the store).
 * From the step: the sampled token's logprob, the KL reference's logprob, the policy's entropy, the
 * advantage, the critic's value and the loss mask.
 */
export const STEP_CHANNELS = ['logprob', 'refLogprob', 'entropy', 'advantage', 'value', 'lossMask'] as const;
export type StepChannel = (typeof STEP_CHANNELS)[number];
/**
 * What training applied per token (engine/rl/token-signals.ts): the importance ratio, the clip side
 * (0, +1 upper, −1 lower, 2 dual) and the loss weight; the advantage's outcome part and process part
 * (they add up to `advantage`); algorithm.distill: the teacher's logprob of each token.
 */
export const SIGNAL_CHANNELS = ['ratio', 'clipped', 'lossWeight', 'advOutcome', 'advProcess', 'teacherLogprob'] as const;
export type SignalChannel = (typeof SIGNAL_CHANNELS)[number];
export type TokenChannel = StepChannel | SignalChannel;

export interface TurnRecord extends Partial<Record<TokenChannel, ArrayLike<number>>> {
  role: string;
  text: string;
  tokenIds?: ArrayLike<number>;
  toolCalls?: unknown[];
  stepReward?: number | null;
  /** Decoded text of each token (same length as tokenIds). */
  tokens?: string[];
}

/** How training treated a trajectory as a whole: its group's reward statistics and the loss settings (for the per-token channels). */
export interface SignalRecord {
  group?: { mean: number; std: number; n: number };
  estimator?: string;
  normByStd?: boolean;
  policyLoss?: string;
  lossAggMode?: string;
  clipLow?: number;
  clipHigh?: number;
  dualClip?: number | null;
  /** algorithm.process_rewards: whether the turns' step rewards entered the advantage (absent in runs stored before it was kept). */
  processRewards?: boolean;
  /** A flat group dynamic sampling dropped (stored as a sample, never trained on). */
  dropped?: boolean;
}

export interface TrajectoryRecord {
  step: number;
  group: number;
  sample: number;
  task?: string;
  prompt?: string;
  reward: number;
  advantage?: number;
  outcome?: Record<string, unknown>;
  timings?: Record<string, number>;
  turns: TurnRecord[];
  /** Branching rollouts: where this sample left its parent (engine/rollout/types.ts BranchPoint); absent for root samples. */
  branch?: { parent: number; turn: number; tokens: number; entropy: number; deltaH: number; probability: number };
  /** What-if replays (engine/replay): the trajectory this one was forked from, and how (see ForkRecord). */
  fork?: ForkRecord;
  signal?: SignalRecord;
}

/**
 * How a replayed trajectory left its parent: the turn (stored index, the prompt is 0) and token
 * where the stored ids stop, the edit appended there (its text and token ids), the checkpoint that
 * sampled the rest and the sampling settings. `prefixTokens` is the length of the shared prefix
 * (the parent's ids, exactly); `prefixLogprob` the per-token logprob of the prefix (plus the edit)
 * under the chosen checkpoint (index 0 has none: NaN).
 */
export interface ForkRecord {
  parent: string;
  turn: number;
  token: number | null;
  edit: { kind: 'observation' | 'text'; text: string; ids: number[]; replaced: 'result' | 'turn' | 'append' } | null;
  checkpoint: { id: string; path: string; step?: number; runId?: string };
  sampling: { temperature: number; n: number; seed: number; index: number };
  prefixTokens: number;
  prefixLogprob: number[];
}

export interface TrajectoryQuery {
  runId: string;
  step?: number;
  minReward?: number;
  maxReward?: number;
  errorsOnly?: boolean;
  task?: string;
  limit?: number;
}

/** Over the model tokens (loss mask 1): the share whose gradient the clip cut, and the mean log π − log π_ref (null when not stored). */
function tokenShares(turns: TurnRecord[]): [number | null, number | null] {
  let n = 0;
  let clipped = 0;
  let hasClip = false;
  let kl = 0;
  let nKl = 0;
  for (const u of turns) {
    const m = u.lossMask;
    if (!m) continue;
    for (let i = 0; i < m.length; i++) {
      if (!m[i]) continue;
      n++;
      if (u.clipped) {
        hasClip = true;
        if (u.clipped[i]) clipped++;
      }
      const lp = u.logprob?.[i];
      const ref = u.refLogprob?.[i];
      if (lp !== undefined && ref !== undefined && Number.isFinite(lp) && Number.isFinite(ref)) {
        kl += lp - ref;
        nKl++;
      }
    }
  }
  return [hasClip && n ? clipped / n : null, nKl ? kl / nKl : null];
}

const f32 = (a?: ArrayLike<number>) => (a ? Buffer.from(Float32Array.from(a).buffer) : null);
const i32 = (a?: ArrayLike<number>) => (a ? Buffer.from(Int32Array.from(a).buffer) : null);
const fromF32 = (b: Buffer | null) => (b ? Array.from(new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))) : null);
/** Each channel's column in the turns table: its name in snake_case (refLogprob → ref_logprob), worked out once. */
const CHANNEL_COLUMN = Object.fromEntries([...STEP_CHANNELS, ...SIGNAL_CHANNELS].map((c) => [c, c.replace(/[A-Z]/g, (x) => `_${x.toLowerCase()}`)])) as Record<
  TokenChannel,
  string
>;
/** A turns row's per-token channels, each a float32 BLOB in its column. */
const readChannels = <C extends TokenChannel>(row: Record<string, unknown>, channels: readonly C[]) =>
  Object.fromEntries(channels.map((c) => [c, fromF32(row[CHANNEL_COLUMN[c]] as Buffer | null)])) as Record<C, number[] | null>;
const fromI32 = (b: Buffer | null) => (b ? Array.from(new Int32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))) : []);

export class Store {
  constructor(readonly db: DB) {}

  // ---- runs ----------------------------------------------------------------------------
  createRun(r: {
    name: string;
    template?: string;
    config?: Record<string, unknown>;
    seed?: number;
    tags?: string[];
    parentId?: string;
    status?: string;
    id?: string;
    project?: string;
  }): string {
    const id = r.id ?? randomUUID().slice(0, 8);
    const projectId = r.project?.trim() ? this.projectId(r.project.trim()) : null;
    this.db
      .prepare(`INSERT INTO runs (id, name, template, status, config, seed, tags, parent_id, created_at, project_id) VALUES (?,?,?,?,?,?,?,?,?,?)`)
      .run(
        id,
        r.name,
        r.template ?? null,
        r.status ?? 'queued',
        JSON.stringify(r.config ?? {}),
        r.seed ?? null,
        JSON.stringify(r.tags ?? []),
        r.parentId ?? null,
        Date.now() / 1000,
        projectId,
      );
    const flat = flattenParams(r.config ?? {});
    const ins = this.db.prepare('INSERT OR REPLACE INTO params (run_id, key, value) VALUES (?,?,?)');
    for (const [k, v] of Object.entries(flat)) ins.run(id, k, v);
    return id;
  }

  /** Set a run's status. Queued/running clear the last error (a resumed run is not failing); an ending status without one keeps it. */
  setStatus(id: string, status: string, error?: string): void {
    const now = Date.now() / 1000;
    const started = status === 'running' ? now : null;
    const ended = ENDED_STATUSES.includes(status) ? now : null;
    const clear = status === 'running' || status === 'queued' ? 1 : 0;
    this.db
      .prepare(
        `UPDATE runs SET status = ?, error = CASE WHEN ? THEN ? ELSE COALESCE(?, error) END, started_at = COALESCE(started_at, ?), ended_at = ? WHERE id = ?`,
      )
      .run(status, clear, error ?? null, error ?? null, started, ended, id);
  }

  /**
   * Make this process (or `owner`) the run's one writer, refusing when another live process holds
   * it (RunOwnedError names it). Atomic across processes (an immediate transaction).
   */
  claimRun(id: string, owner: RunOwner = thisProcess()): void {
    this.db
      .transaction(() => {
        const r = this.db.prepare('SELECT id, status, step, owner_pid, owner_host, heartbeat_at FROM runs WHERE id = ?').get(id) as OwnerRow | undefined;
        if (!r) throw new Error(`no run with id "${id}"`);
        const now = Date.now() / 1000;
        const same = r.owner_pid === owner.pid && r.owner_host === owner.host;
        if (!same && LIVE_STATUSES.includes(r.status) && ownerAlive(r, now)) {
          throw new RunOwnedError(id, { pid: r.owner_pid!, host: r.owner_host! }, r.status, now - (r.heartbeat_at ?? now));
        }
        this.db.prepare('UPDATE runs SET owner_pid = ?, owner_host = ?, heartbeat_at = ? WHERE id = ?').run(owner.pid, owner.host, now, id);
      })
      .immediate();
  }

  /** Refresh the heartbeat of every live run this process owns. */
  heartbeat(owner: RunOwner = thisProcess()): void {
    this.db
      .prepare(`UPDATE runs SET heartbeat_at = ? WHERE owner_pid = ? AND owner_host = ? AND status IN (${LIVE_STATUSES.map(() => '?').join(',')})`)
      .run(Date.now() / 1000, owner.pid, owner.host, ...LIVE_STATUSES);
  }

  /** Give up ownership of a run (its job ended). */
  releaseRun(id: string, owner: RunOwner = thisProcess()): void {
    this.db.prepare('UPDATE runs SET owner_pid = NULL, owner_host = NULL WHERE id = ? AND owner_pid = ? AND owner_host = ?').run(id, owner.pid, owner.host);
  }

  /** The recorded owner of a run (null when none). */
  runOwner(id: string): (RunOwner & { heartbeatAt: number | null; alive: boolean }) | null {
    const r = this.db.prepare('SELECT id, status, step, owner_pid, owner_host, heartbeat_at FROM runs WHERE id = ?').get(id) as OwnerRow | undefined;
    if (!r || r.owner_pid === null || r.owner_host === null) return null;
    return { pid: r.owner_pid, host: r.owner_host, heartbeatAt: r.heartbeat_at, alive: ownerAlive(r) };
  }

  /**
   * Runs left live by a process that is gone: running/paused ones become `interrupted` (with
   * their last step and checkpoint, resumable), queued ones `stopped`. Runs whose owner still
   * lives (a CLI training, another engine) are left alone. Returns the ids changed.
   */
  recoverOrphans(): string[] {
    const changed: string[] = [];
    const rows = this.db
      .prepare(`SELECT id, status, step, owner_pid, owner_host, heartbeat_at FROM runs WHERE status IN (${LIVE_STATUSES.map(() => '?').join(',')})`)
      .all(...LIVE_STATUSES) as OwnerRow[];
    for (const r of rows) {
      if (ownerAlive(r)) continue;
      const who = r.owner_pid !== null ? `pid ${r.owner_pid} on ${r.owner_host}` : 'an engine from before run owners were recorded';
      if (r.status === 'queued') {
        this.setStatus(r.id, 'stopped', `the process that queued it (${who}) ended before it started`);
      } else {
        const ck = this.checkpoints(r.id).at(-1);
        const msg = `interrupted: the process running it (${who}) ended without finishing; last step ${r.step}, ${ck ? `last checkpoint at step ${ck.step}` : 'no checkpoint yet'}; resume to continue${ck ? ' from it' : ''}`;
        this.setStatus(r.id, 'interrupted', msg);
        this.log(r.id, 'warn', msg);
      }
      this.db.prepare('UPDATE runs SET owner_pid = NULL, owner_host = NULL WHERE id = ?').run(r.id);
      changed.push(r.id);
    }
    return changed;
  }

  setNotes(id: string, notes: string): void {
    if (this.db.prepare('UPDATE runs SET notes = ? WHERE id = ?').run(notes, id).changes === 0) throw new Error(`no run with id "${id}"`);
  }

  setTags(id: string, tags: string[]): void {
    const clean = [...new Set(tags.map((t) => t.trim()).filter(Boolean))];
    if (this.db.prepare('UPDATE runs SET tags = ? WHERE id = ?').run(JSON.stringify(clean), id).changes === 0) throw new Error(`no run with id "${id}"`);
  }

  /** The id of the project named `name`, created on first use. */
  private projectId(name: string): number {
    this.db.prepare('INSERT OR IGNORE INTO projects (name, created_at) VALUES (?, ?)').run(name, Date.now() / 1000);
    return (this.db.prepare('SELECT id FROM projects WHERE name = ?').get(name) as { id: number }).id;
  }

  /** Projects with their run counts, by name. */
  projects(): { name: string; runs: number }[] {
    return this.db
      .prepare('SELECT p.name, COUNT(r.id) AS runs FROM projects p LEFT JOIN runs r ON r.project_id = p.id GROUP BY p.id ORDER BY p.name')
      .all() as { name: string; runs: number }[];
  }

  getRun(id: string): RunRow {
    const r = this.db.prepare('SELECT r.*, p.name AS project FROM runs r LEFT JOIN projects p ON p.id = r.project_id WHERE r.id = ?').get(id) as
      Record<string, unknown> | undefined;
    if (!r) throw new Error(`no run with id "${id}"`);
    return this.toRun(r, this.latest(id));
  }

  /** Delete a run; its children (forks, the RL run of a deleted SFT warm start) keep their rows and lose the link. */
  deleteRun(id: string): void {
    this.db.transaction(() => {
      this.db.prepare('UPDATE runs SET parent_id = NULL WHERE parent_id = ?').run(id);
      this.db.prepare('DELETE FROM runs WHERE id = ?').run(id);
    })();
  }

  /** Link a run to its parent (an RL run to the run that recorded its SFT warm start). */
  setParent(id: string, parentId: string | null): void {
    if (this.db.prepare('UPDATE runs SET parent_id = ? WHERE id = ?').run(parentId, id).changes === 0) throw new Error(`no run with id "${id}"`);
  }

  /** Advance a run's step (a run whose steps are SFT steps: writeMetrics keeps sft/* off the step). */
  advanceStep(id: string, step: number): void {
    this.db.prepare('UPDATE runs SET step = MAX(step, ?) WHERE id = ?').run(step, id);
  }

  latest(id: string): Record<string, number> {
    const out: Record<string, number> = {};
    for (const m of this.db.prepare('SELECT key, value FROM latest_metrics WHERE run_id = ?').all(id) as { key: string; value: number }[]) out[m.key] = m.value;
    return out;
  }

  /** Run list with filters (status, tag, text in name) and sort (created, name, status, or a metric key). */
  listRuns(q: { status?: string; tag?: string; search?: string; sort?: string; desc?: boolean; limit?: number; project?: string } = {}): RunRow[] {
    const where: string[] = [];
    const args: unknown[] = [];
    if (q.project) {
      where.push('p.name = ?');
      args.push(q.project);
    }
    if (q.status) {
      where.push('r.status = ?');
      args.push(q.status);
    }
    if (q.tag) {
      where.push('EXISTS (SELECT 1 FROM json_each(r.tags) WHERE value = ?)');
      args.push(q.tag);
    }
    if (q.search) {
      where.push('r.name LIKE ?');
      args.push(`%${q.search}%`);
    }
    const dir = q.desc === false ? 'ASC' : 'DESC';
    let order = `r.created_at ${dir}`;
    let join = '';
    if (q.sort && ['name', 'status', 'created_at'].includes(q.sort)) order = `r.${q.sort} ${dir}`;
    else if (q.sort) {
      join = 'LEFT JOIN latest_metrics lm ON lm.run_id = r.id AND lm.key = ?';
      args.unshift(q.sort);
      order = `lm.value ${dir}`;
    }
    const rows = this.db
      .prepare(
        `SELECT r.*, p.name AS project FROM runs r LEFT JOIN projects p ON p.id = r.project_id ${join} ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY ${order} LIMIT ?`,
      )
      .all(...args, q.limit ?? 1000) as Record<string, unknown>[];
    if (rows.length === 0) return [];
    const latest = new Map<string, Record<string, number>>();
    const ids = rows.map((r) => r.id as string);
    const lm = this.db.prepare(`SELECT run_id, key, value FROM latest_metrics WHERE run_id IN (SELECT value FROM json_each(?))`).all(JSON.stringify(ids)) as {
      run_id: string;
      key: string;
      value: number;
    }[];
    for (const m of lm) {
      let o = latest.get(m.run_id);
      if (!o) latest.set(m.run_id, (o = {}));
      o[m.key] = m.value;
    }
    return rows.map((r) => this.toRun(r, latest.get(r.id as string) ?? {}));
  }

  private toRun(r: Record<string, unknown>, metrics: Record<string, number>): RunRow {
    return {
      id: r.id as string,
      name: r.name as string,
      template: r.template as string | null,
      status: r.status as string,
      config: JSON.parse(r.config as string),
      seed: r.seed as number | null,
      tags: JSON.parse(r.tags as string),
      parentId: r.parent_id as string | null,
      createdAt: r.created_at as number,
      startedAt: r.started_at as number | null,
      endedAt: r.ended_at as number | null,
      error: r.error as string | null,
      step: r.step as number,
      notes: (r.notes as string) ?? '',
      metrics,
      project: (r.project as string | null) ?? null,
    };
  }

  // ---- metrics -------------------------------------------------------------------------
  writeMetrics(runId: string, step: number, values: Record<string, number>, time = Date.now() / 1000): void {
    const ins = this.db.prepare('INSERT INTO metrics (run_id, key, step, time, value) VALUES (?,?,?,?,?)');
    const up = this.db.prepare(`INSERT INTO latest_metrics (run_id, key, step, time, value) VALUES (?,?,?,?,?)
      ON CONFLICT(run_id, key) DO UPDATE SET step = excluded.step, time = excluded.time, value = excluded.value WHERE excluded.step >= latest_metrics.step`);
    for (const [k, v] of Object.entries(values)) {
      const val = Number.isFinite(v) ? v : null;
      ins.run(runId, k, step, time, val);
      up.run(runId, k, step, time, val);
    }
    // sft/* metrics (an SFT warm start before RL) have their own step axis: not the run's step.
    if (Object.keys(values).some((k) => !k.startsWith('sft/'))) this.db.prepare('UPDATE runs SET step = MAX(step, ?) WHERE id = ?').run(step, runId);
  }

  metricKeys(runId: string): string[] {
    return (this.db.prepare('SELECT key FROM latest_metrics WHERE run_id = ? ORDER BY key').all(runId) as { key: string }[]).map((r) => r.key);
  }

  /**
   * A metric series downsampled in SQL to about `maxPoints` points: the steps are split into
   * buckets and each bucket keeps its first, last, minimum and maximum point, so spikes and
   * the ends of the curve survive.
   */
  metricSeries(runId: string, key: string, maxPoints = 1500): { step: number[]; value: (number | null)[] } {
    const r = this.db.prepare('SELECT MIN(step) AS lo, MAX(step) AS hi, COUNT(*) AS n FROM metrics WHERE run_id = ? AND key = ?').get(runId, key) as {
      lo: number | null;
      hi: number | null;
      n: number;
    };
    if (!r.n) return { step: [], value: [] };
    let rows: { step: number; value: number | null }[];
    if (r.n <= maxPoints) {
      rows = this.db.prepare('SELECT step, value FROM metrics WHERE run_id = ? AND key = ? ORDER BY step').all(runId, key) as typeof rows;
    } else {
      const buckets = Math.max(1, Math.floor(maxPoints / 4));
      const width = (r.hi! - r.lo! + 1) / buckets;
      rows = this.db
        .prepare(
          `
        WITH s AS (SELECT step, value, CAST((step - ?) / ? AS INTEGER) AS b FROM metrics WHERE run_id = ? AND key = ?)
        SELECT step, value FROM (
          SELECT step, value, MIN(step) FROM s GROUP BY b
          UNION SELECT step, value, MAX(step) FROM s GROUP BY b
          UNION SELECT step, value, MIN(value) FROM s WHERE value IS NOT NULL GROUP BY b
          UNION SELECT step, value, MAX(value) FROM s WHERE value IS NOT NULL GROUP BY b)
        GROUP BY step ORDER BY step`,
        )
        .all(r.lo, width, runId, key) as typeof rows;
    }
    return { step: rows.map((x) => x.step), value: rows.map((x) => x.value) };
  }

  /** Drop everything a run logged after `step` (resume from a checkpoint at `step`). */
  /** Drop a run's rows after `step` (a resume from the checkpoint at `step`), except sft/* metrics. */
  truncateAfter(runId: string, step: number): void {
    this.db.transaction(() => {
      // An RL resume: sft/* rows are on the warm start's own step axis and stay.
      this.db.prepare("DELETE FROM metrics WHERE run_id = ? AND step > ? AND key NOT LIKE 'sft/%'").run(runId, step);
      this.db.prepare('DELETE FROM trajectories WHERE run_id = ? AND step > ?').run(runId, step);
      this.db.prepare('DELETE FROM latest_metrics WHERE run_id = ?').run(runId);
      this.db
        .prepare(
          `INSERT INTO latest_metrics (run_id, key, step, time, value)
        SELECT run_id, key, step, time, value FROM metrics m WHERE run_id = ? AND step = (SELECT MAX(step) FROM metrics WHERE run_id = m.run_id AND key = m.key) GROUP BY key`,
        )
        .run(runId);
      this.db.prepare('UPDATE runs SET step = ? WHERE id = ?').run(step, runId);
    })();
  }

  // ---- trajectories --------------------------------------------------------------------
  writeTrajectory(runId: string, t: TrajectoryRecord, full = true): number {
    const hasError = t.turns.some((u) => (u.toolCalls ?? []).some((c) => (c as { error?: unknown }).error));
    const info = this.db
      .prepare(
        `INSERT INTO trajectories (run_id, step, grp, sample, task, prompt, reward, advantage, outcome, timings, has_error, turn_count, full, branch, parent_traj, fork, signal, clip_share, kl_mean)
      VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
      )
      .run(
        runId,
        t.step,
        t.group,
        t.sample,
        t.task ?? null,
        t.prompt ?? null,
        t.reward,
        t.advantage ?? null,
        JSON.stringify(t.outcome ?? {}),
        JSON.stringify(t.timings ?? {}),
        hasError ? 1 : 0,
        t.turns.length,
        full ? 1 : 0,
        t.branch ? JSON.stringify(t.branch) : null,
        t.fork ? Number(t.fork.parent) : null,
        t.fork ? JSON.stringify(t.fork) : null,
        t.signal ? JSON.stringify(t.signal) : null,
        ...tokenShares(t.turns),
      );
    const id = Number(info.lastInsertRowid);
    if (full) {
      const ins = this.db
        .prepare(`INSERT INTO turns (traj_id, idx, role, text, token_ids, logprob, ref_logprob, entropy, advantage, value, loss_mask, tool_calls, step_reward, tokens, ratio, clipped, loss_weight, adv_outcome, adv_process, teacher_logprob)
        VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`);
      t.turns.forEach((u, i) =>
        ins.run(
          id,
          i,
          u.role,
          u.text,
          i32(u.tokenIds),
          ...STEP_CHANNELS.map((c) => f32(u[c])),
          JSON.stringify(u.toolCalls ?? []),
          u.stepReward ?? null,
          u.tokens ? JSON.stringify(u.tokens) : null,
          ...SIGNAL_CHANNELS.map((c) => f32(u[c])),
        ),
      );
    }
    return id;
  }

  trajectorySteps(runId: string): number[] {
    return (this.db.prepare('SELECT DISTINCT step FROM trajectories WHERE run_id = ? ORDER BY step').all(runId) as { step: number }[]).map((r) => r.step);
  }

  /** A run's trajectories as the rollouts stored them; what-if replays (forks) are listed by `forks`. */
  searchTrajectories(q: TrajectoryQuery) {
    const where = ['run_id = ?', 'parent_traj IS NULL'];
    const args: unknown[] = [q.runId];
    if (q.step !== undefined) {
      where.push('step = ?');
      args.push(q.step);
    }
    if (q.minReward !== undefined) {
      where.push('reward >= ?');
      args.push(q.minReward);
    }
    if (q.maxReward !== undefined) {
      where.push('reward <= ?');
      args.push(q.maxReward);
    }
    if (q.errorsOnly) where.push('has_error = 1');
    if (q.task) {
      where.push('(task LIKE ? OR prompt LIKE ?)');
      args.push(`%${q.task}%`, `%${q.task}%`);
    }
    const rows = this.db
      .prepare(`SELECT * FROM trajectories WHERE ${where.join(' AND ')} ORDER BY step, grp, sample LIMIT ?`)
      .all(...args, q.limit ?? 2000) as Record<string, unknown>[];
    return rows.map((r) => this.trajSummary(r));
  }

  private trajSummary(r: Record<string, unknown>) {
    const outcome = JSON.parse(r.outcome as string) as Record<string, unknown>;
    return {
      id: String(r.id),
      runId: r.run_id as string,
      step: r.step as number,
      group: r.grp as number,
      sample: r.sample as number,
      task: (r.task as string) ?? undefined,
      prompt: (r.prompt as string) ?? undefined,
      reward: r.reward as number,
      advantage: (r.advantage as number) ?? undefined,
      outcome: typeof outcome.answer === 'string' ? outcome.answer : undefined,
      turns: r.turn_count as number,
      hasError: r.has_error === 1,
      full: r.full === 1,
      outcomeData: outcome,
      timings: JSON.parse(r.timings as string) as Record<string, number>,
      branch: r.branch ? (JSON.parse(r.branch as string) as NonNullable<TrajectoryRecord['branch']>) : null,
      fork: r.fork ? (JSON.parse(r.fork as string) as ForkRecord) : null,
      signal: r.signal ? (JSON.parse(r.signal as string) as SignalRecord) : null,
      clipShare: (r.clip_share as number | null) ?? null,
      klMean: (r.kl_mean as number | null) ?? null,
    };
  }

  /** What-if replays: the forks of one trajectory, or of every trajectory of a run (oldest first). */
  forks(q: { trajectoryId?: string; runId?: string }) {
    if (q.trajectoryId === undefined && q.runId === undefined) throw new Error('forks: give trajectoryId or runId');
    const rows = (
      q.trajectoryId !== undefined
        ? this.db.prepare('SELECT * FROM trajectories WHERE parent_traj = ? ORDER BY id').all(Number(q.trajectoryId))
        : this.db.prepare('SELECT * FROM trajectories WHERE run_id = ? AND parent_traj IS NOT NULL ORDER BY id').all(q.runId)
    ) as Record<string, unknown>[];
    return rows.map((r) => this.trajSummary(r));
  }

  getTrajectory(id: string) {
    const r = this.db.prepare('SELECT * FROM trajectories WHERE id = ?').get(Number(id)) as Record<string, unknown> | undefined;
    if (!r) throw new Error(`no trajectory with id "${id}"`);
    const s = this.trajSummary(r);
    const turns = (
      this.db.prepare('SELECT * FROM turns WHERE traj_id = ? ORDER BY idx').all(Number(id)) as Record<string, Buffer | string | number | null>[]
    ).map((u) => ({
      role: u.role as string,
      text: u.text as string,
      tokenIds: fromI32(u.token_ids as Buffer | null),
      ...readChannels(u, STEP_CHANNELS),
      toolCalls: JSON.parse(u.tool_calls as string) as unknown[],
      stepReward: u.step_reward as number | null,
      tokens: u.tokens ? (JSON.parse(u.tokens as string) as string[]) : [],
      ...readChannels(u, SIGNAL_CHANNELS),
    }));
    return { ...s, turnsData: turns };
  }

  /** Every sample of one prompt (a GRPO group) at a step. */
  group(runId: string, step: number, group: number) {
    return (
      this.db
        .prepare('SELECT * FROM trajectories WHERE run_id = ? AND step = ? AND grp = ? AND parent_traj IS NULL ORDER BY sample')
        .all(runId, step, group) as Record<string, unknown>[]
    ).map((r) => this.trajSummary(r));
  }

  // ---- checkpoints, events, artifacts ---------------------------------------------------
  /**
   * Record a checkpoint, and drop the rows of this run's checkpoints whose folders are gone
   * (`checkpoint.keep` pruned them): the rows follow the files.
   */
  addCheckpoint(runId: string, step: number, path: string, metrics: Record<string, number> = {}): string {
    const id = `${runId}:${step}`;
    this.db.transaction(() => {
      this.db
        .prepare('INSERT OR REPLACE INTO checkpoints (id, run_id, step, path, created_at, metrics) VALUES (?,?,?,?,?,?)')
        .run(id, runId, step, path, Date.now() / 1000, JSON.stringify(metrics));
      this.pruneMissingCheckpoints(runId, id);
    })();
    return id;
  }

  /** Delete checkpoint rows (of one run, or all) whose folder no longer exists; returns how many. */
  pruneMissingCheckpoints(runId?: string, except?: string): number {
    const rows = (
      runId ? this.db.prepare('SELECT id, path FROM checkpoints WHERE run_id = ?').all(runId) : this.db.prepare('SELECT id, path FROM checkpoints').all()
    ) as { id: string; path: string }[];
    const del = this.db.prepare('DELETE FROM checkpoints WHERE id = ?');
    let n = 0;
    for (const r of rows) if (r.id !== except && !existsSync(r.path)) n += del.run(r.id).changes;
    return n;
  }

  /** A run's checkpoints (or all), only those whose folder exists. */
  checkpoints(runId?: string) {
    const rows = (
      runId
        ? this.db.prepare('SELECT * FROM checkpoints WHERE run_id = ? ORDER BY step').all(runId)
        : this.db.prepare('SELECT * FROM checkpoints ORDER BY created_at').all()
    ) as Record<string, unknown>[];
    return rows
      .filter((r) => existsSync(r.path as string))
      .map((r) => ({
        id: r.id as string,
        runId: r.run_id as string,
        step: r.step as number,
        path: r.path as string,
        createdAt: r.created_at as number,
        metrics: JSON.parse(r.metrics as string),
      }));
  }

  log(runId: string | null, level: string, text: string): number {
    return Number(
      this.db.prepare('INSERT INTO events (run_id, time, level, text) VALUES (?,?,?,?)').run(runId, Date.now() / 1000, level, text).lastInsertRowid,
    );
  }

  logs(runId: string, afterSeq = 0, limit = 5000) {
    return this.db.prepare('SELECT seq, time, level, text FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?').all(runId, afterSeq, limit) as {
      seq: number;
      time: number;
      level: string;
      text: string;
    }[];
  }

  /** The run folder a CLI run recorded (its 'run-folder' artifact), if any. */
  runFolder(runId: string): string | undefined {
    const r = this.db.prepare("SELECT path FROM artifacts WHERE run_id = ? AND kind = 'run-folder' ORDER BY created_at DESC LIMIT 1").get(runId) as
      { path: string } | undefined;
    return r?.path;
  }

  addArtifact(runId: string, kind: string, path: string): void {
    this.db.prepare('INSERT INTO artifacts (run_id, kind, path, created_at) VALUES (?,?,?,?)').run(runId, kind, path, Date.now() / 1000);
  }

  /** Config differences between runs: only the keys whose values differ. */
  configDiff(ids: string[]): Record<string, Record<string, string | null>> {
    const flat = ids.map((id) => flattenParams(this.getRun(id).config));
    const keys = new Set(flat.flatMap((f) => Object.keys(f)));
    const out: Record<string, Record<string, string | null>> = {};
    for (const k of [...keys].sort()) {
      const vals = flat.map((f) => f[k] ?? null);
      if (new Set(vals).size > 1) out[k] = Object.fromEntries(ids.map((id, i) => [id, vals[i]]));
    }
    return out;
  }
}

export function flattenParams(o: Record<string, unknown>, prefix = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(o)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === 'object' && !Array.isArray(v)) Object.assign(out, flattenParams(v as Record<string, unknown>, key));
    else out[key] = JSON.stringify(v);
  }
  return out;
}

/**
 * Queued writes committed in one transaction per flush (every `intervalMs` or `maxQueue`
 * items), off the training loop's hot path. `keepEvery` keeps full trajectories (with turns)
 * for every Nth step and summaries for all.
 */
export class BatchWriter {
  private queue: (() => void)[] = [];
  private committed: (() => void)[] = [];
  private timer: NodeJS.Timeout | null = null;
  constructor(
    readonly store: Store,
    readonly opts: { intervalMs?: number; maxQueue?: number; keepEvery?: number } = {},
  ) {}

  private schedule(): void {
    if (!this.timer) this.timer = setTimeout(() => this.flush(), this.opts.intervalMs ?? 200);
  }
  private push(op: () => void): void {
    this.queue.push(op);
    if (this.queue.length >= (this.opts.maxQueue ?? 2000)) this.flush();
    else this.schedule();
  }
  metrics(runId: string, step: number, values: Record<string, number>): void {
    const t = Date.now() / 1000;
    this.push(() => this.store.writeMetrics(runId, step, values, t));
  }
  /** `full` overrides the writer's `keepEvery` retention for this trajectory. */
  trajectory(runId: string, t: TrajectoryRecord, full?: boolean): void {
    const every = this.opts.keepEvery ?? 1;
    const keep = full ?? t.step % every === 0;
    this.push(() => this.store.writeTrajectory(runId, t, keep));
  }
  log(runId: string, level: string, text: string): void {
    this.push(() => this.store.log(runId, level, text));
  }
  /**
   * Call `cb` once everything queued so far is committed (at the next flush, never before this
   * returns): a live event announcing rows goes out only when they can be read.
   */
  afterCommit(cb: () => void): void {
    this.committed.push(cb);
    this.schedule();
  }
  /** Commit everything queued, in one transaction. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.queue.length) {
      const ops = this.queue;
      this.queue = [];
      this.store.db.transaction(() => {
        for (const op of ops) op();
      })();
    }
    const after = this.committed;
    this.committed = [];
    for (const cb of after) cb();
  }
}
